"""Ollama native API: ``POST /api/chat`` and ``POST /api/generate``.  Streams (the default)
are newline-delimited JSON objects; the last has ``done: true`` and ``done_reason``
(stop | length), with ``prompt_eval_count`` / ``eval_count`` token counts.  Tool calls
carry arguments as JSON objects, without ids.  (Ollama's ``/v1`` endpoints go to the
OpenAI Chat adapter.)
"""

from __future__ import annotations

from typing import Any

from ...cassettes.model import Interaction
from ..models import Message, ModelCall, StreamInfo, Usage
from .common import content_text, make_tool_call, request_json, safe_int, split_uri, unusable_response
from .openai_chat import parse_tools
from .sse import parse_ndjson

FINISH = {"stop": "stop", "length": "length", "load": "other", "unload": "other"}


def matches(path: str, body: Any) -> bool:
    return path.endswith("/api/chat") or path.endswith("/api/generate")


def parse(it: Interaction, provider: str = "ollama", req: Any = None) -> ModelCall:
    """Parse one Ollama /api/chat or /api/generate interaction into a ModelCall."""
    req = request_json(it) if req is None else req
    req = req if isinstance(req, dict) else {}
    chat = split_uri(it.request.uri)[1].endswith("/api/chat")
    msgs = []
    for m in req.get("messages") or []:
        if isinstance(m, dict):
            msg = Message(role=str(m.get("role") or ""), text=content_text(m.get("content")))
            for tc in m.get("tool_calls") or []:
                fn = (tc or {}).get("function") or {}
                msg.tool_calls.append(make_tool_call(tc.get("id"), fn.get("name") or "", fn.get("arguments") or {}))
            if msg.role == "tool":
                msg.tool_name = m.get("tool_name") or m.get("name")
            msgs.append(msg)
    if not chat and isinstance(req.get("prompt"), str):
        if req.get("system"):
            msgs.append(Message(role="system", text=str(req["system"])))
        msgs.append(Message(role="user", text=req["prompt"]))
    opts = req.get("options") if isinstance(req.get("options"), dict) else {}
    call = ModelCall(provider=provider, api="ollama-chat" if chat else "ollama-generate", model=req.get("model"),
                     messages=msgs, tools=parse_tools(req), max_tokens=safe_int(opts.get("num_predict")),
                     structured_output=bool(req.get("format")),
                     response_schema=req["format"] if isinstance(req.get("format"), dict) else None)
    if unusable_response(call, it):
        return call
    resp = it.response
    objs, _ = parse_ndjson(resp.body)
    info = StreamInfo(is_stream=len(objs) > 1 or req.get("stream", True) is not False, format="ndjson")
    n = 0
    for o in objs:
        if not isinstance(o, dict):
            continue
        info.events += 1
        if o.get("error"):
            call.error = str(o["error"])
        call.model = o.get("model") or call.model
        m = o.get("message") if isinstance(o.get("message"), dict) else {}
        call.text += str(m.get("content") or "") if chat else str(o.get("response") or "")
        call.reasoning += str(m.get("thinking") or o.get("thinking") or "")
        for tc in m.get("tool_calls") or []:
            fn = (tc or {}).get("function") or {}
            n += 1
            call.tool_calls.append(make_tool_call(tc.get("id") or f"{fn.get('name')}#{n}", fn.get("name") or "", fn.get("arguments") or {}))
        if o.get("done"):
            info.terminal_seen = info.finish_seen = True
            raw = str(o.get("done_reason") or "stop")
            call.finish_reason_raw = raw
            call.finish_reason = "tool_calls" if call.tool_calls and raw == "stop" else FINISH.get(raw, "other")  # type: ignore[assignment]
            call.usage = Usage(input_tokens=safe_int(o.get("prompt_eval_count")), output_tokens=safe_int(o.get("eval_count")))
    info.complete = info.terminal_seen
    call.stream = info
    return call
