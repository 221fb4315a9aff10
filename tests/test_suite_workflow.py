"""``spoolproxy test`` end to end: real playback through mitmproxy, the real agents (openai
SDK + httpx), artifact runs, every outcome kind, baseline regressions, JUnit, pinning and
error outcomes for bad cases.

One suite run (module fixture) covers most of it; the committed example cassettes in
``cassettes/`` are the recordings (v1 failing runs, v2 pinned runs).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))

import model_server  # noqa: E402

from spoolproxy.cassettes import load  # noqa: E402
from spoolproxy.suite.export import export  # noqa: E402
from spoolproxy.suite.files import load_case  # noqa: E402

REFUND_Q = "Please refund order ORD-1002, the mug arrived broken."
STOCK_Q = "Is the blue kettle KET-BLU in stock?"


def spoolproxy(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=240)


def write_case(suite: Path, name: str, **fields) -> None:
    doc = {"name": name, "status": "confirmed", **fields}
    (suite / f"{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.fixture(scope="module")
def model():
    server = model_server.start()
    yield server
    server.shutdown()


@pytest.fixture(scope="module")
def project(tmp_path_factory, model) -> Path:
    """A project whose suite holds one case per outcome kind, run once with --pin."""
    root = tmp_path_factory.mktemp("project")
    (root / "spoolproxy.toml").write_text("")
    shutil.copytree(REPO / "cassettes", root / "cassettes")
    shutil.copy(root / "cassettes" / "refund.yaml", root / "cassettes" / "refund-live.yaml")
    for v in ("v1", "v2"):
        shutil.copy(REPO / "examples" / f"agent_{v}.py", root / f"agent_{v}.py")
    suite = root / "spool"
    export([root / "cassettes" / "stock-check.yaml"], suite, status="confirmed")  # signature from the detectors
    stock = load_case(suite / "stock-check.yaml")
    stock_sig = [f.model_dump() for f in stock.signature]
    v1_stock = {"argv": ["python", "agent_v1.py", STOCK_Q]}
    v2_refund = {"argv": ["python", "agent_v2.py", REFUND_Q]}
    (suite / "stock-check.yaml").unlink()
    write_case(suite, "stock-v1", command=v1_stock, cassette="cassettes/stock-check.yaml", signature=stock_sig)
    write_case(suite, "stock-new-way", command=v1_stock, cassette="cassettes/stock-check.yaml",
               signature=[{"kind": "tool_loop", "message": "an older failure"}])
    write_case(suite, "refund-fixed", command=v2_refund, cassette="cassettes/refund.pinned.yaml",
               signature=[{"kind": "duplicate_side_effect"}])
    write_case(suite, "refund-changed", command=v2_refund, cassette="cassettes/refund.yaml",
               signature=[{"kind": "duplicate_side_effect"}])
    write_case(suite, "refund-live", command=v2_refund, cassette="cassettes/refund-live.yaml",
               routing={"live": ["model.example"]}, signature=[{"kind": "duplicate_side_effect"}])
    write_case(suite, "no-program", command={"argv": ["no-such-agent-program", "x"]},
               cassette="cassettes/refund.yaml")
    write_case(suite, "no-cassette", command=v2_refund, cassette="cassettes/missing.yaml")
    write_case(suite, "later", status="pending", command=v2_refund, cassette="cassettes/refund.yaml")
    write_case(suite, "twin", status="pending", command=v2_refund, cassette="cassettes/refund.yaml")
    (suite / "twin-copy.yaml").write_text((suite / "twin.yaml").read_text())  # same name in another file
    (suite / "typo.yaml").write_text(yaml.safe_dump({"name": "typo", "status": "confirmed", "comand": {}}))
    (root / "baseline.json").write_text(json.dumps({"version": 1, "cases": {"stock-v1": "passes",
                                                                           "refund-fixed": "passes"}}))
    port = model.server_address[1]
    run = spoolproxy("test", "--json", "--junit", "report.xml", "--markdown", "summary.md", "--pin", "--baseline", "baseline.json",
                     "--update-baseline", "--connect-to", f"model.example:80:127.0.0.1:{port}", cwd=root)
    (root / "run.json").write_text(run.stdout)
    (root / "run.rc").write_text(str(run.returncode))
    (root / "run.err").write_text(run.stderr)
    return root


@pytest.fixture(scope="module")
def results(project: Path) -> dict[str, dict]:
    err = (project / "run.err").read_text()
    assert "Traceback" not in err, err
    data = json.loads((project / "run.json").read_text())
    out: dict[str, dict] = {}
    for r in data["results"]:
        out[r["name"] + ("-dup" if r["name"] in out else "")] = r
    return out


def test_each_outcome_kind(results: dict[str, dict]) -> None:
    outcomes = {n: r["outcome"] for n, r in results.items() if n != "twin-dup"}
    assert results["twin-dup"]["outcome"] == "error"
    assert outcomes == {
        "stock-v1": "still_fails", "stock-new-way": "fails_differently", "refund-fixed": "passes",
"refund-changed": "unreplayable", "refund-live": "passes",
        "no-program": "error", "no-cassette": "error", "typo": "error", "later": None,
        "twin": None,
    }
    assert "case name 'twin' is already used by twin-copy.yaml" in results["twin-dup"]["explanation"]
    assert results["stock-v1"]["explanation"].startswith("signature came back: html_error_page")
    assert results["stock-new-way"]["explanation"].startswith("new failure: html_error_page")
    assert results["later"]["explanation"] == "status: pending"


def test_unreplayable_shows_the_near_miss_diff(results: dict[str, dict]) -> None:
    r = results["refund-changed"]
    assert "not in the cassette, first: POST http://model.example/v1/chat/completions" in r["explanation"]
    details = "\n".join(r["details"])
    assert "$.messages[5].content" in details and "RF-5002" in details and "timed out (HTTP 504)" in details
    assert "spoolproxy test --case refund-changed --live model.example --pin" in details


def test_error_outcomes_are_one_line(results: dict[str, dict]) -> None:
    assert "command not found: no-such-agent-program is not on PATH" in results["no-program"]["explanation"]
    assert "cassette cassettes/missing.yaml does not exist" in results["no-cassette"]["explanation"]
    assert "unknown key 'comand'" in results["typo"]["explanation"]
    assert "did you mean 'command'?" in results["typo"]["explanation"]
    for name in ("no-program", "no-cassette", "typo"):
        assert "\n" not in results[name]["explanation"]


def test_artifact_runs_are_recorded_and_judged(project: Path, results: dict[str, dict]) -> None:
    art = project / results["stock-v1"]["artifact"]  # paths are as given (relative to the cwd)
    assert art.is_file() and art.parent == project / "spool" / ".runs" / "stock-v1"
    cas = load(art)
    assert [i.request.uri for i in cas.interactions] == [i.request.uri for i in
                                                        load(project / "cassettes" / "stock-check.yaml").interactions]
    assert cas.interactions[1].response.status == 502 and b"502 Bad Gateway" in cas.interactions[1].response.body
    assert cas.meta.extra["case"] == "stock-v1"
    assert cas.meta.cwd == "."  # relative to the project, as `record` stores it: no machine's path in a pinned run
    report = json.loads((project / results["stock-v1"]["report"]).read_text())
    assert {r["outcome"] for r in report["requests"]} == {"exact"}
    stem = art.name.removesuffix(".yaml")  # the run's report and log carry the artifact's stamp
    assert Path(results["stock-v1"]["report"]).name == f"{stem}.report.json"
    assert (art.parent / f"{stem}.log").is_file()
    assert {f["kind"] for f in results["stock-v1"]["findings"]} >= {"html_error_page"}
    live = load(project / results["refund-live"]["artifact"])
    assert live.meta.extra["live"] == ["model.example"]


def test_baseline_regression_and_exit_status(project: Path, results: dict[str, dict]) -> None:
    data = json.loads((project / "run.json").read_text())
    assert data["summary"]["regressions"] == ["stock-v1"]
    assert results["stock-v1"]["regression"] is True and results["refund-fixed"]["regression"] is False
    assert data["exit_code"] == 1 and (project / "run.rc").read_text() == "1"
    written = json.loads((project / "baseline.json").read_text())["cases"]
    assert written["stock-v1"] == "still_fails" and written["refund-fixed"] == "passes"
    assert "later" not in written


def test_junit_report_is_valid(project: Path, results: dict[str, dict]) -> None:
    root = ET.parse(project / "report.xml").getroot()
    suite = root.find("testsuite")
    assert root.tag == "testsuites" and suite is not None
    cases = {tc.get("name"): tc for tc in suite.iter("testcase")}
    assert set(cases) == {n for n in results if n != "twin-dup"}
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("11", "3", "4", "2")
    assert cases["refund-changed"].find("failure").get("type") == "unreplayable"
    assert cases["no-program"].find("error") is not None
    assert cases["later"].find("skipped") is not None
    assert list(cases["refund-fixed"].iter("failure")) == []


def test_markdown_summary(project: Path) -> None:
    md = (project / "summary.md").read_text()
    assert md.startswith("### spoolproxy test: ")
    assert "| stock-v1 | ❌ still_fails **REGRESSION** | passes | signature came back: html_error_page" in md
    assert "<details><summary>refund-changed: unreplayable</summary>" in md and "$.messages[5].content" in md
    assert "| later | ⏸️ skipped (pending) | - | status: pending |" in md


def test_pin_saves_the_passing_run_and_it_replays_offline(project: Path, results: dict[str, dict]) -> None:
    pinned = project / "cassettes" / "refund-live.pinned.yaml"
    assert project / results["refund-live"]["pinned"] == pinned and pinned.is_file()
    case = load_case(project / "spool" / "refund-live.yaml")
    assert case.cassette == "cassettes/refund-live.pinned.yaml"
    assert case.failing_cassette == "cassettes/refund-live.yaml"
    assert case.routing.live == ["model.example"]  # the case still says which host is live ...
    assert results["refund-changed"]["pinned"] is None  # only passing runs are pinned
    # ... and offline (no model server reachable, --live overridden to nothing) the pinned run replays
    (project / "spool" / "refund-live.yaml").write_text(
        (project / "spool" / "refund-live.yaml").read_text().replace("live: [model.example]", "live: []"))
    run = spoolproxy("test", "--case", "refund-live", "--case", "refund-fixed", "--json", "--fail-on", "any",
                     "--repeat", "2", "--jobs", "2", cwd=project)  # two worker processes, two runs each
    data = json.loads(run.stdout)
    assert [(r["name"], r["outcome"]) for r in data["results"]] == [("refund-fixed", "passes"), ("refund-live", "passes")]
    assert all(r["explanation"].startswith("2/2 runs passed; ") for r in data["results"])
    assert run.returncode == 0 and data["exit_code"] == 0
    art = load(project / data["results"][1]["artifact"])
    assert all(not i.request.uri.startswith("http://spoolproxy") for i in art.interactions)
    assert art.meta.extra["live"] == []


def test_missing_suite_and_unknown_case(project: Path) -> None:
    run = spoolproxy("test", "--suite", "nope", cwd=project)
    assert run.returncode == 2 and run.stderr.startswith("spoolproxy: error: suite directory nope does not exist")
    run = spoolproxy("test", "--case", "ghost", cwd=project)
    assert run.returncode == 2 and "no case named ghost" in run.stderr and "Traceback" not in run.stderr


def test_a_case_that_times_out_is_an_error_and_the_suite_goes_on(project: Path) -> None:
    suite = project / "spool"
    write_case(suite, "sleepy", command={"argv": ["python", "-c", "import time; time.sleep(30)"]},
               cassette="cassettes/refund.yaml")
    try:
        run = spoolproxy("test", "--case", "sleepy", "--case", "stock-v1", "--timeout", "4", "--json", cwd=project)
        table = spoolproxy("test", "--case", "sleepy", "--timeout", "2", cwd=project)
    finally:
        (suite / "sleepy.yaml").unlink()
    assert table.returncode == 1 and "exit 1: sleepy could not be run (outcome error" in table.stdout, table.stdout
    assert "Traceback" not in run.stderr, run.stderr
    got = {r["name"]: r for r in json.loads(run.stdout)["results"]}
    assert got["sleepy"]["outcome"] == "error" and "did not finish within 4 s" in got["sleepy"]["explanation"]
    assert got["stock-v1"]["outcome"] in ("still_fails", "error")  # the suite went on (error only on a very slow machine)
    assert got["stock-v1"]["outcome"] == "still_fails" or "did not finish" in got["stock-v1"]["explanation"]
