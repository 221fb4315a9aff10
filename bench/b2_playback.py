"""B2 playback scaling: serve time vs cassette size (10 / 1,000 / 10,000 distinct interactions).

Subjects, each fed the same cassette content (N distinct OpenAI Chat Completions calls to one
endpoint, told apart by their JSON request bodies):

* ``spoolproxy playback --cassette FILE --match exact --allow-repeats`` (standalone proxy,
  format v1 file; exact matching is what vcrpy's body matcher does);
* vcrpy in-process: ``vcr.use_cassette(FILE, record_mode="none", match_on=[method, scheme,
  host, port, path, query, body], allow_playback_repeats=True)`` with an ``httpx.Client``
  (plain vcrpy file; cassette load time is excluded);
* ``mitmdump --server-replay FLOWS`` (flows written with ``io.FlowWriter``;
  ``server_replay_reuse``, lazy connections, no upstream certificate look-up).

Each run sends K requests spread over the whole cassette (repeats allowed everywhere, which
only matters for N=10) and checks every body; a run stops early when it exceeds its time
budget (vcrpy's linear scan at N=10,000), keeping at least 1 request.  The peak RSS of the
playback processes is B6's playback figure.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

import httpx

from .ctx import RunContext, Unavailable
from .report import Results
from .stats import percentile

TOOLS = {"spoolproxy": "spoolproxy playback", "vcrpy": "vcrpy in-process", "mitmdump": "mitmdump --server-replay"}
SIZES = ("small", "mid", "large")
VCR_MATCH = ["method", "scheme", "host", "port", "path", "query", "body"]


def specs() -> list[tuple[str, str, str, str]]:
    rows = []
    for t, label in TOOLS.items():
        for s in SIZES:
            rows += [(f"B2.{t}.{s}.serve", label, f"per-request serve time ({s})", "ms"),
                     (f"B2.{t}.{s}.rps", label, f"requests/s ({s})", "req/s")]
        rows.append((f"B2.{t}.growth", label, "serve time growth small→large", "×"))
    return rows


def b6_specs() -> list[tuple[str, str, str, str]]:
    return [("B6.playback.spoolproxy.small", "spoolproxy playback", "peak RSS serving the small cassette", "MB"),
            ("B6.playback.spoolproxy.large", "spoolproxy playback", "peak RSS serving the large cassette", "MB"),
            ("B6.playback.spoolproxy.large_warm", "spoolproxy playback, parsed-cassette cache warm",
             "peak RSS serving the large cassette", "MB"),
            ("B6.playback.mitmdump.large", "mitmdump --server-replay", "peak RSS serving the large cassette", "MB")]


def exchanges(cas) -> list[tuple[str, bytes, bytes]]:
    """``(uri, request body, response body)`` of every interaction (a light copy to keep)."""
    return [(it.request.uri, it.request.body, it.response.body) for it in cas.interactions]


def _loop(client: httpx.Client, ex: list[tuple[str, bytes, bytes]], k: int, budget: float,
          offset: int) -> tuple[list[float], float]:
    n = len(ex)
    stride = 7919 if n > 7919 else 1  # 7919 is prime: visits spread over the whole cassette
    lat: list[float] = []
    t0 = time.perf_counter()
    for j in range(k):
        uri, req_body, resp_body = ex[(offset + j * stride) % n]
        a = time.perf_counter()
        r = client.post(uri, content=req_body, headers={"Content-Type": "application/json"})
        body = r.content
        lat.append((time.perf_counter() - a) * 1000)
        if r.status_code != 200 or body != resp_body:
            raise RuntimeError(f"wrong answer for interaction {(offset + j * stride) % n}: "
                               f"{r.status_code} {body[:120]!r}")
        if time.perf_counter() - t0 > budget:
            break
    return lat, len(lat) / (time.perf_counter() - t0)


def run(res: Results, ctx: RunContext) -> None:
    """Measure B2 (and B6's playback rows) into ``res``."""
    from spoolproxy.cassettes import save

    from . import synth

    cfg = ctx.cfg
    res.declare("B2", specs())
    res.declare("B6", b6_specs())
    sizes = dict(zip(SIZES, cfg.b2_sizes))
    big = synth.playback_cassette(max(cfg.b2_sizes))
    files: dict[str, dict[str, Path]] = {}
    cass: dict[str, list] = {}
    for s, n in sizes.items():
        cas = big.model_copy(update={"interactions": big.interactions[:n]})
        cass[s] = exchanges(cas)
        files[s] = {"v1": save(cas, ctx.work / f"b2-{n}.yaml"),
                    "plain": save(cas, ctx.work / f"b2-{n}-plain.yaml", plain=True),
                    "flows": synth.write_flows(cas, ctx.work / f"b2-{n}.flows")}
    del big, cas
    gc.collect()  # keep the client process lean: vcrpy runs in it
    serve: dict[str, dict[str, list[float]]] = {t: {} for t in TOOLS}
    rps: dict[str, dict[str, list[float]]] = {t: {} for t in TOOLS}
    notes: dict[str, list[str]] = {t: [] for t in TOOLS}
    notes["warm"] = []
    rss: dict[str, float] = {}

    def one_run(tool: str, size: str, client: httpx.Client, r: int) -> None:
        lat, rate = _loop(client, cass[size], cfg.b2_requests, cfg.b2_run_budget_s, 1 + r * 31)
        serve[tool].setdefault(size, []).append(percentile(lat, 50))
        rps[tool].setdefault(size, []).append(rate)

    pending: dict[tuple[str, str], tuple] = {}
    for size in SIZES:  # start every playback process at once
        n = sizes[size]
        try:
            pending[("spoolproxy", size)] = ctx.spoolproxy(
                f"b2-spoolproxy-{n}", "playback", "--cassette", str(files[size]["v1"]), "--match", "exact",
                "--allow-repeats", wait=False)
        except Unavailable as exc:
            res.unavailable(f"B2.spoolproxy.{size}", exc)
        pending[("mitmdump", size)] = ctx.mitmdump(
            f"b2-mitmdump-{n}", "--server-replay", str(files[size]["flows"]),
            "--set", "server_replay_reuse=true", "--set", "server_replay_extra=404",
            "--set", "connection_strategy=lazy", "--set", "upstream_cert=false", wait=False)
    clients: dict[tuple[str, str], httpx.Client] = {}
    for key, (proc, port, ca) in pending.items():  # all idle before any measurement
        try:
            ctx.ready(proc)
            c = ctx.client(port, ca)
            _loop(c, cass[key[1]], 2, 1e9, 0)  # warm-up: handshake, first-request costs
            clients[key] = c
        except (Unavailable, RuntimeError, httpx.HTTPError) as exc:
            res.unavailable(f"B2.{key[0]}.{key[1]}", exc)
            res.unavailable(f"B6.playback.{key[0]}", f"B2 playback failed: {exc}")
    # proxies: runs interleaved over sizes and tools, so load noise hits all alike
    for r in range(cfg.b2_runs):
        for size in SIZES:
            for tool in ("spoolproxy", "mitmdump"):
                c = clients.get((tool, size))
                if c is None:
                    continue
                try:
                    one_run(tool, size, c, r)
                except (RuntimeError, httpx.HTTPError) as exc:
                    c.close()
                    del clients[(tool, size)]
                    res.unavailable(f"B2.{tool}.{size}", exc)
    for key, c in clients.items():
        c.close()
    for key, (proc, _, _) in pending.items():
        kib = proc.stop()
        if kib:
            rss[f"{key[0]}.{key[1]}"] = kib * 1024 / 1e6
    # a second start on the large cassette: its parsed document is now in the cache
    if ("spoolproxy", "large") in pending:
        try:
            t0 = time.perf_counter()
            proc, port, ca = ctx.spoolproxy(f"b2-spoolproxy-{sizes['large']}-warm", "playback", "--cassette",
                                            str(files["large"]["v1"]), "--match", "exact", "--allow-repeats")
            started = time.perf_counter() - t0
            try:
                with ctx.client(port, ca) as c:
                    _loop(c, cass["large"], cfg.b2_requests, 1e9, 7)
            finally:
                kib = proc.stop()
            if kib:
                rss["spoolproxy.large_warm"] = kib * 1024 / 1e6
                notes["warm"] = [f"listening {started:.1f} s after the start"]
        except (Unavailable, RuntimeError, httpx.HTTPError) as exc:
            res.unavailable("B6.playback.spoolproxy.large_warm", exc)
    # vcrpy in-process: one use_cassette per size (its load is excluded from the timing)
    for size in SIZES:
        n = sizes[size]
        try:
            import vcr

            t0 = time.perf_counter()
            with vcr.use_cassette(str(files[size]["plain"]), record_mode="none", match_on=VCR_MATCH,
                                  allow_playback_repeats=True):
                with httpx.Client(trust_env=False) as c:
                    _loop(c, cass[size], 1, 1e9, 0)  # the cassette is loaded on the first request
                    notes["vcrpy"].append(f"{n:,}-interaction cassette loaded and first request "
                                          f"served in {time.perf_counter() - t0:.2f} s")
                    for r in range(cfg.b2_runs):
                        one_run("vcrpy", size, c, r)
        except Exception as exc:
            res.unavailable(f"B2.vcrpy.{size}", exc)

    for t in TOOLS:
        for s in SIZES:
            if s not in serve[t]:
                continue
            label = f"per-request serve time, {sizes[s]:,} interactions"
            kw: dict = {}
            if t != "vcrpy" and s in serve["vcrpy"]:
                kw = dict(reference="vcrpy in-process",
                          ratio=[a / b for a, b in zip(serve[t][s], serve["vcrpy"][s])])
                if t == "spoolproxy" and s != "small":
                    kw.update(target="< vcrpy in-process", met=percentile(kw["ratio"], 50) < 1.0)
            res.set(f"B2.{t}.{s}.serve", serve[t][s], metric=label, **kw)
            res.set(f"B2.{t}.{s}.rps", rps[t][s], metric=f"requests/s, {sizes[s]:,} interactions")
        if "small" in serve[t] and "large" in serve[t]:
            g = [a / b for a, b in zip(serve[t]["large"], serve[t]["small"])]
            kw = dict(target="< 1.5×", met=percentile(g, 50) < 1.5) if t == "spoolproxy" else {}
            res.set(f"B2.{t}.growth", g, metric=f"serve time growth {sizes['small']:,}→{sizes['large']:,}",
                    reference=f"same tool at {sizes['small']:,}", note="; ".join(notes[t]), **kw)
    lg, sm = f"{sizes['large']:,}", f"{sizes['small']:,}"
    if "spoolproxy.large" in rss:
        res.set("B6.playback.spoolproxy.large", [rss["spoolproxy.large"]],
                metric=f"peak RSS serving {lg} interactions", reference="mitmdump --server-replay",
                ratio=[rss["spoolproxy.large"] / rss["mitmdump.large"]] if "mitmdump.large" in rss else None)
    if "spoolproxy.small" in rss:
        res.set("B6.playback.spoolproxy.small", [rss["spoolproxy.small"]], metric=f"peak RSS serving {sm} interactions")
    if "spoolproxy.large_warm" in rss:
        res.set("B6.playback.spoolproxy.large_warm", [rss["spoolproxy.large_warm"]],
                metric=f"peak RSS serving {lg} interactions, second start (cache warm)",
                note="; ".join(notes.get("warm", [])))
    if "mitmdump.large" in rss:
        res.set("B6.playback.mitmdump.large", [rss["mitmdump.large"]], metric=f"peak RSS serving {lg} interactions")
    res.unavailable("B6.playback", "measured in B2 (run B2 too)")
