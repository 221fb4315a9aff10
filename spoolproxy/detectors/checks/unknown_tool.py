"""unknown_tool: the model called a tool the request did not declare (client function
tools only; provider-side tools such as Anthropic server tools or Responses built-ins are
not tool calls here).  Severity: error.

Public failure: pydantic/pydantic-ai PR 1255 (BR-10, an undeclared ``send_email`` call).
"""

from __future__ import annotations

from .base import Context

KIND = "unknown_tool"


def check(ctx: Context) -> list:
    out = []
    for s in ctx.steps:
        call = s.llm
        if call is None or not call.tool_calls:
            continue
        declared = {t.name for t in call.tools}
        for n, tc in enumerate(call.tool_calls):
            if tc.name in declared:
                continue
            listed = ", ".join(sorted(declared)) or "no tools"
            out.append(ctx.finding(KIND, "error", [s.index], f"the model called {tc.name!r} but the request declared {listed}",
                                   [ctx.ev.quote(s.index, f"message.tool_calls/{n}/name", tc.name)]))
    return out
