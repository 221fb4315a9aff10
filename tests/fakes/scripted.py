"""A scripted model for the fake provider: each request gets the next :class:`Turn` of a
script, rendered in the wire format the request was sent in (plain or streamed):

* OpenAI Chat Completions (``chat.completion`` / ``chat.completion.chunk`` SSE + ``[DONE]``),
* OpenAI Responses (``response`` / ``response.*`` SSE events),
* Anthropic Messages (``message`` / ``message_start`` ... ``message_stop`` SSE),
* Gemini ``generateContent`` / ``streamGenerateContent?alt=sse``,
* Ollama ``/api/chat`` (one object, or NDJSON).

A turn is text and/or tool calls with their *raw* argument text (so a script can cut it
mid-JSON, as a token limit does) and a finish: ``stop``, ``tool_calls`` or ``length`` (the
token limit: ``finish_reason: length``, ``stop_reason: max_tokens``, ``MAX_TOKENS``,
``incomplete: max_output_tokens``, ``done_reason: length``).  Install with
:meth:`ScriptedModel.install` on a :class:`~tests.fakes.provider.FakeProvider`.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from .routes import LoggedRequest, Reply, json_reply, sse_reply


@dataclass
class Turn:
    """One model answer: ``text``, ``calls`` as ``(name, raw argument text)``, ``finish``."""

    text: str | None = None
    calls: list[tuple[str, str]] = field(default_factory=list)
    finish: str | None = None  # default: tool_calls when there are calls, else stop

    @property
    def end(self) -> str:
        return self.finish or ("tool_calls" if self.calls else "stop")


def _loose(raw: str) -> Any:
    """Arguments as a JSON value for formats that carry objects (Gemini, Ollama, Anthropic's
    non-streamed ``input``): the parsed text, or for cut text the longest prefix that parses
    once closed, else ``{}``."""
    try:
        return json.loads(raw)
    except ValueError:
        pass
    for cut in range(len(raw), 0, -1):
        head = raw[:cut].rstrip().rstrip(",")
        for closer in ('"}', "}", '"}}', "}}"):
            try:
                v = json.loads(head + closer)
                return v if isinstance(v, dict) else {}
            except ValueError:
                continue
    return {}


class ScriptedModel:
    """Serves ``turns`` in order (thread-safe); a request beyond the script gets a 500."""

    def __init__(self, turns: list[Turn], model: str = "scripted-1") -> None:
        self.turns = list(turns)
        self.model = model
        self._lock = threading.Lock()
        self.served = 0

    def _next(self) -> Turn | None:
        with self._lock:
            if self.served >= len(self.turns):
                return None
            self.served += 1
            return self.turns[self.served - 1]

    def install(self, fake, prefix: str = "") -> None:
        """Route the provider paths (under ``prefix``) of ``fake`` to this script."""
        for suffix, fn in (("/chat/completions", self.openai_chat), ("/responses", self.openai_responses),
                           ("/messages", self.anthropic), (":generateContent", self.gemini),
                           (":streamGenerateContent", self.gemini), ("/api/chat", self.ollama)):
            fake.add_route("POST", prefix + suffix, fn)

    # -- OpenAI Chat ----------------------------------------------------------------------
    def openai_chat(self, req: LoggedRequest) -> Reply:
        body = json.loads(req.body)
        t = self._next()
        if t is None:
            return json_reply(500, {"error": {"message": "script exhausted", "type": "server_error"}})
        finish = {"stop": "stop", "tool_calls": "tool_calls", "length": "length"}[t.end]
        usage = {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}
        calls = [{"id": f"call_{n}_{self.served}", "type": "function", "function": {"name": nm, "arguments": a}}
                 for n, (nm, a) in enumerate(t.calls)]
        if not body.get("stream"):
            msg: dict[str, Any] = {"role": "assistant", "content": t.text, "refusal": None}
            if calls:
                msg["tool_calls"] = calls
            return json_reply(200, {"id": f"chatcmpl-s{self.served}", "object": "chat.completion", "created": 1,
                                    "model": self.model, "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                    "usage": usage})
        base = {"id": f"chatcmpl-s{self.served}", "object": "chat.completion.chunk", "created": 1, "model": self.model}
        chunks = [dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
        for piece in _pieces(t.text or ""):
            chunks.append(dict(base, choices=[{"index": 0, "delta": {"content": piece}, "finish_reason": None}]))
        for n, c in enumerate(calls):
            head = {"index": n, "id": c["id"], "type": "function", "function": {"name": c["function"]["name"], "arguments": ""}}
            chunks.append(dict(base, choices=[{"index": 0, "delta": {"tool_calls": [head]}, "finish_reason": None}]))
            for piece in _pieces(c["function"]["arguments"], 7):
                chunks.append(dict(base, choices=[{"index": 0, "delta": {"tool_calls": [
                    {"index": n, "function": {"arguments": piece}}]}, "finish_reason": None}]))
        chunks.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append(dict(base, choices=[], usage=usage))
        return sse_reply([b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"])

    # -- OpenAI Responses ----------------------------------------------------------------
    def openai_responses(self, req: LoggedRequest) -> Reply:
        body = json.loads(req.body)
        t = self._next()
        if t is None:
            return json_reply(500, {"error": {"message": "script exhausted", "type": "server_error"}})
        output: list[dict] = []
        if t.text is not None:
            output.append({"id": f"msg_{self.served}", "type": "message", "status": "completed", "role": "assistant",
                           "content": [{"type": "output_text", "text": t.text, "annotations": []}]})
        for n, (nm, a) in enumerate(t.calls):
            output.append({"id": f"fc_{n}_{self.served}", "type": "function_call", "status": "completed",
                           "call_id": f"call_{n}_{self.served}", "name": nm, "arguments": a})
        status = "incomplete" if t.end == "length" else "completed"
        resp = {"id": f"resp_{self.served}", "object": "response", "created_at": 1, "status": status, "model": self.model,
                "output": output, "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
                "usage": {"input_tokens": 50, "output_tokens": 20, "total_tokens": 70}, "error": None}
        if not body.get("stream"):
            return json_reply(200, resp)
        events = [{"type": "response.created", "response": dict(resp, status="in_progress", output=[])}]
        for item in output:
            if item["type"] == "message":
                for piece in _pieces(t.text or ""):
                    events.append({"type": "response.output_text.delta", "item_id": item["id"], "delta": piece})
            else:
                events.append({"type": "response.output_item.added", "item": dict(item, arguments="")})
                for piece in _pieces(item["arguments"], 7):
                    events.append({"type": "response.function_call_arguments.delta", "item_id": item["id"], "delta": piece})
            events.append({"type": "response.output_item.done", "item": item})
        events.append({"type": f"response.{status}", "response": resp})
        return sse_reply([f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events])

    # -- Anthropic -----------------------------------------------------------------------
    def anthropic(self, req: LoggedRequest) -> Reply:
        body = json.loads(req.body)
        t = self._next()
        if t is None:
            return json_reply(500, {"type": "error", "error": {"type": "api_error", "message": "script exhausted"}})
        stop = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}[t.end]
        blocks: list[dict] = []
        if t.text is not None:
            blocks.append({"type": "text", "text": t.text})
        for n, (nm, a) in enumerate(t.calls):
            blocks.append({"type": "tool_use", "id": f"toolu_{n}_{self.served}", "name": nm, "input": _loose(a), "_raw": a})
        usage = {"input_tokens": 50, "output_tokens": 20}
        msg = {"id": f"msg_{self.served}", "type": "message", "role": "assistant", "model": self.model,
               "content": [{k: v for k, v in b.items() if k != "_raw"} for b in blocks], "stop_reason": stop,
               "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            return json_reply(200, msg)
        ev: list[tuple[str, dict]] = [("message_start", {"type": "message_start",
                                                         "message": dict(msg, content=[], stop_reason=None)})]
        for n, b in enumerate(blocks):
            if b["type"] == "text":
                ev.append(("content_block_start", {"type": "content_block_start", "index": n,
                                                   "content_block": {"type": "text", "text": ""}}))
                for piece in _pieces(b["text"]):
                    ev.append(("content_block_delta", {"type": "content_block_delta", "index": n,
                                                       "delta": {"type": "text_delta", "text": piece}}))
            else:
                ev.append(("content_block_start", {"type": "content_block_start", "index": n, "content_block": {
                    "type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}}))
                for piece in _pieces(b["_raw"], 7):
                    ev.append(("content_block_delta", {"type": "content_block_delta", "index": n,
                                                       "delta": {"type": "input_json_delta", "partial_json": piece}}))
            ev.append(("content_block_stop", {"type": "content_block_stop", "index": n}))
        ev.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 20}}))
        ev.append(("message_stop", {"type": "message_stop"}))
        return sse_reply([f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in ev])

    # -- Gemini --------------------------------------------------------------------------
    def gemini(self, req: LoggedRequest) -> Reply:
        t = self._next()
        if t is None:
            return json_reply(500, {"error": {"code": 500, "message": "script exhausted", "status": "INTERNAL"}})
        parts: list[dict] = []
        if t.text is not None:
            parts.append({"text": t.text})
        parts += [{"functionCall": {"name": nm, "args": _loose(a)}} for nm, a in t.calls]
        finish = "MAX_TOKENS" if t.end == "length" else "STOP"
        doc = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
               "usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 20, "totalTokenCount": 70},
               "modelVersion": self.model}
        if ":streamGenerateContent" in req.path:
            return Reply(200, [("content-type", "text/event-stream")], [b"data: " + json.dumps(doc).encode() + b"\r\n\r\n"])
        return json_reply(200, doc)

    # -- Ollama --------------------------------------------------------------------------
    def ollama(self, req: LoggedRequest) -> Reply:
        body = json.loads(req.body)
        t = self._next()
        if t is None:
            return json_reply(500, {"error": "script exhausted"})
        msg: dict[str, Any] = {"role": "assistant", "content": t.text or ""}
        if t.calls:
            msg["tool_calls"] = [{"function": {"name": nm, "arguments": _loose(a)}} for nm, a in t.calls]
        final = {"model": self.model, "created_at": "2025-04-16T00:00:00Z", "message": msg, "done": True,
                 "done_reason": "length" if t.end == "length" else "stop", "prompt_eval_count": 50, "eval_count": 20}
        if body.get("stream", True) is False:
            return json_reply(200, final)
        lines = [dict(final, message={"role": "assistant", "content": piece}, done=False, done_reason=None)
                 for piece in _pieces(t.text or "")]
        lines.append(dict(final, message=dict(msg, content="")))
        return Reply(200, [("content-type", "application/x-ndjson")], [json.dumps(x).encode() + b"\n" for x in lines])


def _pieces(text: str, size: int = 12) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]
