"""refusal: the model refused (OpenAI ``message.refusal`` or a Responses ``refusal`` part,
Anthropic ``stop_reason: refusal``) or its output was filtered (``content_filter``,
Gemini ``SAFETY``/``PROHIBITED_CONTENT``/blocked prompt, Bedrock guardrails).

Severity: error when the refusal is the run's last model turn (the task is not done);
warn when the run continued to a final answer.

Public failures: openai/openai-agents-python#3055, langchain-ai/langchain PR 34619
(structured-output refusals that leave the parsed result empty).
"""

from __future__ import annotations

import re

from ..evidence import clip
from .base import Context

KIND = "refusal"


def check(ctx: Context) -> list:
    out = []
    fa = ctx.transcript.final_answer
    for s in ctx.steps:
        call = s.llm
        if call is None or not s.ok:
            continue
        if not call.refusal and call.finish_reason not in ("refusal", "content_filter"):
            continue
        i = s.index
        sev = "warn" if fa is not None and fa.interaction > i else "error"
        ev = []
        if call.refusal:
            ev.append(ctx.ev.quote(i, "response.body", call.refusal) or ctx.ev.quote(i, "message.refusal", call.refusal))
        raw = call.finish_reason_raw or ""
        if raw:
            m = re.search(r'"[A-Za-z_]*(reason|Reason)"\s*:\s*"' + re.escape(raw.split(":")[-1]) + '"', ctx.body_text(i))
            ev.append(ctx.ev.quote(i, "response.body", m.group(0)) if m else ctx.ev.quote(i, "message.finish_reason_raw", raw))
        what = f"refused: {clip(call.refusal, 120)!r}" if call.refusal else f"output was filtered ({raw})"
        so = " in a structured-output request" if call.structured_output else ""
        out.append(ctx.finding(KIND, sev, [i], f"the model {what}{so}", ev))
    return out
