"""Detect: read a cassette as an agent transcript and flag failing runs with evidence.

Public entry points (used by ``spoolproxy detect``/``show``, the record summary and the
regression-test runner):

* :func:`build_transcript(cassette) <build_transcript>` -> :class:`~.models.Transcript`
* :func:`analyze(cassette, config=None) <analyze>` -> :class:`~.models.Report`

``config`` is a :class:`~.config.DetectConfig`, a ``[detect]``-shaped dict, or None for
the shipped defaults (pass :func:`~.config.load_detect_config()` to honour the project's
``spoolproxy.toml``).
"""

from __future__ import annotations

from typing import Any

from ..cassettes.model import Cassette
from ..errors import SpoolError
from .config import DetectConfig, load_detect_config
from .evidence import EvidenceBuilder
from .models import SEVERITY_RANK, CheckResult, Evidence, Finding, Report, RunCost, Transcript
from .transcript import build_transcript as _build

__all__ = ["analyze", "build_transcript", "DetectConfig", "load_detect_config", "Report", "Finding", "Evidence",
           "Transcript", "SEVERITY_RANK", "CheckResult", "RunCost", "run_cost"]


def build_transcript(cassette: Cassette, config: DetectConfig | None = None) -> Transcript:
    """The cassette as ordered steps with linked tool results, final answer, totals, cost."""
    cfg = config or DetectConfig()
    return _build(cassette, tuple(cfg.output_tools), cfg.price_book())


def _config(config: DetectConfig | dict[str, Any] | None) -> DetectConfig:
    if config is None:
        return DetectConfig()
    if isinstance(config, DetectConfig):
        return config
    try:
        return DetectConfig.model_validate(config)
    except ValueError as exc:
        raise SpoolError(f"invalid [detect] settings: {str(exc).splitlines()[0]}") from None


def analyze(cassette: Cassette, config: DetectConfig | dict[str, Any] | None = None,
            transcript: Transcript | None = None) -> Report:
    """Run every detector over ``cassette`` and return its :class:`Report`.

    Findings are sorted by first interaction, then kind; the verdict is ``fail`` when any
    finding is error or critical.  The report also carries the run's cost and, when the
    config holds user checks (``[[checks]]``, :mod:`spoolproxy.checks`), their results, a
    ``check_failed`` finding for each one that did not pass.  Raises SpoolError only for an
    invalid ``config`` dict.
    """
    from .checks import DETECTORS
    from .checks.base import Context

    cfg = _config(config)
    t = transcript or build_transcript(cassette, cfg)
    ctx = Context(cassette=cassette, transcript=t, config=cfg, ev=EvidenceBuilder(cassette, t))
    findings: list[Finding] = ctx.prior
    for det in DETECTORS:
        if det.KIND in cfg.disable:
            continue
        findings.extend(det.check(ctx))
    findings.sort(key=lambda f: (f.interactions[0] if f.interactions else -1, f.kind))
    report = Report(cassette=str(cassette.path) if cassette.path else None, findings=findings, cost=run_cost(t))
    if cfg.checks:
        from ..checks import evaluate, findings_of

        report.checks = evaluate(cassette, t, cfg, report.model_copy(deep=True))
        report.findings = findings + findings_of(report.checks)
    fail = any(SEVERITY_RANK[f.severity] >= SEVERITY_RANK["error"] for f in report.findings)
    report.verdict = "fail" if fail else "pass"
    return report


def run_cost(t: Transcript) -> RunCost:
    """The run's :class:`RunCost` from its transcript."""
    calls = sum(1 for s in t.steps if s.llm is not None
                and (s.llm.usage.input_tokens is not None or s.llm.usage.output_tokens is not None))
    return RunCost(usd=t.cost_usd, calls=calls, unpriced_models=t.unpriced_models, sources=t.price_sources,
                   prices_as_of=t.price_table_date)
