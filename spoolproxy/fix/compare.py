"""Comparing two runs (cassettes): how they relate, what changed, where they part.

:func:`diff_runs(a, b) <diff_runs>` returns a :class:`RunDiff`:

* **relation**: ``fork`` (A's ``forked_from`` is B, or the other way round), ``siblings``
  (forks of the same parent), ``replay`` (A is a ``spoolproxy test`` artifact run of B),
  ``pinned`` (one is the other's pinned run), else ``unrelated``;
* each run's detector **verdict** and the **findings** new in A or gone from B;
* **totals** side by side (:class:`Totals`: interactions, model calls, tool calls, tokens,
  cost in USD, wall time in seconds, HTTP errors, blocked side effects, final answer);
* a step-by-step **alignment** (:class:`AlignedStep`): interactions are paired by kind and
  endpoint (method, host, path) in order (difflib's longest matching blocks), and each pair
  is ``same``, ``request`` (the requests differ), ``response`` (same request, different
  answer: for LLM calls the text, tool calls and finish reason, never ids or chunk
  boundaries; for tools the status and body), or unpaired: ``only_a`` / ``only_b``;
* the **first divergence** with its field-level diff (``-`` B, ``+`` A).

B is the base (usually the parent), A the new run.  Pure: no I/O beyond what the caller
loaded.
"""

from __future__ import annotations

import difflib
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..cassettes.model import Cassette, Interaction
from ..detectors import SEVERITY_RANK, analyze, build_transcript
from ..detectors.models import Step, Transcript
from ..replayer.diff import diff_bodies, diff_json
from ..replayer.fingerprint import Fingerprinter

StepStatus = Literal["same", "request", "response", "only_a", "only_b"]


class Totals(BaseModel):
    """One run's totals.  ``cost_usd``: USD from the config's price book (``[prices]``, local
    hosts at $0, the dated table; the same one ``detect`` and ``report`` use), None when a
    model that reported tokens has no price (``unpriced_models`` names them) or no call
    reported tokens; ``price_sources``: where the prices came from; ``wall_s`` None: the
    cassette has no timing."""

    interactions: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    tool_requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None
    unpriced_models: list[str] = Field(default_factory=list)
    price_sources: list[str] = Field(default_factory=list)
    wall_s: float | None = None
    http_errors: int = 0
    blocked: int = 0
    final_answer: str | None = None


class RunSide(BaseModel):
    """One run: its path, verdict (pass/fail), findings (``severity kind`` at interactions) and totals."""

    path: str
    verdict: str
    findings: list[str] = Field(default_factory=list)
    totals: Totals = Field(default_factory=Totals)


class AlignedStep(BaseModel):
    """One row of the alignment: A's and B's interaction (None when unpaired) and what they do."""

    status: StepStatus
    a: int | None = None
    b: int | None = None
    what: str = ""
    source: str | None = None  #: where a fork served A's interaction from (cassette, patched, blocked ...)


class Divergence(BaseModel):
    """The first row that is not ``same``, with its field-level diff lines (``-`` B, ``+`` A)."""

    step: AlignedStep
    summary: str
    fields: list[str] = Field(default_factory=list)


class RunDiff(BaseModel):
    """The comparison of run A with base run B (see the module docstring)."""

    a: RunSide
    b: RunSide
    relation: str
    relation_detail: str
    new_findings: list[str] = Field(default_factory=list)
    gone_findings: list[str] = Field(default_factory=list)
    steps: list[AlignedStep] = Field(default_factory=list)
    first_divergence: Divergence | None = None

    def count(self, status: str) -> int:
        return sum(1 for s in self.steps if s.status == status)


# -- relation ---------------------------------------------------------------------------------
def _resolve(cas: Cassette, rel: Any) -> Path | None:
    if not isinstance(rel, str) or cas.path is None:
        return None
    return (cas.path.parent / rel).resolve()


def _same(p: Path | None, q: Path | None) -> bool:
    return p is not None and q is not None and os.path.normpath(p) == os.path.normpath(q)


def parent_of(cas: Cassette) -> Path | None:
    """The parent cassette a fork names (``forked_from``, resolved against its directory), or None."""
    return _resolve(cas, cas.meta.extra.get("forked_from"))


def relation(a: Cassette, b: Cassette) -> tuple[str, str]:
    """``(kind, one-line description)`` of how A relates to B (see the module docstring)."""
    pa, pb = (a.path.resolve() if a.path else None), (b.path.resolve() if b.path else None)
    fa, fb = parent_of(a), parent_of(b)

    def patches(cas: Cassette) -> str:
        ps = cas.meta.extra.get("patches") or []
        return f" with {len(ps)} patch{'es' if len(ps) != 1 else ''}" if ps else " without patches"

    if _same(fa, pb):
        return "fork", f"A is a fork of B at interaction {a.meta.extra.get('fork_at')}{patches(a)}"
    if _same(fb, pa):
        return "fork", f"B is a fork of A at interaction {b.meta.extra.get('fork_at')}{patches(b)}"
    if fa is not None and _same(fa, fb):
        return "siblings", f"A and B are forks of the same parent ({fa.name}) at interactions " \
                           f"{a.meta.extra.get('fork_at')} and {b.meta.extra.get('fork_at')}"
    rep = a.meta.extra.get("replayed_from")
    if isinstance(rep, str) and pb is not None and (pb.as_posix().endswith(rep) or Path(rep).name == pb.name):
        case = a.meta.extra.get("case")
        if case is None:  # playback --live: B replayed, some hosts live
            return "replay", f"A is a playback of B with {', '.join(map(str, a.meta.extra.get('live') or []))} live"
        return "replay", f"A is a spoolproxy test run (case {case}) replaying B"
    names = (pa.name if pa else "", pb.name if pb else "")
    if any(n.endswith(".pinned.yaml") for n in names) and names[0].split(".")[0] == names[1].split(".")[0]:
        which = "A" if names[0].endswith(".pinned.yaml") else "B"
        return "pinned", f"{which} is the pinned (passing) run of the same case"
    same_cmd = a.meta.command and a.meta.command == b.meta.command
    return "unrelated", "unrelated runs" + (" of the same command" if same_cmd else "")


# -- totals -----------------------------------------------------------------------------------
def totals(cas: Cassette, t: Transcript) -> Totals:
    """The :class:`Totals` of one run."""
    llm = t.llm_steps()
    starts = [(it.started_at, it.duration_ms) for it in cas.interactions if it.started_at is not None]
    wall = None
    if starts:
        first = min(s for s, _ in starts)
        last = max(s + timedelta(milliseconds=d or 0) for s, d in starts)
        wall = round((last - first).total_seconds(), 3)
    return Totals(
        interactions=len(cas.interactions), model_calls=len(llm),
        tool_calls=sum(len(s.llm.tool_calls) for s in llm if s.llm),
        tool_requests=sum(1 for s in t.steps if s.kind != "llm"),
        input_tokens=t.input_tokens, output_tokens=t.output_tokens, total_tokens=t.total_tokens,
        cost_usd=t.cost_usd, unpriced_models=list(t.unpriced_models), price_sources=list(t.price_sources), wall_s=wall,
        http_errors=sum(1 for s in t.steps if (s.status or 0) >= 400 or s.transport_error),
        blocked=sum(1 for it in cas.interactions if it.extra.get("fork") == "blocked"),
        final_answer=t.final_answer.text if t.final_answer else None)


def _finding_key(f) -> str:
    return f"{f.severity} {f.kind}"


# -- alignment --------------------------------------------------------------------------------
def _key(s: Step) -> tuple:
    path = s.url.split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
    return (s.kind, s.method, s.host.lower(), path)


def _what(s: Step) -> str:
    if s.kind == "llm" and s.llm is not None:
        return f"llm {s.llm.provider}/{s.llm.model or '?'}"
    return f"{s.method} {s.host}/{_key(s)[3]}"


def model_output(s: Step) -> dict:
    """What an LLM call answered, without volatile parts (ids, usage, chunk boundaries)."""
    c = s.llm
    if c is None:
        return {}
    return {"text": c.text, "tool_calls": [{"name": tc.name, "arguments": tc.arguments if tc.parse_error is None
                                            else tc.arguments_raw} for tc in c.tool_calls],
            "finish_reason": c.finish_reason, "error": c.error, "status": s.status}


def tool_output(it: Interaction) -> dict:
    """What a tool answered: status and body (parsed JSON when it is JSON), or the transport error."""
    r = it.response
    if r is None:
        return {"error": f"{it.error.kind}: {it.error.message}" if it.error else "no response"}
    body = r.json()
    return {"status": r.status, "body": body if body is not None else r.text}


def _compare(fp: Fingerprinter, ia: Interaction, ib: Interaction, sa: Step, sb: Step) -> StepStatus:
    na, nb = fp.normalize(ia.request), fp.normalize(ib.request)
    if na.key != nb.key:
        return "request"
    if sa.kind == "llm":
        return "same" if model_output(sa) == model_output(sb) else "response"
    return "same" if tool_output(ia) == tool_output(ib) else "response"


def align(a: Cassette, ta: Transcript, b: Cassette, tb: Transcript, fp: Fingerprinter | None = None) -> list[AlignedStep]:
    """Pair A's and B's interactions (see the module docstring)."""
    fp = fp or Fingerprinter()
    ka, kb = [_key(s) for s in ta.steps], [_key(s) for s in tb.steps]
    out: list[AlignedStep] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ka, kb, autojunk=False).get_opcodes():
        if op == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                status = _compare(fp, a.interactions[i], b.interactions[j], ta.steps[i], tb.steps[j])
                out.append(AlignedStep(status=status, a=i, b=j, what=_what(ta.steps[i]), source=_source(a, i)))
            continue
        out += [AlignedStep(status="only_a", a=i, what=_what(ta.steps[i]), source=_source(a, i)) for i in range(i1, i2)]
        out += [AlignedStep(status="only_b", b=j, what=_what(tb.steps[j])) for j in range(j1, j2)]
    return out


def _source(cas: Cassette, i: int) -> str | None:
    v = cas.interactions[i].extra.get("fork")
    return v if isinstance(v, str) else None


def _relabel(lines: list[str]) -> list[str]:
    out = []
    for ln in lines:
        ln = ln.replace(": recorded ", ": B ").replace(", actual ", ", A ")
        out.append(ln.replace("only in actual", "only in A").replace("only in recorded", "only in B"))
    return out


def divergence(step: AlignedStep, a: Cassette, ta: Transcript, b: Cassette, tb: Transcript,
               fp: Fingerprinter | None = None) -> Divergence:
    """The field-level diff of one aligned row that is not ``same``."""
    fp = fp or Fingerprinter()
    if step.status == "only_a":
        return Divergence(step=step, summary=f"A's interaction {step.a} ({step.what}) has no counterpart in B")
    if step.status == "only_b":
        return Divergence(step=step, summary=f"B's interaction {step.b} ({step.what}) has no counterpart in A")
    assert step.a is not None and step.b is not None
    ia, ib = a.interactions[step.a], b.interactions[step.b]
    if step.status == "request":
        na, nb = fp.normalize(ia.request), fp.normalize(ib.request)
        changes = diff_bodies(nb.body_json, na.body_json, nb.body, na.body)
        lines = [ln for c in changes for ln in c.render()]
        if na.query != nb.query:
            lines.insert(0, f"query: B {dict(nb.query)}, A {dict(na.query)}")
        return Divergence(step=step, summary=f"the requests differ (A #{step.a}, B #{step.b}, {step.what})",
                          fields=_relabel(lines))
    sa, sb = ta.steps[step.a], tb.steps[step.b]
    ra, rb = (model_output(sa), model_output(sb)) if sa.kind == "llm" else (tool_output(ia), tool_output(ib))
    lines = [ln for c in diff_json(rb, ra) for ln in c.render()]
    return Divergence(step=step, summary=f"same request, different response (A #{step.a}, B #{step.b}, {step.what})",
                      fields=_relabel(lines))


def diff_runs(a: Cassette, b: Cassette, config=None, fp: Fingerprinter | None = None) -> RunDiff:
    """Compare run A with base run B (``config``: the detectors' settings and ``[prices]``, a
    DetectConfig; both runs are priced with its price book)."""
    fp = fp or Fingerprinter()
    ta, tb = build_transcript(a, config), build_transcript(b, config)
    ra, rb = analyze(a, config, ta), analyze(b, config, tb)

    def side(cas: Cassette, t: Transcript, r) -> RunSide:
        keys = [f"{_finding_key(f)} at {','.join(map(str, f.interactions))}" for f in r.findings]
        return RunSide(path=str(cas.path) if cas.path else "<run>", verdict=r.verdict, findings=keys,
                       totals=totals(cas, t))

    serious = lambda r: {_finding_key(f) for f in r.findings if SEVERITY_RANK[f.severity] >= 1}  # noqa: E731
    kind, detail = relation(a, b)
    steps = align(a, ta, b, tb, fp)
    first = next((s for s in steps if s.status != "same"), None)
    return RunDiff(a=side(a, ta, ra), b=side(b, tb, rb), relation=kind, relation_detail=detail,
                   new_findings=sorted(serious(ra) - serious(rb)), gone_findings=sorted(serious(rb) - serious(ra)),
                   steps=steps, first_divergence=divergence(first, a, ta, b, tb, fp) if first else None)


def to_json(d: RunDiff) -> str:
    """The diff as indented JSON."""
    return json.dumps(d.model_dump(mode="json"), indent=2, ensure_ascii=False)
