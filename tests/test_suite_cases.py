"""Suite building blocks without a proxy: case files, export-test, annotate, judging,
baselines and JUnit XML.  Cassettes are the committed example runs in ``cassettes/``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from spoolproxy.cassettes import load
from spoolproxy.detectors import analyze, build_transcript
from spoolproxy.errors import SpoolError
from spoolproxy.replayer.report import PlaybackReport, RecordedRef, RequestOutcome
from spoolproxy.suite.baseline import exit_status, load_baseline, mark_regressions, save_baseline
from spoolproxy.suite.export import export
from spoolproxy.suite.files import load_case, save_case
from spoolproxy.suite.junit import junit_xml
from spoolproxy.suite.model import Assertions, Case, CaseError
from spoolproxy.suite.outcome import CaseResult, judge

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_CASSETTES = REPO / "cassettes"


def spoolproxy(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with the example cassettes and a spoolproxy.toml marker."""
    (tmp_path / "spoolproxy.toml").write_text("")
    shutil.copytree(EXAMPLE_CASSETTES, tmp_path / "cassettes")
    return tmp_path


def _case(**over) -> dict:
    doc = {"name": "c1", "status": "confirmed", "command": {"argv": ["python", "agent.py"], "cwd": "."},
           "cassette": "cassettes/refund.yaml"}
    doc.update(over)
    return doc


def test_typo_in_a_case_file_is_one_line_naming_the_key(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump({**_case(), "asertions": {}}))
    with pytest.raises(CaseError) as exc:
        load_case(p)
    msg = str(exc.value)
    assert "unknown key 'asertions'" in msg and "allowed here:" in msg and "assertions" in msg and "\n" not in msg
    p.write_text(yaml.safe_dump(_case(command={"agrv": ["x"]})))
    with pytest.raises(CaseError, match=r"unknown key 'command.agrv' \(allowed here: argv, cwd\)"):
        load_case(p)


@pytest.mark.parametrize("over, expect", [
    ({"status": "done"}, "status"),
    ({"assertions": {"final_answer_matches": "("}}, "not a valid regex"),
    ({"name": "has space"}, "name"),
    ({"command": {"argv": []}}, "command.argv"),
])
def test_invalid_case_values(tmp_path: Path, over: dict, expect: str) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(_case(**over)))
    with pytest.raises(CaseError, match=expect):
        load_case(p)


def test_not_yaml_and_not_a_mapping(tmp_path: Path) -> None:
    p = tmp_path / "x.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(CaseError, match="not valid YAML"):
        load_case(p)
    p.write_text("- a list\n")
    with pytest.raises(CaseError, match="must be a YAML mapping"):
        load_case(p)


def test_case_round_trips_through_its_file(tmp_path: Path) -> None:
    case = Case.model_validate(_case(assertions={"final_answer_contains": "RF-", "max_llm_calls": 3}))
    assert case.assertions.final_answer_contains == ["RF-"]
    p = save_case(case, tmp_path / "c1.yaml")
    assert load_case(p) == case
    assert "tools_called" not in p.read_text()  # empty optional assertions are left out


def test_export_writes_one_case_per_failing_run(project: Path) -> None:
    suite = project / "spool"
    paths = sorted((project / "cassettes").glob("*.yaml"))
    results = {r.cassette.name: r for r in export([p for p in paths if "pinned" not in p.name], suite)}
    assert results["order-status.yaml"].action == "skipped"
    assert {n for n, r in results.items() if r.action == "written"} == {"lost-order.yaml", "refund.yaml",
                                                                          "stock-check.yaml"}
    refund = load_case(suite / "refund.yaml")
    assert refund.status == "pending"
    assert refund.command.argv[0] == "python" and refund.command.argv[1] == "agent.py"
    assert refund.command.cwd == "."
    assert refund.cassette == "cassettes/refund.yaml"
    assert refund.match == "exact" and refund.routing.replay == ["*"] and refund.routing.live == []
    assert refund.signature_kinds == ["duplicate_side_effect"]
    assert set(load_case(suite / "stock-check.yaml").signature_kinds) >= {"html_error_page"}
    assert set(load_case(suite / "lost-order.yaml").signature_kinds) >= {"tool_loop"}
    # exporting again does not duplicate; --force overwrites in place
    again = export([project / "cassettes" / "refund.yaml"], suite)
    assert again[0].action == "skipped" and "already exported" in again[0].message
    forced = export([project / "cassettes" / "refund.yaml"], suite, force=True, cmd="python fixed.py --x 'a b'",
                    status="confirmed", assertions=Assertions(tools_called=["create_refund"]))
    assert forced[0].action == "written" and forced[0].case_path == suite / "refund.yaml"
    case = load_case(suite / "refund.yaml")
    assert case.command.argv == ["python", "fixed.py", "--x", "a b"] and case.status == "confirmed"
    assert case.assertions.tools_called == ["create_refund"]
    assert len(list(suite.glob("*.yaml"))) == 3


def test_export_test_cli_and_bad_input(project: Path) -> None:
    cas = load(project / "cassettes" / "refund.yaml")
    cas.meta.command = None
    from spoolproxy.cassettes import save

    save(cas, project / "cassettes" / "nocmd.yaml")
    r = spoolproxy("export-test", "cassettes/nocmd.yaml", "cassettes/refund.yaml", "--confirm", cwd=project)
    assert r.returncode == 2
    assert "spoolproxy: error: " in r.stderr and "records no command; pass --cmd" in r.stderr
    assert "Traceback" not in r.stderr
    assert "wrote spool/refund.yaml (confirmed; signature: duplicate_side_effect)" in r.stdout
    r = spoolproxy("export-test", "cassettes/missing.yaml", cwd=project)
    assert r.returncode != 0 and "Traceback" not in r.stderr and r.stderr.startswith("spoolproxy: error:")


def test_annotate_sets_status_and_assertions(project: Path) -> None:
    export([project / "cassettes" / "refund.yaml"], project / "spool")
    r = spoolproxy("annotate", "refund", "--status", "confirmed", "--final-answer-contains", "refund",
                   "--tool", "create_refund", "--max-llm-calls", "4", cwd=project)
    assert r.returncode == 0, r.stderr
    case = load_case(project / "spool" / "refund.yaml")
    assert case.status == "confirmed"
    assert case.assertions.final_answer_contains == ["refund"] and case.assertions.tools_called == ["create_refund"]
    assert case.assertions.max_llm_calls == 4
    r = spoolproxy("annotate", "spool/refund.yaml", "--status", "rejected", "--clear-assertions", cwd=project)
    assert r.returncode == 0 and load_case(project / "spool" / "refund.yaml").assertions == Assertions()
    assert load_case(project / "spool" / "refund.yaml").status == "rejected"
    r = spoolproxy("annotate", "refund", cwd=project)
    assert r.returncode == 2 and r.stderr.startswith("spoolproxy: error: nothing to change")
    r = spoolproxy("annotate", "nope", "--status", "confirmed", cwd=project)
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr


def _report(*outcomes: str) -> PlaybackReport:
    ref = RecordedRef(cassette="c.yaml", interaction=0, method="POST", uri="http://model.example/v1/chat/completions")
    return PlaybackReport(match="exact", requests=[
        RequestOutcome(seq=i + 1, outcome=o, method="POST", uri=ref.uri, nearest=ref if o == "miss" else None,
                       served=ref if o != "miss" else None) for i, o in enumerate(outcomes)])


def test_judge_orders_the_outcomes(project: Path) -> None:
    v1 = load(project / "cassettes" / "refund.yaml")
    v2 = load(project / "cassettes" / "refund.pinned.yaml")
    case = Case.model_validate(_case(signature=[{"kind": "duplicate_side_effect", "message": "twice"}]))
    kw = {"exit_code": 0, "recorded_exit": 0, "recorded_interactions": 6}
    out, why, _ = judge(case, _report("exact"), analyze(v1), build_transcript(v1), **kw)
    assert out == "still_fails" and "duplicate_side_effect" in why
    out, why, _ = judge(case, _report("exact"), analyze(v2), build_transcript(v2), **kw)
    assert out == "passes" and "gone" in why
    out, why, lines = judge(case, _report("exact", "miss"), analyze(v1), build_transcript(v1), **kw)
    assert out == "unreplayable" and "not in the cassette" in why and any("MISS" in ln for ln in lines)
    diverged = case.model_copy(update={"match": "default"})
    out, _, lines = judge(diverged, _report("divergence"), analyze(v2), build_transcript(v2), **kw)
    assert out == "passes" and any(ln.startswith("DIVERGENCE #1") for ln in lines)  # listed in the details
    assert judge(case, _report("divergence"), analyze(v2), build_transcript(v2), **kw)[0] == "unreplayable"
    strict = case.model_copy(update={"assertions": Assertions(final_answer_matches=r"RF-\d+", tools_called=["nope"])})
    out, why, lines = judge(strict, _report("exact"), analyze(v2), build_transcript(v2), **kw)
    assert out == "fails_differently" and why.startswith("assertion failed: final answer does not match")
    assert any("tool 'nope' was never called" in ln for ln in lines)
    other = case.model_copy(update={"signature": []})
    out, why, _ = judge(other, _report("exact"), analyze(v1), build_transcript(v1), **kw)
    assert out == "fails_differently" and why.startswith("new failure: duplicate_side_effect")
    out, why, _ = judge(case, _report(), analyze(v2), build_transcript(v2), **kw)
    assert out == "fails_differently" and "no request through the proxy" in why
    out, why, _ = judge(case, _report("exact"), analyze(v2), build_transcript(v2), exit_code=3, recorded_exit=0,
                        recorded_interactions=6)
    assert out == "fails_differently" and "exited 3" in why


def test_baseline_and_regressions(tmp_path: Path) -> None:
    results = [CaseResult("a", "passes", ""), CaseResult("b", "still_fails", ""), CaseResult("c", None, "pending")]
    p = save_baseline(tmp_path / "b.json", results)
    assert json.loads(p.read_text()) == {"version": 1, "cases": {"a": "passes", "b": "still_fails"}}
    assert load_baseline(p) == {"a": "passes", "b": "still_fails"}
    assert load_baseline(tmp_path / "none.json") == {}
    now = [CaseResult("a", "unreplayable", ""), CaseResult("b", "passes", ""), CaseResult("d", "still_fails", "")]
    regressions = mark_regressions(now, load_baseline(p))
    assert [r.name for r in regressions] == ["a"] and now[0].baseline == "passes" and not now[2].regression
    assert exit_status(now, regressions, "regression") == 1
    assert exit_status(now, [], "regression") == 0  # known failures alone do not fail the run
    assert exit_status(now, [], "any") == 1
    assert exit_status([CaseResult("x", "passes", ""), CaseResult("y", None, "pending")], [], "any") == 0
    assert exit_status([CaseResult("x", "error", "bad case")], [], "regression") == 1
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(SpoolError, match="not valid JSON"):
        load_baseline(tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text('{"cases": {"a": "great"}}')
    with pytest.raises(SpoolError, match="no valid 'cases'"):
        load_baseline(tmp_path / "bad.json")


def test_junit_xml_structure() -> None:
    results = [
        CaseResult("ok", "passes", "signature gone", duration_s=1.5),
        CaseResult("still", "still_fails", "signature came back: tool_loop", details=["error tool_loop ..."]),
        CaseResult("diff", "fails_differently", "new failure: <html> & \x01 control"),
        CaseResult("gone", "unreplayable", "1 request not in the cassette"),
        CaseResult("broken", "error", "command not found: nope"),
        CaseResult("later", None, "status: pending"),
    ]
    root = ET.fromstring(junit_xml(results, "spool"))
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "spoolproxy"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("6", "3", "1", "1")
    cases = {tc.get("name"): tc for tc in suite.findall("testcase")}
    assert set(cases) == {r.name for r in results}
    assert all(tc.get("classname") == "spoolproxy.spool" and float(tc.get("time")) >= 0 for tc in cases.values())
    assert list(cases["ok"]) == []
    assert cases["still"].find("failure").get("type") == "still_fails"
    assert "tool_loop" in cases["still"].find("failure").text
    assert cases["diff"].find("failure").get("message") == "new failure: <html> &  control"
    assert cases["gone"].find("failure").get("type") == "unreplayable"
    assert cases["broken"].find("error").get("message") == "command not found: nope"
    assert cases["later"].find("skipped").get("message") == "status: pending"


def test_export_dedup_keeps_one_case_per_cluster(project: Path) -> None:
    shutil.copy(project / "cassettes" / "refund.yaml", project / "cassettes" / "refund-again.yaml")
    r = spoolproxy("export-test", "cassettes/refund.yaml", "cassettes/refund-again.yaml", "cassettes/stock-check.yaml",
                   "--dedup", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "refund-again.yaml: skipped: same root cause as cassettes/refund.yaml (cluster c" in r.stdout
    assert sorted(p.name for p in (project / "spool").glob("*.yaml")) == ["refund.yaml", "stock-check.yaml"]
