"""Baselines: the outcome of every case in an earlier run, to tell regressions from known failures.

File format (JSON, diff-friendly, sorted)::

    {"version": 1, "cases": {"refund-twice": "passes", "stock-html": "still_fails"}}

A *regression* is a case whose baseline outcome is ``passes`` and whose outcome now is
anything else.  ``spoolproxy test --fail-on regression`` (the default) exits 1 only for
regressions (and for ``error`` outcomes, which mean the suite itself is broken).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from ..cassettes.storage import atomic_write
from ..errors import SpoolError
from .outcome import OUTCOMES, CaseResult

VERSION = 1


def load_baseline(path: str | Path) -> dict[str, str]:
    """case name -> outcome from a baseline file; ``{}`` when the file does not exist.

    Raises SpoolError (one line) when the file is not a valid baseline.
    """
    p = Path(path)
    if not p.exists():
        return {}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise SpoolError(f"baseline {p} is not valid JSON ({exc}); delete it and rerun with --update-baseline") from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, dict) or not all(isinstance(v, str) and v in OUTCOMES for v in cases.values()):
        raise SpoolError(f"baseline {p} has no valid 'cases' table (name -> outcome); "
                         "delete it and rerun with --update-baseline")
    return dict(cases)


def save_baseline(path: str | Path, results: Iterable[CaseResult], previous: dict[str, str] | None = None) -> Path:
    """Write the outcomes of ``results`` (cases that ran) over ``previous``; returns the path.
    Raises OutputError when it cannot be written."""
    cases = dict(previous or {})
    for r in results:
        if r.outcome is not None:
            cases[r.name] = r.outcome
    p = Path(path)
    atomic_write(p, json.dumps({"version": VERSION, "cases": dict(sorted(cases.items()))}, indent=2) + "\n")
    return p


def mark_regressions(results: Iterable[CaseResult], baseline: dict[str, str]) -> list[CaseResult]:
    """Set ``baseline``/``regression`` on each result; returns the regressions."""
    out = []
    for r in results:
        r.baseline = baseline.get(r.name)
        r.regression = r.outcome is not None and r.baseline == "passes" and r.outcome != "passes"
        if r.regression:
            out.append(r)
    return out


def exit_status(results: Iterable[CaseResult], regressions: list[CaseResult], fail_on: str) -> int:
    """The exit status of a suite run: 1 when it fails under ``fail_on``, else 0.

    ``regression``: a regression, or any ``error`` outcome (a broken suite never looks
    green).  ``any``: any case that ran and does not pass.
    """
    ran = [r for r in results if r.outcome is not None]
    if fail_on == "any":
        return 1 if any(r.outcome != "passes" for r in ran) else 0
    return 1 if regressions or any(r.outcome == "error" for r in ran) else 0
