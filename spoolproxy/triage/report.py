"""One run as a self-contained HTML page (``spoolproxy report CASSETTE -o run.html``).

The page has no script, no external resource and a Content-Security-Policy that forbids
both, so it reads the same with scripts disabled, offline, from a CI artifact or an e-mail
attachment.  Sections: the run's facts (command, tags, git commit, tokens, cost, verdict),
the findings with each piece of evidence shown inside the field it cites (the quote
highlighted), the timeline (model turns with their text and tool calls, the tool results
fed back, MCP calls, plain HTTP calls, request and response bodies folded), the final
answer, and, when the fix loop left them (:mod:`.parent`), the diff to the parent run and
the verify results.

Everything goes through the :class:`~spoolproxy.cassettes.redact.Redactor`: the cassette
is redacted before it is read, and the page once more before it is written.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..cassettes.model import Cassette
from ..cassettes.redact import Redactor
from ..cassettes.storage import atomic_write, load
from ..detectors.evidence import EvidenceBuilder
from ..detectors.models import Report, Step, Transcript
from .parent import diff_to_parent, load_verify, verify_path
from .runs import run_time
from .tags import commit_of, tags_of

BODY_PREVIEW = 4000  # characters of a body shown (folded) in the timeline
CONTEXT = 240  # characters shown each side of an evidence quote


@lru_cache(maxsize=1)
def environment():
    """The jinja2 environment of the triage templates (autoescaped HTML)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(loader=PackageLoader("spoolproxy.triage", "templates"),
                      autoescape=select_autoescape(["html", "j2"], default=True), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    from .. import __version__

    env.globals.update(version=__version__, generated=None)
    env.filters["money"] = lambda v: "unknown" if v is None else f"${v:,.4f}" if v == 0 or v >= 0.01 else f"${v:.6f}"
    env.filters["num"] = lambda v: "" if v is None else f"{v:,}"
    env.filters["ms"] = lambda v: "" if v is None else (f"{v:,.0f} ms" if v < 10_000 else f"{v / 1000:,.1f} s")
    return env


def _pretty(text: str) -> str:
    """JSON text indented for reading (other text unchanged)."""
    s = text.strip()
    if s[:1] in ("{", "[") and len(s) < 200_000:
        try:
            return json.dumps(json.loads(s), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    return text


def _cut(text: str, n: int = BODY_PREVIEW) -> tuple[str, int]:
    """``(text[:n], characters left out)``."""
    return (text, 0) if len(text) <= n else (text[:n], len(text) - n)


def _evidence(ev: EvidenceBuilder, e) -> dict[str, Any]:
    """An evidence item with the cited field cut around the quote: before / quote / after."""
    field = ev.resolve(e.interaction, e.path) or ""
    at = field.find(e.quote) if e.quote else -1
    if at < 0:
        return {"interaction": e.interaction, "path": e.path, "before": "", "quote": e.quote, "after": "",
                "clipped": (False, False)}
    lo, hi = max(0, at - CONTEXT), min(len(field), at + len(e.quote) + CONTEXT)
    return {"interaction": e.interaction, "path": e.path, "before": field[lo:at], "quote": e.quote,
            "after": field[at + len(e.quote):hi], "clipped": (lo > 0, hi < len(field))}


def _step(cas: Cassette, s: Step, findings: list[tuple[int, Any]]) -> dict[str, Any]:
    it = cas.interactions[s.index]
    req_body, req_more = _cut(_pretty(it.request.text)) if it.request.body else ("", 0)
    resp = it.response
    resp_text = resp.text if resp is not None and resp.body else ""
    resp_body, resp_more = _cut(_pretty(resp_text)) if resp_text else ("", 0)
    d: dict[str, Any] = {"s": s, "findings": findings, "req_body": req_body, "req_more": req_more,
                         "resp_body": resp_body, "resp_more": resp_more,
                         "who": f"{s.llm.provider} / {s.llm.model or '?'}" if s.llm else s.host,
                         "results": [dict(r=r, text=_cut(_pretty(r.content), 2000)) for r in s.new_tool_results],
                         "calls": [], "elided": resp is not None and resp.body_ref is not None}
    if s.llm is not None:
        d["calls"] = [{"tc": tc, "args": _pretty(tc.arguments_raw)} for tc in s.llm.tool_calls]
    return d


def _diagnosis(path: Path | None, ev: EvidenceBuilder) -> dict[str, Any] | None:
    """The stored judge diagnosis and kept fixes of the run (``spoolproxy diagnose`` /
    ``fix``), with each quote shown in its field, or None."""
    if path is None:
        return None
    from ..fix.patches import parse_patches
    from ..judge.service import stored

    d, fixes = stored(path)
    if d is None:
        return None
    kept = []
    for p in fixes.kept if fixes is not None else []:
        try:
            what = parse_patches(p.patch).patches[0].describe()
        except Exception:  # noqa: BLE001 - shown as stored
            what = json.dumps(p.patch, ensure_ascii=False)[:200]
        kept.append({"rank": p.rank, "file": p.file, "what": what, "rationale": p.rationale, "test_only": p.test_only})
    dropped = sum(1 for p in fixes.proposals if not p.kept) if fixes is not None else 0
    return {"d": d, "evidence": [_evidence(ev, e) for e in d.evidence], "fixes": kept, "dropped": dropped}


def report_context(cas: Cassette, *, config=None, redactor: Redactor | None = None, links: dict | None = None,
                   title: str | None = None) -> dict[str, Any]:
    """Everything the report template shows, from a loaded cassette (redacted here).

    ``links``: optional ``{"dashboard": href, "parent": href}`` for navigation.
    """
    from ..detectors import analyze, build_transcript

    red = redactor or Redactor()
    path = cas.path
    cas = red.cassette(cas)
    cas.path = path
    t: Transcript = build_transcript(cas, config)
    r: Report = analyze(cas, config, transcript=t)
    ev = EvidenceBuilder(cas, t)
    findings = []
    by_step: dict[int, list[tuple[int, Any]]] = {}
    for n, f in enumerate(r.findings):
        findings.append({"n": n, "f": f, "evidence": [_evidence(ev, e) for e in f.evidence]})
        for i in f.interactions:
            by_step.setdefault(i, []).append((n, f))
    counts = {sev: sum(1 for f in r.findings if f.severity == sev) for sev in ("critical", "error", "warn", "info")}
    verify = verify_path(path) if path is not None else None
    total_ms = sum(s.duration_ms or 0 for s in t.steps) or None
    return {
        "title": title or (path.name if path else "run"), "path": str(path) if path else None, "meta": cas.meta,
        "when": run_time(cas, t), "tags": tags_of(cas.meta), "commit": commit_of(cas.meta),
        "dirty": (cas.meta.extra.get("git") or {}).get("dirty") if isinstance(cas.meta.extra.get("git"), dict) else None,
        "t": t, "report": r, "findings": findings, "counts": counts, "total_ms": total_ms,
        "tool_calls": sum(len(s.llm.tool_calls) for s in t.steps if s.llm is not None),
        "steps": [_step(cas, s, by_step.get(s.index, [])) for s in t.steps],
        "diff": diff_to_parent(cas, t, r, config=config, redactor=red),
        "verify": load_verify(verify) if verify is not None else None,
        "diagnosis": _diagnosis(path, ev),
        "links": {"dashboard": None, "parent": None, **(links or {})},
    }


def render_report(cas: Cassette, *, config=None, redactor: Redactor | None = None, links: dict | None = None,
                  title: str | None = None) -> str:
    """The HTML page of one run (a ``str``), redacted.  See :func:`report_context`."""
    red = redactor or Redactor()
    html = environment().get_template("report.html.j2").render(
        **report_context(cas, config=config, redactor=red, links=links, title=title))
    return red.text(html)


def write_report(cassette: str | Path, out: str | Path, *, config=None, redactor: Redactor | None = None,
                 links: dict | None = None, title: str | None = None) -> Path:
    """Load ``cassette``, render it and write ``out`` atomically; returns ``out``.

    Raises CassetteError for an unreadable cassette, OutputError when ``out`` cannot be written.
    """
    cas = load(cassette)
    html = render_report(cas, config=config, redactor=redactor, links=links, title=title)
    target = Path(out)
    atomic_write(target, html)
    return target
