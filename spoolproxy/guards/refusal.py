"""The response a model request gets once the circuit breaker has tripped.

Status 400 with ``x-should-retry: false`` (as playback's miss, :mod:`spoolproxy.replayer.miss`):
the openai and anthropic SDKs retry 408/409/429/5xx and honour ``x-should-retry``, so the
agent sees one ``BadRequestError`` at once instead of retrying.  The body uses the provider's
error shape so the SDK shows the reason: OpenAI ``{"error": {"message", "type", "param",
"code"}}``, Anthropic ``{"type": "error", "error": {"type", "message"}}``, Gemini
``{"error": {"code", "message", "status"}}``.  ``x-spoolproxy: circuit-breaker`` marks it, so
playback of the recording recognises it.
"""

from __future__ import annotations

import json

from ..replayer.miss import provider_of
from .breaker import Stop

STATUS = 400
MARK = "circuit-breaker"
CODE = "spoolproxy_circuit_breaker"


def refusal_message(stop: Stop) -> str:
    """The error message the agent sees."""
    return (f"spoolproxy circuit breaker: the run was stopped ({stop.reason}); this model request was not sent "
            "upstream. Raise the budget or fix the agent, then run it again.")


def refusal_response(stop: Stop, host: str, path: str) -> tuple[int, dict[str, str], bytes]:
    """``(status, headers, body)`` refusing a model request to ``host`` ``path``."""
    message = refusal_message(stop)
    kind = provider_of(host, path)
    if kind == "anthropic":
        doc: dict = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    elif kind == "gemini":
        doc = {"error": {"code": STATUS, "message": message, "status": "FAILED_PRECONDITION"}}
    else:
        doc = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": CODE}}
    headers = {"content-type": "application/json", "x-should-retry": "false", "x-spoolproxy": MARK}
    return STATUS, headers, json.dumps(doc, ensure_ascii=False).encode("utf-8")
