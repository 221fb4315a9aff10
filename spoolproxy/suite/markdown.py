"""A Markdown summary of a regression run, for CI job summaries (``$GITHUB_STEP_SUMMARY``).

A heading with the counts, a table (case, outcome, baseline, explanation) with regressions
marked, and a collapsed details block per failing case.  Pipes and newlines in cell text
are escaped so the table stays one row per case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .outcome import CaseResult

ICON = {"passes": "✅", "still_fails": "❌", "fails_differently": "⚠️", "unreplayable": "🔁", "error": "💥", None: "⏸️"}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown_summary(results: Sequence[CaseResult], title: str = "spoolproxy test") -> str:
    """The summary as Markdown text."""
    ran = [r for r in results if r.outcome is not None]
    counts: dict[str, int] = {}
    for r in ran:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1  # type: ignore[index]
    head = ", ".join(f"{n} {o}" for o, n in counts.items()) or "no case ran"
    regressions = [r.name for r in results if r.regression]
    lines = [f"### {title}: {head}", ""]
    if regressions:
        lines += [f"**Regression:** {', '.join(regressions)} passed in the baseline and no longer pass.", ""]
    lines += ["| case | outcome | baseline | explanation |", "|---|---|---|---|"]
    for r in results:
        outcome = r.outcome or f"skipped ({r.status})"
        mark = " **REGRESSION**" if r.regression else ""
        lines.append(f"| {_cell(r.name)} | {ICON.get(r.outcome, '')} {outcome}{mark} | {r.baseline or '-'} | "
                     f"{_cell(r.explanation)} |")
    for r in results:
        if r.outcome in ("still_fails", "fails_differently", "unreplayable", "error") and (r.details or r.artifact):
            body = "\n".join([*r.details, *([f"artifact run: {r.artifact}"] if r.artifact else [])])
            lines += ["", f"<details><summary>{_cell(r.name)}: {r.outcome}</summary>", "", "```text",
                      body.replace("```", "'''"), "```", "", "</details>"]
    return "\n".join(lines) + "\n"


def append_markdown(path: str | Path, results: Sequence[CaseResult]) -> Path:
    """Append :func:`markdown_summary` to ``path`` (created when missing), as GitHub expects."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a", encoding="utf-8") as fh:
        fh.write(markdown_summary(results))
    return p
