"""Anthropic Messages (``POST /v1/messages``).  Non-streamed: a ``message`` whose
``content`` holds ``text``, ``thinking`` and ``tool_use`` blocks.  Streamed: SSE events
``message_start``, ``content_block_start`` / ``_delta`` (``text_delta``,
``input_json_delta``, ``thinking_delta``) / ``_stop``, ``message_delta`` (stop_reason,
usage) and the terminal ``message_stop``; ``ping`` and ``error`` events may appear.
Server tools (``server_tool_use``, web search) are not client tool calls and are skipped.
"""

from __future__ import annotations

import json
from typing import Any

from ...cassettes.model import Interaction
from ..models import Message, ModelCall, StreamInfo, ToolSpec
from .common import content_text, error_of, make_tool_call, request_json, response_json, safe_int, tool_spec, unusable_response
from .sse import json_events, looks_like_sse, parse_sse

API = "anthropic-messages"
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
          "refusal": "refusal", "pause_turn": "pause", "model_context_window_exceeded": "length"}


def matches(path: str, body: Any) -> bool:
    return path.endswith("/v1/messages") or path.endswith("/messages") and isinstance(body, dict) and "max_tokens" in body


def parse_request_messages(req: dict) -> list[Message]:
    out: list[Message] = []
    if req.get("system"):
        out.append(Message(role="system", text=content_text(req["system"])))
    for m in req.get("messages") or []:
        if not isinstance(m, dict):
            continue
        role = str(m.get("role") or "")
        content = m.get("content")
        if isinstance(content, str) or not isinstance(content, list):
            out.append(Message(role=role, text=content_text(content)))
            continue
        msg = Message(role=role)
        texts = []
        for block in content:
            if not isinstance(block, dict):
                continue
            typ = block.get("type")
            if typ == "text":
                texts.append(str(block.get("text") or ""))
            elif typ == "tool_use":
                msg.tool_calls.append(make_tool_call(block.get("id"), block.get("name") or "", block.get("input") if block.get("input") is not None else {}))
            elif typ == "tool_result":
                c = block.get("content")
                out.append(Message(role="tool", tool_call_id=block.get("tool_use_id"), text=content_text(c),
                                   is_error=bool(block.get("is_error"))))
        msg.text = "\n".join(texts)
        if msg.text or msg.tool_calls or role != "user":
            out.append(msg)
    return out


def parse_tools(req: dict) -> list[ToolSpec]:
    return [tool_spec(t["name"], t.get("input_schema") if isinstance(t.get("input_schema"), dict) else None)
            for t in req.get("tools") or [] if isinstance(t, dict) and t.get("name")]


def _usage(call: ModelCall, u: Any) -> None:
    if not isinstance(u, dict):
        return
    inp = sum(v for k, v in u.items() if k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens") and isinstance(v, int))
    if "input_tokens" in u:
        call.usage.input_tokens = inp
        if isinstance(u.get("cache_read_input_tokens"), int):
            call.usage.cache_read_tokens = u["cache_read_input_tokens"]
        if isinstance(u.get("cache_creation_input_tokens"), int):
            call.usage.cache_write_tokens = u["cache_creation_input_tokens"]
    if isinstance(u.get("output_tokens"), int):
        call.usage.output_tokens = u["output_tokens"]


def parse(it: Interaction, provider: str = "anthropic", req: Any = None) -> ModelCall:
    """Parse one Messages interaction into a ModelCall."""
    req = request_json(it) if req is None else req
    req = req if isinstance(req, dict) else {}
    tc = req.get("tool_choice") if isinstance(req.get("tool_choice"), dict) else {}
    of = req.get("output_format") if isinstance(req.get("output_format"), dict) else {}
    schema = of.get("schema") if of.get("type") == "json_schema" and isinstance(of.get("schema"), dict) else None
    forced = tc.get("name") if tc.get("type") == "tool" and isinstance(tc.get("name"), str) else None
    call = ModelCall(provider=provider, api=API, model=req.get("model"), messages=parse_request_messages(req),
                     tools=parse_tools(req), max_tokens=safe_int(req.get("max_tokens")),
                     structured_output=bool(schema or forced), response_schema=schema, response_tool=forced)
    if unusable_response(call, it, stream=bool(req.get("stream"))):
        return call
    resp = it.response
    if looks_like_sse(resp.body, resp):
        _parse_stream(call, resp.body)
    else:
        doc = response_json(it)
        if isinstance(doc, dict):
            _message(call, doc)
            for block in doc.get("content") or []:
                if isinstance(block, dict):
                    _block(call, block, None)
            _finish(call, doc.get("stop_reason"))
    return call


def _message(call: ModelCall, msg: dict) -> None:
    call.model = msg.get("model") or call.model
    if msg.get("type") == "error":
        call.error, call.error_code = error_of(msg)
    _usage(call, msg.get("usage"))


def _block(call: ModelCall, block: dict, partial: str | None) -> None:
    typ = block.get("type")
    if typ == "text":
        call.text += str(block.get("text") or "")
    elif typ == "thinking":
        call.reasoning += str(block.get("thinking") or "")
    elif typ == "tool_use":
        raw = partial if partial is not None else block.get("input", {})
        call.tool_calls.append(make_tool_call(block.get("id"), block.get("name") or "", raw))


def _finish(call: ModelCall, raw: Any) -> None:
    if raw:
        call.finish_reason_raw = str(raw)
        call.finish_reason = FINISH.get(str(raw), "other")  # type: ignore[assignment]


def _parse_stream(call: ModelCall, body: bytes) -> None:
    info = StreamInfo(is_stream=True, format="sse")
    blocks: dict[int, dict] = {}
    partial: dict[int, list[str]] = {}
    texts: dict[int, list[str]] = {}
    for name, data in json_events(parse_sse(body)):
        info.events += 1
        if not isinstance(data, dict):
            continue
        typ = data.get("type") or name
        if typ == "message_start" and isinstance(data.get("message"), dict):
            _message(call, data["message"])
        elif typ == "content_block_start" and isinstance(data.get("content_block"), dict):
            idx = safe_int(data.get("index")) or 0
            blocks[idx] = dict(data["content_block"])
            texts[idx] = []
            partial[idx] = []
        elif typ == "content_block_delta" and isinstance(data.get("delta"), dict):
            idx = safe_int(data.get("index")) or 0
            d = data["delta"]
            dt = d.get("type")
            if dt == "text_delta":
                texts.setdefault(idx, []).append(str(d.get("text") or ""))
            elif dt == "thinking_delta":
                texts.setdefault(idx, []).append(str(d.get("thinking") or ""))
            elif dt == "input_json_delta":
                partial.setdefault(idx, []).append(str(d.get("partial_json") or ""))
        elif typ == "message_delta":
            if isinstance(data.get("delta"), dict) and data["delta"].get("stop_reason"):
                info.finish_seen = True
                _finish(call, data["delta"]["stop_reason"])
            _usage(call, data.get("usage"))
        elif typ == "message_stop":
            info.terminal_seen = True
        elif typ == "error":
            call.error, call.error_code = error_of(data)
    for idx in sorted(blocks):
        b = blocks[idx]
        t = b.get("type")
        if t == "text":
            b["text"] = str(b.get("text") or "") + "".join(texts.get(idx, []))
        elif t == "thinking":
            b["thinking"] = str(b.get("thinking") or "") + "".join(texts.get(idx, []))
        raw = "".join(partial.get(idx, [])) if t == "tool_use" else None
        if t == "tool_use" and not raw and b.get("input"):
            raw = json.dumps(b["input"])
        _block(call, b, raw)
    info.complete = info.terminal_seen
    call.stream = info
