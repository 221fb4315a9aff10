"""tool_error_ignored: a tool result signals failure and the agent answers as if it had
succeeded.

A result fails when the HTTP/MCP interaction behind it failed (4xx/5xx, HTML error page,
MCP ``isError: true``), when the client marked it ``is_error``, or when its JSON says
``ok: false`` / carries an ``error`` field / ``status: "error"``, holds a traceback, is
plain text whose first line starts with an error report (``Error: 500 internal``,
``Internal Server Error``: ``base.PLAIN_ERROR``, anchored, never a word in prose), or
matches ``[detect] error_patterns``.  It is *ignored* when the run's final answer comes
after it, a later call of the same tool did not succeed, and the final answer does not
admit the failure (a failure lexicon, ``ack_patterns``, or the error text itself).
Recovered errors (a retry that succeeded, a fallback, an answer that tells the user) are
not reported.  Severity: error.

Public failures: dograh-hq/dograh#715 (BR-03, a 503 page wrapped as success), llama_index
PR 22944 (BR-12, MCP ``isError`` passed on as data), crewAI PR 6712 (BR-15, ``ok: false``).
"""

from __future__ import annotations

import re

from .base import Context

KIND = "tool_error_ignored"


def check(ctx: Context) -> list:
    fa = ctx.transcript.final_answer
    if fa is None:
        return []
    results = ctx.transcript.tool_results
    failed = {id(r): ctx.tool_failure(r) for r in results}
    last_ok: dict[str | None, tuple[int, int]] = {}  # tool name -> position of its last good result
    for r in results:
        if failed[id(r)] is None:
            pos = _pos(r)
            if pos > last_ok.get(r.name, (-1, -1)):
                last_ok[r.name] = pos
    by_tool: dict[str, list] = {}
    for r in results:
        f = failed[id(r)]
        if f is None or r.interaction > fa.interaction:
            continue
        if last_ok.get(r.name, (-1, -1)) > _pos(r):
            continue  # a later call of the same tool worked: recovered
        extra = [re.escape(q.quote) for e in f[1] if e is not None for q in [e] if len(q.quote) <= 40]
        if ctx.acknowledges(fa.text, extra):
            continue
        by_tool.setdefault(r.name or "?", []).append((r, f))
    out = []
    for name, items in by_tool.items():
        idxs: list[int] = [fa.interaction]
        ev = []
        for n, (r, (reason, evs)) in enumerate(items):
            idxs.append(r.interaction)
            if r.source_interaction is not None:
                idxs.append(r.source_interaction)
            if n < 2 or n == len(items) - 1:
                ev.extend(evs[:2])
        reason = items[-1][1][0]
        ev.append(ctx.ev.field(fa.interaction, "message.text", max_len=160))
        n = f"{len(items)} failed results" if len(items) > 1 else "a failed result"
        out.append(ctx.finding(KIND, "error", idxs, f"tool {name} returned {n} ({reason}) and the final answer "
                               f"does not mention it", ev))
    return out


def _pos(r) -> tuple[int, int]:
    """Where a result sits in the run: (interaction of its call, interaction that carried it)."""
    return (r.call_interaction if r.call_interaction is not None else r.interaction, r.interaction)
