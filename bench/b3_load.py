"""B3 cassette loading: spoolproxy's loader vs vcrpy's vs a raw ``yaml.load`` (C loader).

Texts are read into memory first, so disk I/O is excluded for everyone.  Loaders:
``spoolproxy.cassettes.storage.parse_text`` (YAML -> typed Cassette, bodies decoded),
``vcr.serialize.deserialize(text, yamlserializer)`` (YAML -> vcrpy Request/response dicts)
and ``yaml.load(text, Loader=yaml.CSafeLoader)`` (YAML -> plain Python objects, the floor).
spoolproxy keeps parsed documents of large files in a cache keyed by content hash
(``spoolproxy.cassettes.cache``); the "first load" rows pass text (the YAML path), the
"warm" rows pass bytes of a file loaded once before (the cache path).
vcrpy cannot read pydantic-ai's ``parsed_body`` cassettes, so vcrpy is compared on the
corpus files it reads.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from .ctx import RunContext
from .report import Results
from .stats import percentile

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "cassettes"


def corpus_dir() -> Path:
    import os

    env = os.environ.get("SPOOLPROXY_SHARED")
    return Path(env) / "corpus" / "cassettes" if env else CORPUS


def specs() -> list[tuple[str, str, str, str]]:
    rows = []
    for key, what in (("corpus", "whole corpus"), ("corpus_vcr", "corpus files vcrpy reads"),
                      ("synth", "synthetic cassette, plain vcrpy layout"),
                      ("synth_v1", "synthetic cassette, spoolproxy format v1")):
        subjects = [("raw", "yaml.load CSafeLoader"), ("spoolproxy", "spoolproxy loader (YAML: first load)")]
        if key in ("corpus_vcr", "synth"):
            subjects.insert(1, ("vcrpy", "vcrpy loader"))
        if key in ("synth", "synth_v1"):
            subjects.append(("spoolproxy_warm", "spoolproxy loader, parsed-document cache warm (later loads)"))
        rows += [(f"B3.{key}.{s}", label, what, "ms") for s, label in subjects]
    return rows


def _loaders():
    from vcr.serialize import deserialize
    from vcr.serializers import yamlserializer

    from spoolproxy.cassettes.storage import parse_text

    return {
        "raw": lambda p, t: yaml.load(t, Loader=yaml.CSafeLoader),
        "vcrpy": lambda p, t: deserialize(t, yamlserializer),
        "spoolproxy": lambda p, t: parse_text(t, p),
        # bytes, as storage.load passes them: large files hit the parsed-document cache
        "spoolproxy_warm": lambda p, t: parse_text(_as_bytes(t), p),
    }


_BYTES: dict[int, tuple[str, bytes]] = {}


def _as_bytes(t: str) -> bytes:
    """``t`` encoded once (the warm rows time the load, not the encoding)."""
    hit = _BYTES.get(id(t))
    if hit is None or hit[0] is not t:
        hit = _BYTES[id(t)] = (t, t.encode("utf-8"))
    return hit[1]


def _time_all(fn, texts: list[tuple[Path, str]]) -> float:
    t0 = time.perf_counter()
    for p, t in texts:
        fn(p, t)
    return (time.perf_counter() - t0) * 1000


def _measure(res: Results, key: str, texts, subjects: list[str], runs: int, what: str) -> None:
    loaders = _loaders()
    times: dict[str, list[float]] = {s: [] for s in subjects}
    if len(texts) > 3:
        for s in subjects:  # warm-up (imports, caches); a single big file needs none
            _time_all(loaders[s], texts[:3])
    for _ in range(runs):
        for s in subjects:
            times[s].append(_time_all(loaders[s], texts))
    raw = times["raw"]
    res.set(f"B3.{key}.raw", raw, metric=what)
    for s in subjects[1:]:
        ratio = [a / b for a, b in zip(times[s], raw)]
        kw = {}
        if s == "spoolproxy":
            kw = dict(target="≤ 1.2× raw C loader", met=percentile(ratio, 50) <= 1.2)
        res.set(f"B3.{key}.{s}", times[s], reference="raw C loader", ratio=ratio, metric=what, **kw)


def run(res: Results, ctx: RunContext) -> None:
    """Measure B3 into ``res``."""
    cfg = ctx.cfg
    res.declare("B3", specs())
    loaders = _loaders()
    cdir = corpus_dir()
    if cdir.is_dir():
        files = sorted(cdir.rglob("*.yaml"))[:: cfg.corpus_stride]
        texts = [(p, p.read_text(encoding="utf-8")) for p in files]
        nint = sum(len(loaders["spoolproxy"](p, t)) for p, t in texts)
        vcr_ok = []
        for p, t in texts:
            try:
                loaders["vcrpy"](p, t)
                vcr_ok.append((p, t))
            except Exception:
                pass
        mb = sum(len(t) for _, t in texts) / 1e6
        _measure(res, "corpus", texts, ["raw", "spoolproxy"], cfg.b3_runs,
                 f"whole corpus: {len(texts)} files, {nint} interactions, {mb:.1f} MB")
        mb = sum(len(t) for _, t in vcr_ok) / 1e6
        _measure(res, "corpus_vcr", vcr_ok, ["raw", "vcrpy", "spoolproxy"], cfg.b3_runs,
                 f"{len(vcr_ok)} corpus files vcrpy reads, {mb:.1f} MB")
    else:
        res.unavailable("B3.corpus", f"shared corpus not found at {cdir} (set SPOOLPROXY_SHARED)")

    from spoolproxy.cassettes.storage import dumps

    from . import synth

    cas = synth.mixed_cassette(cfg.b3_synth_n)
    n = cfg.b3_synth_n
    plain = dumps(cas, plain=True)
    loaders["spoolproxy_warm"](Path("synth.yaml"), plain)  # fills the cache (a first load)
    _measure(res, "synth", [(Path("synth.yaml"), plain)], ["raw", "vcrpy", "spoolproxy", "spoolproxy_warm"], cfg.b3_runs,
             f"synthetic {n:,} interactions, plain vcrpy layout, {len(plain) / 1e6:.1f} MB")
    del plain
    # format v1 has ~2x the YAML nodes of the plain layout (JSON bodies as structures) and
    # PyYAML constructs each in Python, so a fifth of the size keeps the run short
    n1 = max(1, n // 5)
    v1 = dumps(cas.model_copy(update={"interactions": cas.interactions[:n1]}))
    loaders["spoolproxy_warm"](Path("synth.yaml"), v1)
    _measure(res, "synth_v1", [(Path("synth.yaml"), v1)], ["raw", "spoolproxy", "spoolproxy_warm"], cfg.b3_runs,
             f"synthetic {n1:,} interactions, spoolproxy format v1, {len(v1) / 1e6:.1f} MB")
