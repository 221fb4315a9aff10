"""``spoolproxy test --repeat K --fail-under RATE``: each case's pass rate and a suite-level
gate, in the table, JSON, JUnit and Markdown.  Offline: the example suite (the demo's
pinned v2 runs) replayed through the real proxy with the real agent."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

import pytest
import yaml

from tests.fixproject import REPO, STOCK_Q, spoolproxy


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("passrate")
    (root / "spoolproxy.toml").write_text("")
    shutil.copytree(REPO / "cassettes", root / "cassettes")
    (root / "examples").mkdir()
    shutil.copytree(REPO / "examples" / "spool", root / "examples" / "spool", ignore=shutil.ignore_patterns(".runs"))
    shutil.copy(REPO / "examples" / "agent_v1.py", root / "examples" / "agent_v1.py")
    shutil.copy(REPO / "examples" / "agent_v2.py", root / "examples" / "agent_v2.py")
    (root / "examples" / "spool" / "baseline.json").unlink()
    return root


def test_all_pass_meets_the_gate(project):
    r = spoolproxy(project, "test", "--suite", "examples/spool", "--case", "refund", "--repeat", "2",
                   "--fail-under", "95%", "--junit", "ok.xml", "--markdown", "ok.md")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pass rate: 2/2 runs (100%, 95% CI 34%-100%); --fail-under 0.95: ok" in r.stdout
    assert "2/2 (100%)" in r.stdout  # the per-case column
    suite = ET.parse(project / "ok.xml").getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props == {"runs": "2", "passed_runs": "2", "pass_rate": "1.0000", "fail_under": "0.95",
                     "below_fail_under": "false"}
    assert "| refund | ✅ passes | 2/2 |" in (project / "ok.md").read_text()


def test_a_failing_case_pulls_the_rate_below_the_gate(project):
    (project / "examples" / "spool" / "stock-v1.yaml").write_text(yaml.safe_dump({
        "name": "stock-v1", "status": "confirmed", "command": {"argv": ["python", "examples/agent_v1.py", STOCK_Q]},
        "cassette": "cassettes/stock-check.yaml", "signature": [{"kind": "html_error_page"}]}))
    try:
        r = spoolproxy(project, "test", "--suite", "examples/spool", "--case", "refund", "--case", "stock-v1",
                       "--repeat", "2", "--fail-under", "0.9", "--json", "--markdown", "low.md")
    finally:
        (project / "examples" / "spool" / "stock-v1.yaml").unlink()
    data = json.loads(r.stdout)
    # a known failure alone would not fail the run under --fail-on regression; the pass-rate gate does
    assert r.returncode == 1 and data["exit_code"] == 1
    s = data["summary"]
    assert (s["runs"], s["passed_runs"], s["pass_rate"], s["below_fail_under"]) == (4, 2, 0.5, True)
    row = next(x for x in data["results"] if x["name"] == "stock-v1")
    assert (row["runs"], row["passed_runs"], row["pass_rate"]) == (2, 0, 0.0)
    md = (project / "low.md").read_text()
    assert "Pass rate: 2/4 runs (50%" in md and "--fail-under 0.9: **FAILED** (below the threshold)" in md


def test_bad_rate_is_a_usage_error(project):
    r = spoolproxy(project, "test", "--suite", "examples/spool", "--fail-under", "1.5")
    assert r.returncode == 2 and "outside 0-1" in r.stderr
