"""unknown_tool: the model called a tool the request did not declare (client function
tools only; provider-side tools such as Anthropic server tools or Responses built-ins are
not tool calls here).  One finding per undeclared tool name, listing every interaction
that called it.  Severity: error.

Public failure: pydantic/pydantic-ai PR 1255 (BR-10, an undeclared ``send_email`` call).
"""

from __future__ import annotations

from .base import Context

KIND = "unknown_tool"


def check(ctx: Context) -> list:
    by_name: dict[str, list[tuple[int, int, list[str]]]] = {}
    for s in ctx.steps:
        call = s.llm
        if call is None or not call.tool_calls:
            continue
        declared = None
        for n, tc in enumerate(call.tool_calls):
            if declared is None:
                declared = {t.name for t in call.tools}
            if tc.name not in declared:
                by_name.setdefault(tc.name, []).append((s.index, n, sorted(declared)))
    out = []
    for name, hits in by_name.items():
        idx, n, declared = hits[0]
        listed = ", ".join(declared) or "no tools"
        times = f" ({len(hits)} calls)" if len(hits) > 1 else ""
        ev = [ctx.ev.quote(idx, f"message.tool_calls/{n}/name", name)]
        if len(hits) > 1:
            ev.append(ctx.ev.quote(hits[-1][0], f"message.tool_calls/{hits[-1][1]}/name", name))
        out.append(ctx.finding(KIND, "error", [h[0] for h in hits],
                               f"the model called {name!r}{times} but the request declared {listed}", ev))
    return out
