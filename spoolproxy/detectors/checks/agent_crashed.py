"""agent_crashed: the recorded command itself failed: it exited with a non-zero status,
was killed by a signal, or overran ``record --timeout``.  The traffic may look healthy (the
traceback came after the last request); the agent's own end says otherwise.

Read from the cassette's metadata: ``exit_code`` and ``agent_end`` (``signal``,
``timed_out``, ``interrupted``, the redacted ``stderr_tail`` that ``spoolproxy record``
keeps).  Cassettes without an exit status (vcrpy, standalone recordings) are never flagged.
The message quotes the exit status and the last lines of stderr.

Severity: error; warn when the run was interrupted (the SIGINT/SIGTERM that stopped it
reached ``spoolproxy record`` first: a user or CI stopping the run, not the agent failing).
The finding is anchored at the last interaction (the agent ended after it).

Public failures: runs whose agent raised after its last model call read as passing
(issue 9); crashlab records a run's status ``error``/``timeout`` for the same reason.
"""

from __future__ import annotations

from ..evidence import clip
from .base import Context

KIND = "agent_crashed"


def check(ctx: Context) -> list:
    meta = ctx.cassette.meta
    code = meta.exit_code
    end = meta.extra.get("agent_end")
    end = end if isinstance(end, dict) else {}
    timed_out = bool(end.get("timed_out"))
    if code in (None, 0) and not timed_out:
        return []
    sig = end.get("signal") if isinstance(end.get("signal"), str) else None
    if timed_out:
        what = f"overran its timeout and was stopped ({sig or f'exit status {code}'})"
    elif sig:
        what = f"was killed by {sig} (exit status {code})"
    else:
        what = f"exited with status {code}"
    interrupted = end.get("interrupted") if isinstance(end.get("interrupted"), str) else None
    sev = "warn" if interrupted and not timed_out else "error"
    if sev == "warn":
        what += f" after {interrupted} reached spoolproxy record (the run was stopped from outside)"
    tail = end.get("stderr_tail") if isinstance(end.get("stderr_tail"), str) else ""
    lines = [ln for ln in tail.splitlines() if ln.strip()]
    last = "\n".join(lines[-3:])
    msg = f"the recorded command {what}"
    if lines:
        msg += f"; its stderr ends: {clip(lines[-1].strip(), 200)}"
    ev = [ctx.ev.quote(None, "meta.exit_code", str(code)) if code is not None else None,
          ctx.ev.quote(None, "meta.agent_end.stderr_tail", last[-400:]) if last else None]
    anchor = [len(ctx.steps) - 1] if ctx.steps else []
    return [ctx.finding(KIND, sev, anchor, msg, ev)]
