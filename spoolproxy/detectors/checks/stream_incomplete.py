"""stream_incomplete: an LLM stream ended without its terminal event (OpenAI Chat: a chunk
with ``finish_reason`` and ``data: [DONE]``; Anthropic ``message_stop``; Responses
``response.completed``/``incomplete``/``failed``; Gemini ``finishReason`` and, for the JSON
array stream, the closing ``]``; Ollama ``done: true``; Cohere ``message-end``; Bedrock
``messageStop``), or was cut by a transport failure.

MCP SSE replies are not LLM streams and are never checked.  Severity: error when neither
the finish reason nor the terminal event arrived (or the connection broke); warn when
only one is missing, or when the next LLM request re-sends or continues the same call.

Public failures: BerriAI/litellm#40260 (BR-13, a Chat stream cut before ``[DONE]``),
litellm PR 32159 and charmbracelet/fantasy PR 245 (BR-14, no ``message_stop``).
"""

from __future__ import annotations

from .base import Context

KIND = "stream_incomplete"
TERMINAL = {"openai-chat": "finish_reason + data: [DONE]", "anthropic-messages": "message_stop",
            "openai-responses": "response.completed", "gemini-generateContent": "finishReason",
            "ollama-chat": "done: true", "ollama-generate": "done: true", "cohere-chat": "message-end",
            "bedrock-converse": "messageStop"}


def check(ctx: Context) -> list:
    out = []
    llm = [s for s in ctx.steps if s.llm is not None]
    for n, s in enumerate(llm):
        call = s.llm
        if not s.ok and s.transport_error is None:
            continue
        if not call.stream.is_stream or call.stream.complete or call.error:
            continue  # a stream that ends with an error event is reported by http_error
        if s.status is None or s.status >= 400:
            continue
        i = s.index
        nxt = llm[n + 1] if n + 1 < len(llm) else None
        resent = nxt is not None and (
            ctx.cassette.interactions[nxt.index].request.body == ctx.cassette.interactions[i].request.body
            or (nxt.method == "GET" and call.api == "openai-responses"))
        hard = s.transport_error is not None or not (call.stream.finish_seen or call.stream.terminal_seen)
        sev = "error" if hard and not resent else "warn"
        missing = TERMINAL.get(call.api, "terminal event")
        lines = [ln for ln in ctx.body_text(i).splitlines() if ln.strip()]
        ev = [ctx.ev.quote(i, "response.body", lines[-1][-200:]) if lines else None,
              ctx.ev.field(i, "error.message") if s.transport_error else None]
        got = "; ".join(x for x in (f"finish reason {call.finish_reason_raw}" if call.stream.finish_seen else "no finish reason",
                                    "terminal event seen" if call.stream.terminal_seen else "no terminal event") if x)
        out.append(ctx.finding(KIND, sev, [i], f"{call.api} stream ended after {call.stream.events} events without "
                               f"{missing} ({got})", ev))
    return out
