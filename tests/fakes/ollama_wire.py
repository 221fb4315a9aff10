"""Ollama's native chat API (``POST /api/chat``), the common NDJSON stream.

With ``stream`` true (Ollama's default) the answer is newline-delimited JSON, one
``{"model", "created_at", "message": {"role", "content"}, "done": false}`` line per piece
and a final ``"done": true`` line with ``done_reason`` and the token counts
(``application/x-ndjson``); with ``"stream": false`` one JSON object.
"""

from __future__ import annotations

import json
from typing import Any

from .common import count_tokens, pieces, text_of

CREATED_AT = "2025-04-16T14:45:16.000000Z"


def _answer(req: dict[str, Any]) -> str:
    messages = req.get("messages") or []
    return f"Echo: {text_of(messages[-1].get('content')) if messages else ''}"


def _final(req: dict[str, Any], content: str) -> dict[str, Any]:
    prompt = sum(count_tokens(text_of(m.get("content"))) for m in req.get("messages") or [])
    return {
        "model": req.get("model", "llama3.2"),
        "created_at": CREATED_AT,
        "message": {"role": "assistant", "content": content},
        "done_reason": "stop",
        "done": True,
        "total_duration": 1000000,
        "load_duration": 1000,
        "prompt_eval_count": prompt,
        "prompt_eval_duration": 1000,
        "eval_count": count_tokens(_answer(req)),
        "eval_duration": 1000,
    }


def chat(req: dict[str, Any]) -> dict[str, Any]:
    """The non-streamed ``/api/chat`` response."""
    return _final(req, _answer(req))


def ndjson(req: dict[str, Any]) -> list[bytes]:
    """The streamed ``/api/chat`` response, one NDJSON line per ``bytes``."""
    lines = [
        {"model": req.get("model", "llama3.2"), "created_at": CREATED_AT,
         "message": {"role": "assistant", "content": piece}, "done": False}
        for piece in pieces(_answer(req))
    ]
    lines.append(_final(req, ""))
    return [json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in lines]
