"""JUnit XML for a regression run (the format CI systems render as a test report).

One ``<testsuite name="spoolproxy">`` inside ``<testsuites>``; one ``<testcase>`` per case
(``classname`` ``spoolproxy.<suite directory name>``, ``time`` in seconds).  ``still_fails``,
``fails_differently`` and ``unreplayable`` become ``<failure type=OUTCOME message=...>``
with the details as text; ``error`` becomes ``<error>``; cases that did not run (status
pending/rejected) become ``<skipped>``.  The artifact cassette path goes to ``<system-out>``.
With ``--repeat`` or ``--fail-under``, pass rates go in ``<properties>``: per case ``runs``,
``passed_runs`` and ``pass_rate``; for the suite ``runs``, ``passed_runs``, ``pass_rate`` and,
with ``--fail-under``, ``fail_under`` and ``below_fail_under``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Sequence

from ..cassettes.storage import atomic_write
from .outcome import CaseResult, suite_pass_rate

_FAIL = ("still_fails", "fails_differently", "unreplayable")


def _clean(text: str) -> str:
    """Drop characters XML 1.0 cannot hold."""
    return "".join(ch for ch in text if ch in "\t\n\r" or ord(ch) >= 0x20)


def _properties(parent: ET.Element, props: dict[str, object]) -> None:
    el = ET.SubElement(parent, "properties")
    for k, v in props.items():
        ET.SubElement(el, "property", {"name": k, "value": str(v)})


def junit_xml(results: Sequence[CaseResult], suite_name: str = "spool", fail_under: float | None = None) -> str:
    """The JUnit XML document for ``results`` as a string."""
    failures = sum(1 for r in results if r.outcome in _FAIL)
    errors = sum(1 for r in results if r.outcome == "error")
    skipped = sum(1 for r in results if r.outcome is None)
    total_time = sum(r.duration_s for r in results)
    counts = {"tests": str(len(results)), "failures": str(failures), "errors": str(errors),
              "skipped": str(skipped), "time": f"{total_time:.3f}"}
    root = ET.Element("testsuites", {"name": "spoolproxy", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": "spoolproxy", **counts})
    passed, runs = suite_pass_rate(results)
    rates = fail_under is not None or any(r.runs > 1 for r in results)
    if runs and rates:
        props: dict[str, object] = {"runs": runs, "passed_runs": passed, "pass_rate": f"{passed / runs:.4f}"}
        if fail_under is not None:
            props.update(fail_under=f"{fail_under:g}", below_fail_under=str(passed / runs < fail_under).lower())
        _properties(suite, props)
    for r in results:
        tc = ET.SubElement(suite, "testcase", {"classname": f"spoolproxy.{suite_name}", "name": r.name,
                                               "time": f"{r.duration_s:.3f}"})
        if r.pass_rate is not None and rates:
            _properties(tc, {"runs": r.runs, "passed_runs": round(r.pass_rate * r.runs),
                             "pass_rate": f"{r.pass_rate:.4f}"})
        if r.outcome in _FAIL:
            el = ET.SubElement(tc, "failure", {"type": r.outcome, "message": _clean(r.explanation)})
            el.text = _clean("\n".join([r.explanation, *r.details]))
        elif r.outcome == "error":
            el = ET.SubElement(tc, "error", {"type": "error", "message": _clean(r.explanation)})
            el.text = _clean(r.explanation)
        elif r.outcome is None:
            ET.SubElement(tc, "skipped", {"message": _clean(r.explanation)})
        if r.artifact:
            ET.SubElement(tc, "system-out").text = _clean(f"artifact run: {r.artifact}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: str | Path, results: Sequence[CaseResult], suite_name: str = "spool",
                fail_under: float | None = None) -> Path:
    """Write :func:`junit_xml` to ``path`` atomically.  Raises OutputError when it cannot be written."""
    p = Path(path)
    atomic_write(p, junit_xml(results, suite_name, fail_under))
    return p
