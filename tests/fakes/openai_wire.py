"""OpenAI wire formats, shaped after real recordings (``../shared/corpus``):

* Chat Completions (``POST /v1/chat/completions``): a ``chat.completion`` object, or with
  ``stream: true`` a list of ``chat.completion.chunk`` objects (sent as SSE ``data:`` lines
  closed by ``data: [DONE]``), with a final usage chunk when
  ``stream_options.include_usage`` is set.  When the request declares ``tools`` and its
  last message is from the user, the answer is a tool call (arguments streamed in
  fragments); after a ``role: tool`` message the answer is text quoting the tool result.
* Responses (``POST /v1/responses``): a ``response`` object, or with ``stream: true`` the
  ``response.*`` SSE events (``event:`` + ``data:``), with ``function_call`` output when
  tools are declared and the input ends with a user message.
* Models (``GET /v1/models``): a ``list`` of ``model`` objects.
"""

from __future__ import annotations

import json
from typing import Any

from .common import (
    CREATED,
    count_tokens,
    json_pieces,
    pieces,
    short_id,
    text_of,
    tool_arguments,
)

SYSTEM_FINGERPRINT = "fp_fake0000"
MODELS = ("gpt-4o-mini", "gpt-4o", "gpt-4.1")


def _resolved_model(model: str) -> str:
    return model or "gpt-4o-mini"


# --- Chat Completions -------------------------------------------------------------


def _chat_plan(req: dict[str, Any]) -> dict[str, Any]:
    """Decide the answer: ``{"text": str | None, "tool": (name, arguments) | None}``."""
    messages = req.get("messages") or []
    last = messages[-1] if messages else {}
    role = last.get("role")
    tools = [t for t in req.get("tools") or [] if t.get("type", "function") == "function"]
    if role == "tool":
        return {"text": f"The tool said: {text_of(last.get('content'))}", "tool": None}
    text = text_of(last.get("content"))
    if tools and role == "user" and req.get("tool_choice") != "none":
        fn = tools[0].get("function") or {}
        return {"text": None, "tool": (fn.get("name", "tool"), tool_arguments(fn.get("parameters"), text))}
    return {"text": f"Echo: {text}", "tool": None}


def _usage(req: dict[str, Any], completion: str) -> dict[str, Any]:
    prompt = sum(count_tokens(text_of(m.get("content"))) for m in req.get("messages") or [])
    done = count_tokens(completion)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": done,
        "total_tokens": prompt + done,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def chat_completion(req: dict[str, Any], raw: bytes) -> dict[str, Any]:
    """OpenAI Chat Completions response object (``object: chat.completion``) for *req*."""
    plan = _chat_plan(req)
    rid = short_id(raw)
    message: dict[str, Any] = {"role": "assistant", "content": plan["text"], "refusal": None, "annotations": []}
    if plan["tool"]:
        name, args = plan["tool"]
        message["tool_calls"] = [
            {"id": f"call_{rid}", "type": "function", "function": {"name": name, "arguments": args}}
        ]
    completion = plan["text"] or plan["tool"][1]
    return {
        "id": f"chatcmpl-{rid}",
        "object": "chat.completion",
        "created": CREATED,
        "model": _resolved_model(req.get("model", "")),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if plan["tool"] else "stop",
            }
        ],
        "usage": _usage(req, completion),
        "service_tier": "default",
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }


def chat_chunks(req: dict[str, Any], raw: bytes) -> list[dict[str, Any]]:
    """OpenAI Chat Completions streaming chunks (``object: chat.completion.chunk``), in
    order, without the ``[DONE]`` sentinel.  Includes the usage chunk (``choices: []``)
    when ``stream_options.include_usage`` is true."""
    plan = _chat_plan(req)
    rid = short_id(raw)
    include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
    base = {
        "id": f"chatcmpl-{rid}",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": _resolved_model(req.get("model", "")),
        "service_tier": "default",
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        out = dict(base, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])
        if include_usage:
            out["usage"] = None
        return out

    chunks: list[dict[str, Any]] = []
    if plan["tool"]:
        name, args = plan["tool"]
        chunks.append(
            chunk(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"index": 0, "id": f"call_{rid}", "type": "function", "function": {"name": name, "arguments": ""}}
                    ],
                    "refusal": None,
                }
            )
        )
        for frag in json_pieces(args):
            chunks.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": frag}}]}))
        chunks.append(chunk({}, "tool_calls"))
        completion = args
    else:
        chunks.append(chunk({"role": "assistant", "content": "", "refusal": None}))
        for piece in pieces(plan["text"]):
            chunks.append(chunk({"content": piece}))
        chunks.append(chunk({}, "stop"))
        completion = plan["text"]
    if include_usage:
        chunks.append(dict(base, choices=[], usage=_usage(req, completion)))
    return chunks


def chat_sse(req: dict[str, Any], raw: bytes) -> list[bytes]:
    """The SSE events of a streamed chat completion, one ``bytes`` per event
    (``data: {json}\\n\\n`` ... ``data: [DONE]\\n\\n``), as OpenAI frames them."""
    events = [b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n" for c in chat_chunks(req, raw)]
    events.append(b"data: [DONE]\n\n")
    return events


# --- Responses --------------------------------------------------------------------


def _responses_plan(req: dict[str, Any]) -> dict[str, Any]:
    inp = req.get("input")
    if isinstance(inp, str):
        items: list[dict[str, Any]] = [{"role": "user", "content": inp}]
    else:
        items = list(inp or [])
    last = items[-1] if items else {}
    tools = [t for t in req.get("tools") or [] if t.get("type") == "function"]
    if last.get("type") == "function_call_output":
        return {"text": f"The tool said: {last.get('output', '')}", "tool": None}
    text = text_of(last.get("content"))
    if tools and last.get("role") == "user":
        return {"text": None, "tool": (tools[0].get("name", "tool"), tool_arguments(tools[0].get("parameters"), text))}
    return {"text": f"Echo: {text}", "tool": None}


def _response_object(req: dict[str, Any], raw: bytes, status: str, output: list[Any], usage: Any) -> dict[str, Any]:
    return {
        "id": f"resp_{short_id(raw, 40)}",
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": req.get("instructions"),
        "max_output_tokens": req.get("max_output_tokens"),
        "model": _resolved_model(req.get("model", "")),
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": req.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": req.get("tools") or [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


def _responses_usage(req: dict[str, Any], completion: str) -> dict[str, Any]:
    inp = req.get("input")
    prompt = count_tokens(inp) if isinstance(inp, str) else sum(
        count_tokens(text_of(i.get("content")) or str(i.get("output", ""))) for i in inp or []
    )
    done = count_tokens(completion)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": done,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + done,
    }


def _output_item(plan: dict[str, Any], rid: str) -> dict[str, Any]:
    if plan["tool"]:
        name, args = plan["tool"]
        return {"id": f"fc_{rid}", "type": "function_call", "status": "completed",
                "arguments": args, "call_id": f"call_{rid}", "name": name}
    return {
        "id": f"msg_{rid}",
        "type": "message",
        "status": "completed",
        "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": plan["text"]}],
        "role": "assistant",
    }


def response(req: dict[str, Any], raw: bytes) -> dict[str, Any]:
    """OpenAI Responses API response object (``object: response``, ``status: completed``)."""
    plan = _responses_plan(req)
    rid = short_id(raw, 40)
    completion = plan["text"] or plan["tool"][1]
    return _response_object(req, raw, "completed", [_output_item(plan, rid)], _responses_usage(req, completion))


def responses_sse(req: dict[str, Any], raw: bytes) -> list[bytes]:
    """The SSE events of a streamed Responses API call (``event: response.created`` ...
    ``event: response.completed``), one ``bytes`` per event, with ``sequence_number``."""
    plan = _responses_plan(req)
    rid = short_id(raw, 40)
    item = _output_item(plan, rid)
    completion = plan["text"] or plan["tool"][1]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response_object(req, raw, "in_progress", [], None)},
        {"type": "response.in_progress", "response": _response_object(req, raw, "in_progress", [], None)},
    ]
    if plan["tool"]:
        events.append({"type": "response.output_item.added", "output_index": 0,
                       "item": dict(item, status="in_progress", arguments="")})
        for frag in json_pieces(item["arguments"]):
            events.append({"type": "response.function_call_arguments.delta", "item_id": item["id"],
                           "output_index": 0, "delta": frag})
        events.append({"type": "response.function_call_arguments.done", "item_id": item["id"],
                       "output_index": 0, "arguments": item["arguments"]})
    else:
        events.append({"type": "response.output_item.added", "output_index": 0,
                       "item": dict(item, status="in_progress", content=[])})
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        events.append({"type": "response.content_part.added", "item_id": item["id"], "output_index": 0,
                       "content_index": 0, "part": part})
        for piece in pieces(plan["text"]):
            events.append({"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
                           "content_index": 0, "delta": piece, "logprobs": []})
        events.append({"type": "response.output_text.done", "item_id": item["id"], "output_index": 0,
                       "content_index": 0, "text": plan["text"], "logprobs": []})
        events.append({"type": "response.content_part.done", "item_id": item["id"], "output_index": 0,
                       "content_index": 0, "part": dict(part, text=plan["text"])})
    events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
    events.append({"type": "response.completed",
                   "response": _response_object(req, raw, "completed", [item], _responses_usage(req, completion))})
    out = []
    for seq, ev in enumerate(events):
        ev["sequence_number"] = seq
        out.append(f"event: {ev['type']}\ndata: ".encode() + json.dumps(ev, separators=(",", ":")).encode() + b"\n\n")
    return out


# --- Models and errors ------------------------------------------------------------


def models() -> dict[str, Any]:
    """OpenAI ``GET /v1/models`` list object."""
    return {
        "object": "list",
        "data": [{"id": m, "object": "model", "created": CREATED, "owned_by": "system"} for m in MODELS],
    }


def error(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    """OpenAI error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


#: Response headers OpenAI sends (values are fakes; names as in real recordings).
def headers(request_id: str) -> list[tuple[str, str]]:
    """Provider-specific response headers for one request."""
    return [
        ("openai-organization", "fake-org"),
        ("openai-processing-ms", "1"),
        ("openai-version", "2020-10-01"),
        ("x-request-id", f"req_{request_id}"),
        ("x-ratelimit-limit-requests", "10000"),
        ("x-ratelimit-remaining-requests", "9999"),
    ]
