"""The mitmproxy addon carrying out a :class:`~.breaker.Guard`'s decisions.

* ``request``: a model request (by URL path and body shape, as the detectors' adapters
  recognise them) is shown to the guard; when it says stop, the flow gets the refusal
  (:mod:`.refusal`) instead of going upstream, marked for the recorder in
  ``flow.metadata[EXTRA_META]`` (``{"circuit_breaker": {...}}``);
* completed exchanges reach the guard through the recording addon's ``observers``
  (:meth:`GuardAddon.observe`), which see streamed bodies whole;
* ``response``: under playback, a served recorded refusal stops later live model requests
  too, so playback of a stopped run stops at the same point.

``live_only``: under ``spoolproxy playback --live``, act only on flows the playback addon
left to go upstream (served ones cost nothing and are the cassette's business).  Options
(``guard_max_llm_calls`` ... ``guard_circuit_breaker``) let mitmproxy's own tools set the
budgets; spoolproxy's commands pass a ready guard.
"""

from __future__ import annotations

from typing import Any

from ..cassettes.model import Interaction, parse_json
from ..proxy.recorder import EXTRA_META
from .breaker import Guard
from .budget import Limits
from .refusal import MARK, refusal_response

#: flow.metadata key the playback addon sets (serve | miss | live | ...)
PLAYBACK_META = "spoolproxy.playback"
_BODY_SHAPED = ("/messages", "/completions")


def is_model_request(method: str, path: str, body: bytes | None) -> bool:
    """True for a request to an LLM API (OpenAI chat/Responses, Anthropic, Gemini, Ollama,
    Bedrock, Cohere), recognised by path and, where the path is ambiguous, body shape."""
    from ..detectors.adapters.registry import LLM_ADAPTERS

    if method not in ("POST", "GET"):
        return False
    path = path.split("?", 1)[0]
    body_doc: Any = None
    for attempt in (0, 1):
        for module in LLM_ADAPTERS:
            if module.matches(path, body_doc):
                return method == "POST" or module.__name__.endswith("openai_responses")
        if attempt or not body or not path.endswith(_BODY_SHAPED):
            return False
        body_doc = parse_json(body)
    return False


class GuardAddon:
    """mitmproxy addon for one :class:`Guard` (see the module docstring)."""

    def __init__(self, guard: Guard, *, live_only: bool = False) -> None:
        self.guard = guard
        self.live_only = live_only

    def load(self, loader) -> None:
        loader.add_option("guard_max_llm_calls", int, -1, "Budget: model calls in the run (-1: no limit).")
        loader.add_option("guard_max_tool_calls", int, -1, "Budget: tool calls the model asks for (-1: no limit).")
        loader.add_option("guard_max_tokens", int, -1, "Budget: tokens providers report (-1: no limit).")
        loader.add_option("guard_max_cost", float, -1.0, "Budget: cost in USD of priced calls (-1: no limit).")
        loader.add_option("guard_max_seconds", float, -1.0, "Budget: wall seconds of the run (-1: no limit).")
        loader.add_option("guard_circuit_breaker", bool, False,
                          "Refuse model requests once a budget is exceeded or a tool loop / retry storm appears.")

    def configure(self, updated) -> None:
        from mitmproxy import ctx

        if not any(u.startswith("guard_") for u in updated):
            return
        o = ctx.options
        given = {"max_llm_calls": o.guard_max_llm_calls, "max_tool_calls": o.guard_max_tool_calls,
                 "max_tokens": o.guard_max_tokens, "max_cost_usd": o.guard_max_cost, "max_seconds": o.guard_max_seconds}
        set_ = {k: v for k, v in given.items() if v is not None and v >= 0}
        if set_:
            self.guard.limits = self.guard.meter.limits = Limits(**{**self.guard.limits.model_dump(), **set_})
        if o.guard_circuit_breaker:
            self.guard.breaker = True

    def observe(self, interaction: int, it: Interaction) -> None:
        """Recorder observer: a completed exchange."""
        self.guard.on_interaction(interaction, it)

    def request(self, flow) -> None:
        if flow.response is not None or flow.error is not None:
            return
        if self.live_only and flow.metadata.get(PLAYBACK_META) != "live":
            return
        req = flow.request
        if not is_model_request(req.method.upper(), req.path, req.raw_content):
            return
        stop = self.guard.on_model_request(flow.metadata.get("spoolproxy.seq"))
        if stop is None:
            return
        from mitmproxy import http

        status, headers, body = refusal_response(stop, req.pretty_host, req.path)
        flow.response = http.Response.make(status, body, headers)
        flow.metadata[EXTRA_META] = {**(flow.metadata.get(EXTRA_META) or {}),
                                     "circuit_breaker": {"refused": True, "reason": stop.reason}}

    def response(self, flow) -> None:
        if flow.metadata.get(PLAYBACK_META) != "serve" or flow.response is None:
            return
        if flow.response.headers.get("x-spoolproxy") == MARK:
            doc = parse_json(flow.response.raw_content or b"")
            err = doc.get("error") if isinstance(doc, dict) else None
            msg = err.get("message") if isinstance(err, dict) else None
            self.guard.replayed_stop(msg or "the recorded run was stopped by the circuit breaker here")
