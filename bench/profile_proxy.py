"""Profile a proxy under B1/B2 load with py-spy and say whose code the time goes to.

    python -m bench.profile_proxy record --load 1k      # spoolproxy record, 1 KB JSON
    python -m bench.profile_proxy mitmdump --load sse   # bare mitmdump, SSE
    python -m bench.profile_proxy playback              # spoolproxy playback, 1,000 interactions

py-spy (``pip install py-spy``; not a dependency of spoolproxy) samples the proxy process
(``--gil``: only the thread holding the GIL, i.e. where Python CPU time goes) while the
benchmark client drives it; the summary (share of samples with a spoolproxy frame, spoolproxy
functions by inclusive share, hottest frames) is printed and written to
``bench/profiles/<subject>-<load>.txt``.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .config import QUICK
from .ctx import RunContext

HERE = Path(__file__).resolve().parent


def _ours(frame: str) -> bool:
    return "spoolproxy/" in frame and "proxy/runner.py" not in frame and "spoolproxy/cli/" not in frame


def summarize(raw: Path, top: int = 25) -> str:
    """Text summary of a py-spy ``--format raw`` file (collapsed stacks with counts)."""
    incl: collections.Counter = collections.Counter()
    selfc: collections.Counter = collections.Counter()
    total = ours = 0
    for line in raw.read_text().splitlines():
        stack, _, cnt = line.rpartition(" ")
        if not stack:
            continue
        n = int(cnt)
        total += n
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        for f in set(frames):
            incl[f] += n
        if any(_ours(f) for f in frames):
            ours += n
        selfc[frames[-1]] += n
    if not total:
        return "no samples\n"
    out = [f"samples: {total}; inside spoolproxy's own code (addons, cassettes, replayer; not the "
           f"runner thread that hosts mitmproxy's loop): {ours} ({100 * ours / total:.1f}%)",
           "", "spoolproxy functions, inclusive share:"]
    out += [f"  {100 * v / total:5.1f}%  {k}" for k, v in incl.most_common() if _ours(k)][:top]
    out += ["", "hottest frames (self):"]
    out += [f"  {100 * v / total:5.1f}%  {k}" for k, v in selfc.most_common(top)]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profile_proxy", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("subject", choices=["record", "mitmdump", "mitmdump-stream", "playback"])
    ap.add_argument("--load", choices=["1k", "100k", "sse"], default="1k")
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("py-spy is not installed: pip install py-spy", file=sys.stderr)
        return 2
    from .b1_record import _json_batch, _sse
    from .b2_playback import _loop

    with RunContext(QUICK) as ctx:
        if args.subject == "record":
            proc, port, ca = ctx.spoolproxy("prof", "record", "--cassette", str(ctx.work / "p.yaml"),
                                            "--upstream-ca", str(ctx.pki.ca_cert))
        elif args.subject == "playback":
            from spoolproxy.cassettes import save

            from . import synth

            from .b2_playback import exchanges

            model = synth.playback_cassette(1000)
            path = save(model, ctx.work / "p.yaml")
            cas = exchanges(model)
            proc, port, ca = ctx.spoolproxy("prof", "playback", "--cassette", str(path), "--match", "exact",
                                            "--allow-repeats")
        else:
            extra = ("--set", "stream_large_bodies=1") if args.subject == "mitmdump-stream" else ()
            proc, port, ca = ctx.mitmdump("prof", *extra)
        client = ctx.client(port, ca)
        size = {"1k": 1024, "100k": 102400}.get(args.load, 0)
        url = ctx.origin_url(f"/json?size={size}" if size else "/sse?events=200&gap_ms=0")

        def once() -> None:
            if args.subject == "playback":
                _loop(client, cas, 10, 1e9, int(time.time() * 1000) % 1000)
            elif size:
                _json_batch(client, url, 10, size)
            else:
                _sse(client, url, 200)

        once()
        raw = ctx.work / "spy.txt"
        sp = subprocess.Popen([spy, "record", "-p", str(proc.pid), "-o", str(raw), "-f", "raw", "-r", "500",
                               "-d", str(int(args.seconds)), "--gil"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        t0 = time.time()
        while time.time() - t0 < args.seconds - 1:
            once()
        sp.wait()
        client.close()
        text = f"# py-spy --gil profile of `{args.subject}` under {args.load if args.subject != 'playback' else 'B2 (1,000 interactions)'} load\n\n"
        text += summarize(raw)
    out = HERE / "profiles" / f"{args.subject}-{args.load if args.subject != 'playback' else 'b2'}.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)
    print(text)
    print(f"written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
