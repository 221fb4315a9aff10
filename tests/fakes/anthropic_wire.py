"""Anthropic Messages wire format (``POST /v1/messages``), shaped after real recordings.

Plain: a ``message`` object.  With ``stream: true``: the SSE events ``message_start``,
``content_block_start``, ``ping``, ``content_block_delta`` (``text_delta`` /
``input_json_delta``), ``content_block_stop``, ``message_delta``, ``message_stop``, each
framed ``event: NAME\\ndata: {json}\\n\\n``.  When ``tools`` are declared and the last user
message is not a ``tool_result``, the answer is a short text block followed by a
``tool_use`` block for the first tool; after a ``tool_result`` it is text quoting it.
"""

from __future__ import annotations

import json
from typing import Any

from .common import count_tokens, json_pieces, pieces, short_id, text_of, tool_arguments

MODELS = ("claude-3-5-haiku-20241022", "claude-sonnet-4-20250514")


def _plan(req: dict[str, Any]) -> dict[str, Any]:
    messages = req.get("messages") or []
    last = messages[-1] if messages else {}
    content = last.get("content")
    results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] if isinstance(content, list) else []
    if results:
        return {"text": f"The tool said: {text_of(results[-1].get('content'))}", "tool": None}
    text = text_of(content)
    tools = [t for t in req.get("tools") or [] if "input_schema" in t]
    if tools and (req.get("tool_choice") or {}).get("type") != "none":
        args = tool_arguments(tools[0]["input_schema"], text)
        return {"text": "I'll use a tool.", "tool": (tools[0]["name"], args)}
    return {"text": f"Echo: {text}", "tool": None}


def _input_tokens(req: dict[str, Any]) -> int:
    system = text_of(req.get("system"))
    return count_tokens(system) * bool(system) + sum(
        count_tokens(text_of(m.get("content"))) for m in req.get("messages") or []
    )


def _ids(raw: bytes) -> tuple[str, str]:
    rid = short_id(raw)
    return f"msg_{rid}", f"toolu_{rid}"


def message(req: dict[str, Any], raw: bytes) -> dict[str, Any]:
    """Anthropic Messages response object (``type: message``) for *req*."""
    plan = _plan(req)
    mid, tid = _ids(raw)
    content: list[dict[str, Any]] = [{"type": "text", "text": plan["text"]}]
    completion = plan["text"]
    if plan["tool"]:
        name, args = plan["tool"]
        content.append({"type": "tool_use", "id": tid, "name": name, "input": json.loads(args)})
        completion += args
    return {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": req.get("model") or MODELS[0],
        "content": content,
        "stop_reason": "tool_use" if plan["tool"] else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": _input_tokens(req),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": count_tokens(completion),
            "service_tier": "standard",
        },
    }


def stream_events(req: dict[str, Any], raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Anthropic Messages streaming events as ``(event name, data)`` pairs, in order."""
    plan = _plan(req)
    full = message(req, raw)
    start = dict(full, content=[], stop_reason=None, stop_sequence=None,
                 usage=dict(full["usage"], output_tokens=1))
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    events.append(("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}}))
    events.append(("ping", {"type": "ping"}))
    for piece in pieces(plan["text"]):
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": piece}}))
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    if plan["tool"]:
        name, args = plan["tool"]
        block = {"type": "tool_use", "id": full["content"][1]["id"], "name": name, "input": {}}
        events.append(("content_block_start", {"type": "content_block_start", "index": 1, "content_block": block}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 1,
                                               "delta": {"type": "input_json_delta", "partial_json": ""}}))
        for frag in json_pieces(args):
            events.append(("content_block_delta", {"type": "content_block_delta", "index": 1,
                                                   "delta": {"type": "input_json_delta", "partial_json": frag}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 1}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": full["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": full["usage"]["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def sse(req: dict[str, Any], raw: bytes) -> list[bytes]:
    """The streamed message as SSE events, one ``bytes`` per event."""
    return [
        f"event: {name}\ndata: ".encode() + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"
        for name, data in stream_events(req, raw)
    ]


def models() -> dict[str, Any]:
    """Anthropic ``GET /v1/models`` list object."""
    data = [{"type": "model", "id": m, "display_name": m, "created_at": "2024-10-22T00:00:00Z"} for m in MODELS]
    return {"data": data, "has_more": False, "first_id": MODELS[0], "last_id": MODELS[-1]}


def error(message: str, type_: str) -> dict[str, Any]:
    """Anthropic error body: ``{"type": "error", "error": {"type", "message"}}``."""
    return {"type": "error", "error": {"type": type_, "message": message}}


def headers(request_id: str) -> list[tuple[str, str]]:
    """Provider-specific response headers for one request."""
    return [
        ("request-id", f"req_{request_id}"),
        ("anthropic-organization-id", "fake-org"),
        ("anthropic-ratelimit-requests-limit", "4000"),
        ("anthropic-ratelimit-requests-remaining", "3999"),
    ]
