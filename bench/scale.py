"""``python -m bench.scale``: throughput beyond one machine, measured on this one.

Not part of ``python -m bench`` (it needs the ``scale`` extra and moto, and takes minutes):
its figures go to docs/scaling.md.  What it measures, each the median of ``--repeat`` runs:

* **distributed detect**: the shared corpus copied ``--copies`` times (distinct keys, same
  bytes; the parse cache is off so nothing is read twice for free) and uploaded to moto's
  S3 server (its own process, on 127.0.0.1), analysed through :mod:`spoolproxy.scale` by the
  local engine in one process (the reference, from local disk and from S3) and by Dask with
  1 and 2 worker processes (from S3 and from local disk); cassettes/s and interactions/s,
  warm workers (start-up measured apart), and per CPU-second of the analysing processes
  (this process, or the Dask workers: a figure that other load on the machine does not
  change much); and the Parquet bytes per run (one copy: distinct
  runs);
* **the gateway**: ``spoolproxy serve`` (its own process) recording ``--sessions`` sessions
  of ``--requests`` requests each from ``--clients`` concurrent httpx clients against a
  local HTTP upstream (its own process), each session ended by the control request and
  published to the S3 store; requests/s and sessions/s.

Writes ``bench/out/scale.json`` and prints a Markdown table.  Every server listens on
127.0.0.1 only; every loop is bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SPOOLPROXY_SHARED", REPO.parent / "shared"))
S3_ENV = {"AWS_ACCESS_KEY_ID": "spoolproxy-bench", "AWS_SECRET_ACCESS_KEY": "spoolproxy-bench",
          "AWS_DEFAULT_REGION": "us-east-1", "SPOOLPROXY_CACHE": "off"}

_MOTO = """
import sys
from moto.server import ThreadedMotoServer
s = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
import logging; logging.getLogger("werkzeug").setLevel(logging.ERROR)
s.start()
print(s.get_host_and_port()[1], flush=True)
sys.stdin.read()
"""

_UPSTREAM = """
import http.server, sys
BODY = b'{"ok": true, "pad": "' + b"x" * 1000 + b'"}'
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def _spawn(code: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **S3_ENV})
    return proc, int(proc.stdout.readline())


def make_corpus(dest: Path, copies: int) -> tuple[int, int]:
    """``copies`` copies of the shared corpus under ``dest`` (``copyNN/...``); returns
    (cassettes, bytes)."""
    src = SHARED / "corpus" / "cassettes"
    if not src.is_dir():
        sys.exit(f"bench.scale: the shared corpus is not at {src} (set SPOOLPROXY_SHARED)")
    n = size = 0
    for i in range(copies):
        shutil.copytree(src, dest / f"copy{i:02d}")
    for f in dest.rglob("*.yaml"):
        n += 1
        size += f.stat().st_size
    return n, size


def cpu_seconds(engine) -> float:
    """CPU seconds used so far by whoever analyses: the Dask workers, or this process."""
    if getattr(engine, "client", None) is not None:
        return sum(engine.client.run(time.process_time).values())
    return time.process_time()


def timed_rows(paths: list[str], engine, options: dict) -> tuple[float, int, int, float]:
    """(seconds, cassettes, interactions, CPU seconds of the analysing processes) of one
    pass over ``paths`` with a started ``engine``."""
    from spoolproxy.scale.pipeline import analyse, cassette_items

    t0, c0 = time.perf_counter(), cpu_seconds(engine)
    items = cassette_items(paths, options)
    n = inter = 0
    for row in analyse(items, engine, options=options):
        n += 1
        inter += row["interactions"]
    return time.perf_counter() - t0, n, inter, cpu_seconds(engine) - c0


def measure(label: str, paths: list[str], engine, options: dict, repeat: int) -> dict:
    runs = []
    with engine:
        timed_rows([paths[0] + "/copy00"], engine, options)  # warm-up: imports in the workers, connections
        for _ in range(repeat):
            runs.append(timed_rows(paths, engine, options))
    secs = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[3] for r in runs)
    n, inter = runs[0][1], runs[0][2]
    out = {"label": label, "seconds": round(secs, 3), "cassettes": n, "interactions": inter,
           "cassettes_per_s": round(n / secs, 1), "interactions_per_s": round(inter / secs, 1),
           "cpu_s": round(cpu, 3), "interactions_per_cpu_s": round(inter / cpu, 1) if cpu else None,
           "spread_s": [round(r[0], 3) for r in runs]}
    print(f"  {label}: {out['cassettes_per_s']} cassettes/s, {out['interactions_per_s']} interactions/s "
          f"({n} cassettes in {secs:.2f} s; {out['interactions_per_cpu_s']} interactions per CPU-second of the "
          f"analysing processes)", flush=True)
    return out


def cluster_startup(workers: int) -> float:
    from spoolproxy.scale.engine import DaskEngine

    t0 = time.perf_counter()
    with DaskEngine(workers=workers) as eng:
        eng.client.wait_for_workers(workers)
        took = time.perf_counter() - t0
    return round(took, 2)


def gateway(endpoint: str, sessions: int, requests: int, clients: int) -> dict:
    """Run ``spoolproxy serve`` into ``s3://gw-bench/runs`` and drive it; see the module docstring."""
    import httpx
    import s3fs

    s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True).mkdir("gw-bench")
    up, up_port = _spawn(_UPSTREAM)
    home = Path(tempfile.mkdtemp(prefix="spoolproxy-bench-home-"))
    env = {**os.environ, **S3_ENV, "SPOOLPROXY_HOME": str(home)}
    serve = subprocess.Popen([sys.executable, "-m", "spoolproxy", "serve", "--port", "0", "--store", "s3://gw-bench/runs",
                              "--storage-option", f"endpoint_url={endpoint}", "--idle", "600"],
                             stderr=subprocess.PIPE, text=True, env=env, start_new_session=True, cwd=REPO)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(serve.stderr), daemon=True).start()  # keep the pipe drained
    try:
        deadline = time.monotonic() + 60
        while not any("serving on" in ln for ln in lines) and time.monotonic() < deadline and serve.poll() is None:
            time.sleep(0.05)
        found = [ln for ln in lines if "serving on" in ln]
        if not found:
            raise SystemExit("bench.scale: spoolproxy serve did not start: " + "".join(lines)[-500:])
        proxy = found[0].split("serving on ")[1].split(";")[0]
        todo = list(range(sessions))
        lock = threading.Lock()
        body = {"messages": [{"role": "user", "content": "x" * 200}]}

        def worker():
            with httpx.Client(proxy=proxy, timeout=60) as c:
                while True:
                    with lock:
                        if not todo:
                            return
                        sid = f"bench-{todo.pop()}"
                    for _ in range(requests):
                        c.post(f"http://127.0.0.1:{up_port}/v1/chat", json=body, headers={"x-spoolproxy-session": sid})
                    r = c.post(f"http://spoolproxy.control/sessions/{sid}/end")
                    assert r.json()["ok"], r.text

        t0, c0 = time.perf_counter(), _proc_cpu(serve.pid)
        threads = [threading.Thread(target=worker) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        secs, cpu = time.perf_counter() - t0, _proc_cpu(serve.pid) - c0
        published = len(s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True).find("gw-bench/runs"))
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(60)
        up.kill()
        shutil.rmtree(home, ignore_errors=True)
    out = {"sessions": sessions, "requests_per_session": requests, "clients": clients, "seconds": round(secs, 2),
           "requests_per_s": round(sessions * requests / secs, 1), "sessions_per_s": round(sessions / secs, 2),
           "published": published, "gateway_cpu_s": round(cpu, 2),
           "requests_per_gateway_cpu_s": round(sessions * requests / cpu, 1) if cpu else None}
    print(f"  gateway: {out['requests_per_s']} requests/s, {out['sessions_per_s']} sessions/s "
          f"({sessions} sessions x {requests} requests, {clients} clients, {published} cassettes in S3; "
          f"{out['requests_per_gateway_cpu_s']} requests per CPU-second of the gateway process)", flush=True)
    return out


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def detect_part(tmp: Path, args, endpoint: str, options: dict) -> dict:
    """The distributed-detect measurements (see the module docstring)."""
    from spoolproxy.scale.engine import DaskEngine, LocalEngine

    results: dict = {}
    n, size = make_corpus(tmp / "corpus", args.copies)
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True)
    fs.mkdir("bench")
    t0 = time.perf_counter()
    fs.put(str(tmp / "corpus") + "/", "bench/corpus/", recursive=True)
    results["corpus"] = {"cassettes": n, "bytes": size, "upload_s": round(time.perf_counter() - t0, 2)}
    print(f"corpus: {n} cassettes, {size / 1e6:.1f} MB, uploaded to moto S3 in {results['corpus']['upload_s']} s")
    local, s3 = [str(tmp / "corpus")], ["s3://bench/corpus"]
    results["startup_s"] = {f"dask_{w}": cluster_startup(w) for w in (1, 2)}
    print(f"  Dask LocalCluster start-up: {results['startup_s']}")
    results["detect"] = [
        measure("local engine, 1 process, local disk", local, LocalEngine(1), options, args.repeat),
        measure("local engine, 1 process, S3", s3, LocalEngine(1), options, args.repeat),
        measure("dask, 1 worker, S3", s3, DaskEngine(workers=1), options, args.repeat),
        measure("dask, 2 workers, S3", s3, DaskEngine(workers=2), options, args.repeat),
        measure("dask, 1 worker, local disk", local, DaskEngine(workers=1), options, args.repeat),
        measure("dask, 2 workers, local disk", local, DaskEngine(workers=2), options, args.repeat),
    ]
    from spoolproxy.scale.parquet import write_rows
    from spoolproxy.scale.pipeline import analyse, cassette_items

    with LocalEngine(1) as eng:  # one copy: distinct runs (copies would compress to nothing)
        table = tmp / "findings.parquet"
        rows = write_rows(analyse(cassette_items([local[0] + "/copy00"]), eng), table)
    results["parquet"] = {"rows": rows, "bytes": table.stat().st_size,
                          "bytes_per_row": round(table.stat().st_size / rows, 1)}
    print(f"  Parquet: {results['parquet']['bytes_per_row']} bytes per run")
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=10, help="copies of the corpus (default 10: 1,210 cassettes)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sessions", type=int, default=60)
    ap.add_argument("--requests", type=int, default=10)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "scale.json")
    ap.add_argument("--only", choices=("detect", "gateway"), default=None, help="run one part only")
    args = ap.parse_args()
    os.environ.update(S3_ENV)
    load0 = os.getloadavg()
    moto, port = _spawn(_MOTO)
    endpoint = f"http://127.0.0.1:{port}"
    options = {"endpoint_url": endpoint}
    tmp = Path(tempfile.mkdtemp(prefix="spoolproxy-bench-scale-"))
    results: dict = {"load_start": [round(x, 2) for x in load0], "cores": os.cpu_count()}
    try:
        if args.only != "gateway":
            results.update(detect_part(tmp, args, endpoint, options))
        if args.only != "detect":
            results["gateway"] = gateway(endpoint, args.sessions, args.requests, args.clients)
    finally:
        moto.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    results["load_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"load average {results['load_start']} -> {results['load_end']}; wrote {args.out}")


if __name__ == "__main__":
    main()
