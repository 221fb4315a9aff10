"""Budgets for an agent run: pure counting, no proxy, no clock of its own unless asked.

A :class:`BudgetMeter` counts what a run spends along five dimensions (:data:`DIMENSIONS`):
model calls, tool calls the model asked for, tokens (as providers report them), cost in USD
(priced calls only: an unknown model adds nothing and is listed in ``unpriced``) and wall
seconds since the run started.  It is fed as the run goes, in the order things happen:

* :meth:`BudgetMeter.would_exceed` before a model request is sent: the event that sending it
  would cause (a call beyond ``max_llm_calls``, or ``max_seconds`` already past), so a
  circuit breaker can refuse it;
* :meth:`BudgetMeter.admit` when a model request is sent (counts the call);
* :meth:`BudgetMeter.record` when its response is complete (tool calls, tokens, cost).

Each returns the :class:`BudgetEvent` s it caused: ``warn`` once per dimension when usage
reaches ``warn_at`` (default 80%) of its limit, ``exceeded`` once when it goes beyond the
limit (a limit is the most allowed: ``max_llm_calls = 3`` allows 3 calls, the 4th exceeds).

The same meter judges a stored run after the fact (:func:`meter_transcript`, used by the
``budget_exceeded`` detector), so live stops and later findings agree.  Used by
``spoolproxy record`` / ``playback --live`` through :mod:`.breaker` and :mod:`.addon`, and
meant for fork/verify trials too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field

#: (dimension, Limits field, label used in messages)
DIMENSIONS: tuple[tuple[str, str, str], ...] = (
    ("llm_calls", "max_llm_calls", "LLM calls"),
    ("tool_calls", "max_tool_calls", "tool calls"),
    ("tokens", "max_tokens", "tokens"),
    ("cost_usd", "max_cost_usd", "cost (USD)"),
    ("seconds", "max_seconds", "seconds"),
)
LABEL = {d: label for d, _, label in DIMENSIONS}


class Limits(BaseModel):
    """Budget limits of one run (None: no limit) and the warning threshold ``warn_at``
    (a fraction of each limit, default 0.8).  ``max_cost_usd`` in USD, ``max_seconds`` in
    wall seconds since the run started."""

    model_config = ConfigDict(extra="forbid")
    max_llm_calls: int | None = Field(None, ge=0)
    max_tool_calls: int | None = Field(None, ge=0)
    max_tokens: int | None = Field(None, ge=0)
    max_cost_usd: float | None = Field(None, ge=0)
    max_seconds: float | None = Field(None, gt=0)
    warn_at: float = Field(0.8, gt=0, le=1)

    def active(self) -> bool:
        """True when any limit is set."""
        return any(getattr(self, f) is not None for _, f, _ in DIMENSIONS)

    def limit(self, dimension: str) -> float | None:
        """The limit of ``dimension`` (``llm_calls``, ``tool_calls``, ``tokens``, ``cost_usd``, ``seconds``)."""
        return getattr(self, dict((d, f) for d, f, _ in DIMENSIONS)[dimension])

    def describe(self) -> str:
        """``LLM calls 20, cost (USD) 0.5`` for the limits that are set."""
        return ", ".join(f"{LABEL[d]} {_num(self.limit(d))}" for d, _, _ in DIMENSIONS if self.limit(d) is not None)


@dataclass(frozen=True)
class BudgetEvent:
    """``level`` ``warn`` (usage reached ``warn_at`` of the limit) or ``exceeded`` (usage went
    beyond it) on ``dimension``; ``used`` and ``limit`` in the dimension's unit;
    ``interaction``: the interaction that caused it, when known."""

    dimension: str
    level: Literal["warn", "exceeded"]
    used: float
    limit: float
    interaction: int | None = None

    @property
    def message(self) -> str:
        """One line, e.g. ``LLM calls: 4 of 5 used (80%)`` or ``tokens: 1210 exceed the budget of 1000``."""
        label = LABEL[self.dimension]
        if self.level == "warn":
            pct = 100.0 * self.used / self.limit if self.limit else 100.0
            return f"{label}: {_num(self.used)} of {_num(self.limit)} used ({pct:.0f}%)"
        return f"{label}: {_num(self.used)} exceed{'s' if self.dimension in ('cost_usd',) else ''} the budget of {_num(self.limit)}"


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    if float(v).is_integer():
        return str(int(v))
    return f"{v:.6f}".rstrip("0") if abs(v) < 1 else f"{v:.2f}"


@dataclass
class BudgetMeter:
    """Running totals of one run against :class:`Limits` (see the module docstring).

    ``clock``: seconds (default ``time.monotonic``); ``started``: the run's start on that
    clock (default: the first time the meter is fed, i.e. the run's first model request or
    exchange, so start-up time of the agent's process does not count).  Not thread-safe:
    feed it from one thread.
    """

    limits: Limits
    clock: Callable[[], float] = time.monotonic
    started: float | None = None
    used: dict[str, float] = field(default_factory=lambda: {d: 0.0 for d, _, _ in DIMENSIONS})
    unpriced: list[str] = field(default_factory=list)
    events: list[BudgetEvent] = field(default_factory=list)
    _fired: set[tuple[str, str]] = field(default_factory=set)

    @property
    def exceeded(self) -> list[BudgetEvent]:
        """The ``exceeded`` events so far, in order."""
        return [e for e in self.events if e.level == "exceeded"]

    def elapsed(self, now: float | None = None) -> float:
        """Seconds since the run started (0 before it did)."""
        if self.started is None:
            return 0.0
        return (self.clock() if now is None else now) - self.started

    def _start(self, now: float | None) -> None:
        if self.started is None:
            self.started = self.clock() if now is None else now

    def would_exceed(self, interaction: int | None = None, now: float | None = None) -> BudgetEvent | None:
        """The ``exceeded`` event sending one more model request now would cause (one call
        beyond ``max_llm_calls``, or ``max_seconds`` already past), without counting it."""
        lim = self.limits
        if lim.max_llm_calls is not None and self.used["llm_calls"] + 1 > lim.max_llm_calls:
            return BudgetEvent("llm_calls", "exceeded", self.used["llm_calls"] + 1, lim.max_llm_calls, interaction)
        if lim.max_seconds is not None and self.elapsed(now) > lim.max_seconds:
            return BudgetEvent("seconds", "exceeded", round(self.elapsed(now), 3), lim.max_seconds, interaction)
        return None

    def admit(self, interaction: int | None = None, now: float | None = None) -> list[BudgetEvent]:
        """Count a model request being sent; the events it causes (LLM calls, seconds)."""
        self._start(now)
        self.used["llm_calls"] += 1
        self.used["seconds"] = round(self.elapsed(now), 3)
        return self._check(("llm_calls", "seconds"), interaction)

    def record(self, *, tool_calls: int = 0, tokens: int = 0, cost_usd: float | None = None, model: str | None = None,
               interaction: int | None = None, now: float | None = None) -> list[BudgetEvent]:
        """Add a completed model call's tool calls, tokens and cost (``cost_usd`` None: an
        unpriced call, ``model`` noted in ``unpriced``); the events it causes."""
        self._start(now)
        self.used["tool_calls"] += tool_calls
        self.used["tokens"] += tokens
        if cost_usd is not None:
            self.used["cost_usd"] += cost_usd
        elif tokens and model not in self.unpriced:
            self.unpriced.append(model or "(no model name)")
        self.used["seconds"] = round(self.elapsed(now), 3)
        return self._check(("tool_calls", "tokens", "cost_usd", "seconds"), interaction)

    def tick(self, now: float | None = None, interaction: int | None = None) -> list[BudgetEvent]:
        """Update the seconds used; the events that causes."""
        self._start(now)
        self.used["seconds"] = round(self.elapsed(now), 3)
        return self._check(("seconds",), interaction)

    def _check(self, dims: Iterable[str], interaction: int | None) -> list[BudgetEvent]:
        out = []
        for d in dims:
            limit = self.limits.limit(d)
            if limit is None:
                continue
            used = self.used[d]
            if used > limit and (d, "exceeded") not in self._fired:
                out.append(BudgetEvent(d, "exceeded", used, limit, interaction))
                self._fired |= {(d, "exceeded"), (d, "warn")}
            elif used >= self.limits.warn_at * limit and used > 0 and (d, "warn") not in self._fired:
                out.append(BudgetEvent(d, "warn", used, limit, interaction))
                self._fired.add((d, "warn"))
        self.events += out
        return out

    def snapshot(self) -> dict:
        """Usage and limits as a JSON-ready dict (stored in a cassette's ``meta.extra['budget']``)."""
        return {"limits": self.limits.model_dump(exclude_none=True),
                "used": {d: (round(v, 6) if d == "cost_usd" else v) for d, v in self.used.items()},
                "unpriced_models": list(self.unpriced),
                "exceeded": [e.message for e in self.exceeded]}


@dataclass(frozen=True)
class Overrun:
    """A dimension a stored run went beyond: its ``limit``, the ``total`` used, and the
    ``interactions`` from the one that crossed the limit on (each that added to it)."""

    dimension: str
    limit: float
    total: float
    interactions: list[int]


def meter_transcript(transcript, limits: Limits, started_at: dict[int, float] | None = None,
                     ended_at: dict[int, float] | None = None) -> list[Overrun]:
    """Replay a stored run (a :class:`~spoolproxy.detectors.models.Transcript`) through a
    :class:`BudgetMeter`: the dimensions it went beyond, in :data:`DIMENSIONS` order.

    Every LLM step counts as a call (its tool calls, reported tokens and known cost added);
    ``started_at`` / ``ended_at`` (interaction -> POSIX seconds, when the cassette has them)
    give the seconds dimension."""
    t0 = min(started_at.values()) if started_at else 0.0
    meter = BudgetMeter(limits, clock=lambda: 0.0, started=t0)
    over: dict[str, list[int]] = {}
    for s in transcript.steps:
        now = ended_at.get(s.index) if ended_at and s.index in ended_at else None
        start = started_at.get(s.index, t0) if started_at else t0
        before = dict(meter.used)
        if s.llm is not None:
            meter.admit(s.index, now=start)
            u = s.llm.usage
            meter.record(tool_calls=len(s.llm.tool_calls), tokens=u.total, cost_usd=s.llm.cost_usd, model=s.llm.model,
                         interaction=s.index, now=now if now is not None else t0)
        elif now is not None:
            meter.tick(now, s.index)
        for d, _, _ in DIMENSIONS:
            limit = limits.limit(d)
            if limit is not None and meter.used[d] > limit and meter.used[d] != before[d]:
                over.setdefault(d, []).append(s.index)
    return [Overrun(d, limits.limit(d), meter.used[d], over[d]) for d, _, _ in DIMENSIONS if d in over]  # type: ignore[arg-type]
