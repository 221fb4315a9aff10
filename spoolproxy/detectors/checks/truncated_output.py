"""truncated_output: the model stopped at its token limit (OpenAI ``finish_reason:
length``, Anthropic ``stop_reason: max_tokens``, Gemini ``MAX_TOKENS``, Responses
``incomplete: max_output_tokens``, Ollama ``done_reason: length``, Cohere/Bedrock
``MAX_TOKENS``/``max_tokens``).

Severity: error; warn when a later LLM call finished normally and the run has a final
answer (the agent continued or raised the limit).

Public failures: agent0ai/agent-zero#1747, NousResearch/hermes-agent#7680 (BR-08, tool
arguments cut at ``max_tokens``).
"""

from __future__ import annotations

import re

from .base import Context

KIND = "truncated_output"
_FIELD = r'"(finish_reason|stop_reason|finishReason|done_reason|stopReason|reason)"\s*:\s*"{}"'


def check(ctx: Context) -> list:
    out = []
    fa = ctx.transcript.final_answer
    for s in ctx.steps:
        call = s.llm
        if call is None or call.finish_reason != "length":
            continue
        i = s.index
        recovered = fa is not None and fa.interaction > i
        raw = (call.finish_reason_raw or "").split(":")[-1]
        m = re.search(_FIELD.format(re.escape(raw)), ctx.body_text(i)) if raw else None
        ev = [ctx.ev.quote(i, "response.body", m.group(0)) if m else ctx.ev.quote(i, "message.finish_reason_raw", raw)]
        u = call.usage
        used = f" after {u.output_tokens} output tokens" if u.output_tokens is not None else ""
        limit = f" (max {call.max_tokens})" if call.max_tokens else ""
        what = f" inside a {call.tool_calls[-1].name} tool call" if call.tool_calls else ""
        out.append(ctx.finding(KIND, "warn" if recovered else "error", [i],
                               f"output cut at the token limit{used}{limit}{what}", ev))
    return out
