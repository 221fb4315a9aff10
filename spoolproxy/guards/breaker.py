"""The guard of a live run: budgets, warnings at 80%, and the circuit breaker.  Pure decisions
(no mitmproxy): :mod:`.addon` carries them out.

A :class:`Guard` is told about each model request before it goes upstream
(:meth:`Guard.on_model_request`) and about each completed exchange
(:meth:`Guard.on_interaction`).  It keeps a :class:`~.budget.BudgetMeter` and prints budget
warnings through ``say``.  With ``breaker`` on it *trips* when

* a budget is exceeded (a model call beyond ``max_llm_calls`` or past ``max_seconds`` is
  refused itself; tokens, tool calls and cost are known once a response is complete, so
  the next model request is refused), or
* a finding of a kind in ``breaker_kinds`` (default: ``tool_loop``, ``retry_storm``) at error
  level, or any critical finding of them, appears in the last ``window`` interactions.
  Only those detectors run, over that window, after each model call, so the cost per call
  is bounded however long the run.

Once tripped, every later model request is refused (:class:`Stop` says why); tool calls
and other traffic still pass, so the agent can clean up.  The refusal itself is built by
:func:`.refusal.refusal_response`.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from ..cassettes.model import Cassette, Interaction
from .budget import BudgetEvent, BudgetMeter, Limits

#: finding kinds that trip the breaker by default (a looping agent, a retry storm)
BREAKER_KINDS = ("tool_loop", "retry_storm")


@dataclass
class Stop:
    """Why the breaker tripped: ``reason`` (one line), ``cause`` (``budget`` or ``finding``),
    ``what`` (the budget dimension or finding kind), ``after`` (the interaction that tripped
    it, when known), ``interaction`` (the first model request refused), ``refused`` (model
    requests refused so far)."""

    reason: str
    cause: str
    what: str
    after: int | None = None
    interaction: int | None = None
    refused: int = 0

    def to_json(self) -> dict:
        return {"reason": self.reason, "cause": self.cause, "what": self.what, "tripped_after": self.after,
                "interaction": self.interaction, "refused": self.refused}


@dataclass
class Guard:
    """Budgets and circuit breaker of one live run (see the module docstring).

    ``limits``: the budgets; ``breaker``: refuse model requests once tripped; ``say``: where
    warnings go (one line each, e.g. stderr); ``prices``: a
    :class:`~spoolproxy.detectors.pricing.PriceBook`; ``detect_config``: thresholds for the
    mid-run detectors (a DetectConfig; default the shipped ones); ``window``: interactions
    the mid-run detectors look back over.  Thread-safe: the proxy's event loop and the
    journal thread may both call it.
    """

    limits: Limits
    breaker: bool = False
    breaker_kinds: tuple[str, ...] = BREAKER_KINDS
    say: Callable[[str], None] = lambda line: None
    prices: object | None = None
    detect_config: object | None = None
    window: int = 200
    clock: Callable[[], float] | None = None
    meter: BudgetMeter = field(init=False)
    stop: Stop | None = None
    _recent: deque = field(init=False)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self.meter = BudgetMeter(self.limits, **({"clock": self.clock} if self.clock else {}))
        self._recent = deque(maxlen=self.window)

    @property
    def active(self) -> bool:
        """True when there is anything to watch (a budget, or the breaker)."""
        return self.limits.active() or self.breaker

    # -- decisions --------------------------------------------------------------------
    def on_model_request(self, interaction: int | None = None) -> Stop | None:
        """A model request is about to go upstream: None to let it (and count it), or the
        :class:`Stop` to refuse it with."""
        with self._lock:
            if self.stop is None and self.breaker:
                ev = self.meter.would_exceed(interaction)
                if ev is not None:
                    self._warn([ev])
                    self._trip(f"budget exceeded: {ev.message}", "budget", ev.dimension, None)
            if self.stop is not None:
                if self.stop.interaction is None:
                    self.stop.interaction = interaction
                self.stop.refused += 1
                return self.stop
            self._warn(self.meter.admit(interaction))
            return None

    def on_interaction(self, interaction: int, it: Interaction) -> None:
        """A completed exchange (unredacted is fine: nothing is kept beyond the window)."""
        from ..detectors.adapters.registry import classify

        if it.extra.get("circuit_breaker"):
            return  # our own refusal
        kind, parsed = classify(it)
        with self._lock:
            if kind != "llm":
                self._warn(self.meter.tick(interaction=interaction))
                self._recent.append((interaction, it))
                return
            u = parsed.usage  # type: ignore[union-attr]
            cost = None
            if u.input_tokens is not None or u.output_tokens is not None:
                cost = self._cost(parsed, it)
            events = self.meter.record(tool_calls=len(parsed.tool_calls), tokens=u.total, cost_usd=cost,  # type: ignore[union-attr]
                                       model=parsed.model, interaction=interaction)  # type: ignore[union-attr]
            self._warn(events)
            self._recent.append((interaction, it))
            if not self.breaker or self.stop is not None:
                return
            over = [e for e in events if e.level == "exceeded"]
            if over:
                self._trip(f"budget exceeded: {over[0].message}", "budget", over[0].dimension, interaction)
                return
            self._watch()

    def replayed_stop(self, reason: str) -> None:
        """Playback served a recorded circuit-breaker refusal: later live model requests are refused too."""
        with self._lock:
            if self.stop is None:
                self.stop = Stop(reason=reason, cause="replayed", what="circuit_breaker")

    # -- helpers ----------------------------------------------------------------------
    def _cost(self, call, it: Interaction) -> float | None:
        from ..detectors.pricing import PriceBook, call_cost

        book = self.prices if self.prices is not None else PriceBook()
        price = book.price(call.model, host=it.request.url.netloc, provider=call.provider)  # type: ignore[attr-defined]
        u = call.usage
        return call_cost(price, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens)

    def _watch(self) -> None:
        """Run the breaker's detectors over the recent interactions; trip on a finding."""
        from ..detectors import analyze
        from ..detectors.checks import KINDS
        from ..detectors.config import DetectConfig
        from ..detectors.models import SEVERITY_RANK

        recent = sorted(self._recent, key=lambda x: x[0])
        base = self.detect_config if isinstance(self.detect_config, DetectConfig) else DetectConfig()
        cfg = base.model_copy(update={"disable": [k for k in KINDS if k not in self.breaker_kinds], "checks": [],
                                      "max_llm_calls": None, "max_tool_calls": None, "max_tokens": None,
                                      "max_cost_usd": None, "max_seconds": None})
        try:
            report = analyze(Cassette(interactions=[it for _, it in recent]), cfg)
        except Exception as exc:  # noqa: BLE001 - a detector bug must never break the recording
            self.say(f"spoolproxy: warning: circuit breaker: the mid-run detectors failed ({type(exc).__name__}: {exc})")
            return
        for f in report.findings:
            if f.kind in self.breaker_kinds and SEVERITY_RANK[f.severity] >= SEVERITY_RANK["error"]:
                at = recent[f.interactions[-1]][0] if f.interactions else None
                self._trip(f"{f.kind}: {f.message}", "finding", f.kind, at)
                return

    def _trip(self, reason: str, cause: str, what: str, after: int | None) -> None:
        self.stop = Stop(reason=reason, cause=cause, what=what, after=after)
        where = f" after interaction {after}" if after is not None else ""
        self.say(f"spoolproxy: circuit breaker: stopping the run{where}: {reason}; "
                 "further model requests get an error")

    def _warn(self, events: list[BudgetEvent]) -> None:
        for e in events:
            if e.level == "warn":
                self.say(f"spoolproxy: warning: budget at {100 * self.limits.warn_at:.0f}%: {e.message}")
            elif not self.breaker:
                self.say(f"spoolproxy: warning: budget exceeded: {e.message} (add --circuit-breaker to stop the run)")

    # -- reporting --------------------------------------------------------------------
    def summary_lines(self) -> list[str]:
        """What the guard saw, for the run's summary (empty when nothing was watched)."""
        if not self.active:
            return []
        m = self.meter
        lines = [f"budget: {_usage(m)}" + (f" (limits: {self.limits.describe()})" if self.limits.active() else "")]
        if self.stop is not None:
            s = self.stop
            where = f"at interaction {s.interaction}" if s.interaction is not None else "before any further model request"
            after = f", tripped after interaction {s.after}" if s.after is not None else ""
            lines.append(f"circuit breaker: stopped the run {where}{after}: {s.reason} "
                         f"({s.refused} model request{'s' if s.refused != 1 else ''} refused)")
        elif not self.breaker and m.exceeded:
            lines.append("budget exceeded (no --circuit-breaker, so the run went on): "
                         + "; ".join(e.message for e in m.exceeded))
        return lines

    def meta(self) -> dict:
        """Run-level facts for ``meta.extra``: ``budget`` (limits, usage) and, when tripped,
        ``circuit_breaker`` (:meth:`Stop.to_json`)."""
        out: dict = {}
        if self.active:
            out["budget"] = self.meter.snapshot()
        if self.stop is not None:
            out["circuit_breaker"] = self.stop.to_json()
        return out


def _usage(m: BudgetMeter) -> str:
    u = m.used
    cost = f"${u['cost_usd']:.6f}".rstrip("0").rstrip(".") if u["cost_usd"] else "$0"
    unknown = f" (+ unpriced: {', '.join(m.unpriced)})" if m.unpriced else ""
    return (f"{int(u['llm_calls'])} LLM calls, {int(u['tool_calls'])} tool calls, {int(u['tokens'])} tokens, "
            f"{cost}{unknown}, {u['seconds']:.1f} s")
