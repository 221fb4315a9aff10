"""Pick the adapter for an interaction by URL path and body shape, never by host, so
OpenAI-compatible servers (Groq, OpenRouter, Together, DeepSeek, vLLM, llama.cpp, Ollama
``/v1``) and Azure OpenAI are recognised wherever they run.

:func:`classify` returns ``("llm", ModelCall)``, ``("mcp", McpCall)`` or
``("http", HttpCall)``; it never raises (an adapter crash on a strange body degrades the
interaction to a plain HTTP call).
"""

from __future__ import annotations

from typing import Any

from ...cassettes.model import Interaction, parse_json
from ..models import HttpCall, McpCall, ModelCall
from .common import content_type, split_uri
from . import anthropic, bedrock, cohere, gemini, mcp, ollama, openai_chat, openai_responses

#: (module, provider name or None to let the module decide), in matching order
LLM_ADAPTERS = (gemini, bedrock, anthropic, openai_responses, openai_chat, ollama, cohere)


def _provider(module, host: str, path: str) -> str:
    if module is openai_chat:
        return openai_chat.provider_of(host, path)
    if module is openai_responses:
        return "azure-openai" if host.endswith("openai.azure.com") or "/openai/" in path else "openai"
    return {gemini: "gemini", bedrock: "bedrock", anthropic: "anthropic", ollama: "ollama", cohere: "cohere"}[module]


def http_call(it: Interaction) -> HttpCall:
    """The plain-HTTP view of any interaction."""
    r = it.response
    return HttpCall(method=it.request.method, url=it.request.uri, host=split_uri(it.request.uri)[0],
                    status=r.status if r is not None else None, content_type=content_type(r),
                    body_size=len(r.body) if r is not None else 0)


def classify(it: Interaction) -> tuple[str, ModelCall | McpCall | HttpCall]:
    """Classify and parse one interaction (see module docstring)."""
    netloc, path = split_uri(it.request.uri)
    body: Any = None
    if it.request.method in ("POST", "PUT") and it.request.body:
        body = parse_json(it.request.body)
        if body is None:
            body = {}  # not JSON: adapters must not parse it again
    try:
        if body is not None and mcp.matches(body):
            return "mcp", mcp.parse(it, body)
        if it.request.method in ("POST", "GET"):
            for module in LLM_ADAPTERS:
                if module.matches(path, body):
                    if it.request.method == "GET" and module is not openai_responses:
                        break
                    return "llm", module.parse(it, _provider(module, netloc, path), body)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError):
        pass
    return "http", http_call(it)
