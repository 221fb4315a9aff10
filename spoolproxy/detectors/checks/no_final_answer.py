"""no_final_answer: the run has LLM calls but ends without a final assistant answer: the
last LLM call failed, was cut, truncated, refused, still asked for tools, or was empty.
A call to a configured output tool (``output_tools``, default ``final_result*``) counts
as the answer.  Anchored at the last LLM interaction.

Severity: error; info when the last LLM call failed with a status listed in ``[detect]
expected_status`` (a test that provokes the error on purpose); warn when the recording
simply stops at a well-formed tool call and nothing else in the run is an error (the agent
died while running the tool, or the recording is a single-step test: the traffic cannot
tell which).

Public failures: langchain-ai/langgraph#4231 (BR-01, recursion limit during a tool
loop), BR-05, BR-08, BR-09, BR-10, BR-11 (runs that die before answering).
"""

from __future__ import annotations

from ..models import SEVERITY_RANK
from ..evidence import clip
from .base import Context

KIND = "no_final_answer"


def check(ctx: Context) -> list:
    llm = [s for s in ctx.steps if s.llm is not None]
    if not llm or ctx.transcript.final_answer is not None:
        return []
    s = llm[-1]
    call = s.llm
    i = s.index
    sev = "error"
    if not s.ok:
        if s.status in ctx.config.expected_status:
            sev = "info"
        cut = ctx.cut_stream(i) if s.transport_error is not None else None
        if cut is not None:
            why = f"the last LLM call failed: {cut}"
            ev = [ctx.ev.field(i, "error.message")]
        else:
            why = f"the last LLM call got {s.status or s.transport_error}"
            ev = [ctx.ev.quote(i, "response.status", str(s.status)) if s.status else ctx.ev.field(i, "error.message")]
    elif call.error:
        why = f"the last LLM call reported an error: {clip(call.error, 120)}"
        ev = [ctx.ev.quote(i, "response.body", call.error)]
    elif call.stream.is_stream and not call.stream.finish_seen:
        why = ("the client closed the last stream before the model finished" if s.client_closed
               else "the last stream was cut before the model finished")
        lines = [ln for ln in ctx.body_text(i).splitlines() if ln.strip()]
        ev = [ctx.ev.quote(i, "response.body", lines[-1][-200:]) if lines else None]
    elif call.refusal or call.finish_reason in ("refusal", "content_filter"):
        why = "the last model turn is a refusal"
        ev = [ctx.ev.quote(i, "message.refusal", call.refusal) or ctx.ev.quote(i, "message.finish_reason_raw", call.finish_reason_raw)]
    elif call.finish_reason == "length":
        why = "the last model turn was cut at the token limit"
        ev = [ctx.ev.quote(i, "message.finish_reason_raw", call.finish_reason_raw)]
    elif call.tool_calls:
        names = ", ".join(tc.name for tc in call.tool_calls)
        why = f"the last model turn still asks for tools ({names})"
        if not any(SEVERITY_RANK[f.severity] >= 2 for f in ctx.prior):
            sev = "warn"
            why += " and the recording stops there"
        ev = [ctx.ev.quote(i, "message.tool_calls/0/name", call.tool_calls[0].name)]
    else:
        why = f"the last model turn is empty (finish reason {call.finish_reason_raw})"
        ev = [ctx.ev.quote(i, "message.finish_reason_raw", call.finish_reason_raw)]
    return [ctx.finding(KIND, sev, [i], f"the run ends without a final answer: {why}", ev)]
