"""``python -m bench.playback_bigbody [--before SRC]``: what a big changed request body
costs playback (issue 11: a 2.7 MB changed base64 image froze the proxy for 11 minutes).

1. **Explanation time** of a divergence whose base64 image changed by one character, or was
   replaced by another image of the same size, by body size: ``Index.lookup`` with the explanation computed inline (what the old code did on
   the request path).  With ``--before SRC`` the same measurement runs on another spoolproxy
   source tree (e.g. ``main``) in a subprocess, sizes growing until one takes longer than
   ``--limit`` seconds.
2. **Through the proxy**: the latency of small requests (sequential, keep-alive) alone and
   while a 20 MB changed base64 body and a 12 MB changed multipart upload are being served
   on other connections; how long those two take; the size of the JSON report.

Prints Markdown tables.  Plain HTTP through the in-process proxy (playback never connects
upstream, so no origin server is needed).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CHAT = "http://api.example.test/v1/chat/completions"
FILES = "http://api.example.test/v1/files"

_EXPLAIN = r'''
import base64, json, random, sys, time
from spoolproxy.cassettes.model import Cassette, Interaction, Request, Response
from spoolproxy.replayer.index import Index
size, kind = int(sys.argv[1]), sys.argv[2]
b64 = base64.b64encode(random.Random(1).randbytes(size * 3 // 4)).decode()
def body(s):
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + s}}]}]}).encode()
req = lambda s: Request(method="POST", uri="http://api.example.test/v1/chat/completions",
                        headers={"content-type": ["application/json"]}, body=body(s))
mid = len(b64) // 2
idx = Index([Cassette(interactions=[Interaction(request=req(b64), response=Response(status=200, body=b"{}"))])])
if kind == "one-char":
    changed = req(b64[:mid] + ("A" if b64[mid] != "A" else "B") + b64[mid + 1:])
else:  # another image of the same size (a re-rendered screenshot, a re-encoded photo)
    changed = req(base64.b64encode(random.Random(2).randbytes(size * 3 // 4)).decode())
t = time.perf_counter()
lk = idx.lookup(changed)
print(json.dumps({"s": time.perf_counter() - t, "outcome": lk.outcome, "changes": len(lk.changes)}))
'''


def explain_time(size: int, kind: str, pythonpath: str | None, limit: float) -> float | None:
    """Seconds to look up and explain a divergence of a ``size``-byte base64 image changed
    by one character (``kind`` one-char) or replaced by another (``other``); None: longer
    than ``limit``."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    try:
        # cwd outside any checkout: ``python -c`` puts the cwd first on sys.path
        out = subprocess.run([sys.executable, "-c", _EXPLAIN, str(size), kind], env=env, capture_output=True, text=True,
                             timeout=limit, check=True, cwd=tempfile.gettempdir()).stdout
    except subprocess.TimeoutExpired:
        return None
    return json.loads(out.strip().splitlines()[-1])["s"]


def through_proxy(tmp: Path) -> dict[str, float]:
    import httpx

    from spoolproxy.cassettes import save
    from spoolproxy.cassettes.model import Cassette, Interaction, Request, Response
    from spoolproxy.proxy.runner import ProxyRunner
    from spoolproxy.replayer.addon import Playback
    from spoolproxy.replayer.session import PlaybackConfig, PlaybackSession

    rnd = random.Random(7)
    b64 = base64.b64encode(rnd.randbytes(15_000_000)).decode()
    img = lambda s: json.dumps({"model": "m", "messages": [{"role": "user", "content": [  # noqa: E731
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + s}}]}]}).encode()
    blob = rnd.randbytes(12_000_000)
    mp = lambda b: (b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\n"  # noqa: E731
                    + b + b"\r\n--B--\r\n")
    ok = Response(status=200, headers={"content-type": ["application/json"]}, body=b'{"ok": true}')
    small = lambda i: Request(method="POST", uri=CHAT, headers={"content-type": ["application/json"]},  # noqa: E731
                              body=json.dumps({"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}).encode())
    its = [Interaction(request=Request(method="POST", uri=CHAT, headers={"content-type": ["application/json"]},
                                       body=img(b64)), response=ok),
           Interaction(request=Request(method="POST", uri=FILES, body=mp(blob),
                                       headers={"content-type": ["multipart/form-data; boundary=B"]}), response=ok),
           *[Interaction(request=small(i), response=ok) for i in range(400)]]
    path = tmp / "big.yaml"
    save(Cassette(interactions=its), path)
    session = PlaybackSession(PlaybackConfig(cassettes=[str(path)]))
    out: dict[str, float] = {}
    with ProxyRunner([Playback(session)], options={"connection_strategy": "lazy", "upstream_cert": False}) as runner:
        def smalls(lo: int, hi: int, stop: threading.Event | None = None) -> list[float]:
            lat = []
            with httpx.Client(proxy=runner.proxy_url, timeout=60) as c:
                for i in range(lo, hi):
                    if stop is not None and stop.is_set():
                        break
                    t = time.perf_counter()
                    c.post(CHAT, content=small(i).body, headers={"content-type": "application/json"})
                    lat.append((time.perf_counter() - t) * 1000)
            return lat

        alone = smalls(0, 150)
        done = threading.Event()
        big_s: list[float] = []

        def big() -> None:
            changed_img = img(b64[:10_000_000] + ("A" if b64[10_000_000] != "A" else "B") + b64[10_000_001:])
            changed_mp = mp(blob[:6_000_000] + bytes([blob[6_000_000] ^ 1]) + blob[6_000_001:])
            with httpx.Client(proxy=runner.proxy_url, timeout=300) as c:
                t = time.perf_counter()
                c.post(CHAT, content=changed_img, headers={"content-type": "application/json"})
                big_s.append(time.perf_counter() - t)
                t = time.perf_counter()
                c.post(FILES, content=changed_mp, headers={"content-type": "multipart/form-data; boundary=B"})
                big_s.append(time.perf_counter() - t)
            done.set()

        th = threading.Thread(target=big)
        th.start()
        during = smalls(150, 400, done)
        th.join()
        report = session.report()
    q = lambda xs, p: statistics.quantiles(xs, n=100)[p - 1] if len(xs) >= 2 else (xs[0] if xs else float("nan"))  # noqa: E731
    out.update(alone_p50=statistics.median(alone), alone_p95=q(alone, 95), alone_max=max(alone),
               during_n=len(during), during_p50=statistics.median(during) if during else float("nan"),
               during_p95=q(during, 95), during_max=max(during) if during else float("nan"),
               big_image_s=big_s[0], big_upload_s=big_s[1],
               entries_kb=sum(len(r.model_dump_json()) for r in report.requests if r.outcome == "divergence") / 1024,
               text_kb=len("\n".join(ln for r in report.requests if r.outcome == "divergence" for ln in r.render())) / 1024,
               divergences=report.divergences)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="another spoolproxy source tree to time the explanation on")
    ap.add_argument("--limit", type=float, default=60.0, help="seconds before a single explanation counts as a freeze")
    args = ap.parse_args(argv)
    here = str(Path(__file__).resolve().parents[1])
    sizes = [100_000, 1_000_000, 2_700_000, 20_000_000]
    for kind, what in (("one-char", "one character changed"), ("other", "another image of the same size")):
        print(f"\n{what}:\n")
        print("| base64 body | explanation, this tree |" + (" before |" if args.before else ""))
        print("|---:|---:|" + ("---:|" if args.before else ""))
        frozen = False
        for size in sizes:
            now = explain_time(size, kind, here, args.limit)
            before = "-"
            if args.before:
                if frozen:
                    before = "not run (a smaller body already froze)"
                else:
                    b = explain_time(size, kind, args.before, args.limit)
                    frozen = b is None
                    before = f"> {args.limit:.0f} s (stopped)" if b is None else f"{b * 1000:.0f} ms"
            shown = "> limit" if now is None else f"{now * 1000:.0f} ms"
            print(f"| {size / 1e6:g} MB | {shown} |" + (f" {before} |" if args.before else ""))
    with tempfile.TemporaryDirectory() as tmp:
        r = through_proxy(Path(tmp))
    print()
    print("| through the proxy | value |\n|---|---:|")
    print(f"| small request alone, p50 / p95 / max | {r['alone_p50']:.1f} / {r['alone_p95']:.1f} / {r['alone_max']:.1f} ms |")
    print(f"| small requests served while the big ones were in flight | {r['during_n']} |")
    print(f"| small request meanwhile, p50 / p95 / max | {r['during_p50']:.1f} / {r['during_p95']:.1f} / "
          f"{r['during_max']:.1f} ms |")
    print(f"| 20 MB changed base64 body answered (divergence) | {r['big_image_s']:.2f} s |")
    print(f"| 12 MB changed multipart upload answered (divergence) | {r['big_upload_s']:.2f} s |")
    print(f"| report entries of the two big requests: JSON / text | {r['entries_kb']:.1f} KB / {r['text_kb']:.1f} KB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
