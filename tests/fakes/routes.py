"""What the fake provider answers: request log entries, replies and the built-in routes.

A route is a function ``LoggedRequest -> Reply``; :data:`BUILTIN_ROUTES` maps
``(method, path suffix)`` to the provider wire formats (:mod:`.openai_wire`,
:mod:`.anthropic_wire`, :mod:`.gemini_wire`, :mod:`.ollama_wire`, :mod:`.cohere_wire`,
:mod:`.bedrock_wire`).  Errors come in the
shape of the provider the request was meant for (:func:`error_reply`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import anthropic_wire, bedrock_wire, cohere_wire, gemini_wire, ollama_wire, openai_wire
from .common import short_id


@dataclass
class LoggedRequest:
    """One request as the fake provider received it.

    ``headers``: ``(name, value)`` pairs in wire order and case.  ``body``: the raw
    (de-chunked) request body.  ``path``: path and query after any ``/_fake/...`` prefix
    was stripped.  ``sent``: ``(time.monotonic() seconds, bytes written)`` for each body
    chunk the server wrote (one per SSE event for streams).  ``status`` and
    ``response_body``: what the server answered (the body before any gzip; for a cut
    stream only the part sent; empty for ``huge:N`` and ``reset``).
    """

    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    scheme: str
    connection: int
    sent: list[tuple[float, int]] = field(default_factory=list)
    status: int | None = None
    response_body: bytes = b""

    def header(self, name: str, default: str | None = None) -> str | None:
        """The first value of header *name* (case-insensitive), or *default*."""
        lname = name.lower()
        for key, value in self.headers:
            if key.lower() == lname:
                return value
        return default

    def json(self) -> Any:
        """The body parsed as JSON (raises ValueError when it is not JSON)."""
        return json.loads(self.body)


@dataclass
class Reply:
    """What a route returns.  ``body`` is one ``bytes`` (sent with Content-Length) or a
    list of ``bytes`` (sent chunked, one chunk per item, flushed and spaced by the SSE
    delay)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes | list[bytes]


Route = Callable[[LoggedRequest], Reply]


def json_reply(status: int, obj: Any, extra: list[tuple[str, str]] | None = None) -> Reply:
    """A JSON reply (``application/json``) with optional extra headers."""
    return Reply(status, [("content-type", "application/json")] + (extra or []), json.dumps(obj).encode())


def sse_reply(events: list[bytes], extra: list[tuple[str, str]] | None = None) -> Reply:
    """An SSE reply (``text/event-stream; charset=utf-8``, chunked, one event per chunk)."""
    head = [("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache")]
    return Reply(200, head + (extra or []), events)


def _is_gemini(req: LoggedRequest) -> bool:
    return req.path.split("?")[0].endswith((":generateContent", ":streamGenerateContent"))


def _is_anthropic(req: LoggedRequest) -> bool:
    return req.path.split("?")[0].endswith("/messages") or req.header("anthropic-version") is not None


def error_reply(req: LoggedRequest, status: int, message: str, extra: list[tuple[str, str]] | None = None) -> Reply:
    """An error in the shape of the provider the request was meant for."""
    rid = short_id(req.body + req.path.encode(), 16)
    if _is_gemini(req):
        return json_reply(status, gemini_wire.error(status, message), extra)
    if _is_anthropic(req):
        kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        return json_reply(status, anthropic_wire.error(message, kind), anthropic_wire.headers(rid) + (extra or []))
    kind = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
            429: "requests"}.get(status, "server_error")
    code = {429: "rate_limit_exceeded", 404: "unknown_url"}.get(status)
    return json_reply(status, openai_wire.error(message, kind, code), openai_wire.headers(rid) + (extra or []))


def _parse_json(req: LoggedRequest) -> dict[str, Any] | None:
    try:
        obj = json.loads(req.body or b"{}")
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def route_openai_chat(req: LoggedRequest) -> Reply:
    """OpenAI Chat Completions (plain or ``stream: true``)."""
    body = _parse_json(req)
    if body is None:
        return error_reply(req, 400, "We could not parse the JSON body of your request.")
    extra = openai_wire.headers(short_id(req.body, 16))
    if body.get("stream"):
        return sse_reply(openai_wire.chat_sse(body, req.body), extra)
    return json_reply(200, openai_wire.chat_completion(body, req.body), extra)


def route_openai_responses(req: LoggedRequest) -> Reply:
    """OpenAI Responses API (plain or ``stream: true``)."""
    body = _parse_json(req)
    if body is None:
        return error_reply(req, 400, "We could not parse the JSON body of your request.")
    extra = openai_wire.headers(short_id(req.body, 16))
    if body.get("stream"):
        return sse_reply(openai_wire.responses_sse(body, req.body), extra)
    return json_reply(200, openai_wire.response(body, req.body), extra)


def route_anthropic_messages(req: LoggedRequest) -> Reply:
    """Anthropic Messages (plain or ``stream: true``)."""
    body = _parse_json(req)
    if body is None:
        return error_reply(req, 400, "messages: request body is not valid JSON")
    extra = anthropic_wire.headers(short_id(req.body, 16))
    if body.get("stream"):
        return sse_reply(anthropic_wire.sse(body, req.body), extra)
    return json_reply(200, anthropic_wire.message(body, req.body), extra)


def route_gemini(req: LoggedRequest) -> Reply:
    """Gemini ``:generateContent`` and ``:streamGenerateContent`` (``alt=sse`` or JSON array)."""
    body = _parse_json(req)
    if body is None:
        return error_reply(req, 400, "Invalid JSON payload received.")
    bare, _, query = req.path.partition("?")
    model, _, method = bare.rsplit("/", 1)[-1].partition(":")
    head = [("vary", "Origin"), ("server", "scaffolding on HTTPServer2")]
    if method == "generateContent":
        return json_reply(200, gemini_wire.generate(body, req.body, model), head)
    if "alt=sse" in query:
        return Reply(200, [("content-type", "text/event-stream")] + head, gemini_wire.sse(body, req.body, model))
    return Reply(200, [("content-type", "application/json; charset=UTF-8")] + head,
                 gemini_wire.json_array_chunks(body, req.body, model))


def route_ollama_chat(req: LoggedRequest) -> Reply:
    """Ollama ``/api/chat``: NDJSON stream, or one JSON object with ``"stream": false``."""
    body = _parse_json(req)
    if body is None:
        return json_reply(400, {"error": "invalid JSON body"})
    if body.get("stream", True):
        return Reply(200, [("content-type", "application/x-ndjson")], ollama_wire.ndjson(body))
    return json_reply(200, ollama_wire.chat(body))


def route_cohere_chat(req: LoggedRequest) -> Reply:
    """Cohere v2 chat: SSE with ``stream: true``, else one JSON object."""
    body = _parse_json(req)
    if body is None:
        return json_reply(400, {"message": "invalid request: body is not valid JSON"})
    if body.get("stream"):
        return sse_reply(cohere_wire.sse(body, req.body))
    return json_reply(200, cohere_wire.chat(body, req.body))


def route_bedrock_converse_stream(req: LoggedRequest) -> Reply:
    """Bedrock ConverseStream: an AWS event stream (``application/vnd.amazon.eventstream``)."""
    body = _parse_json(req)
    if body is None:
        return json_reply(400, {"message": "Malformed input request, please reformat your input and try again."})
    return Reply(200, [("content-type", "application/vnd.amazon.eventstream"),
                       ("x-amzn-requestid", short_id(req.body, 36))], bedrock_wire.converse_stream(body))


def route_models(req: LoggedRequest) -> Reply:
    """``GET /v1/models`` for OpenAI, or Anthropic when ``anthropic-version`` is sent."""
    if req.header("anthropic-version"):
        return json_reply(200, anthropic_wire.models(), anthropic_wire.headers("models"))
    return json_reply(200, openai_wire.models(), openai_wire.headers("models"))


def route_echo(req: LoggedRequest) -> Reply:
    """A stand-in tool API: JSON ``{"method", "path", "headers", "body"}`` of the request."""
    return json_reply(200, {
        "method": req.method,
        "path": req.path,
        "headers": {k.lower(): v for k, v in req.headers},
        "body": req.body.decode("utf-8", "replace"),
    })


#: built-in ``(method, path suffix, route)`` table; ``FakeProvider.add_route`` prepends to it.
BUILTIN_ROUTES: tuple[tuple[str, str, Route], ...] = (
    ("POST", "/chat/completions", route_openai_chat),
    ("POST", "/responses", route_openai_responses),
    ("POST", "/messages", route_anthropic_messages),
    ("POST", "/api/chat", route_ollama_chat),
    ("POST", ":generateContent", route_gemini),
    ("POST", ":streamGenerateContent", route_gemini),
    ("POST", "/v2/chat", route_cohere_chat),
    ("POST", "/converse-stream", route_bedrock_converse_stream),
    ("GET", "/models", route_models),
)


