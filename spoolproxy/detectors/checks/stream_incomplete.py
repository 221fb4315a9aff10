"""stream_incomplete: an LLM stream whose own content is not whole: it lacks its terminal
event (OpenAI Chat: a chunk with ``finish_reason`` and ``data: [DONE]``; Anthropic
``message_stop``; Responses ``response.completed``/``incomplete``/``failed``; Gemini
``finishReason`` and, for the JSON array stream, the closing ``]``; Ollama ``done: true``;
Cohere ``message-end``; Bedrock ``messageStop``).

Completeness is read from the stream's content, never from how the connection ended: the
openai SDK stops reading at ``data: [DONE]`` and the anthropic SDK at ``message_stop``, and
when the server's terminating chunk comes a few ms later the client has already hung up.
Such a stream is whole.  A connection that broke after the terminal event is whole too
(``http_error`` notes the failure at warn).

MCP SSE replies are not LLM streams and are never checked.  Severity: error when neither
the finish reason nor the terminal event arrived and the upstream cut it; warn when only
one of them is missing, when the *client* closed the stream early (it stopped reading: the
traffic cannot say why; ``no_final_answer`` reports it when it was the last model turn),
or when the next LLM request re-sends or continues the same call.

Public failures: BerriAI/litellm#40260 (BR-13, a Chat stream cut before ``[DONE]``),
litellm PR 32159 and charmbracelet/fantasy PR 245 (BR-14, no ``message_stop``).
"""

from __future__ import annotations

from .base import Context

KIND = "stream_incomplete"
TERMINAL = {"openai-chat": "finish_reason + data: [DONE]", "anthropic-messages": "message_stop",
            "openai-responses": "response.completed", "gemini-generateContent": "finishReason and the closing ]",
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
        nothing = not (call.stream.finish_seen or call.stream.terminal_seen)
        sev = "error" if nothing and not resent and not s.client_closed else "warn"
        missing = TERMINAL.get(call.api, "terminal event")
        lines = [ln for ln in ctx.body_text(i).splitlines() if ln.strip()]
        ev = [ctx.ev.quote(i, "response.body", lines[-1][-200:]) if lines else None,
              ctx.ev.field(i, "error.message") if s.transport_error else None]
        seen = [f"finish reason {call.finish_reason_raw}" if call.stream.finish_seen else "no finish reason",
                "terminal event seen" if call.stream.terminal_seen else "no terminal event"]
        if s.client_closed:
            seen.append("the client closed it")
        elif s.transport_error:
            seen.append(f"cut by {ctx.cassette.interactions[i].error.kind}")
        out.append(ctx.finding(KIND, sev, [i], f"{call.api} stream ended after {call.stream.events} events without "
                               f"{missing} ({'; '.join(seen)})", ev))
    return out
