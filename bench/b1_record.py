"""B1 recording overhead: direct vs bare mitmdump vs ``spoolproxy record`` (standalone).

The same persistent ``httpx.Client`` (HTTP/1.1 keep-alive, HTTPS to a local origin with its
own test CA) sends, in every run and for every subject in turn: POSTs answered by 1 KB and
100 KB JSON (per-request latency p50/p99 and sequential requests/s), and GETs of an SSE
stream of 200 events (time to the first body byte, total time; the origin pauses 5 ms after
the first event, then writes the rest back to back, each event flushed on its own).  Runs interleave subjects so
load noise hits all of them alike; ratios are per run.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import httpx

from .ctx import RunContext, Unavailable
from .report import Results
from .stats import percentile

SUBJECTS = {"direct": "direct", "mitmdump": "bare mitmdump", "mitmdump_stream": "bare mitmdump, streaming",
            "spoolproxy": "spoolproxy record",
            # diagnostic: the same, journal and cassette on tmpfs, where fsync costs nothing
            "spoolproxy_tmpfs": "spoolproxy record, cassette on tmpfs"}
REQUEST_BODY = (b'{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful agent."},'
                b'{"role":"user","content":"Benchmark request: please answer with a long JSON document."}],'
                b'"temperature":0}')


def specs() -> list[tuple[str, str, str, str]]:
    rows = []
    for size in ("1k", "100k"):
        label = "1 KB" if size == "1k" else "100 KB"
        for s in SUBJECTS:
            rows += [(f"B1.json{size}.{s}.p50", SUBJECTS[s], f"{label} JSON latency p50", "ms"),
                     (f"B1.json{size}.{s}.p99", SUBJECTS[s], f"{label} JSON latency p99", "ms"),
                     (f"B1.json{size}.{s}.rps", SUBJECTS[s], f"{label} JSON requests/s", "req/s")]
        rows += [(f"B1.json{size}.mitmdump.added_p50", "bare mitmdump", f"{label} JSON added p50 vs direct", "ms"),
                 (f"B1.json{size}.spoolproxy.added_p50", "spoolproxy record", f"{label} JSON added p50 vs direct", "ms")]
    for s in SUBJECTS:
        rows += [(f"B1.sse.{s}.ttfb", SUBJECTS[s], "SSE 200 events: time to first byte", "ms"),
                 (f"B1.sse.{s}.total", SUBJECTS[s], "SSE 200 events: total time", "ms")]
    rows += [(f"B1.sse.spoolproxy.ttfb_vs_mitmdump", "spoolproxy record",
              "SSE time to first byte / streaming mitmdump's", "×"),
             ("B1.sse.spoolproxy.total_vs_mitmdump", "spoolproxy record", "SSE total time / streaming mitmdump's", "×")]
    return rows


def _json_batch(client: httpx.Client, url: str, n: int, size: int) -> tuple[list[float], float]:
    lat = []
    t0 = time.perf_counter()
    for _ in range(n):
        a = time.perf_counter()
        r = client.post(url, content=REQUEST_BODY, headers={"Content-Type": "application/json"})
        body = r.content
        lat.append((time.perf_counter() - a) * 1000)
        if r.status_code != 200 or len(body) != size:
            raise RuntimeError(f"bad response {r.status_code}, {len(body)} bytes (wanted {size})")
    return lat, n / (time.perf_counter() - t0)


def _sse(client: httpx.Client, url: str, events: int) -> tuple[float, float]:
    a = time.perf_counter()
    ttfb = None
    n = 0
    with client.stream("GET", url) as r:
        for chunk in r.iter_raw():
            if ttfb is None and chunk:
                ttfb = (time.perf_counter() - a) * 1000
            n += chunk.count(b"data: ")
    total = (time.perf_counter() - a) * 1000
    if n != events + 1:
        raise RuntimeError(f"SSE stream had {n} events, wanted {events + 1}")
    return ttfb or total, total


def run(res: Results, ctx: RunContext) -> None:
    """Measure B1 into ``res``."""
    cfg = ctx.cfg
    res.declare("B1", specs())
    port = ctx.origin()
    url1k, url100k = ctx.origin_url("/json?size=1024"), ctx.origin_url("/json?size=102400")
    url_sse = ctx.origin_url(f"/sse?events={cfg.b1_sse_events}&gap_ms={cfg.b1_sse_gap_ms}"
                             f"&first_gap_ms={cfg.b1_sse_first_gap_ms}")
    clients: dict[str, httpx.Client] = {"direct": ctx.client()}
    notes: dict[str, str] = {}
    cassette = ctx.work / "b1-record.yaml"
    pending = {  # start all proxies at once, then wait for each
        "mitmdump": ctx.mitmdump("b1-mitmdump", wait=False),
        "mitmdump_stream": ctx.mitmdump("b1-mitmdump-stream", "--set", "stream_large_bodies=1", wait=False),
    }
    try:
        pending["spoolproxy"] = ctx.spoolproxy("b1-spoolproxy", "record", "--cassette", str(cassette),
                                               "--upstream-ca", str(ctx.pki.ca_cert), wait=False)
    except Unavailable as exc:
        for k in ("json1k", "json100k", "sse"):
            res.unavailable(f"B1.{k}.spoolproxy", exc)
    shm = None
    if Path("/dev/shm").is_dir():
        shm = Path(tempfile.mkdtemp(prefix="spoolproxy-bench-", dir="/dev/shm"))
        try:
            pending["spoolproxy_tmpfs"] = ctx.spoolproxy(
                "b1-spoolproxy-tmpfs", "record", "--cassette", str(shm / "b1-record.yaml"),
                "--upstream-ca", str(ctx.pki.ca_cert), wait=False)
        except Unavailable as exc:
            for k in ("json1k", "json100k", "sse"):
                res.unavailable(f"B1.{k}.spoolproxy_tmpfs", exc)
    else:
        for k in ("json1k", "json100k", "sse"):
            res.unavailable(f"B1.{k}.spoolproxy_tmpfs", "no /dev/shm on this machine")
    sp_proc = None
    others = []
    for s, (proc, p, ca) in pending.items():
        try:
            ctx.ready(proc)
        except Unavailable as exc:
            for k in ("json1k", "json100k", "sse"):
                res.unavailable(f"B1.{k}.{s}", exc)
            continue
        clients[s] = ctx.client(p, ca)
        if s == "spoolproxy":
            sp_proc = proc
        else:
            others.append(proc)

    data: dict[str, dict[str, list[float]]] = {s: {} for s in clients}

    def add(s: str, key: str, v: float) -> None:
        data[s].setdefault(key, []).append(v)

    for s, c in list(clients.items()):  # warm up: TLS handshakes, certificate generation
        try:
            _json_batch(c, url1k, 3, 1024)
            _sse(c, url_sse, cfg.b1_sse_events)
        except Exception as exc:  # a subject that cannot serve is reported, not fatal
            c.close()
            del clients[s]
            res.unavailable(f"B1.json1k.{s}", f"warm-up failed: {exc}")
            res.unavailable(f"B1.json100k.{s}", f"warm-up failed: {exc}")
            res.unavailable(f"B1.sse.{s}", f"warm-up failed: {exc}")
    for _ in range(cfg.b1_runs):
        for s, c in clients.items():
            for size, url, n in (("1k", url1k, cfg.b1_requests_1k), ("100k", url100k, cfg.b1_requests_100k)):
                lat, rps = _json_batch(c, url, n, 1024 if size == "1k" else 102400)
                add(s, f"{size}.p50", percentile(lat, 50))
                add(s, f"{size}.p99", percentile(lat, 99))
                add(s, f"{size}.rps", rps)
            tt, tot = [], []
            for _ in range(cfg.b1_sse_streams):
                a, b = _sse(c, url_sse, cfg.b1_sse_events)
                tt.append(a)
                tot.append(b)
            add(s, "sse.ttfb", percentile(tt, 50))
            add(s, "sse.total", percentile(tot, 50))
    for c in clients.values():
        c.close()
    if sp_proc is not None:
        sp_proc.stop(timeout=60)
        notes["spoolproxy"] = _check_cassette(cassette, cfg)
    for proc in others:
        proc.stop(timeout=60)
    if shm is not None:
        shutil.rmtree(shm, ignore_errors=True)

    def per_run(a: list[float], b: list[float], op) -> list[float]:
        return [op(x, y) for x, y in zip(a, b)]

    d = data["direct"]
    for size in ("1k", "100k"):
        for s in SUBJECTS:
            if s not in data or f"{size}.p50" not in data[s]:
                continue
            v = data[s]
            ref = "bare mitmdump" if s == "spoolproxy" else ("direct" if s != "direct" else None)
            refd = data.get("mitmdump", {}) if s == "spoolproxy" else d
            for m in ("p50", "p99", "rps"):
                kw = {}
                if ref and f"{size}.{m}" in refd:
                    kw = dict(reference=ref, ratio=per_run(v[f"{size}.{m}"], refd[f"{size}.{m}"], lambda x, y: x / y))
                    if s == "spoolproxy" and m in ("p50", "rps"):
                        r = kw["ratio"]
                        med = sorted(r)[len(r) // 2]
                        ok = med <= 1.10 if m == "p50" else med >= 1 / 1.10
                        kw.update(target="≤ 1.10× bare mitmdump" if m == "p50" else "≥ bare mitmdump / 1.10", met=ok)
                res.set(f"B1.json{size}.{s}.{m}", v[f"{size}.{m}"], note=notes.get(s, "") if m == "p50" else "", **kw)
            if s in ("mitmdump", "spoolproxy"):
                added = per_run(v[f"{size}.p50"], d[f"{size}.p50"], lambda x, y: x - y)
                kw = dict(target="< 2 ms", met=percentile(added, 50) < 2.0) if s == "spoolproxy" else {}
                res.set(f"B1.json{size}.{s}.added_p50", added, reference="direct", **kw)
    for s in SUBJECTS:
        if s not in data or "sse.ttfb" not in data[s]:
            continue
        v = data[s]
        kw: dict = {}
        if s != "direct":
            kw = dict(reference="direct", ratio=per_run(v["sse.ttfb"], d["sse.ttfb"], lambda x, y: x / y))
        if s == "spoolproxy":
            allowed = [y * 1.05 + 2.0 for y in d["sse.ttfb"]]
            kw.update(target="≤ direct × 1.05 + 2 ms",
                      met=percentile(v["sse.ttfb"], 50) <= percentile(allowed, 50))
        if s == "mitmdump":
            kw["note"] = "mitmdump without stream_large_bodies buffers the whole SSE response (mitmproxy issue 4469)"
        res.set(f"B1.sse.{s}.ttfb", v["sse.ttfb"], **kw)
        kw = {}
        if s != "direct":
            kw = dict(reference="direct", ratio=per_run(v["sse.total"], d["sse.total"], lambda x, y: x / y))
        res.set(f"B1.sse.{s}.total", v["sse.total"], **kw)
    if "spoolproxy" in data and "mitmdump_stream" in data and "sse.ttfb" in data["spoolproxy"]:
        r = per_run(data["spoolproxy"]["sse.ttfb"], data["mitmdump_stream"]["sse.ttfb"], lambda x, y: x / y)
        res.set("B1.sse.spoolproxy.ttfb_vs_mitmdump", r, reference="bare mitmdump, streaming",
                target="≤ 1.10", met=percentile(r, 50) <= 1.10)
        r = per_run(data["spoolproxy"]["sse.total"], data["mitmdump_stream"]["sse.total"], lambda x, y: x / y)
        res.set("B1.sse.spoolproxy.total_vs_mitmdump", r, reference="bare mitmdump, streaming",
                target="≤ 1.00 (no worse)", met=percentile(r, 50) <= 1.0)
    res.unavailable("B1.", "subject failed during the run; see the logs")


def _check_cassette(path: Path, cfg) -> str:
    """A note saying how many interactions the recording holds (proof the proxy recorded)."""
    warm = 3 + 1
    per_run = cfg.b1_requests_1k + cfg.b1_requests_100k + cfg.b1_sse_streams
    want = warm + cfg.b1_runs * per_run
    try:
        from spoolproxy.cassettes import load

        got = len(load(path))
    except Exception as exc:
        return f"cassette not readable after the run: {exc}"
    return f"cassette holds {got} of {want} interactions" + ("" if got == want else " (MISMATCH)")
