"""Cohere v2 Chat (``POST /v2/chat``).  Non-streamed: ``message {content: [{type: text}],
tool_plan, tool_calls}`` with ``finish_reason`` COMPLETE | MAX_TOKENS | TOOL_CALL |
STOP_SEQUENCE | ERROR.  Streamed: SSE events ``message-start``, ``content-delta``,
``tool-call-start`` / ``-delta`` / ``-end``, and the terminal ``message-end``.
"""

from __future__ import annotations

from typing import Any

from ...cassettes.model import Interaction
from ..models import Message, ModelCall, StreamInfo, Usage
from .common import content_text, make_tool_call, request_json, response_json, safe_int, unusable_response
from .openai_chat import parse_tools
from .sse import json_events, looks_like_sse, parse_sse

FINISH = {"COMPLETE": "stop", "STOP_SEQUENCE": "stop", "MAX_TOKENS": "length", "TOOL_CALL": "tool_calls", "ERROR": "error"}


def matches(path: str, body: Any) -> bool:
    return path.endswith("/v2/chat")


def _usage(u: Any) -> Usage:
    if not isinstance(u, dict):
        return Usage()
    t = u.get("tokens") if isinstance(u.get("tokens"), dict) else u.get("billed_units") or {}
    return Usage(input_tokens=safe_int(t.get("input_tokens")), output_tokens=safe_int(t.get("output_tokens")))


def parse(it: Interaction, provider: str = "cohere", req: Any = None) -> ModelCall:
    """Parse one Cohere v2 chat interaction into a ModelCall."""
    req = request_json(it) if req is None else req
    req = req if isinstance(req, dict) else {}
    msgs = []
    for m in req.get("messages") or []:
        if isinstance(m, dict):
            msg = Message(role=str(m.get("role") or ""), text=content_text(m.get("content")), tool_call_id=m.get("tool_call_id"))
            for tc in m.get("tool_calls") or []:
                fn = (tc or {}).get("function") or {}
                msg.tool_calls.append(make_tool_call(tc.get("id"), fn.get("name") or "", fn.get("arguments"), parse=False))
            msgs.append(msg)
    rf = req.get("response_format") if isinstance(req.get("response_format"), dict) else {}
    call = ModelCall(provider=provider, api="cohere-chat", model=req.get("model"), messages=msgs, tools=parse_tools(req),
                     max_tokens=safe_int(req.get("max_tokens")), structured_output=rf.get("type") == "json_object",
                     response_schema=rf.get("json_schema") if isinstance(rf.get("json_schema"), dict) else None)
    if unusable_response(call, it):
        return call
    resp = it.response
    if looks_like_sse(resp.body, resp):
        info = StreamInfo(is_stream=True, format="sse")
        slots: list[dict] = []
        for name, d in json_events(parse_sse(resp.body)):
            info.events += 1
            if not isinstance(d, dict):
                continue
            typ = d.get("type") or name
            delta = d.get("delta") if isinstance(d.get("delta"), dict) else {}
            msg = delta.get("message") if isinstance(delta.get("message"), dict) else {}
            if typ == "content-delta":
                call.text += str((msg.get("content") or {}).get("text") or "")
            elif typ == "tool-plan-delta":
                call.reasoning += str(msg.get("tool_plan") or "")
            elif typ == "tool-call-start":
                tc = msg.get("tool_calls") or {}
                slots.append({"id": tc.get("id"), "name": (tc.get("function") or {}).get("name") or "",
                              "args": [(tc.get("function") or {}).get("arguments") or ""]})
            elif typ == "tool-call-delta" and slots:
                slots[-1]["args"].append(((msg.get("tool_calls") or {}).get("function") or {}).get("arguments") or "")
            elif typ == "message-end":
                info.terminal_seen = info.finish_seen = True
                _finish(call, delta.get("finish_reason"))
                call.usage = _usage(delta.get("usage"))
        call.tool_calls = [make_tool_call(s["id"], s["name"], "".join(s["args"])) for s in slots]
        info.complete = info.terminal_seen
        call.stream = info
        return call
    doc = response_json(it)
    if isinstance(doc, dict):
        m = doc.get("message") if isinstance(doc.get("message"), dict) else {}
        call.text = content_text(m.get("content"))
        call.reasoning = str(m.get("tool_plan") or "")
        for tc in m.get("tool_calls") or []:
            fn = (tc or {}).get("function") or {}
            call.tool_calls.append(make_tool_call(tc.get("id"), fn.get("name") or "", fn.get("arguments")))
        _finish(call, doc.get("finish_reason"))
        call.usage = _usage(doc.get("usage"))
    return call


def _finish(call: ModelCall, raw: Any) -> None:
    if raw:
        call.finish_reason_raw = str(raw)
        call.finish_reason = FINISH.get(str(raw), "other")  # type: ignore[assignment]
