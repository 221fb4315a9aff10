"""Assertions learned from a fixed run: diff a failing run against a passing run of the same
task and propose what the passing one shows a correct run must do.

:func:`learn` proposes (:class:`Proposal`):

* **facts** (``final_answer_contains``): values the passing run got from its tools (JSON
  leaves, or tokens holding a digit in text results: ids, amounts, dates, tracking numbers)
  that its final answer states and the failing answer does not (or the failing run has no
  answer).  Values the task itself gave (in the first user message) are left out: repeating
  them proves nothing.  Only the longest of overlapping values is kept.
* **tools** (``tools_called``): tools the passing run called that the failing run never did.
* **budgets** (``max_llm_calls``, ``max_tool_calls``): the passing run's count with some
  slack (half again, at least one more), capped below the failing run's count when that is
  higher, so the loop or retry that failed is caught.

Every proposal is checked on both runs with the suite's own assertion code
(:func:`~.outcome.check_assertions`): ``separates`` is true when the passing run satisfies it
and the failing run does not; only those are ``recommended``.  Nothing is written here:
:func:`apply` adds the proposals a reviewer accepted to a case's :class:`~.model.Assertions`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Iterable, Literal

from ..cassettes.model import Cassette
from ..detectors.models import Transcript
from .model import Assertions

Kind = Literal["final_answer_contains", "tools_called", "max_llm_calls", "max_tool_calls"]
#: at most this many fact proposals (the most specific first)
MAX_FACTS = 5
_TOKEN = re.compile(r"[\w$€£#][\w$€£#.,:/%+-]*")
_WORDY = re.compile(r"^[\w .,'&/()+-]+$")


@dataclass
class Proposal:
    """One proposed assertion: ``kind`` (an :class:`~.model.Assertions` field), ``value``,
    ``why`` (one line of evidence), ``separates`` (passing run satisfies it, failing run does
    not), ``recommended`` (accepted by default)."""

    kind: Kind
    value: str | int
    why: str
    separates: bool = False
    recommended: bool = False

    def describe(self) -> str:
        """``final answer contains 'PC-77120034'``-style text."""
        return {"final_answer_contains": f"final answer contains {self.value!r}",
                "tools_called": f"tool {self.value!r} is called",
                "max_llm_calls": f"at most {self.value} LLM calls",
                "max_tool_calls": f"at most {self.value} tool calls"}[self.kind]


@dataclass
class Learned:
    """The proposals from one failing/passing pair, and whether the runs look like the same
    task (``same_task``; ``task_note`` says why not)."""

    proposals: list[Proposal] = field(default_factory=list)
    same_task: bool = True
    task_note: str = ""


def learn(failing: Cassette, passing: Cassette, config=None) -> Learned:
    """Proposals from a ``failing`` and a ``passing`` run of the same task (see the module
    docstring).  ``config``: a DetectConfig (output tools, prices); default the shipped one."""
    from ..detectors import build_transcript

    tf, tp = build_transcript(failing, config), build_transcript(passing, config)
    out = Learned()
    task_f, task_p = _task(tf), _task(tp)
    if task_f != task_p:
        out.same_task = False
        out.task_note = f"the runs' first user messages differ ({_short(task_f)!r} vs {_short(task_p)!r})"
    out.proposals = [*_facts(tf, tp, task_p), *_tools(tf, tp), *_budgets(tf, tp)]
    for p in out.proposals:
        p.separates = _holds(p, tp) and not _holds(p, tf)
        p.recommended = p.separates
    return out


def apply(assertions: Assertions, accepted: Iterable[Proposal]) -> Assertions:
    """``assertions`` with the ``accepted`` proposals added (budgets replace a looser one)."""
    a = assertions.model_copy(deep=True)
    for p in accepted:
        if p.kind == "final_answer_contains" and p.value not in a.final_answer_contains:
            a.final_answer_contains.append(str(p.value))
        elif p.kind == "tools_called" and p.value not in a.tools_called:
            a.tools_called.append(str(p.value))
        elif p.kind in ("max_llm_calls", "max_tool_calls"):
            current = getattr(a, p.kind)
            setattr(a, p.kind, int(p.value) if current is None else min(current, int(p.value)))
    return a


def select(learned: Learned, spec: str) -> list[Proposal]:
    """The proposals a reviewer picked: ``recommended``, ``all``, ``none`` or numbers (``1,3``,
    1-based as listed).  Raises ValueError naming a bad number."""
    spec = spec.strip().lower()
    if spec in ("", "recommended", "r"):
        return [p for p in learned.proposals if p.recommended]
    if spec in ("all", "a"):
        return list(learned.proposals)
    if spec in ("none", "n", "-"):
        return []
    picked = []
    for part in re.split(r"[,\s]+", spec):
        if not part:
            continue
        if not part.isdigit() or not 1 <= int(part) <= len(learned.proposals):
            raise ValueError(f"{part!r} is not one of 1-{len(learned.proposals)}; use numbers, 'recommended', 'all' or 'none'")
        picked.append(learned.proposals[int(part) - 1])
    return picked


# -- facts ---------------------------------------------------------------------------------
def _facts(tf: Transcript, tp: Transcript, task: str) -> list[Proposal]:
    if tp.final_answer is None:
        return []
    answer = tp.final_answer.text
    failed = tf.final_answer.text if tf.final_answer is not None else None
    found: dict[str, str] = {}
    for r in tp.tool_results:
        if r.is_error:
            continue
        where = f"tool result of {r.name or 'a tool'} (interaction {r.interaction})"
        for value in _values(r.content_json, r.content):
            hit = _in(value, answer)
            if hit is None or hit in found:
                continue
            if (failed is not None and _in(hit, failed) is not None) or _in(hit, task) is not None:
                continue
            found[hit] = where
    keep = [v for v in found if not any(v != o and v.lower() in o.lower() for o in found)]
    keep.sort(key=lambda v: (not any(c.isdigit() for c in v), -len(v)))
    tail = "absent from the failing run's answer" if failed is not None else "the failing run has no final answer"
    return [Proposal("final_answer_contains", v, f"in the {found[v]} and the passing answer; {tail}")
            for v in keep[:MAX_FACTS]]


def _values(doc: Any, text: str) -> list[str]:
    """Candidate facts of one tool result: JSON leaves, else digit-bearing tokens of its text."""
    out: list[str] = []
    if doc is None and text.lstrip()[:1] in ("{", "["):
        from ..cassettes.model import parse_json

        doc = parse_json(text.encode("utf-8", "replace"))
    if doc is not None:
        _leaves(doc, out, 0)
    else:
        out += _tokens(text)
    return [v for v in dict.fromkeys(out) if _fact_like(v)]


def _tokens(text: str) -> list[str]:
    """The digit-bearing tokens of a text (``PC-77120034``, ``$12.99``, ``2026-12-04``)."""
    out = []
    for m in _TOKEN.finditer(text[:20000]):
        tok = m.group(0).rstrip(".,:/+-")
        if any(c.isdigit() for c in tok):
            out.append(tok)
    return out


def _leaves(v: Any, out: list[str], depth: int) -> None:
    if depth > 12 or len(out) > 500:
        return
    if isinstance(v, dict):
        for x in v.values():
            _leaves(x, out, depth + 1)
    elif isinstance(v, list):
        for x in v:
            _leaves(x, out, depth + 1)
    elif isinstance(v, bool) or v is None:
        return
    elif isinstance(v, (int, float)):
        out.append(str(v))
    elif isinstance(v, str):
        s = v.strip()
        if len(s) <= 80 and len(s.split()) <= 6:
            out.append(s)
        else:  # a long text: its digit-bearing tokens
            out += _tokens(s)


def _fact_like(v: str) -> bool:
    """Specific enough to mean something when an answer contains it."""
    if len(v) < 3 or len(v) > 80:
        return False
    if any(c.isdigit() for c in v):
        return sum(c.isdigit() for c in v) >= 2 or len(v) >= 4
    return bool(_WORDY.match(v)) and len(v) >= 4 and v.lower() not in _COMMON


#: JSON values too common to be a fact about this run
_COMMON = {"true", "false", "null", "none", "ok", "success", "error", "data", "result", "results", "items",
           "object", "string", "list", "json", "text", "type", "name", "value", "default", "unknown", "open"}


def _in(value: str, text: str) -> str | None:
    """How ``value`` appears in ``text`` (its exact spelling there), or None: exact for values
    with digits, case-insensitive on word boundaries otherwise."""
    if not text:
        return None
    if any(c.isdigit() for c in value):
        return value if value in text else None
    m = re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.IGNORECASE)
    return m.group(0) if m else None


# -- tools and budgets ---------------------------------------------------------------------
def _called(t: Transcript) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in t.llm_steps():
        for tc in s.llm.tool_calls if s.llm else []:
            out.setdefault(tc.name, s.index)
    return out


def _tools(tf: Transcript, tp: Transcript) -> list[Proposal]:
    fail, passed = _called(tf), _called(tp)
    return [Proposal("tools_called", name, f"the passing run calls it (interaction {at}); the failing run never does")
            for name, at in passed.items() if name not in fail]


def _budget(p: int, f: int) -> int:
    b = max(p + 1, math.ceil(p * 1.5))
    return max(p, min(b, f - 1)) if f > p else b


def _budgets(tf: Transcript, tp: Transcript) -> list[Proposal]:
    out = []
    counts = (("max_llm_calls", "LLM calls", len(tp.llm_steps()), len(tf.llm_steps())),
              ("max_tool_calls", "tool calls", _n_tools(tp), _n_tools(tf)))
    for kind, label, p, f in counts:
        if p == 0 and f == 0:
            continue
        b = _budget(p, f)
        out.append(Proposal(kind, b, f"the passing run makes {p} {label}, the failing run {f}"))  # type: ignore[arg-type]
    return out


def _n_tools(t: Transcript) -> int:
    return sum(len(s.llm.tool_calls) for s in t.llm_steps() if s.llm)


# -- helpers -------------------------------------------------------------------------------
def _holds(p: Proposal, t: Transcript) -> bool:
    from .outcome import check_assertions

    a = apply(Assertions(signature_absent=False), [p])
    return not check_assertions(SimpleNamespace(assertions=a), t)  # type: ignore[arg-type]


def _task(t: Transcript) -> str:
    for s in t.llm_steps():
        for m in s.llm.messages if s.llm else []:
            if m.role == "user" and m.text.strip():
                return m.text.strip()
    return ""


def _short(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
