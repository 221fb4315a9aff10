"""A Markdown summary of a regression run, for CI job summaries (``$GITHUB_STEP_SUMMARY``).

A heading with the counts, the suite's pass rate (and the ``--fail-under`` result), a table
(case, outcome, runs passed, baseline, explanation) with regressions marked, and a
collapsed details block per failing case.  Pipes and newlines in cell text
are escaped so the table stays one row per case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..errors import OutputError
from .outcome import CaseResult, pass_rate_line

ICON = {"passes": "✅", "still_fails": "❌", "fails_differently": "⚠️", "unreplayable": "🔁", "error": "💥", None: "⏸️"}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown_summary(results: Sequence[CaseResult], title: str = "spoolproxy test",
                     fail_under: float | None = None) -> str:
    """The summary as Markdown text."""
    ran = [r for r in results if r.outcome is not None]
    counts: dict[str, int] = {}
    for r in ran:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1  # type: ignore[index]
    head = ", ".join(f"{n} {o}" for o, n in counts.items()) or "no case ran"
    regressions = [r.name for r in results if r.regression]
    lines = [f"### {title}: {head}", ""]
    rate = pass_rate_line(results, fail_under) if fail_under is not None or any(r.runs > 1 for r in results) else None
    if rate:
        lines += [rate[0].upper() + rate[1:].replace("FAILED", "**FAILED**"), ""]
    if regressions:
        lines += [f"**Regression:** {', '.join(regressions)} passed in the baseline and no longer pass.", ""]
    show_runs = fail_under is not None or any(r.runs > 1 for r in results)  # --repeat or --fail-under
    lines += ["| case | outcome | runs passed | baseline | explanation |", "|---|---|---|---|---|"] if show_runs \
        else ["| case | outcome | baseline | explanation |", "|---|---|---|---|"]
    for r in results:
        outcome = r.outcome or f"skipped ({r.status})"
        mark = " **REGRESSION**" if r.regression else ""
        runs = (f" {round(r.pass_rate * r.runs)}/{r.runs} |" if r.pass_rate is not None else " - |") if show_runs else ""
        lines.append(f"| {_cell(r.name)} | {ICON.get(r.outcome, '')} {outcome}{mark} |{runs} {r.baseline or '-'} | "
                     f"{_cell(r.explanation)} |")
    for r in results:
        if r.outcome in ("still_fails", "fails_differently", "unreplayable", "error") and (r.details or r.artifact):
            body = "\n".join([*r.details, *([f"artifact run: {r.artifact}"] if r.artifact else [])])
            lines += ["", f"<details><summary>{_cell(r.name)}: {r.outcome}</summary>", "", "```text",
                      body.replace("```", "'''"), "```", "", "</details>"]
    return "\n".join(lines) + "\n"


def append_markdown(path: str | Path, results: Sequence[CaseResult], fail_under: float | None = None) -> Path:
    """Append :func:`markdown_summary` to ``path`` (created when missing), as GitHub expects.
    Raises OutputError when it cannot be written."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with p.open("a", encoding="utf-8") as fh:
            fh.write(markdown_summary(results, fail_under=fail_under))
    except OSError as exc:
        raise OutputError.from_os(p, exc) from None
    return p
