"""User checks (oracles): the user's own rules deciding whether a run passed, in any language.

A check is declared in spoolproxy.toml (``[[checks]]``) or in a regression case (``checks:``)
as a command that reads the run document (:mod:`spoolproxy.detectors.document`, the JSON
``spoolproxy show --json`` prints) on stdin and exits 0 to pass or non-zero to fail, or as a
Python ``module:function`` that gets the :class:`~spoolproxy.detectors.models.Transcript`
(:mod:`.spec`, :mod:`.runner`).  Checks that fail, crash or hang become ``check_failed``
findings at the severity they declare, so they count wherever findings do.

Entry points:

* :func:`evaluate(cassette, transcript, config, report) <evaluate>` -> ``list[CheckResult]``
* :func:`run_checks(cassette, transcript, config, report=None) <run_checks>` -> ``list[Finding]``
* :func:`findings_of(results) <findings_of>` -> ``list[Finding]``

:func:`spoolproxy.detectors.analyze` calls :func:`evaluate` whenever its config carries
checks (``load_detect_config()`` reads them), so everything that judges runs through
``analyze`` (``detect``, ``show``, ``record``'s summary, ``spoolproxy test``, and fork/verify
trials) gets the checks for free.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

from ..cassettes.model import Cassette
from ..detectors.models import CheckResult, Finding, Report, Transcript
from .spec import CheckSpec

__all__ = ["CheckSpec", "KIND", "evaluate", "run_checks", "findings_of", "applicable", "run_tags", "run_hosts"]

#: the finding kind of a check that did not pass
KIND = "check_failed"
#: checks of one run that may run at the same time
PARALLEL = 4


def run_tags(cassette: Cassette) -> dict[str, str]:
    """The run's tags (``meta.extra['tags']``, set by ``spoolproxy record --tag``) as strings."""
    tags = cassette.meta.extra.get("tags")
    return {str(k): str(v) for k, v in tags.items()} if isinstance(tags, dict) else {}


def run_hosts(transcript: Transcript) -> set[str]:
    """The hosts the run reached, with and without their ``:port``."""
    out: set[str] = set()
    for s in transcript.steps:
        h = s.host.lower()
        out.add(h)
        if h.count(":") == 1:
            out.add(h.split(":")[0])
    return out


def applicable(specs: Iterable[CheckSpec], cassette: Cassette, transcript: Transcript) -> list[CheckSpec]:
    """The checks of ``specs`` that apply to this run (by tags and hosts)."""
    tags, hosts = run_tags(cassette), run_hosts(transcript)
    return [s for s in specs if s.applies(tags, hosts) is None]


def evaluate(cassette: Cassette, transcript: Transcript, config=None, report: Report | None = None, *,
             specs: Iterable[CheckSpec] | None = None) -> list[CheckResult]:
    """Run every applicable check (``specs``, default ``config.checks``) on one run, up to
    :data:`PARALLEL` at a time; results in declaration order.  ``report``: the detectors'
    findings so far, passed to the checks in the run document.  Never raises for a check's
    behaviour (failures, crashes and timeouts are results)."""
    from ..detectors.document import run_document

    todo = applicable(specs if specs is not None else (getattr(config, "checks", None) or []), cassette, transcript)
    if not todo:
        return []
    doc = json.dumps(run_document(cassette, transcript, report or Report(cassette=transcript.cassette)),
                     ensure_ascii=False).encode("utf-8")
    path = str(cassette.path) if cassette.path else None
    from .runner import run_check

    if len(todo) == 1:
        return [run_check(todo[0], doc, cassette=path)]
    with ThreadPoolExecutor(min(PARALLEL, len(todo)), thread_name_prefix="spoolproxy-check") as pool:
        return list(pool.map(lambda s: run_check(s, doc, cassette=path), todo))


def findings_of(results: Iterable[CheckResult]) -> list[Finding]:
    """One ``check_failed`` finding per result that is not a pass, at the check's severity."""
    out = []
    for r in results:
        if r.status == "pass":
            continue
        what = {"fail": "failed", "crashed": "crashed (no verdict)", "timeout": "timed out (no verdict)"}[r.status]
        out.append(Finding(kind=KIND, severity=r.severity, interactions=r.interactions,
                           message=f"check {r.name} {what}: {r.message}"))
    return out


def run_checks(cassette: Cassette, transcript: Transcript, config=None, report: Report | None = None) -> list[Finding]:
    """The ``check_failed`` findings of the checks in ``config`` (a DetectConfig) on one run:
    :func:`findings_of` over :func:`evaluate`."""
    return findings_of(evaluate(cassette, transcript, config, report))
