"""The hooks a run report reads from the fork / diff / verify loop (``spoolproxy/fix/``).

Contract (documented in docs/triage.md; the fix loop writes these, the report renders them
whenever they are present and ignores them otherwise):

* ``meta.extra["forked_from"]``: the parent cassette's path, relative to the forked
  cassette's directory (or absolute); ``meta.extra["fork_at"]``: the interaction index the
  fork went live from (optional); ``meta.extra["patches"]``: a list describing the patches
  applied (strings or mappings, optional).  The report shows the parent's verdict,
  findings fixed and new, totals side by side and a step-by-step alignment.
* ``<cassette stem>.verify.json`` (or ``<cassette name>.verify.json``) beside the run: the
  result of ``spoolproxy verify``, a JSON object.  Rendered keys: ``verdict`` (VERIFIED |
  LIKELY | INCONCLUSIVE | REJECTED), ``summary`` (one line), any other scalar keys as
  facts, and ``trials`` (a list of objects: one row each, their scalar keys as columns).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..cassettes.model import Cassette
from ..detectors.models import Report, Step, Transcript

FORKED_FROM = "forked_from"
FORK_AT = "fork_at"
PATCHES = "patches"


def parent_path(cas: Cassette) -> Path | None:
    """The parent cassette named by ``meta.extra["forked_from"]`` (resolved against the
    cassette's directory), or None."""
    raw = cas.meta.extra.get(FORKED_FROM)
    if not raw or not isinstance(raw, str):
        return None
    p = Path(raw)
    if not p.is_absolute() and cas.path is not None:
        p = cas.path.parent / p
    return p


def verify_path(cassette_path: Path) -> Path | None:
    """The verify results beside a run (``run.verify.json`` or ``run.yaml.verify.json``), if any."""
    for cand in (cassette_path.with_name(cassette_path.stem + ".verify.json"),
                 cassette_path.with_name(cassette_path.name + ".verify.json")):
        if cand.is_file():
            return cand
    return None


def load_verify(path: Path) -> dict[str, Any]:
    """The verify results as ``{"path", "verdict", "summary", "facts": [(k, v)], "columns",
    "trials": [[cell, ...]], "error"}`` (``error`` set when the file is not a JSON object)."""
    out: dict[str, Any] = {"path": str(path), "verdict": None, "summary": None, "facts": [], "columns": [],
                           "trials": [], "error": None}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        out["error"] = f"cannot read {path.name}: {exc}"
        return out
    if not isinstance(doc, dict):
        out["error"] = f"{path.name} is not a JSON object"
        return out
    out["verdict"] = doc.get("verdict")
    out["summary"] = doc.get("summary")
    out["facts"] = [(k, v) for k, v in doc.items() if k not in ("verdict", "summary", "trials")
                    and (v is None or isinstance(v, (str, int, float, bool)))]
    trials = [t for t in doc.get("trials") or [] if isinstance(t, dict)]
    cols = list(dict.fromkeys(k for t in trials for k, v in t.items() if isinstance(v, (str, int, float, bool))))[:8]
    out["columns"] = cols
    out["trials"] = [[t.get(c, "") for c in cols] for t in trials]
    return out


def step_key(step: Step) -> str:
    """What a step is, for alignment: kind, method, host and path, and for model calls the
    names of the tools it called."""
    base = f"{step.kind} {step.method} {step.host}{urlsplit(step.url).path}"
    if step.llm is not None:
        base += " -> " + ",".join(tc.name for tc in step.llm.tool_calls)
    if step.mcp is not None and step.mcp.tool_name:
        base += f" {step.mcp.tool_name}"
    return base


def step_text(step: Step) -> str:
    """What a step said, for comparing two aligned steps."""
    if step.llm is not None:
        calls = "; ".join(f"{tc.name}({tc.arguments_raw})" for tc in step.llm.tool_calls)
        return f"{step.status} {step.llm.text.strip()} {calls} {step.llm.error or ''}".strip()
    if step.mcp is not None:
        return f"{step.status} {step.mcp.result_text or step.mcp.error or ''}"
    return f"{step.status} {step.content_type} {step.http.body_size if step.http else 0}B"


@dataclass
class ParentDiff:
    """This run against its parent: ``rows`` are ``(tag, parent index, this index, parent
    text, this text)`` with ``tag`` same | changed | only in parent | only here."""

    parent: Path
    fork_at: Any = None
    patches: list[Any] = field(default_factory=list)
    verdicts: tuple[str, str] = ("", "")
    fixed: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    totals: list[tuple[str, Any, Any]] = field(default_factory=list)
    rows: list[tuple[str, int | None, int | None, str, str]] = field(default_factory=list)
    error: str | None = None


def diff_to_parent(cas: Cassette, transcript: Transcript, report: Report, *, config=None,
                   redactor=None) -> ParentDiff | None:
    """The diff to the run's parent (None when the run names none).  A parent that cannot
    be read gives a ParentDiff with ``error`` set, never an exception."""
    from ..cassettes.storage import load
    from ..detectors import analyze, build_transcript
    from ..errors import SpoolError

    path = parent_path(cas)
    if path is None:
        return None
    patches = cas.meta.extra.get(PATCHES) or []
    d = ParentDiff(parent=path, fork_at=cas.meta.extra.get(FORK_AT),
                   patches=patches if isinstance(patches, list) else [patches])
    try:
        parent = load(path)
    except SpoolError as exc:
        d.error = f"parent run unreadable: {exc}"
        return d
    if redactor is not None:
        parent = redactor.cassette(parent)
    pt = build_transcript(parent, config)
    pr = analyze(parent, config, transcript=pt)
    d.verdicts = (pr.verdict, report.verdict)
    before = {f.kind for f in pr.findings if f.severity in ("error", "critical")}
    after = {f.kind for f in report.findings if f.severity in ("error", "critical")}
    d.fixed, d.new = sorted(before - after), sorted(after - before)
    d.totals = [("interactions", len(pt.steps), len(transcript.steps)),
                ("model calls", len(pt.llm_steps()), len(transcript.llm_steps())),
                ("tool calls", _tool_calls(pt), _tool_calls(transcript)),
                ("tokens", pt.total_tokens, transcript.total_tokens),
                ("cost (USD)", pt.cost_usd, transcript.cost_usd)]
    a, b = [step_key(s) for s in pt.steps], [step_key(s) for s in transcript.steps]
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                x, y = step_text(pt.steps[i]), step_text(transcript.steps[j])
                d.rows.append(("same" if x == y else "changed", i, j, x, y))
            continue
        for i in range(i1, i2):
            d.rows.append(("only in parent", i, None, step_text(pt.steps[i]), ""))
        for j in range(j1, j2):
            d.rows.append(("only here", None, j, "", step_text(transcript.steps[j])))
    return d


def _tool_calls(t: Transcript) -> int:
    return sum(len(s.llm.tool_calls) for s in t.steps if s.llm is not None)
