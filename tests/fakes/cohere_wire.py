"""Cohere v2 Chat wire format (``POST /v2/chat``), after Cohere's API reference.

Plain: ``{"id", "finish_reason", "message": {"role", "content": [{"type": "text", "text"}]},
"usage": {"billed_units", "tokens"}}``.  With ``stream: true`` SSE events, each framed
``event: NAME\\ndata: {json}\\n\\n``: ``message-start``, ``content-start``, one
``content-delta`` per piece, ``content-end`` and the terminal ``message-end`` carrying
``finish_reason`` (``COMPLETE``) and usage.  The answer echoes the last user message.
"""

from __future__ import annotations

import json
from typing import Any

from .common import count_tokens, pieces, short_id, text_of


def _answer(req: dict[str, Any]) -> str:
    messages = req.get("messages") or []
    return f"Echo: {text_of(messages[-1].get('content')) if messages else ''}"


def _usage(req: dict[str, Any], answer: str) -> dict[str, Any]:
    prompt = sum(count_tokens(text_of(m.get("content"))) for m in req.get("messages") or [])
    done = count_tokens(answer)
    return {"billed_units": {"input_tokens": prompt, "output_tokens": done},
            "tokens": {"input_tokens": prompt + 60, "output_tokens": done}}


def chat(req: dict[str, Any], raw: bytes) -> dict[str, Any]:
    """The non-streamed ``/v2/chat`` response."""
    answer = _answer(req)
    return {"id": short_id(raw, 36), "finish_reason": "COMPLETE",
            "message": {"role": "assistant", "content": [{"type": "text", "text": answer}]},
            "usage": _usage(req, answer)}


def sse(req: dict[str, Any], raw: bytes) -> list[bytes]:
    """The streamed ``/v2/chat`` response, one SSE event per ``bytes``."""
    answer = _answer(req)
    events: list[dict[str, Any]] = [
        {"id": short_id(raw, 36), "type": "message-start",
         "delta": {"message": {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}}},
        {"type": "content-start", "index": 0, "delta": {"message": {"content": {"type": "text", "text": ""}}}},
    ]
    events += [{"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": p}}}} for p in pieces(answer)]
    events.append({"type": "content-end", "index": 0})
    events.append({"type": "message-end", "delta": {"finish_reason": "COMPLETE", "usage": _usage(req, answer)}})
    return [f"event: {e['type']}\ndata: ".encode() + json.dumps(e, separators=(",", ":")).encode() + b"\n\n"
            for e in events]
