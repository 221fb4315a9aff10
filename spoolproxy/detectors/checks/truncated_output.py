"""truncated_output: the model stopped at its token limit (OpenAI ``finish_reason:
length``, Anthropic ``stop_reason: max_tokens``, Gemini ``MAX_TOKENS``, Responses
``incomplete: max_output_tokens``, Ollama ``done_reason: length``, Cohere/Bedrock
``MAX_TOKENS``/``max_tokens``).

When the cut turn ends in a tool call (its last call: the one the limit cut) and the agent
then **executed** that call (a later request carries its result, or an HTTP/MCP interaction
served it, or an MCP ``tools/call`` of that tool follows before the next model turn), the
tool acted on cut arguments: error, whatever happened next and even when the cut arguments
still parse as JSON (a cut can end exactly at a closing brace, and agents repair partial
JSON).

Severity: error; warn when nothing cut was executed, a later LLM call finished normally and
the run has a final answer (the agent continued or raised the limit).

Public failures: agent0ai/agent-zero#1747, NousResearch/hermes-agent#7680 (BR-08, tool
arguments cut at ``max_tokens``, the half-written file then saved).
"""

from __future__ import annotations

import re

from .base import Context

KIND = "truncated_output"
_FIELD = r'"(finish_reason|stop_reason|finishReason|done_reason|stopReason|reason)"\s*:\s*"{}"'


def executed(ctx: Context, i: int, tc) -> int | None:
    """The interaction showing that the agent ran tool call ``tc`` of model turn ``i`` (the
    HTTP/MCP interaction that served it, else the request that carried its result), or None."""
    for r in ctx.transcript.tool_results:
        if r.call_interaction != i or r.name not in (None, tc.name):
            continue
        if tc.id and r.call_id and r.call_id != tc.id:
            continue
        return r.source_interaction if r.source_interaction is not None else r.interaction
    for s in ctx.steps[i + 1:]:
        if s.llm is not None:
            break
        if s.tool_call_ref is not None and s.tool_call_ref == (i, tc.id):
            return s.index
        if s.mcp is not None and s.mcp.method == "tools/call" and s.mcp.tool_name == tc.name:
            return s.index
    return None


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
        cut = call.tool_calls[-1] if call.tool_calls else None
        what = f" inside a {cut.name} tool call" if cut is not None else ""
        ran = executed(ctx, i, cut) if cut is not None else None
        idxs = [i]
        if ran is not None:
            what += f", and the agent executed the cut call (interaction {ran})"
            idxs.append(ran)
            n = len(call.tool_calls) - 1
            ev.append(ctx.ev.quote(i, f"message.tool_calls/{n}/arguments_raw", cut.arguments_raw[-200:]))
        sev = "warn" if recovered and ran is None else "error"
        out.append(ctx.finding(KIND, sev, idxs, f"output cut at the token limit{used}{limit}{what}", ev))
    return out
