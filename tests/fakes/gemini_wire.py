"""Gemini API wire format (``generativelanguage.googleapis.com``), shaped after real
recordings in ``../shared/corpus`` (llm-gemini, pydantic-ai):

* ``POST /v1beta/models/{model}:generateContent``: one ``GenerateContentResponse``;
* ``POST /v1beta/models/{model}:streamGenerateContent``: without ``alt=sse`` a streamed
  JSON array (``[{...}`` then ``\\n,\\r\\n{...}`` per piece, then ``\\n]``, each object
  indented by 2), with ``?alt=sse`` SSE events ``data: {...}\\r\\n\\r\\n``.

The answer echoes the last user text; when ``tools[].functionDeclarations`` are declared and
the last turn is user text, it is a ``functionCall`` of the first function; after a
``functionResponse`` part, text quoting its ``response``.
"""

from __future__ import annotations

import json
from typing import Any

from .common import count_tokens, first_argument_name, pieces, short_id


def _text(parts: Any) -> str:
    return "".join(p.get("text", "") for p in parts or [] if isinstance(p, dict))


def _plan(req: dict[str, Any]) -> dict[str, Any]:
    contents = req.get("contents") or []
    last = contents[-1] if contents else {}
    parts = last.get("parts") or []
    responses = [p["functionResponse"] for p in parts if isinstance(p, dict) and "functionResponse" in p]
    if responses:
        return {"text": f"The tool said: {json.dumps(responses[-1].get('response'))}", "call": None}
    text = _text(parts)
    decls = [d for t in req.get("tools") or [] for d in t.get("functionDeclarations") or []]
    if decls and last.get("role", "user") == "user":
        schema = (decls[0].get("parameters") or decls[0].get("parametersJsonSchema")
                  or decls[0].get("parameters_json_schema"))  # google-genai's spelling
        return {"text": None, "call": {"name": decls[0]["name"], "args": {first_argument_name(schema): text}}}
    return {"text": f"Echo: {text}", "call": None}


def _usage(req: dict[str, Any], completion: str) -> dict[str, Any]:
    prompt = sum(count_tokens(_text(c.get("parts"))) for c in req.get("contents") or [])
    done = count_tokens(completion)
    return {"promptTokenCount": prompt, "candidatesTokenCount": done, "totalTokenCount": prompt + done}


def _candidate(parts: list[dict[str, Any]], finish: str | None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    return cand


def generate(req: dict[str, Any], raw: bytes, model: str) -> dict[str, Any]:
    """Gemini ``GenerateContentResponse`` for *req* (``model`` from the URL path)."""
    plan = _plan(req)
    part = {"functionCall": plan["call"]} if plan["call"] else {"text": plan["text"]}
    completion = plan["text"] or json.dumps(plan["call"]["args"])
    return {
        "candidates": [_candidate([part], "STOP")],
        "usageMetadata": _usage(req, completion),
        "modelVersion": model,
        "responseId": short_id(raw, 22),
    }


def stream_pieces(req: dict[str, Any], raw: bytes, model: str) -> list[dict[str, Any]]:
    """The ``GenerateContentResponse`` pieces of a streamed answer: one per text piece,
    the last one with ``finishReason`` and ``usageMetadata``."""
    full = generate(req, raw, model)
    plan = _plan(req)
    if plan["call"]:
        return [full]
    texts = pieces(plan["text"])
    out = []
    for i, t in enumerate(texts):
        last = i == len(texts) - 1
        piece: dict[str, Any] = {"candidates": [_candidate([{"text": t}], "STOP" if last else None)]}
        if last:
            piece["usageMetadata"] = full["usageMetadata"]
        piece["modelVersion"] = model
        piece["responseId"] = full["responseId"]
        out.append(piece)
    return out


def json_array_chunks(req: dict[str, Any], raw: bytes, model: str) -> list[bytes]:
    """The streamed JSON array as Gemini sends it, one ``bytes`` per network write."""
    objs = [json.dumps(p, indent=2).encode() for p in stream_pieces(req, raw, model)]
    return [b"[" + objs[0]] + [b"\n,\r\n" + o for o in objs[1:]] + [b"\n]"]


def sse(req: dict[str, Any], raw: bytes, model: str) -> list[bytes]:
    """The ``alt=sse`` stream: ``data: {json}\\r\\n\\r\\n`` per piece."""
    return [b"data: " + json.dumps(p, separators=(",", ": ")).encode() + b"\r\n\r\n"
            for p in stream_pieces(req, raw, model)]


def error(status: int, message: str) -> dict[str, Any]:
    """Google API error body: ``{"error": {"code", "message", "status"}}``."""
    name = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
            429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}.get(status, "INTERNAL")
    return {"error": {"code": status, "message": message, "status": name}}
