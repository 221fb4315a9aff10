"""B5 start-up: wall time of ``spoolproxy playback -- true`` and ``spoolproxy record -- true``
against ``true`` alone (the target: within 0.3 s of it) and ``python -c pass`` (and
``spoolproxy --help``, the CLI's import cost, and importing mitmproxy's master and default
addons, which the proxy imports while CMD runs), by subprocess timing with repeats, after
one untimed warm-up run each (CA creation, caches)."""

from __future__ import annotations

import subprocess
import time

from .ctx import RunContext, Unavailable, spoolproxy_command
from .procs import PYTHON, tool
from .report import Results
from .stats import percentile


def specs() -> list[tuple[str, str, str, str]]:
    return [("B5.true", "true", "wall time (the program alone)", "s"),
            ("B5.python", "python -c pass", "wall time", "s"),
            ("B5.mitmproxy_import", "python -c 'import mitmproxy.master, mitmproxy.addons'",
             "wall time (the floor of any in-process mitmproxy)", "s"),
            ("B5.help", "spoolproxy --help", "wall time", "s"),
            ("B5.playback", "spoolproxy playback -- true", "wall time", "s"),
            ("B5.record", "spoolproxy record -- true", "wall time", "s")]


def _time(cmd: list[str], ctx: RunContext) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=ctx.env(), cwd=ctx.work, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise Unavailable(f"`{' '.join(cmd[1:])}` exited {r.returncode}: "
                          + " ".join(r.stderr.decode(errors='replace').split())[-250:])
    return dt


def run(res: Results, ctx: RunContext) -> None:
    """Measure B5 into ``res``."""
    from spoolproxy.cassettes import save

    from . import synth

    res.declare("B5", specs())
    sp = tool("spoolproxy")
    tiny = save(synth.playback_cassette(3), ctx.work / "b5-tiny.yaml")
    cmds = {
        "true": ["true"],
        "python": [PYTHON, "-c", "pass"],
        "mitmproxy_import": [PYTHON, "-c", "import mitmproxy.master, mitmproxy.addons"],
        "help": [sp, "--help"],
        "playback": [sp, "playback", "--cassette", str(tiny), "--", "true"],
        "record": [sp, "record", "--cassette", str(ctx.work / "b5-record.yaml"), "--", "true"],
    }
    usable = {}
    for key, cmd in cmds.items():
        try:
            if key in ("playback", "record"):
                spoolproxy_command(key)
            _time(cmd, ctx)  # warm-up
            usable[key] = cmd
        except (Unavailable, subprocess.SubprocessError) as exc:
            res.unavailable(f"B5.{key}", exc)
    times: dict[str, list[float]] = {k: [] for k in usable}
    for _ in range(ctx.cfg.b5_runs):
        for key, cmd in usable.items():
            times[key].append(_time(cmd, ctx))
    base = times.get("python")
    alone = times.get("true")
    for key, vals in times.items():
        kw: dict = {}
        if key in ("playback", "record") and alone:
            added = [a - b for a, b in zip(vals, alone)]
            kw = dict(reference="true alone", ratio=[a / b for a, b in zip(vals, alone)],
                      target="≤ true + 0.3 s", met=percentile(added, 50) <= 0.3,
                      note=f"{percentile(added, 50):.3f} s more than true alone (median of the per-run differences)")
        elif key not in ("python", "true") and base:
            kw = dict(reference="python -c pass", ratio=[a / b for a, b in zip(vals, base)])
        res.set(f"B5.{key}", vals, **kw)
