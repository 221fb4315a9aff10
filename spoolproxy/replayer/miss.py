"""The HTTP response a client gets for a request no cassette matches.

Status 400 with ``x-should-retry: false``: the openai and anthropic SDKs retry 408, 409, 429
and 5xx and honour ``x-should-retry``, so a miss surfaces at once as the SDK's
``BadRequestError`` instead of being retried.  The JSON body uses the provider's error shape
so the SDK shows our message:

* OpenAI (and OpenAI-compatible APIs): ``{"error": {"message", "type", "param", "code"}}``
  (OpenAI API reference, "Error codes");
* Anthropic Messages: ``{"type": "error", "error": {"type", "message"}}`` (Anthropic API
  "Errors");
* Gemini: ``{"error": {"code", "message", "status"}}`` (Google API error model).
"""

from __future__ import annotations

import json

from .index import Lookup

MISS_STATUS = 400


def provider_of(host: str, path: str) -> str:
    """``anthropic`` | ``gemini`` | ``openai`` (the default shape) for a request's host and path."""
    h = host.lower()
    if "anthropic" in h or path.startswith("/v1/messages") or path.startswith("/v1/complete"):
        return "anthropic"
    if h.endswith("googleapis.com"):
        return "gemini"
    return "openai"


def miss_message(lookup: Lookup) -> str:
    """One paragraph naming spoolproxy, the request and, when its explanation is ready, the
    nearest recorded request and the first fields that differ (bounded: at most five
    paths and three reasons)."""
    req = lookup.request
    uri = lookup.display_uri or req.uri
    msg = f"spoolproxy playback: no recorded interaction matches {req.method} {uri}"
    if lookup.outcome == "optional":
        msg += f" (an optional request under the SDK rule {', '.join(lookup.actual.rules)}: not counted as a miss)"
    if not lookup.explained.is_set():
        msg += "; the explanation (nearest recorded request, differing fields) was not ready within 50 ms"
    elif lookup.nearest is not None:
        msg += f"; nearest recorded request: {lookup.nearest.ref().label()}"
        if lookup.changes:
            msg += "; differs at " + ", ".join(c.path for c in lookup.changes[:5])
        elif lookup.reasons:
            msg += "; " + "; ".join(lookup.reasons[:3])
        if lookup.suggestions:
            msg += "; to match, add " + " ".join(lookup.suggestions)
    else:
        msg += "; no recorded request for this host"
    return msg + " (the run's summary and --report FILE list every miss with its diff)"


def miss_response(lookup: Lookup) -> tuple[int, dict[str, str], bytes]:
    """``(status, headers, body)`` for a miss, in the provider's error shape."""
    a = lookup.actual
    message = miss_message(lookup)
    kind = provider_of(a.host, a.path)
    if kind == "anthropic":
        doc: dict = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    elif kind == "gemini":
        doc = {"error": {"code": MISS_STATUS, "message": message, "status": "FAILED_PRECONDITION"}}
    else:
        doc = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": "spoolproxy_miss"}}
    headers = {
        "content-type": "application/json",
        "x-should-retry": "false",
        "x-spoolproxy": "miss",
    }
    return MISS_STATUS, headers, json.dumps(doc, ensure_ascii=False).encode("utf-8")
