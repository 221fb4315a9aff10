"""empty_output: the final assistant turn has no text and no tool calls (and is not a
refusal, a truncation or a cut stream, which have their own kinds).  A reasoning-only
turn counts as empty: the user gets nothing.  Severity: error.

Public failure: crewAIInc/crewAI#7349 (BR-11, ``content: ""`` with ``finish_reason: stop``).
"""

from __future__ import annotations

import re

from .base import Context

KIND = "empty_output"
_EMPTY = re.compile(r'"(content|text)"\s*:\s*(""|null|\[\])')


def check(ctx: Context) -> list:
    llm = [s for s in ctx.steps if s.llm is not None]
    if not llm:
        return []
    s = llm[-1]
    call = s.llm
    if not s.ok or call.error or call.text.strip() or call.tool_calls or call.refusal:
        return []
    if call.finish_reason in ("length", "content_filter", "refusal", "error", "pause"):
        return []
    if call.stream.is_stream and not call.stream.complete:
        return []
    i = s.index
    m = _EMPTY.search(ctx.body_text(i))
    ev = [ctx.ev.quote(i, "response.body", m.group(0)) if m else None,
          ctx.ev.quote(i, "message.finish_reason_raw", call.finish_reason_raw)]
    extra = " (reasoning only)" if call.reasoning.strip() else ""
    return [ctx.finding(KIND, "error", [i], f"the final assistant turn is empty{extra}: no text and no tool calls "
                        f"(finish reason {call.finish_reason_raw})", ev)]
