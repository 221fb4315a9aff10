"""B4 detection throughput: interactions/s of ``spoolproxy.detectors.analyze(cassette)``.

Cassettes are loaded first (loading is B3); only ``analyze`` is timed.  The reference is a
floor: ``json.loads`` of every request and response body (the least work any transcript
reader must do), timed the same way.
"""

from __future__ import annotations

import json
import time

from .b3_load import corpus_dir
from .ctx import RunContext
from .report import Results
from .stats import percentile

TARGET = 20_000


def specs() -> list[tuple[str, str, str, str]]:
    rows = []
    for key, what in (("corpus", "whole corpus"), ("synth", "synthetic agent run (OpenAI chat)")):
        rows += [(f"B4.{key}.floor", "json.loads of every body", what, "interactions/s"),
                 (f"B4.{key}.spoolproxy", "spoolproxy detect (analyze)", what, "interactions/s")]
    return rows


def _floor(cassettes) -> None:
    for cas in cassettes:
        for it in cas.interactions:
            for body in (it.request.body, it.response.body if it.response else b""):
                if body[:1] in (b"{", b"["):
                    try:
                        json.loads(body)
                    except ValueError:
                        pass


def _measure(res: Results, key: str, cassettes, runs: int, what: str) -> None:
    n = sum(len(c) for c in cassettes)
    rates: dict[str, list[float]] = {"floor": [], "spoolproxy": []}
    try:
        from spoolproxy.detectors import analyze
    except ImportError as exc:
        analyze = None
        res.unavailable(f"B4.{key}.spoolproxy", f"spoolproxy.detectors.analyze is not implemented yet ({exc})")

    def all_analyze(cs):
        for c in cs:
            analyze(c)

    fns = {"floor": _floor}
    if analyze is not None:
        fns["spoolproxy"] = all_analyze
        all_analyze(cassettes[:2])  # warm-up
    for _ in range(runs):
        for s, fn in fns.items():
            t0 = time.perf_counter()
            fn(cassettes)
            rates[s].append(n / (time.perf_counter() - t0))
    res.set(f"B4.{key}.floor", rates["floor"], metric=what)
    if rates["spoolproxy"]:
        ratio = [a / b for a, b in zip(rates["spoolproxy"], rates["floor"])]
        res.set(f"B4.{key}.spoolproxy", rates["spoolproxy"], reference="json.loads floor", ratio=ratio,
                target=f"≥ {TARGET:,} interactions/s", met=percentile(rates["spoolproxy"], 50) >= TARGET,
                metric=what)


def run(res: Results, ctx: RunContext) -> None:
    """Measure B4 into ``res``."""
    cfg = ctx.cfg
    res.declare("B4", specs())
    from spoolproxy.cassettes import load

    from . import synth

    cdir = corpus_dir()
    if cdir.is_dir():
        cassettes = [load(p) for p in sorted(cdir.rglob("*.yaml"))[:: cfg.corpus_stride]]
        n = sum(len(c) for c in cassettes)
        _measure(res, "corpus", cassettes, cfg.b4_runs, f"whole corpus: {len(cassettes)} cassettes, {n} interactions")
    else:
        res.unavailable("B4.corpus", f"shared corpus not found at {cdir} (set SPOOLPROXY_SHARED)")
    cas = synth.agent_run(cfg.b4_synth_n)
    _measure(res, "synth", [cas], cfg.b4_runs, f"synthetic agent run, {len(cas):,} interactions")
