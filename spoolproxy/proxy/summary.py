"""The run summary ``spoolproxy record`` prints: interactions, LLM calls per provider and
model, tokens in/out, HTTP errors, transport failures and streams.

Deliberately small and self-contained (the detectors package has the full provider
adapters).  A call is recognised by host and path:

* ``openai``: api.openai.com; ``openai-compatible``: any other host serving
  ``/chat/completions``, ``/completions``, ``/responses`` or ``/embeddings``
  (OpenAI Chat Completions / Responses API);
* ``anthropic``: ``/v1/messages`` (Anthropic Messages API);

(only ``POST`` requests count as model calls);
* ``gemini``: ``:generateContent`` / ``:streamGenerateContent`` (Gemini API);
* ``ollama``: ``/api/chat``, ``/api/generate`` (Ollama API).

The model comes from the request JSON (``model``), the response JSON, or the Gemini path;
usage from the response JSON or, for streams, the SSE events / NDJSON lines (the last
usage seen wins, Anthropic's ``message_start`` input + ``message_delta`` output combined).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..cassettes.model import Interaction

_OPENAI_PATHS = ("/chat/completions", "/completions", "/responses", "/embeddings")
_GEMINI_MODEL = re.compile(r"/models/([^/:]+):(?:stream)?[gG]enerateContent")


_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def host_port(it: Interaction) -> str:
    """``host`` of the request, with ``:port`` when the URL names a port other than its
    scheme's default (``127.0.0.1:8080``; ``api.openai.com`` for https on 443); IPv6 hosts
    in brackets."""
    url = it.request.url
    host = url.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = url.port
    except ValueError:  # a malformed port: show the netloc as recorded
        return url.netloc
    if port is None or port == _DEFAULT_PORTS.get(url.scheme.lower()):
        return host
    return f"{host}:{port}"


def provider_of(it: Interaction) -> str | None:
    """The LLM provider a model call goes to, or None for anything else (a plain HTTP
    call, or a provider endpoint that is not a model call, such as ``GET /v1/models``)."""
    if it.request.method != "POST":
        return None
    host = it.request.host.lower()
    path = it.request.url.path
    if ":generateContent" in path or ":streamGenerateContent" in path:
        return "gemini"
    if path.endswith(("/v1/messages", "/v1/complete")):
        return "anthropic"
    if path in ("/api/chat", "/api/generate"):
        return "ollama"
    if path.endswith(_OPENAI_PATHS):
        return "openai" if host == "api.openai.com" else "openai-compatible"
    return None


def _events(body: bytes, content_type: str) -> Iterator[Any]:
    """JSON objects of a streamed body: SSE ``data:`` lines, NDJSON lines or a JSON array."""
    text = body.decode("utf-8", "replace")
    if "event-stream" in content_type or text.lstrip().startswith(("data:", "event:")):
        for line in text.splitlines():
            if line.startswith("data:"):
                data = line[5:].strip()
                if data and data != "[DONE]":
                    try:
                        yield json.loads(data)
                    except ValueError:
                        pass
        return
    try:
        whole = json.loads(text)
    except ValueError:
        for line in text.splitlines():
            try:
                yield json.loads(line)
            except ValueError:
                pass
        return
    if isinstance(whole, list):
        yield from whole
    else:
        yield whole


def _usage(obj: Any) -> tuple[int | None, int | None]:
    """(input, output) tokens from one response object or stream event."""
    if not isinstance(obj, dict):
        return None, None
    if "usageMetadata" in obj:  # Gemini
        u = obj["usageMetadata"] or {}
        return u.get("promptTokenCount"), u.get("candidatesTokenCount")
    if "prompt_eval_count" in obj or "eval_count" in obj:  # Ollama
        return obj.get("prompt_eval_count"), obj.get("eval_count")
    for holder in (obj, obj.get("message") if isinstance(obj.get("message"), dict) else None, obj.get("response") if isinstance(obj.get("response"), dict) else None):
        if isinstance(holder, dict) and isinstance(holder.get("usage"), dict):
            u = holder["usage"]
            i = u.get("prompt_tokens", u.get("input_tokens"))
            o = u.get("completion_tokens", u.get("output_tokens"))
            return i, o
    return None, None


def call_facts(it: Interaction) -> tuple[str | None, int | None, int | None, bool]:
    """(model, input tokens, output tokens, streamed) for an LLM call; the token counts are
    None when the response reported no usage (a stream without a usage event)."""
    req = it.request.json()
    model = req.get("model") if isinstance(req, dict) else None
    if model is None:
        m = _GEMINI_MODEL.search(it.request.url.path)
        model = m.group(1) if m else None
    tin: int | None = None
    tout: int | None = None
    streamed = False
    resp = it.response
    if resp is not None and resp.body:
        ctype = resp.content_type
        streamed = "event-stream" in ctype or "ndjson" in ctype or (bool(req) and isinstance(req, dict) and bool(req.get("stream")))
        for ev in _events(resp.body, ctype):
            if isinstance(ev, dict) and not model:
                msg = ev.get("message") if isinstance(ev.get("message"), dict) else {}
                inner = ev.get("response") if isinstance(ev.get("response"), dict) else {}
                model = ev.get("model") or msg.get("model") or inner.get("model") or ev.get("modelVersion")
            i, o = _usage(ev)
            if i:
                tin = int(i)
            elif i is not None and tin is None:
                tin = 0
            if o is not None:
                tout = int(o)
    return model, tin, tout, streamed


@dataclass
class RunSummary:
    """Counts over a recording; feed it with :meth:`add` (thread-safe enough for one writer)."""

    interactions: int = 0
    calls: Counter = field(default_factory=Counter)  # (provider, model) -> calls
    tokens_in: Counter = field(default_factory=Counter)  # provider -> tokens
    tokens_out: Counter = field(default_factory=Counter)
    no_usage: Counter = field(default_factory=Counter)  # provider -> answered calls that reported no usage
    refused: Counter = field(default_factory=Counter)  # provider -> model requests the circuit breaker answered
    http_errors: Counter = field(default_factory=Counter)  # status -> count
    failures: list[str] = field(default_factory=list)
    streams: int = 0
    hosts: Counter = field(default_factory=Counter)
    websockets: int = 0  # WebSocket sessions
    websocket_messages: int = 0

    def add(self, it: Interaction) -> None:
        """Count one interaction (unredacted bodies are fine: nothing is kept)."""
        self.interactions += 1
        self.hosts[it.request.host] += 1
        resp = it.response
        if resp is not None:
            if resp.status >= 400:
                self.http_errors[resp.status] += 1
            ctype = resp.content_type
            if "event-stream" in ctype or "ndjson" in ctype or (resp.chunks and len(resp.chunks) > 1 and "json" not in ctype):
                self.streams += 1
        ws = it.extra.get("websocket")
        if isinstance(ws, dict):
            self.websockets += 1
            self.websocket_messages += len(ws.get("messages") or [])
        if it.error is not None:
            self.failures.append(f"{it.error.kind} {it.request.method} {host_port(it)}{it.request.url.path}")
        prov = provider_of(it)
        if prov is None:
            return
        breaker = it.extra.get("circuit_breaker")
        if isinstance(breaker, dict) and breaker.get("refused"):  # answered by the breaker, never sent
            self.refused[prov] += 1
            return
        try:
            model, tin, tout, _ = call_facts(it)
        except Exception:  # a summary must never break a recording
            model, tin, tout = None, None, None
        self.calls[(prov, model or "?")] += 1
        self.tokens_in[prov] += tin or 0
        self.tokens_out[prov] += tout or 0
        if tin is None and tout is None and resp is not None and resp.status < 400:
            self.no_usage[prov] += 1

    def lines(self) -> list[str]:
        """The summary as short human lines (no trailing newline)."""
        out = [f"interactions: {self.interactions}  streams: {self.streams}"]
        if self.calls or self.refused:
            by_prov: dict[str, list[str]] = {p: [] for p in sorted(self.refused)}
            for (prov, model), n in sorted(self.calls.items()):
                by_prov.setdefault(prov, []).append(f"{model} x{n}")
            for prov, models in by_prov.items():
                unknown = self.no_usage[prov]
                note = f" ({unknown} call{'s' if unknown != 1 else ''} reported no usage: tokens unknown)" if unknown else ""
                if self.refused[prov]:
                    note += f"; {self.refused[prov]} more refused by the circuit breaker (never sent)"
                out.append(
                    f"LLM calls ({prov}): {', '.join(models) or 'none sent'}; tokens in {self.tokens_in[prov]}, out {self.tokens_out[prov]}{note}"
                )
        else:
            out.append("LLM calls: none recognised")
        if self.websockets:
            out.append(f"WebSocket sessions: {self.websockets} ({self.websocket_messages} messages)")
        if self.http_errors:
            errs = ", ".join(f"{code} x{n}" for code, n in sorted(self.http_errors.items()))
            out.append(f"HTTP errors: {errs}")
        if self.failures:
            shown = "; ".join(self.failures[:3]) + (" ..." if len(self.failures) > 3 else "")
            out.append(f"transport failures: {len(self.failures)} ({shown})")
            if any(f.startswith("tls ") for f in self.failures):
                out.append("hint: an upstream certificate was not trusted; pass --upstream-ca PEM or --insecure-upstream")
        return out


NOTHING_RECORDED = """\
WARNING: nothing went through the proxy, the cassette has no interactions.
  Likely causes:
  - the client ignores HTTPS_PROXY/HTTP_PROXY: aiohttp needs ClientSession(trust_env=True);
    httpx/openai/anthropic SDKs need trust_env left on (the default); a client given its own
    proxy or transport setting bypasses the environment;
  - NO_PROXY/no_proxy set inside the program (spoolproxy clears them for the child);
  - the client pins its own CA store or certificate and refused the spoolproxy CA (point it
    at the bundle printed by 'spoolproxy ca');
  - the program reached no network at all, or talks to a local server exempted with
    --no-proxy-localhost;
  - a client that cannot use a proxy: use --reverse https://api.example.com and point its
    base URL at the printed local port."""


#: :data:`NOTHING_RECORDED` in one line, for ``--quiet``
NOTHING_RECORDED_SHORT = (
    "spoolproxy: warning: nothing went through the proxy, the cassette has no interactions "
    "(rerun without -q for the likely causes)"
)
