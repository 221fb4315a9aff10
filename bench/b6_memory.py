"""B6 memory: peak RSS of the proxy process while a client downloads a large body through it.

Each subject is a fresh standalone process: ``spoolproxy record --cassette F`` and, for
reference, bare ``mitmdump`` (which buffers whole bodies) and ``mitmdump --set
stream_large_bodies=1m``.  The client (httpx, streaming, body discarded) downloads N MiB
of ``application/octet-stream`` over HTTPS from the local origin.  Peak RSS is the kernel's
``ru_maxrss`` for that process (``os.wait4``), covering its whole life including the
cassette write at exit.  The playback rows of B6 are measured in B2.
"""

from __future__ import annotations

import time

from .ctx import RunContext, Unavailable
from .report import Results

SUBJECTS = {"spoolproxy": "spoolproxy record", "mitmdump": "bare mitmdump",
            "mitmdump_stream": "bare mitmdump, stream_large_bodies=1m"}
TARGET_MB = 150


def specs() -> list[tuple[str, str, str, str]]:
    return [(f"B6.download.{s}", label, "peak RSS recording a large download", "MB") for s, label in SUBJECTS.items()]


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
    """Measure B6's download rows into ``res``."""
    res.declare("B6", specs())
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
