"""Judging one verification trial (a fork run) and pricing its live model calls.  Pure.

A trial **errored** (it says nothing about the patch, and is left out of the pass rates)
when the command timed out, the rerun left its parent's prefix (a miss before the fork
point) or ended before reaching it, or a live model call failed on the provider's side:
HTTP 429, 5xx or 529, or a transport failure (refused, reset, timeout).  Otherwise it
**failed** when its guard stopped it (the circuit breaker refused a model request: a budget
was exceeded or a tool loop appeared: the agent ran away) or it went over a budget, when it
has an error-level finding (the project's checks included), a failed assertion of the case
(final answer, tools called, LLM calls), or a non-zero exit where the parent exited 0; else
it **passed**.

A trial's cost and model calls count its live model requests (``fork: live|patched``; a
request the circuit breaker refused never went out), priced with the run's price book
(``[prices]``, local hosts at $0; None when a model has no price).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cassettes.model import Cassette, Interaction
from ..detectors import SEVERITY_RANK, analyze, build_transcript
from ..detectors.models import Transcript
from ..suite.model import Assertions, Case, Command
from .runner import ForkResult
from .session import EXTRA_KEY, LIVE_SOURCES

PROVIDER_ERRORS = (429, 529)


def went_live(it: Interaction) -> bool:
    """True when the fork sent this request upstream (``live``/``patched``, not refused by the breaker)."""
    return it.extra.get(EXTRA_KEY) in LIVE_SOURCES and not it.extra.get("circuit_breaker")


@dataclass
class Judgement:
    """A trial's ``outcome`` (passed / failed / errored) and one-line ``reason``;
    ``findings``: ``severity kind`` of the error-level findings; ``cost_usd`` of its live
    model calls (None when a model is not in the price table); ``tokens`` of those calls;
    ``blocked``: the side effects the fork blocked."""

    outcome: str
    reason: str
    findings: list[str] = field(default_factory=list)
    cost_usd: float | None = 0.0
    tokens: int = 0
    blocked: list[str] = field(default_factory=list)
    model_calls: int = 0


def live_cost(cas: Cassette, t: Transcript) -> tuple[float | None, int]:
    """(USD, tokens) of the model calls a fork made live (``fork: live|patched``), each
    priced as the transcript priced it (its config's price book); USD None when one has no price."""
    total: float | None = 0.0
    tokens = 0
    for s in t.llm_steps():
        if not went_live(cas.interactions[s.index]) or s.llm is None:
            continue
        u = s.llm.usage
        tokens += u.total
        if u.input_tokens is None and u.output_tokens is None:
            continue
        one = s.llm.cost_usd
        total = None if one is None or total is None else total + one
    return (round(total, 8) if total is not None else None), tokens


def provider_error(cas: Cassette, t: Transcript) -> str | None:
    """The first live model call that failed on the provider's side, described, or None."""
    for s in t.llm_steps():
        if not went_live(cas.interactions[s.index]):
            continue
        if s.transport_error:
            return f"interaction {s.index}: {s.transport_error}"
        if s.status is not None and (s.status in PROVIDER_ERRORS or s.status >= 500):
            return f"interaction {s.index}: the provider answered {s.status}"
    for i, it in enumerate(cas.interactions):  # a live call the detectors could not parse as an LLM call
        if went_live(it) and it.error is not None and it.response is None:
            return f"interaction {i}: {it.error.kind}: {it.error.message}"
    return None


def guard_stop(cas: Cassette) -> str | None:
    """Why the run's guard says it ran away (``meta.extra`` ``circuit_breaker`` or ``budget``),
    or None: ``stopped by the circuit breaker at interaction 6: budget exceeded: ...`` or
    ``over budget (not stopped: no circuit breaker): ...``."""
    cb = cas.meta.extra.get("circuit_breaker")
    if isinstance(cb, dict):
        where = f" at interaction {cb['interaction']}" if isinstance(cb.get("interaction"), int) else ""
        return f"stopped by the circuit breaker{where}: {cb.get('reason') or 'no reason recorded'}"
    budget = cas.meta.extra.get("budget")
    over = budget.get("exceeded") if isinstance(budget, dict) else None
    if isinstance(over, list) and over:
        return f"over budget (not stopped: no circuit breaker): {'; '.join(str(x) for x in over)}"
    return None


def judge_trial(result: ForkResult, assertions: Assertions | None = None, *, parent_exit: int | None = 0,
                config=None) -> Judgement:
    """Judge one fork run as a trial (see the module docstring).  ``assertions``: the case's
    (None: only "no error-level finding"); ``parent_exit``: the parent run's exit status."""
    cas = result.cassette
    t = build_transcript(cas, config)
    cost, tokens = live_cost(cas, t)
    blocked = [f"{r.method} {r.uri}" for r in result.report.blocked]
    base = dict(cost_usd=cost, tokens=tokens, blocked=blocked,
                model_calls=sum(1 for s in t.llm_steps() if went_live(cas.interactions[s.index])))
    if result.timed_out:
        return Judgement("errored", "the command timed out", **base)
    rep = result.report
    if rep.diverged_at is not None:
        return Judgement("errored", f"the rerun left its parent's prefix at request {rep.diverged_at}", **base)
    if not rep.reached:
        return Judgement("errored", f"the rerun ended after {len(rep.requests)} requests, before the fork point "
                                    f"({rep.at})", **base)
    err = provider_error(cas, t)
    if err is not None:  # also when the breaker then tripped on the retries it caused
        return Judgement("errored", f"provider error ({err})", **base)
    stopped = guard_stop(cas)
    if stopped is not None:
        return Judgement("failed", stopped, **base)
    report = analyze(cas, config, t)
    errors = [f for f in report.findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK["error"]]
    keys = [f"{f.severity} {f.kind}" for f in errors]
    if errors:
        return Judgement("failed", f"{errors[0].kind}: {errors[0].message}", keys, **base)
    if assertions is not None:
        from ..suite.outcome import check_assertions

        case = Case(name="trial", command=Command(argv=["-"]), cassette="-", assertions=assertions)
        failed = check_assertions(case, t)
        if failed:
            return Judgement("failed", f"assertion failed: {failed[0]}", **base)
    if result.exit_code not in (0, None) and parent_exit in (0, None):
        return Judgement("failed", f"the command exited {result.exit_code} (the parent exited {parent_exit or 0})",
                         **base)
    answer = t.final_answer.text if t.final_answer else ""
    short = " ".join(answer.split())
    return Judgement("passed", f"no error-level finding; answer: {short[:60] + ('…' if len(short) > 60 else '')}"
                     if answer else "no error-level finding", **base)
