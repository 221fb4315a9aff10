"""OpenAI Responses API (``POST .../responses``; ``GET .../responses/<id>`` for background
mode).  Non-streamed: a ``response`` object whose ``output`` holds ``message`` (``output_text``
/ ``refusal`` parts), ``function_call`` and ``reasoning`` items.  Streamed: SSE events
``response.output_text.delta``, ``response.function_call_arguments.delta``,
``response.output_item.done`` ..., terminated by ``response.completed`` /
``response.incomplete`` / ``response.failed`` carrying the whole response.
"""

from __future__ import annotations

import re
from typing import Any

from ...cassettes.model import Interaction
from ..models import Message, ModelCall, StreamInfo, ToolSpec, Usage
from .openai_chat import forced_function
from .common import content_text, error_of, make_tool_call, request_json, response_json, safe_int, tool_spec, unusable_response
from .sse import json_events, looks_like_sse, parse_sse

API = "openai-responses"
_PATH = re.compile(r"/responses(/[A-Za-z0-9_\-]+)?$")
TERMINAL = {"response.completed", "response.incomplete", "response.failed", "response.cancelled"}


def matches(path: str, body: Any) -> bool:
    return bool(_PATH.search(path)) and not path.endswith("/input_items")


def parse_request_messages(req: dict) -> list[Message]:
    out: list[Message] = []
    if isinstance(req.get("instructions"), str):
        out.append(Message(role="system", text=req["instructions"]))
    inp = req.get("input")
    if isinstance(inp, str):
        out.append(Message(role="user", text=inp))
        return out
    for item in inp or []:
        if not isinstance(item, dict):
            continue
        typ = item.get("type")
        if typ == "function_call":
            out.append(Message(role="assistant", tool_calls=[make_tool_call(item.get("call_id"), item.get("name") or "", item.get("arguments"), parse=False)]))
        elif typ == "function_call_output":
            output = item.get("output")
            out.append(Message(role="tool", tool_call_id=item.get("call_id"), text=content_text(output)))
        elif typ in (None, "message"):
            out.append(Message(role=str(item.get("role") or "user"), text=content_text(item.get("content"))))
    return out


def parse_tools(req: dict) -> list[ToolSpec]:
    return [tool_spec(t["name"], t.get("parameters") if isinstance(t.get("parameters"), dict) else None)
            for t in req.get("tools") or [] if isinstance(t, dict) and t.get("type", "function") == "function" and t.get("name")]


def parse(it: Interaction, provider: str = "openai", req: Any = None) -> ModelCall:
    """Parse one Responses API interaction into a ModelCall."""
    req = request_json(it) if req is None else req
    req = req if isinstance(req, dict) else {}
    text_cfg = req.get("text") if isinstance(req.get("text"), dict) else {}
    fmt = text_cfg.get("format") if isinstance(text_cfg.get("format"), dict) else {}
    call = ModelCall(provider=provider, api=API, model=req.get("model"), messages=parse_request_messages(req),
                     tools=parse_tools(req), max_tokens=safe_int(req.get("max_output_tokens")),
                     structured_output=fmt.get("type") in ("json_schema", "json_object"),
                     response_schema=fmt.get("schema") if isinstance(fmt.get("schema"), dict) else None,
                     response_tool=forced_function(req.get("tool_choice")))
    if unusable_response(call, it, stream=bool(req.get("stream"))):
        return call
    resp = it.response
    if looks_like_sse(resp.body, resp):
        _parse_stream(call, resp.body)
    else:
        apply_response(call, response_json(it))
    return call


def apply_response(call: ModelCall, doc: Any) -> None:
    """Fill ``call`` from a Responses ``response`` object."""
    if not isinstance(doc, dict):
        return
    call.model = doc.get("model") or call.model
    if doc.get("error"):
        call.error, call.error_code = error_of(doc)
    u = doc.get("usage")
    if isinstance(u, dict):
        details = u.get("input_tokens_details")
        call.usage = Usage(input_tokens=safe_int(u.get("input_tokens")), output_tokens=safe_int(u.get("output_tokens")),
                           total_tokens=safe_int(u.get("total_tokens")),
                           cache_read_tokens=safe_int(details.get("cached_tokens")) if isinstance(details, dict) else None)
    text: list[str] = []
    reasoning: list[str] = []
    refusal: list[str] = []
    calls = []
    for item in doc.get("output") or []:
        if not isinstance(item, dict):
            continue
        _item(item, text, reasoning, refusal, calls)
    call.text, call.reasoning = "".join(text), "\n".join(reasoning)
    call.refusal = "".join(refusal) or None
    call.tool_calls = calls
    _status(call, doc.get("status"), doc.get("incomplete_details"))


def _item(item: dict, text: list, reasoning: list, refusal: list, calls: list) -> None:
    typ = item.get("type")
    if typ == "message":
        for part in item.get("content") or []:
            if isinstance(part, dict):
                if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    text.append(part["text"])
                elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    refusal.append(part["refusal"])
    elif typ == "function_call":
        calls.append(make_tool_call(item.get("call_id") or item.get("id"), item.get("name") or "", item.get("arguments")))
    elif typ == "reasoning":
        for s in item.get("summary") or []:
            if isinstance(s, dict) and isinstance(s.get("text"), str):
                reasoning.append(s["text"])


def _status(call: ModelCall, status: Any, details: Any) -> None:
    if status is None:
        return
    reason = details.get("reason") if isinstance(details, dict) else None
    call.finish_reason_raw = f"{status}:{reason}" if reason else str(status)
    if status == "completed":
        call.finish_reason = "refusal" if call.refusal and not call.text else ("tool_calls" if call.tool_calls else "stop")
    elif status == "incomplete":
        call.finish_reason = "content_filter" if reason == "content_filter" else "length" if reason == "max_output_tokens" else "other"
    elif status in ("failed", "cancelled"):
        call.finish_reason = "error"
    else:
        call.finish_reason = None  # queued / in_progress (background mode)


def _parse_stream(call: ModelCall, body: bytes) -> None:
    info = StreamInfo(is_stream=True, format="sse")
    text: list[str] = []
    reasoning: list[str] = []
    refusal: list[str] = []
    calls: list = []
    final: dict | None = None
    for name, data in json_events(parse_sse(body)):
        info.events += 1
        if not isinstance(data, dict):
            continue
        typ = data.get("type") or name
        if typ in TERMINAL:
            info.terminal_seen = info.finish_seen = True
            final = data.get("response") if isinstance(data.get("response"), dict) else None
        elif typ == "response.output_text.delta" and isinstance(data.get("delta"), str):
            text.append(data["delta"])
        elif typ == "response.refusal.delta" and isinstance(data.get("delta"), str):
            refusal.append(data["delta"])
        elif typ == "response.reasoning_summary_text.delta" and isinstance(data.get("delta"), str):
            reasoning.append(data["delta"])
        elif typ == "response.output_item.done" and isinstance(data.get("item"), dict):
            if data["item"].get("type") == "function_call":
                _item(data["item"], [], [], [], calls)
        elif typ == "response.created" and isinstance(data.get("response"), dict):
            call.model = data["response"].get("model") or call.model
        elif typ == "error":
            call.error, call.error_code = str(data.get("message") or data.get("error") or "stream error"), data.get("code")
    if final is not None:
        apply_response(call, final)
        if not call.text and text:
            call.text = "".join(text)
        if not call.tool_calls and calls:
            call.tool_calls = calls
    else:
        call.text, call.reasoning, call.tool_calls = "".join(text), "".join(reasoning), calls
        call.refusal = "".join(refusal) or None
    info.complete = info.terminal_seen
    call.stream = info
