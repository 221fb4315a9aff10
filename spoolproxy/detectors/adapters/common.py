"""Helpers shared by the provider adapters: JSON access, argument parsing, content text."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from ...cassettes.model import Interaction, parse_json
from ..models import ToolCall, ToolSpec


def split_uri(uri: str) -> tuple[str, str]:
    """(netloc, path) of an absolute URI (``scheme://netloc/path?query``), without
    urllib's validation cost; falls back to ``urlsplit`` for anything unusual."""
    scheme, sep, rest = uri.partition("://")
    if not sep or "\\" in rest:
        u = urlsplit(uri)
        return u.netloc, u.path
    end = len(rest)
    for ch in "/?#":
        k = rest.find(ch)
        if 0 <= k < end:
            end = k
    netloc, tail = rest[:end], rest[end:]
    if not tail.startswith("/"):
        return netloc, ""
    for ch in "?#":
        k = tail.find(ch)
        if k >= 0:
            tail = tail[:k]
    return netloc, tail


def header(headers: dict[str, list[str]], name: str) -> str | None:
    """First value of a header; ``name`` is lower-case.  Tries the two usual spellings
    before a case-insensitive scan."""
    for key in (name, name.title()):
        v = headers.get(key)
        if v:
            return v[0]
    for key, v in headers.items():
        if v and key.lower() == name:
            return v[0]
    return None


def content_type(resp: Any) -> str:
    """The response's media type, lower-case, without parameters ('' when absent)."""
    v = header(resp.headers, "content-type") if resp is not None else None
    return v.split(";", 1)[0].strip().lower() if v else ""


def request_json(it: Interaction) -> Any:
    """The request body as JSON (None when not JSON)."""
    return parse_json(it.request.body)


def response_json(it: Interaction) -> Any:
    """The response body as JSON (None when absent or not JSON)."""
    return parse_json(it.response.body) if it.response is not None else None


def make_tool_call(call_id: str | None, name: str, raw: Any, parse: bool = True) -> ToolCall:
    """A ToolCall from raw arguments: a string (parsed as JSON unless ``parse`` is False,
    as for calls repeated in a request's history) or an already parsed value."""
    if raw is None:
        raw = ""
    if isinstance(raw, str) and not parse:
        return ToolCall(id=call_id, name=name or "", arguments_raw=raw)
    if isinstance(raw, str):
        if not raw.strip():
            return ToolCall(id=call_id, name=name or "", arguments_raw=raw, arguments={})
        try:
            return ToolCall(id=call_id, name=name or "", arguments_raw=raw, arguments=json.loads(raw))
        except ValueError as exc:
            return ToolCall(id=call_id, name=name or "", arguments_raw=raw, parse_error=str(exc))
    return ToolCall(id=call_id, name=name or "", arguments_raw=json.dumps(raw, ensure_ascii=False), arguments=raw)


_TOOL_MEMO: dict[str, ToolSpec] = {}


def tool_spec(name: str, schema: Any) -> ToolSpec:
    """A ToolSpec, reusing the previous object for this name when its schema is equal (the
    same tools are declared in every request of a run; a shared object lets validators be
    cached by identity).  Treat ToolSpecs as read-only."""
    schema = schema if isinstance(schema, dict) else None
    hit = _TOOL_MEMO.get(name)
    if hit is not None and hit.schema_ == schema:
        return hit
    spec = ToolSpec(name=name, schema=schema)
    if len(_TOOL_MEMO) > 10_000:
        _TOOL_MEMO.clear()
    _TOOL_MEMO[name] = spec
    return spec


def content_text(content: Any) -> str:
    """Text of a message content: a string, or a list of parts with ``text`` (OpenAI,
    Anthropic, Cohere, Bedrock part shapes).  Non-text parts are skipped."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                t = part.get("text")
                if isinstance(t, str):
                    out.append(t)
                elif isinstance(part.get("json"), (dict, list)):
                    out.append(json.dumps(part["json"], ensure_ascii=False))
                elif isinstance(part.get("content"), (str, list)):
                    out.append(content_text(part["content"]))
        return "\n".join(out)
    if isinstance(content, dict):
        return json.dumps(content, ensure_ascii=False)
    return str(content)


def error_of(doc: Any) -> tuple[str | None, str | None]:
    """(message, code) of a provider error body: ``{"error": {...}}``, ``{"error": "..."}``,
    ``{"message": ...}`` (Bedrock, Cohere) or a list holding one of these (Gemini)."""
    if isinstance(doc, list) and doc:
        doc = doc[0]
    if not isinstance(doc, dict):
        return None, None
    err = doc.get("error")
    if isinstance(err, dict):
        # the most specific name: OpenAI ``code`` (model_not_found), else ``type``
        # (invalid_request_error), else Gemini's ``status`` (INVALID_ARGUMENT); never a bare number
        code = next((str(c) for c in (err.get("code"), err.get("type"), err.get("status"))
                     if c not in (None, "") and not str(c).isdigit()), None)
        return (str(err.get("message") or err.get("type") or json.dumps(err)), code)
    if isinstance(err, str):
        return err, None
    if isinstance(doc.get("message"), str) and len(doc) <= 4:
        return doc["message"], str(doc.get("__type") or doc.get("code") or "") or None
    return None, None


def client_closed(it: Interaction) -> bool:
    """True when the *client* ended the exchange after the response headers (it stopped
    reading, e.g. the openai SDK at ``data: [DONE]``): the recorder's ``client_closed``
    extension, or, in cassettes recorded before it existed, a ``during: response`` failure
    whose message is mitmproxy's ``Client disconnected.`` / ``stream reset by client``.
    That is not an upstream failure; whether the body is whole is for its content to say."""
    if it.extra.get("client_closed"):
        return True
    err = it.error
    if err is None or err.during != "response" or it.response is None:
        return False
    from ...proxy.failures import closed_by_client

    return closed_by_client(err.message)


def safe_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def unusable_response(call, it: Interaction, stream: bool | None = None) -> bool:
    """True when the interaction has no response body to parse (no response, an HTTP error
    status, or an empty body); then ``call.error``/``call.error_code`` are set from the
    provider's error object and, when ``stream`` is given, ``call.stream.is_stream``."""
    resp = it.response
    if resp is None:
        return True
    if resp.status >= 400 or not resp.body:
        call.error, call.error_code = error_of(response_json(it))
        if stream is not None:
            call.stream.is_stream = stream
        return True
    return False
