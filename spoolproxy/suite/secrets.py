"""Secrets in a regression run's outputs: one redactor per case, applied to every report.

An artifact run writes the recorded cassette, the playback report, the command's output
log, and its result feeds the JUnit XML, the Markdown summary, ``--json`` and the terminal
table.  The agent may print a key, a tool may echo a password: :func:`case_redactor` is the
project's ``[redact]`` rules plus the child's ``*_API_KEY``/``*_TOKEN``/``*_SECRET``
values, and it remembers every secret the recorder redacts from the run's traffic, so
:func:`redact_result` (and the log and report writers) hide those too.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Mapping

from ..cassettes.redact import Redactor
from .outcome import CaseResult


def case_redactor(root: Path | None = None, env: Mapping[str, str] | None = None) -> Redactor:
    """A fresh Redactor with the ``[redact]`` table of the project at ``root`` (the
    ``spoolproxy.toml`` found from there) that already knows the secrets in ``env``
    (default ``os.environ``).  Raises SpoolError/UsageError for a bad ``[redact]`` table."""
    from ..config import find_config, section

    config = find_config(root) if root is not None else find_config()
    red = Redactor.from_config(section("redact", config))
    red.learn_env(os.environ if env is None else env)
    return red


def redact_result(result: CaseResult, red: Redactor) -> CaseResult:
    """``result`` with every text a report shows redacted: explanation, details, finding
    messages and evidence quotes."""
    findings = [f.model_copy(update={
        "message": red.text(f.message),
        "evidence": [e.model_copy(update={"quote": red.text(e.quote)}) for e in f.evidence],
    }) for f in result.findings]
    return replace(result, explanation=red.text(result.explanation), details=[red.text(d) for d in result.details],
                   findings=findings)
