"""B6 memory: peak RSS of the proxy process while a client downloads a large body through it.

Each subject is a fresh standalone process: ``spoolproxy record --cassette F`` and, for
reference, bare ``mitmdump`` (which buffers whole bodies) and ``mitmdump --set
stream_large_bodies=1m``.  The client (httpx, streaming, body discarded) downloads N MiB
of ``application/octet-stream`` over HTTPS from the local origin.  Peak RSS is the kernel's
``ru_maxrss`` for that process (``os.wait4``), covering its whole life including the
cassette write at exit.  The playback rows of B6 are measured in B2.

The read rows: peak RSS of ``spoolproxy detect``, ``show``, ``playback -- true`` and
``test`` (a case exported from the run) reading one large cassette, a long agent run in
the OpenAI Chat Completions wire format whose requests re-send the conversation (about 50 MB
in format v1), each with an empty parsed-document cache (a first read, which also writes
the cache entry); the target is at most 4 times the file's size.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from .ctx import RunContext, Unavailable
from .procs import PYTHON, RSSWRAP, tool
from .report import Results

SUBJECTS = {"spoolproxy": "spoolproxy record", "mitmdump": "bare mitmdump",
            "mitmdump_stream": "bare mitmdump, stream_large_bodies=1m"}
TARGET_MB = 150
READERS = {"detect": "spoolproxy detect", "show": "spoolproxy show", "playback": "spoolproxy playback -- true",
           "test": "spoolproxy test (one case)"}
READ_TARGET = 4.0


def specs() -> list[tuple[str, str, str, str]]:
    rows = [(f"B6.download.{s}", label, "peak RSS recording a large download", "MB") for s, label in SUBJECTS.items()]
    rows += [(f"B6.read.{k}", label, "peak RSS reading a large cassette", "MB") for k, label in READERS.items()]
    return rows


def _peak(cmd: list[str], ctx: RunContext, cwd: Path, name: str) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of ``cmd`` run to its end under :mod:`bench.rsswrap`."""
    out = ctx.logs / f"{name}.maxrss"
    ctx.logs.mkdir(parents=True, exist_ok=True)
    env = ctx.env()
    env["SPOOLPROXY_CACHE"] = str(ctx.work / f"cache-{name}")  # empty: a first read
    t0 = time.perf_counter()
    r = subprocess.run([PYTHON, "-I", "-S", str(RSSWRAP), str(out), *cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    secs = time.perf_counter() - t0
    if r.returncode not in (0, 1):  # detect/test exit 1 on a failing run: still a complete read
        raise Unavailable(f"`{' '.join(cmd[1:])}` exited {r.returncode}: "
                          + " ".join(r.stderr.decode(errors="replace").split())[-250:])
    return int(out.read_text().split()[0]) * 1024 / 1e6, secs


def read_rows(res: Results, ctx: RunContext) -> None:
    """Peak RSS of each command reading one large cassette, against the file's size."""
    from spoolproxy.cassettes import save

    from . import synth

    proj = ctx.work / "b6-read"
    proj.mkdir(parents=True, exist_ok=True)
    path = save(synth.long_agent_run(ctx.cfg.b6_read_steps), proj / "run.yaml")
    size_mb = path.stat().st_size / 1e6
    sp = tool("spoolproxy")
    subprocess.run([sp, "export-test", "run.yaml", "--passing", "--cmd", "true", "--confirm"], cwd=proj, env=ctx.env(),
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    cmds = {"detect": [sp, "detect", "run.yaml"], "show": [sp, "show", "run.yaml"],
            "playback": [sp, "playback", "-q", "-c", "run.yaml", "--", "true"], "test": [sp, "test", "--no-isolate"]}
    for key, cmd in cmds.items():
        try:
            peak, secs = _peak(cmd, ctx, proj, f"b6-read-{key}")
        except (Unavailable, subprocess.SubprocessError, OSError, ValueError) as exc:
            res.unavailable(f"B6.read.{key}", exc)
            continue
        res.set(f"B6.read.{key}", [peak], metric=f"peak RSS reading a {size_mb:.0f} MB cassette (first read)",
                reference="the file's size", ratio=[peak / size_mb], target=f"≤ {READ_TARGET:g}× the file's size",
                met=peak <= READ_TARGET * size_mb,
                note=f"{size_mb:.1f} MB cassette, {ctx.cfg.b6_read_steps * 2 + 1} interactions; {secs:.1f} s")


def _download(client, url: str, want: int) -> float:
    t0 = time.perf_counter()
    got = 0
    with client.stream("GET", url) as r:
        if r.status_code != 200:
            raise RuntimeError(f"download answered {r.status_code}")
        for chunk in r.iter_raw(1 << 20):
            got += len(chunk)
    if got != want:
        raise RuntimeError(f"downloaded {got} bytes, wanted {want}")
    return time.perf_counter() - t0


def run(res: Results, ctx: RunContext) -> None:
    """Measure B6's download and read rows into ``res``."""
    res.declare("B6", specs())
    read_rows(res, ctx)
    mib = ctx.cfg.b6_download_mib
    size = mib * 1024 * 1024
    url = ctx.origin_url(f"/download?bytes={size}")
    small = ctx.origin_url("/json?size=1024")
    peaks: dict[str, float] = {}
    pending: dict = {}
    for s in ("mitmdump_stream", "mitmdump", "spoolproxy"):  # start all at once
        try:
            if s == "spoolproxy":
                pending[s] = ctx.spoolproxy("b6-spoolproxy", "record", "--cassette", str(ctx.work / "b6-record.yaml"),
                                            "--upstream-ca", str(ctx.pki.ca_cert), wait=False)
            elif s == "mitmdump":
                pending[s] = ctx.mitmdump("b6-mitmdump", wait=False)
            else:
                pending[s] = ctx.mitmdump("b6-mitmdump-stream", "--set", "stream_large_bodies=1m", wait=False)
        except Unavailable as exc:
            res.unavailable(f"B6.download.{s}", exc)
    for s, (proc, _, _) in list(pending.items()):  # all idle before any measurement
        try:
            ctx.ready(proc)
        except Unavailable as exc:
            del pending[s]
            res.unavailable(f"B6.download.{s}", exc)
    for s, (proc, port, ca) in pending.items():  # references first, for the ratio
        try:
            try:
                with ctx.client(port, ca) as c:
                    c.post(small, content=b"{}").raise_for_status()
                    idle = (proc.sample_hwm() or 0) * 1024 / 1e6
                    secs = _download(c, url, size)
            finally:
                kib = proc.stop(timeout=120)
            if not kib:
                raise RuntimeError("peak RSS not available")
            peak = kib * 1024 / 1e6
            peaks[s] = peak
            note = f"{mib} MiB in {secs:.2f} s ({mib / secs:.0f} MiB/s); peak RSS after one small request: {idle:.0f} MB"
            kw: dict = {}
            if s == "spoolproxy":
                kw = dict(target=f"< {TARGET_MB} MB", met=peak < TARGET_MB)
                if "mitmdump_stream" in peaks:
                    kw.update(reference="mitmdump, streaming", ratio=[peak / peaks["mitmdump_stream"]])
            res.set(f"B6.download.{s}", [peak], metric=f"peak RSS, {mib} MiB download", note=note, **kw)
        except (Unavailable, RuntimeError, OSError) as exc:
            res.unavailable(f"B6.download.{s}", exc)
        except Exception as exc:  # httpx errors and the like: report, go on
            res.unavailable(f"B6.download.{s}", f"{type(exc).__name__}: {exc}")
