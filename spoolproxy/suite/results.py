"""The latest outcome of every case, kept beside the artifact runs for dashboards.

``spoolproxy test`` merges its results into ``<suite>/.runs/results.json`` (each case keeps
its newest result, so a ``--case`` run or a parallel worker updates only its own cases)::

    {"version": 1, "suite": "spool", "updated_at": "2026-03-01T10:00:00+00:00",
     "cases": {"refund": {<CaseResult.to_json()>, "ran_at": "...",
                          "artifact": "refund/20260301T100000Z.yaml"}}}

Artifact, report and case paths are stored relative to the suite directory.  Written
atomically through the Redactor (explanations and details may quote recorded text).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from ..cassettes.redact import Redactor
from ..cassettes.storage import atomic_write
from ..errors import OutputError
from .outcome import CaseResult

RESULTS_NAME = "results.json"
VERSION = 1


def results_path(suite_dir: str | Path) -> Path:
    """``<suite>/.runs/results.json``."""
    return Path(suite_dir) / ".runs" / RESULTS_NAME


def _rel(value: str | None, suite: Path) -> str | None:
    if not value:
        return value
    try:
        return Path(os.path.relpath(Path(value).resolve(), suite.resolve())).as_posix()
    except ValueError:
        return value


def load_results(suite_dir: str | Path) -> dict:
    """The stored document (``{"cases": {}}`` when there is none or it is unreadable)."""
    p = results_path(suite_dir)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {"version": VERSION, "cases": {}}
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), dict):
        return {"version": VERSION, "cases": {}}
    return doc


def record_results(suite_dir: str | Path, results: Iterable[CaseResult], *, now: datetime | None = None,
                   redactor: Redactor | None = None) -> Path | None:
    """Merge the results of cases that ran into the suite's ``results.json``; returns its
    path, or None when nothing ran or the file cannot be written (never fails a test run)."""
    suite = Path(suite_dir)
    ran = [r for r in results if r.outcome is not None]
    if not ran:
        return None
    stamp = (now or datetime.now(timezone.utc)).replace(microsecond=0).isoformat()
    doc = load_results(suite)
    for r in ran:
        d = r.to_json()
        for key in ("artifact", "report", "case"):
            d[key] = _rel(d.get(key), suite)
        d["ran_at"] = stamp
        doc["cases"][r.name] = d
    doc.update(version=VERSION, suite=suite.name, updated_at=stamp)
    p = results_path(suite)
    try:
        atomic_write(p, (redactor or Redactor()).text(json.dumps(doc, indent=2, ensure_ascii=False)) + "\n")
    except OutputError:
        return None
    return p
