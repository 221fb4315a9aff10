"""Thin adapters for the judge's model: any OpenAI-compatible Chat Completions endpoint
(OpenAI, Groq, vLLM, Ollama's ``/v1``, llama.cpp's server ...) or Anthropic Messages.

Both ask for one JSON object that follows a schema:

* **OpenAI Chat Completions** (``POST {base_url}/chat/completions``): ``response_format``
  ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`` first; a server
  that rejects it (a 4xx/5xx naming ``response_format``, ``json_schema`` or ``schema``) is
  asked again with ``{"type": "json_object", "schema": ...}`` (llama-cpp-python's server
  turns that schema into a grammar), then ``{"type": "json_object"}``, then with no
  ``response_format`` at all; the
  prompt states the JSON shape in every case, and the answer is read by the tolerant
  parser (:mod:`.parse`).  The mode that worked is remembered for the next call;
* **Anthropic Messages** (``POST {base_url}/v1/messages``): one tool whose
  ``input_schema`` is the schema, forced with ``tool_choice: {"type": "tool", "name"}``;
  the ``tool_use`` block's ``input`` is the answer (a text answer is parsed as a fallback).

Requests are deterministic (``temperature: 0``, fixed key order) so a recorded judge
replays exactly.  The HTTP client is given (:mod:`.traffic` points it at spoolproxy's
proxy to record or replay the calls).  Errors are :class:`JudgeCallError` (one line: what
failed and what to do next).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from ..errors import SpoolError
from .parse import extract_json

Provider = Literal["openai", "anthropic"]
OPENAI_URL = "https://api.openai.com/v1"
ANTHROPIC_URL = "https://api.anthropic.com"
_MODES = ("json_schema", "json_object_schema", "json_object", "none")


class JudgeCallError(SpoolError):
    """A judge model call failed (unreachable, an error status, no usable answer)."""


@dataclass
class JudgeSettings:
    """Which model judges, and how it is reached.

    ``model``: the model name the endpoint knows; ``base_url``: the endpoint (default
    OpenAI's, or Anthropic's for ``provider="anthropic"``); ``api_key_env``: the name of the
    environment variable holding the key (never the key itself; default ``OPENAI_API_KEY``
    / ``ANTHROPIC_API_KEY`` when set, else none, as local servers need none);
    ``provider``: ``openai`` (any Chat Completions endpoint) or ``anthropic`` (default:
    ``anthropic`` for ``claude-*`` models or an ``anthropic.com`` URL); ``timeout``: seconds
    per call; ``max_tokens``: answer budget; ``structured``: the first ``response_format``
    mode to try (``json_schema``, ``json_object_schema``, ``json_object`` or ``none``); ``system_role``: False sends
    the instructions at the top of the user message instead of as a ``system`` message (for
    chat templates that drop system messages, such as Gemma's in llama-cpp-python).
    """

    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    provider: Provider | None = None
    timeout: float = 300.0
    max_tokens: int = 1024
    structured: str = "json_schema"
    system_role: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def resolved_provider(self) -> Provider:
        """``openai`` or ``anthropic`` (see the class docstring)."""
        if self.provider:
            return self.provider
        host = (urlsplit(self.base_url).hostname or "") if self.base_url else ""
        if host.endswith("anthropic.com") or (not self.base_url and self.model.startswith("claude")):
            return "anthropic"
        return "openai"

    def url(self) -> str:
        """The endpoint's base URL (no trailing slash)."""
        default = ANTHROPIC_URL if self.resolved_provider() == "anthropic" else OPENAI_URL
        return (self.base_url or default).rstrip("/")

    def api_key(self) -> str | None:
        """The key from ``api_key_env`` (raises JudgeCallError when that variable is
        unset), else from the provider's usual variable when set, else None."""
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise JudgeCallError(f"--api-key-env {self.api_key_env}: that environment variable is not set; "
                                     "export it or name another one")
            return key
        usual = "ANTHROPIC_API_KEY" if self.resolved_provider() == "anthropic" else "OPENAI_API_KEY"
        return os.environ.get(usual) or None


@dataclass
class Answer:
    """A judge answer: ``data`` (the parsed JSON object), ``text`` (the raw text, when
    the answer came as text) and ``mode`` (how it was asked: ``json_schema``,
    ``json_object``, ``none`` or ``tool``)."""

    data: dict[str, Any]
    text: str = ""
    mode: str = ""


class ChatClient:
    """Asks one model for a JSON answer (see the module docstring).  ``http``: an
    :class:`httpx.Client` (its proxy and trust settings decide where the calls go)."""

    def __init__(self, settings: JudgeSettings, http: httpx.Client, api_key: str | None = None) -> None:
        self.settings = settings
        self.http = http
        self.api_key = api_key
        self.mode = settings.structured if settings.structured in _MODES else "json_schema"

    def ask(self, messages: list[dict[str, str]], schema: dict[str, Any], name: str) -> Answer:
        """One answer to ``messages`` (``system`` then ``user``) following ``schema``.
        Raises JudgeCallError."""
        if self.settings.resolved_provider() == "anthropic":
            return self._anthropic(messages, schema, name)
        if not self.settings.system_role:
            system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
            rest = [dict(m) for m in messages if m["role"] != "system"]
            if system and rest:
                rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
            messages = rest
        return self._openai(messages, schema, name)

    # -- OpenAI Chat Completions --------------------------------------------------------------
    def _openai(self, messages, schema, name) -> Answer:
        url = self.settings.url() + "/chat/completions"
        headers = {"content-type": "application/json"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        modes = list(_MODES[_MODES.index(self.mode):])
        for n, mode in enumerate(modes):
            body: dict[str, Any] = {"model": self.settings.model, "messages": messages, "temperature": 0,
                                    "max_tokens": self.settings.max_tokens, "stream": False}
            if mode == "json_schema":
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": name, "schema": schema, "strict": True}}
            elif mode == "json_object_schema":  # llama-cpp-python: the schema becomes a grammar
                body["response_format"] = {"type": "json_object", "schema": schema}
            elif mode == "json_object":
                body["response_format"] = {"type": "json_object"}
            body.update(self.settings.extra)
            resp = self._post(url, headers, body)
            if resp.status_code in (400, 404, 415, 422, 500, 501) and n + 1 < len(modes) and _format_refused(resp):
                continue
            doc = self._check(resp)
            self.mode = mode
            try:
                msg = doc["choices"][0]["message"]
            except (KeyError, IndexError, TypeError):
                raise JudgeCallError(f"{url} answered 200 without choices[0].message; is it an OpenAI-compatible "
                                     "Chat Completions endpoint?") from None
            text = msg.get("content") or ""
            if isinstance(text, list):
                text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
            if not text and msg.get("tool_calls"):
                text = msg["tool_calls"][0].get("function", {}).get("arguments", "")
            return Answer(data=extract_json(text), text=text, mode=mode)
        raise JudgeCallError(f"{url} refused every structured-output mode")  # pragma: no cover - loop returns

    # -- Anthropic Messages -----------------------------------------------------------------
    def _anthropic(self, messages, schema, name) -> Answer:
        url = self.settings.url() + "/v1/messages"
        headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        body = {"model": self.settings.model, "max_tokens": self.settings.max_tokens, "temperature": 0,
                "system": system,
                "messages": [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"],
                "tools": [{"name": name, "description": f"Report the {name.replace('_', ' ')}.", "input_schema": schema}],
                "tool_choice": {"type": "tool", "name": name}, **self.settings.extra}
        doc = self._check(self._post(url, headers, body))
        blocks = doc.get("content") if isinstance(doc, dict) else None
        for b in blocks or []:
            if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("input"), dict):
                return Answer(data=b["input"], mode="tool")
        text = "".join(b.get("text", "") for b in blocks or [] if isinstance(b, dict))
        return Answer(data=extract_json(text), text=text, mode="tool")

    # -- HTTP -------------------------------------------------------------------------------
    def _post(self, url: str, headers: dict[str, str], body: dict[str, Any]) -> httpx.Response:
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        try:
            return self.http.post(url, content=data, headers=headers, timeout=self.settings.timeout)
        except httpx.TimeoutException:
            raise JudgeCallError(f"the judge model at {url} did not answer within {self.settings.timeout:.0f} s; "
                                 "raise --timeout or use a smaller model") from None
        except httpx.HTTPError as exc:
            raise JudgeCallError(f"cannot reach the judge model at {url} ({type(exc).__name__}: {exc}); start the "
                                 "server or check --base-url") from None

    def _check(self, resp: httpx.Response) -> dict[str, Any]:
        if resp.headers.get("x-spoolproxy") == "miss":
            raise JudgeCallError("the judge cassette has no recorded answer to this prompt (the run, the prompt or "
                                 "the model changed since it was recorded); record it again without --offline / "
                                 "--replay-judge")
        if resp.status_code >= 400:
            raise JudgeCallError(f"the judge model at {resp.request.url} answered {resp.status_code}: "
                                 f"{_error_text(resp)}; check --model, --base-url and --api-key-env")
        try:
            doc = resp.json()
        except ValueError:
            raise JudgeCallError(f"the judge model at {resp.request.url} answered {resp.status_code} with a body "
                                 "that is not JSON; is --base-url the API's URL?") from None
        if not isinstance(doc, dict):
            raise JudgeCallError(f"the judge model at {resp.request.url} answered JSON that is not an object")
        return doc


def _error_text(resp: httpx.Response) -> str:
    try:
        doc = resp.json()
    except ValueError:
        return " ".join(resp.text.split())[:200] or "(empty body)"
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict):
        return str(err.get("message") or err)[:200]
    return str(err or doc)[:200]


def _format_refused(resp: httpx.Response) -> bool:
    """Does an error response say the server does not support the asked response_format?"""
    if resp.headers.get("x-spoolproxy") == "miss":
        return False
    text = resp.text.lower()
    return any(w in text for w in ("response_format", "json_schema", "schema", "structured", "grammar"))
