"""Build interactions for runs that were logged as messages, not as HTTP traffic.

Message logs and OpenTelemetry GenAI spans say what the model was sent and what it
answered, but not the bytes on the wire.  :class:`RunBuilder` turns them into the
interactions a recording would hold, so the transcript reader and the detectors read
them like any other cassette:

* a model call becomes one **OpenAI Chat Completions** interaction
  (``POST <base>/v1/chat/completions``, a ``chat.completion`` object in the response);
* a tool call with its result becomes one interaction
  ``POST http://tools.invalid/<name>?call=<call id>`` whose request body is the call's arguments and whose response body is the result the
  model was fed (status 200, or 500 when the source marked the result as an error; the
  content type is sniffed: HTML, JSON or text).  ``.invalid`` is a reserved top-level
  domain, so such an interaction can never be confused with a real host; the call id in
  the URL keeps two calls with equal arguments distinct, as they were (whether a repeated
  call was a mistake is the transcript's business: ``tool_loop``).

* an HTTP exchange a source carried whole (spoolproxy's own OTLP export with content)
  becomes that interaction again (method, URL, status, bodies, the headers it kept).

Every synthesised interaction carries ``synthesized: chat-completion | tool-result | http`` in its
``spoolproxy:`` extension keys.  Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote

from ..cassettes.model import Failure, Interaction, Request, Response

#: host of synthesised tool interactions (RFC 6761 reserves ``.invalid``)
TOOL_HOST = "tools.invalid"
DEFAULT_LLM_BASE = "https://api.openai.com/v1"
_JSON_HEADERS = {"content-type": ["application/json"]}
_HTML = re.compile(r"^\s*(<!doctype html|<html[\s>]|<head[\s>]|<body[\s>])", re.IGNORECASE)


#: finish reasons of other providers and conventions -> OpenAI Chat Completions' values
FINISH = {"max_tokens": "length", "MAX_TOKENS": "length", "end_turn": "stop", "STOP": "stop", "stop_sequence": "stop",
          "tool_use": "tool_calls", "function_call": "tool_calls", "SAFETY": "content_filter",
          "refusal": "content_filter", "error": "error"}


def content_text(content: Any) -> str:
    """Message ``content`` as text: a string as is, a list of parts (OpenAI ``text`` parts,
    Anthropic ``text`` blocks, plain strings) joined, anything else as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for p in content:
            if isinstance(p, str):
                out.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                out.append(p["text"])
            elif isinstance(p, dict) and isinstance(p.get("content"), str):
                out.append(p["content"])
        return "".join(out)
    return json.dumps(content, ensure_ascii=False)


def arguments_text(arguments: Any) -> str:
    """Tool-call arguments as the JSON text OpenAI sends (a string is kept as is)."""
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def sniff_type(body: str) -> str:
    """Content type of a tool result: ``text/html`` for an HTML document,
    ``application/json`` for JSON, else ``text/plain``."""
    if _HTML.match(body[:200]):
        return "text/html; charset=utf-8"
    s = body.strip()
    if s[:1] in ("{", "[") or s in ("true", "false", "null"):
        try:
            json.loads(s)
            return "application/json"
        except ValueError:
            pass
    return "text/plain; charset=utf-8"


class RunBuilder:
    """Accumulates the interactions of one run, in order.

    ``base_url``: where the synthesised model calls go (``https://host/v1``).
    """

    def __init__(self, base_url: str = DEFAULT_LLM_BASE) -> None:
        self.base_url = base_url.rstrip("/")
        self.interactions: list[Interaction] = []
        self._calls = 0
        self._tools = 0
        self._refs: set[str] = set()

    def model_call(
        self,
        messages: list[dict],
        answer: dict | None,
        *,
        model: str | None = None,
        tools: list[dict] | None = None,
        params: dict[str, Any] | None = None,
        finish_reason: str | None = None,
        usage: dict[str, int] | None = None,
        response_id: str | None = None,
        response_model: str | None = None,
        error: tuple[int, str, str] | Failure | None = None,
        started_at: datetime | None = None,
        duration_ms: float | None = None,
        base_url: str | None = None,
    ) -> Interaction:
        """Append one Chat Completions interaction.

        ``messages``: the OpenAI-shaped messages the model was sent; ``answer``: the
        assistant message it returned (``role``, ``content``, ``tool_calls``), or None when
        the call failed.  ``error``: ``(status, error type, message)`` for an HTTP error
        answer, or a transport :class:`Failure` (no response at all).  ``usage``:
        ``prompt_tokens``/``completion_tokens`` (ints).  Returns the interaction.
        """
        self._calls += 1
        body: dict[str, Any] = {"model": model or response_model or "unknown-model", "messages": messages}
        if tools:
            body["tools"] = tools
        body.update(params or {})
        url = f"{(base_url or self.base_url).rstrip('/')}/chat/completions"
        req = Request(method="POST", uri=url, headers=dict(_JSON_HEADERS), body=_dump(body))
        resp: Response | None = None
        failure: Failure | None = None
        if isinstance(error, Failure):
            failure = error
        elif error is not None and answer is None:
            status, etype, msg = error
            doc = {"error": {"message": msg, "type": etype, "code": None}}
            resp = Response(status=status, reason="", headers=dict(_JSON_HEADERS), body=_dump(doc))
        else:
            msg = dict(answer or {"role": "assistant", "content": ""})
            msg.setdefault("role", "assistant")
            if "content" not in msg:
                msg["content"] = None
            reason = FINISH.get(str(finish_reason), finish_reason) if finish_reason else (
                "tool_calls" if msg.get("tool_calls") else "stop")
            doc = {
                "id": response_id or f"chatcmpl-imported-{self._calls}",
                "object": "chat.completion",
                "model": response_model or model or "unknown-model",
                "choices": [{"index": 0, "message": msg, "finish_reason": reason}],
            }
            if error is not None:  # an error reported with (part of) an answer, e.g. in a stream
                doc["error"] = {"message": error[2], "type": error[1], "code": None}
            if usage:
                p, c = usage.get("prompt_tokens"), usage.get("completion_tokens")
                doc["usage"] = {"prompt_tokens": p or 0, "completion_tokens": c or 0, "total_tokens": (p or 0) + (c or 0)}
            resp = Response(status=200, reason="OK", headers=dict(_JSON_HEADERS), body=_dump(doc))
        it = Interaction(request=req, response=resp, error=failure, started_at=started_at, duration_ms=duration_ms,
                         extra={"synthesized": "chat-completion"})
        self.interactions.append(it)
        return it

    def tool_call(
        self,
        name: str,
        arguments: Any,
        result: Any,
        *,
        call_id: str | None = None,
        is_error: bool = False,
        status: int | None = None,
        started_at: datetime | None = None,
        duration_ms: float | None = None,
    ) -> Interaction:
        """Append one tool interaction: ``POST http://tools.invalid/<name>?call=<id>`` with the
        arguments as body, answered by ``result`` (text, or JSON for other values) with
        ``status`` when the source knows the HTTP status the tool got (a 502 stays 502), else
        200, or 500 when ``is_error``.  ``call_id`` is kept as the request header
        ``x-tool-call-id``."""
        text = result if isinstance(result, str) else content_text(result) if isinstance(result, list) else (
            "" if result is None else json.dumps(result, ensure_ascii=False))
        headers = dict(_JSON_HEADERS)
        if call_id:
            headers["x-tool-call-id"] = [str(call_id)]
        self._tools += 1
        ref = quote(str(call_id or f"call-{self._tools}"), safe="")
        if ref in self._refs:  # ids repeat across runs in one file (Gemini's name#n): keep calls apart
            ref = f"{ref}~{self._tools}"
        self._refs.add(ref)
        req = Request(method="POST", uri=f"http://{TOOL_HOST}/{quote(name or 'tool', safe='')}?call={ref}",
                      headers=headers, body=arguments_text(arguments).encode("utf-8"))
        code = status if status is not None and 100 <= status < 600 else 500 if is_error else 200
        resp = Response(status=code, reason="Tool Error" if code >= 400 else "OK",
                        headers={"content-type": [sniff_type(text)]}, body=text.encode("utf-8"))
        it = Interaction(request=req, response=resp, started_at=started_at, duration_ms=duration_ms,
                         extra={"synthesized": "tool-result"})
        self.interactions.append(it)
        return it


    def http_call(
        self,
        method: str,
        url: str,
        *,
        status: int | None,
        request_body: str = "",
        response_body: str | None = None,
        request_headers: dict[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
        failure: Failure | None = None,
        started_at: datetime | None = None,
        duration_ms: float | None = None,
    ) -> Interaction:
        """Append one plain HTTP interaction as it was exchanged (a tool's or another
        request's traffic that a trace carried whole): ``status`` None with ``failure`` for a
        request that got no response.  Bodies are text (UTF-8 on the wire)."""
        req = Request(method=method.upper(), uri=url, headers={k: [v] for k, v in (request_headers or {}).items()},
                      body=request_body.encode("utf-8"))
        resp = None
        if status is not None:
            resp = Response(status=status, reason="", headers={k: [v] for k, v in (response_headers or {}).items()},
                            body=(response_body or "").encode("utf-8"))
        it = Interaction(request=req, response=resp, error=failure, started_at=started_at, duration_ms=duration_ms,
                         extra={"synthesized": "http"})
        self.interactions.append(it)
        return it

    def infer_tools(self) -> bool:
        """Give every synthesised model call that declared no tools a declaration (name
        only, no schema) of each tool the run called, so an undeclared-tool finding is
        not made up for logs that do not list their tools.  True when any was added."""
        names: list[str] = []
        for it in self.interactions:
            if it.extra.get("synthesized") == "tool-result":
                name = unquote(it.request.url.path.rsplit("/", 1)[-1])
                if name not in names:
                    names.append(name)
            elif it.extra.get("synthesized") == "chat-completion" and it.response is not None:
                for ch in (it.response.json() or {}).get("choices") or []:
                    for tc in (ch.get("message") or {}).get("tool_calls") or []:
                        name = (tc.get("function") or {}).get("name")
                        if name and name not in names:
                            names.append(name)
        added = False
        for n, it in enumerate(self.interactions):
            body = it.request.json() if it.extra.get("synthesized") == "chat-completion" else None
            if names and isinstance(body, dict) and not body.get("tools"):
                body["tools"] = [{"type": "function", "function": {"name": name}} for name in names]
                self.interactions[n] = it.model_copy(update={"request": it.request.model_copy(update={"body": _dump(body)})})
                added = True
        return added


def _dump(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")
