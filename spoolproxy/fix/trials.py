"""Judging one verification trial (a fork run) and pricing its live model calls.  Pure.

A trial **errored** (it says nothing about the patch, and is left out of the pass rates)
when the command timed out, the rerun left its parent's prefix (a miss before the fork
point) or ended before reaching it, or a live model call failed on the provider's side:
HTTP 429, 5xx or 529, or a transport failure (refused, reset, timeout).  Otherwise it
**failed** when it has an error-level finding, a failed assertion of the case (final
answer, tools called, LLM calls), or a non-zero exit where the parent exited 0; else it
**passed**.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cassettes.model import Cassette
from ..detectors import SEVERITY_RANK, analyze, build_transcript
from ..detectors.models import Transcript
from ..detectors.pricing import cost_usd
from ..suite.model import Assertions, Case, Command
from .runner import ForkResult
from .session import EXTRA_KEY

PROVIDER_ERRORS = (429, 529)
LIVE_SOURCES = ("live", "patched")


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
    """(USD, tokens) of the model calls a fork made live (``fork: live|patched``)."""
    total: float | None = 0.0
    tokens = 0
    for s in t.llm_steps():
        if cas.interactions[s.index].extra.get(EXTRA_KEY) not in LIVE_SOURCES or s.llm is None:
            continue
        u = s.llm.usage
        tokens += u.total
        if u.input_tokens is None and u.output_tokens is None:
            continue
        one = cost_usd(s.llm.model, u.input_tokens, u.output_tokens)
        total = None if one is None or total is None else total + one
    return total, tokens


def provider_error(cas: Cassette, t: Transcript) -> str | None:
    """The first live model call that failed on the provider's side, described, or None."""
    for s in t.llm_steps():
        if cas.interactions[s.index].extra.get(EXTRA_KEY) not in LIVE_SOURCES:
            continue
        if s.transport_error:
            return f"interaction {s.index}: {s.transport_error}"
        if s.status is not None and (s.status in PROVIDER_ERRORS or s.status >= 500):
            return f"interaction {s.index}: the provider answered {s.status}"
    for i, it in enumerate(cas.interactions):  # a live call the detectors could not parse as an LLM call
        if it.extra.get(EXTRA_KEY) in LIVE_SOURCES and it.error is not None and it.response is None:
            return f"interaction {i}: {it.error.kind}: {it.error.message}"
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
                model_calls=sum(1 for s in t.llm_steps() if cas.interactions[s.index].extra.get(EXTRA_KEY)
                                in LIVE_SOURCES))
    if result.timed_out:
        return Judgement("errored", "the command timed out", **base)
    rep = result.report
    if rep.diverged_at is not None:
        return Judgement("errored", f"the rerun left its parent's prefix at request {rep.diverged_at}", **base)
    if not rep.reached:
        return Judgement("errored", f"the rerun ended after {len(rep.requests)} requests, before the fork point "
                                    f"({rep.at})", **base)
    err = provider_error(cas, t)
    if err is not None:
        return Judgement("errored", f"provider error ({err})", **base)
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
