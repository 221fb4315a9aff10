"""CPU time per request of each recording proxy process, interleaved: where B1's added
latency comes from on a noisy machine.

    python -m bench.record_cpu [--requests 300] [--rounds 3] [--parts]

Starts the B1 origin, bare ``mitmdump`` (buffering and streaming), ``spoolproxy record`` and
``runner`` (spoolproxy's ProxyRunner with no recorder: the cost of embedding mitmproxy),
then sends 1 KB and 100 KB JSON POSTs and 200-event SSE streams through each in turn and
reads each proxy's user+system CPU time from ``/proc/<pid>/stat`` around every batch.
``--parts`` adds recorders with parts switched off (``capture``: the hooks only, nothing
queued; ``no-journal``: everything but the journal write; ``inline``: no writer thread;
``no-wait``: the end of a chunked response not held back until its line is written),
so the differences say what each part costs.  Prints milliseconds of CPU per request
(medians over rounds) and the p50 latency.  CPU time resolution is a clock tick (10 ms), so
use enough requests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from .b1_record import _json_batch, _sse
from .config import FULL
from .ctx import RunContext
from .procs import PYTHON, free_port

PARTS = ("runner", "capture", "no-journal", "inline", "no-wait")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(variant: str, port: int, ca: str, cassette: str) -> None:
    """Run a ProxyRunner with the recorder ``variant`` (see the module docstring) until SIGINT."""
    import signal
    import threading

    from spoolproxy.proxy.recorder import Recorder
    from spoolproxy.proxy.runner import ProxyRunner
    from spoolproxy.proxy.tlswatch import TlsWatch

    addons: list = []
    if variant != "runner":
        rec = Recorder(cassette)
        rec.open()
        if variant == "capture":
            rec._writer.submit = lambda seq, it, done=None: done and done()
        elif variant == "no-journal":
            rec.journal.append_many = lambda items: None
        elif variant == "no-wait":  # the end of a chunked response is not held back for its journal line
            submit = rec._writer.submit
            rec._writer.submit = lambda seq, it, done=None: (submit(seq, it), done and done())
        elif variant == "inline":
            rec._writer.submit = lambda seq, it, done=None: (rec._count_batch(rec._write_batch([(seq, it)])), done and done())
        addons = [rec, TlsWatch()]
    runner = ProxyRunner(addons, listen_port=port, upstream_ca=Path(ca), options={"connection_strategy": "lazy"})
    runner.start()
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    runner.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.record_cpu", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=300, help="1 KB requests per batch (100 KB: a third)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parts", action="store_true", help="also recorders with parts switched off")
    ap.add_argument("--serve", nargs=4, metavar=("VARIANT", "PORT", "CA", "CASSETTE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), args.serve[2], args.serve[3])
        return 0
    n1, n100 = args.requests, max(10, args.requests // 3)
    with RunContext(FULL) as ctx:
        ctx.origin()
        u1, u100 = ctx.origin_url("/json?size=1024"), ctx.origin_url("/json?size=102400")
        usse = ctx.origin_url("/sse?events=200&gap_ms=0&first_gap_ms=5")
        subjects = {
            "mitmdump": ctx.mitmdump("cpu-mitmdump", wait=False),
            "mitmdump, streaming": ctx.mitmdump("cpu-mitmdump-stream", "--set", "stream_large_bodies=1", wait=False),
            "spoolproxy record": ctx.spoolproxy("cpu-spoolproxy", "record", "-q", "--cassette",
                                                str(ctx.work / "cpu.yaml"), "--upstream-ca", str(ctx.pki.ca_cert),
                                                wait=False),
        }
        for v in PARTS if args.parts else PARTS[:1]:
            port = free_port()
            cmd = [PYTHON, "-m", "bench.record_cpu", "--serve", v, str(port), str(ctx.pki.ca_cert),
                   str(ctx.work / f"cpu-{v}.yaml")]
            subjects[v] = (ctx.start(cmd, f"cpu-{v}", port, wait=False), port, ctx.spoolproxy_ca())
        clients = {}
        for name, (proc, port, ca) in subjects.items():
            ctx.ready(proc)
            clients[name] = (ctx.client(port, ca), proc)
        for c, _ in clients.values():  # warm-up: handshakes, certificates
            _json_batch(c, u1, 20, 1024)
            _json_batch(c, u100, 5, 102400)
            _sse(c, usse, 200)
        res: dict[str, dict[str, list[float]]] = {k: {} for k in clients}
        for _ in range(args.rounds):
            for name, (c, proc) in clients.items():
                for key, url, n, size in (("1k", u1, n1, 1024), ("100k", u100, n100, 102400)):
                    a = cpu_seconds(proc.pid)
                    lat, _ = _json_batch(c, url, n, size)
                    res[name].setdefault(key, []).append((cpu_seconds(proc.pid) - a) / n * 1000)
                    res[name].setdefault(key + " p50", []).append(statistics.median(lat))
                a = cpu_seconds(proc.pid)
                totals = [_sse(c, usse, 200)[1] for _ in range(6)]
                res[name].setdefault("sse", []).append((cpu_seconds(proc.pid) - a) / 6 * 1000)
                res[name].setdefault("sse total", []).append(statistics.median(totals))
        print(f"{'subject':22} {'CPU ms/req 1 KB':>16} {'100 KB':>8} {'SSE':>8}   {'p50 1 KB':>9} {'100 KB':>8} {'SSE total':>10}")
        for name, v in res.items():
            m = {k: statistics.median(x) for k, x in v.items()}
            print(f"{name:22} {m['1k']:16.2f} {m['100k']:8.2f} {m['sse']:8.1f}   {m['1k p50']:9.2f} "
                  f"{m['100k p50']:8.2f} {m['sse total']:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
