"""Added latency of ``spoolproxy record``: per request and time-to-first-token, proxy vs direct.

``python bench/record_latency.py [--requests 200] [--streams 30]`` starts the fake provider
(HTTPS, run-time test CA; see tests/fakes) in this process and ``spoolproxy record`` in
standalone mode as a subprocess (reaching the fake as api.openai.com via --connect-to), then
measures with httpx:

* small JSON request/response on a kept-alive connection (``keepalive``),
* the same with a new connection per request (``new conn``: CONNECT + two TLS handshakes),
* time to first SSE event of a stream whose events are 50 ms apart (``TTFT``), and the
  spread of the gaps between events as seen by the client (``gap error``).

Prints a table of medians / p95 in milliseconds.  Numbers depend on the machine; the point is
the difference between the two columns.
"""

from __future__ import annotations

import argparse
import os
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from tests.fakes.provider import FakeProvider  # noqa: E402

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}
STREAM = {**BODY, "stream": True}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def start_proxy(fake: FakeProvider, home: Path, cassette: Path) -> tuple[subprocess.Popen, str, str]:
    env = dict(os.environ, SPOOLPROXY_HOME=str(home), PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "spoolproxy", "record", "-q", "-c", str(cassette),
         "--upstream-ca", str(fake.ca_pem_path), "--connect-to", f"api.openai.com:443:127.0.0.1:{fake.port}"],
        env=env, stdout=subprocess.PIPE, text=True,
    )
    exports = {}
    for line in proc.stdout:
        if line.startswith("export "):
            k, v = line[7:].strip().split("=", 1)
            exports[k] = v.strip("'")
        if "SSL_CERT_FILE" in exports:
            break
    return proc, exports["HTTPS_PROXY"], exports["SSL_CERT_FILE"]


def timed_requests(make_client, url: str, n: int, *, reuse: bool) -> list[float]:
    out = []
    client = make_client() if reuse else None
    for _ in range(n):
        c = client or make_client()
        t = time.perf_counter()
        r = c.post(url, json=BODY, headers={"accept-encoding": "identity"})
        r.read()
        out.append((time.perf_counter() - t) * 1000)
        if client is None:
            c.close()
    if client:
        client.close()
    return out


def timed_streams(make_client, url: str, n: int) -> tuple[list[float], list[float]]:
    ttft, gap_err = [], []
    with make_client() as c:
        for _ in range(n):
            t = time.perf_counter()
            arrivals = []
            with c.stream("POST", url, json=STREAM, headers={"x-fake-delay-ms": "50"}) as r:
                for _piece in r.iter_raw():
                    arrivals.append(time.perf_counter())
            ttft.append((arrivals[0] - t) * 1000)
            gaps = [(b - a) * 1000 for a, b in zip(arrivals, arrivals[1:])]
            gap_err += [abs(g - 50) for g in gaps if g > 10]  # ignore the unpaced tail piece
    return ttft, gap_err


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--streams", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeProvider(gzip=False) as fake:
        home, cassette = Path(tmp) / "home", Path(tmp) / "bench.yaml"
        direct_ctx = ssl.create_default_context(cafile=str(fake.ca_pem_path))
        direct = lambda: httpx.Client(verify=direct_ctx, trust_env=False, timeout=30)  # noqa: E731
        durl = f"https://127.0.0.1:{fake.port}/v1/chat/completions"
        proc, proxy, bundle = start_proxy(fake, home, cassette)
        try:
            proxy_ctx = ssl.create_default_context(cafile=bundle)
            via = lambda: httpx.Client(proxy=proxy, verify=proxy_ctx, trust_env=False, timeout=30)  # noqa: E731
            purl = "https://api.openai.com/v1/chat/completions"
            for mk, u in ((direct, durl), (via, purl)):  # warm-up (cert generation, imports)
                timed_requests(mk, u, 5, reuse=True)
            rows = []
            d, p = timed_requests(direct, durl, args.requests, reuse=True), timed_requests(via, purl, args.requests, reuse=True)
            rows.append(("request, keepalive", d, p))
            n_new = max(20, args.requests // 5)
            d, p = timed_requests(direct, durl, n_new, reuse=False), timed_requests(via, purl, n_new, reuse=False)
            rows.append(("request, new conn", d, p))
            (dt, dg), (pt, pg) = timed_streams(direct, durl, args.streams), timed_streams(via, purl, args.streams)
            rows.append(("TTFT (SSE)", dt, pt))
            rows.append(("SSE gap error vs 50 ms", dg, pg))
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)
        print(f"{'metric (ms)':26} {'direct p50':>10} {'p95':>7} {'proxy p50':>10} {'p95':>7} {'added p50':>10}")
        for name, d, p in rows:
            print(f"{name:26} {statistics.median(d):10.2f} {pct(d, .95):7.2f} {statistics.median(p):10.2f} "
                  f"{pct(p, .95):7.2f} {statistics.median(p) - statistics.median(d):10.2f}")
        print(f"(cassette: {sum(1 for _ in open(cassette)) if cassette.exists() else 0} YAML lines recorded)")


if __name__ == "__main__":
    main()
