"""Per-request playback serve time at 10 and 10,000 interactions.

``python -m bench.playback_serve [N ...]`` builds a synthetic cassette of N distinct chat
requests (~1 KB JSON bodies, 1 KB responses), then measures

* ``lookup``: :meth:`Index.lookup` alone (normalise + redact + fingerprint + queue pop), and
* ``proxy``: a full request through the real in-process playback proxy with one keep-alive
  httpx client over HTTPS (CONNECT once, TLS to mitmproxy, request, response),

for the last 200 requests of the cassette (so the index is full size), and prints the
median and p95 in milliseconds, plus the index build time.
"""

from __future__ import annotations

import json
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from spoolproxy.cassettes import load, save
from spoolproxy.cassettes.model import Cassette, Interaction, Request, Response
from spoolproxy.proxy.ca import ensure_ca
from spoolproxy.proxy.runner import ProxyRunner
from spoolproxy.replayer.addon import Playback
from spoolproxy.replayer.index import Index
from spoolproxy.replayer.session import PlaybackConfig, PlaybackSession

URL = "https://api.openai.com/v1/chat/completions"


def make(n: int) -> list[Interaction]:
    out = []
    for i in range(n):
        body = {"model": "gpt-4o-mini", "messages": [{"role": "system", "content": "x" * 800},
                                                   {"role": "user", "content": f"question {i}"}]}
        resp = {"id": f"c{i}", "choices": [{"message": {"role": "assistant", "content": "y" * 900}}]}
        out.append(Interaction(
            request=Request(method="POST", uri=URL, headers={"content-type": ["application/json"]},
                            body=json.dumps(body).encode()),
            response=Response(status=200, headers={"content-type": ["application/json"]}, body=json.dumps(resp).encode()),
        ))
    return out


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run(n: int, sample: int = 200) -> dict:
    inters = make(n)
    tail = inters[-min(sample, n):]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bench.yaml"
        save(Cassette(interactions=inters), path)
        t = time.perf_counter()
        cas = load(path)
        idx = Index([cas])
        build_ms = (time.perf_counter() - t) * 1000
        lk = []
        for it in tail:
            t = time.perf_counter()
            idx.lookup(it.request)
            lk.append((time.perf_counter() - t) * 1000)
        session = PlaybackSession(PlaybackConfig(cassettes=[str(path)]))
        with ProxyRunner([Playback(session)], options={"connection_strategy": "lazy", "upstream_cert": False}) as r:
            ctx = ssl.create_default_context(cafile=str(ensure_ca().bundle))
            with httpx.Client(proxy=r.proxy_url, verify=ctx, timeout=30) as c:
                c.get(URL)  # warm up: CONNECT + TLS (a miss)
                px = []
                for it in tail:
                    t = time.perf_counter()
                    resp = c.post(URL, content=it.request.body, headers={"content-type": "application/json"})
                    px.append((time.perf_counter() - t) * 1000)
                    assert resp.status_code == 200
    return {"n": n, "load_and_index_ms": build_ms, "lookup_median_ms": statistics.median(lk),
            "lookup_p95_ms": pct(lk, 0.95), "proxy_median_ms": statistics.median(px), "proxy_p95_ms": pct(px, 0.95)}


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv] or [10, 10_000]
    print("| interactions | load+index ms | lookup median ms | lookup p95 ms | proxy median ms | proxy p95 ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        r = run(n)
        print(f"| {n} | {r['load_and_index_ms']:.0f} | {r['lookup_median_ms']:.3f} | {r['lookup_p95_ms']:.3f} "
              f"| {r['proxy_median_ms']:.2f} | {r['proxy_p95_ms']:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
