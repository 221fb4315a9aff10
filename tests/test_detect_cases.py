"""The 22 labelled agent runs in ../shared/cases, scored exactly as their README says:
each expected finding reported (kind, one shared interaction, at least its minimum
severity), no forbidden kind, the right verdict; all with the default configuration.
Also: ``spoolproxy detect --json`` over the whole directory, and every evidence quote
verified against the field it cites."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from spoolproxy.cassettes import load
from spoolproxy.detectors import SEVERITY_RANK, analyze, build_transcript
from spoolproxy.detectors.evidence import EvidenceBuilder

from .conftest import CASES, REPO

CASE_DIRS = sorted(p for p in CASES.iterdir() if (p / "expected.yaml").is_file()) if CASES.is_dir() else []


def score(report, expected: dict) -> list[str]:
    """Problems of ``report`` against one case's labels (empty when it passes)."""
    problems = []
    for e in expected.get("findings") or []:
        ok = any(f.kind == e["kind"] and set(f.interactions) & set(e["interactions"])
                 and SEVERITY_RANK[f.severity] >= SEVERITY_RANK[e["min_severity"]] for f in report.findings)
        if not ok:
            problems.append(f"missing {e['kind']} at {e['interactions']} >= {e['min_severity']}")
    for f in report.findings:
        if f.kind in (expected.get("forbidden") or []):
            problems.append(f"forbidden {f.kind} ({f.severity}) at {f.interactions}: {f.message}")
    if report.verdict != expected["verdict"]:
        problems.append(f"verdict {report.verdict}, expected {expected['verdict']}")
    return problems


@pytest.mark.parametrize("case", CASE_DIRS, ids=[p.name for p in CASE_DIRS])
def test_case(case: Path, cases_dir):
    expected = yaml.safe_load((case / "expected.yaml").read_text())
    report = analyze(load(case / "cassette.yaml"))
    assert score(report, expected) == []


@pytest.mark.parametrize("case", CASE_DIRS, ids=[p.name for p in CASE_DIRS])
def test_every_quote_is_verbatim(case: Path, cases_dir):
    cas = load(case / "cassette.yaml")
    t = build_transcript(cas)
    report = analyze(cas, transcript=t)
    ev = EvidenceBuilder(cas, t)
    assert report.findings == [] or any(f.evidence for f in report.findings)
    for f in report.findings:
        for e in f.evidence:
            field = ev.resolve(e.interaction, e.path)
            assert field is not None and e.quote in field, (f.kind, e)


def test_detect_cli_json_lines_over_all_cases(cases_dir, tmp_path):
    env = {**os.environ, "SPOOLPROXY_CONFIG": str(tmp_path / "none.toml")}
    (tmp_path / "none.toml").write_text("")
    proc = subprocess.run([sys.executable, "-m", "spoolproxy", "detect", str(cases_dir), "--json"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(lines) == len(CASE_DIRS) == 22
    for doc in lines:
        assert set(doc) == {"cassette", "verdict", "findings", "cost", "checks"}
        for f in doc["findings"]:
            assert set(f) == {"kind", "severity", "interactions", "message", "evidence"}
            assert all(set(e) == {"interaction", "path", "quote"} for e in f["evidence"])
        expected = yaml.safe_load((Path(doc["cassette"]).parent / "expected.yaml").read_text())
        assert doc["verdict"] == expected["verdict"], doc["cassette"]
    # every expected.yaml is skipped with one warning line, not a crash
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("spoolproxy: warning: skipped")]
    assert len(warnings) == 22 and "Traceback" not in proc.stderr
    parallel = subprocess.run([sys.executable, "-m", "spoolproxy", "detect", str(cases_dir), "--json", "--jobs", "2"],
                              capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert parallel.returncode == 0 and parallel.stdout == proc.stdout  # same lines, same order
    failing = subprocess.run([sys.executable, "-m", "spoolproxy", "detect", str(cases_dir / "13-clean-openai-multi-tool"),
                              str(cases_dir / "07-empty-assistant-message"), "--fail-on", "error"],
                             capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    assert failing.returncode == 1 and "empty_output" in failing.stdout and "1 fail" in failing.stdout
