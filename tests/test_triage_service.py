"""The plain functions behind ``spoolproxy mcp`` (no MCP SDK needed): the workspace (paths
confined to the root, symlinks, the allow-list, redaction), the reading tools, show_run,
annotate, export and the suite runner's refusals, on the examples' real cassettes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from spoolproxy.errors import SpoolError, UsageError
from spoolproxy.suite.annotate import CaseChange
from spoolproxy.triage import actions, runview, service
from spoolproxy.triage.workspace import Workspace, clip, page, parse_allow

from .test_proxy_support import cli_env

REPO = Path(__file__).resolve().parents[1]


def secret_key() -> str:
    return "sk-proj-" + "Zq9x" * 12


def make_project(root: Path) -> Path:
    """A project like the demo's: the examples' cassettes, its suite of three confirmed cases
    (refund, stock-check, lost-order; commands ``python examples/agent_v2.py ...``), the
    agent and its tools, and ``leak.yaml``: a passing run whose answer carries a key-shaped
    string (a cassette that escaped redaction)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "spoolproxy.toml").write_text("")
    shutil.copytree(REPO / "cassettes", root / "cassettes")
    shutil.copytree(REPO / "examples", root / "examples", ignore=shutil.ignore_patterns("spool", "ci", "__pycache__"))
    # the suite's cases, not the results of a local `spoolproxy test --suite examples/spool`
    shutil.copytree(REPO / "examples" / "spool", root / "spool", ignore=shutil.ignore_patterns(".runs"))
    text = (REPO / "cassettes" / "order-status.yaml").read_text(encoding="utf-8")
    (root / "cassettes" / "leak.yaml").write_text(text.replace("PC-77120034", secret_key()), encoding="utf-8")
    return root


@pytest.fixture
def ws(tmp_path) -> Workspace:
    return Workspace.open(make_project(tmp_path / "project"), env={"SPOOLPROXY_MCP_ALLOW": "python examples/* 'Please refund*'"})


def test_workspace_defaults_and_paths_confined_to_the_root(ws, tmp_path):
    assert [ws.rel(p) for p in ws.paths] == ["cassettes", "spool"]
    assert ws.rel(ws.suite) == "spool"
    assert ws.resolve("cassettes/refund.yaml") == ws.root / "cassettes" / "refund.yaml"
    for bad in ("../outside.yaml", "/etc/passwd", "cassettes/../../x"):
        with pytest.raises(UsageError, match="outside the project root"):
            ws.resolve(bad)
    with pytest.raises(UsageError, match="does not exist"):
        ws.resolve("cassettes/nope.yaml")
    # a symlink inside the root may lead elsewhere; results name it by the link
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(REPO / "cassettes", elsewhere)
    (ws.root / "linked").symlink_to(elsewhere)
    real = ws.resolve("linked").resolve()
    assert ws.rel(real / "refund.yaml") == "linked/refund.yaml"
    assert ws.resolve(str(real / "refund.yaml")) == real / "refund.yaml"  # a path the server itself reported
    with pytest.raises(SpoolError, match="not a directory"):
        Workspace.open(tmp_path / "missing")
    # a directory that is no project (a client started the server in $HOME or /) is not searched
    bare = tmp_path / "bare"
    bare.mkdir()
    empty = Workspace.open(bare)
    assert empty.paths == []
    with pytest.raises(UsageError, match="no runs yet.*ingest a directory"):
        service.stats(empty)
    (bare / "pyproject.toml").write_text("")
    assert Workspace.open(bare).paths == [bare.resolve()]


def test_allow_list_parsing_and_matching(ws):
    assert parse_allow(None) == ()
    assert parse_allow(" python agent.py * ;\nnode agent.js *;; ") == ("python agent.py *", "node agent.js *")
    assert ws.allowed(["python", "examples/agent_v2.py", "Please refund order ORD-1002"]) is not None
    assert ws.allowed(["python", "examples/agent_v2.py", "Is the kettle in stock?"]) is None
    assert ws.allowed(["python", "-c", "import os"]) is None


def test_helpers_clip_and_page():
    assert clip("abcdef", 3) == "abc… [3 more characters]"
    assert clip("abc", 3) == "abc"
    chunk, info = page(list(range(5)), 2, 2)
    assert chunk == [2, 3] and info == {"total": 5, "offset": 2, "returned": 2, "next_offset": 4}
    assert page([1], 0, 5)[1]["next_offset"] is None


def test_redact_removes_key_shaped_strings_from_any_result(ws):
    doc = ws.redact({"text": f"key {secret_key()}", "nested": [{secret_key(): 1}], "n": 3})
    dumped = json.dumps(doc)
    assert secret_key() not in dumped and "REDACTED-openai-key-" in dumped and doc["n"] == 3


def test_stats_and_clusters_of_the_examples(ws):
    s = service.stats(ws)
    assert (s["runs"], s["failing"]) == (8, 3)
    assert s["cases"] == {"suite": "spool", "total": 3, "pending": 0, "confirmed": 3, "rejected": 0, "invalid": 0}
    assert set(s["failure_kinds"]) == {"duplicate_side_effect", "html_error_page", "tool_loop"}
    assert s["clusters"]["count"] == 3
    first = service.list_clusters(ws, limit=1, members=0)
    assert len(first["clusters"]) == 1 and first["clusters"][0]["members"] == []
    assert first["clusters"][0]["members_total"] == 1 and first["page"]["next_offset"] == 1
    rest = service.list_clusters(ws, offset=1, limit=10)
    ids = {c["id"] for c in first["clusters"] + rest["clusters"]}
    assert len(ids) == 3 and rest["page"]["next_offset"] is None
    failing = service.list_runs(ws, verdict="fail")
    assert {r["cassette"] for r in failing["runs"]} == {"cassettes/refund.yaml", "cassettes/stock-check.yaml",
                                                         "cassettes/lost-order.yaml"}
    assert all(r["cluster"] in ids and r["case"]["status"] == "confirmed" for r in failing["runs"])
    one = service.list_runs(ws, cluster=failing["runs"][0]["cluster"])
    assert [r["cassette"] for r in one["runs"]] == [failing["runs"][0]["cassette"]]
    with pytest.raises(UsageError, match="no cluster 'cffffff'"):
        service.list_runs(ws, cluster="cffffff")


def test_cases_listing_and_one_case(ws):
    listing = service.list_cases(ws)
    assert [c["name"] for c in listing["cases"]] == ["lost-order", "refund", "stock-check"]
    by_name = {c["name"]: c for c in listing["cases"]}
    assert by_name["refund"]["allowed"] and not by_name["stock-check"]["allowed"]
    assert by_name["refund"]["signature"] == ["duplicate_side_effect"]
    assert service.list_cases(ws, status="pending")["cases"] == []
    refund = service.show_case(ws, "refund")
    assert refund["case"]["failing_cassette"] == "cassettes/refund.yaml" and refund["run"] == "cassettes/refund.yaml"
    assert refund["allowed_by"] == "python examples/* 'Please refund*'" and refund["cluster"] == by_name["refund"]["cluster"]
    with pytest.raises(UsageError, match="no case 'nope'.*lost-order, refund, stock-check"):
        service.show_case(ws, "nope")


def test_show_run_as_transcript_with_findings_paged_and_clipped(ws):
    run = runview.show_run(ws, "refund")  # a case name: its failing run
    assert run["cassette"] == "cassettes/refund.yaml" and run["verdict"] == "fail"
    assert run["root_failure"]["kind"] == "duplicate_side_effect"
    dup = next(f for f in run["findings"] if f["kind"] == "duplicate_side_effect")
    assert dup["interactions"] == [3, 4] and any("refund_id" in e["quote"] for e in dup["evidence"])
    kinds = [s["kind"] for s in run["steps"]]
    assert kinds == ["llm", "http", "llm", "http", "http", "llm"]
    first = run["steps"][0]
    assert "refund" in first["user"].lower() and first["tool_calls"][0]["name"]
    retried, served = run["steps"][3], run["steps"][4]
    assert retried["status"] == 504 and retried["findings"] == ["duplicate_side_effect", "http_error"]
    assert served["served_tool_call"] == {"interaction": 2, "call_id": run["steps"][2]["tool_calls"][0]["id"]}
    assert "RF-5002" in served["response"]
    assert run["final_answer"]["text"] and run["summary"]["tool_calls"] == 2
    small = runview.show_run(ws, "cassettes/refund.yaml", offset=1, limit=2, max_chars=80)
    assert [s["index"] for s in small["steps"]] == [1, 2] and small["page"]["next_offset"] == 3
    focus = runview.show_run(ws, "cassettes/refund.yaml", focus="findings")
    assert {s["index"] for s in focus["steps"]} == {2, 3, 4}
    assert small["steps"][1]["tool_results_in"][0]["content"].endswith("more characters]")  # 226 > 80
    with pytest.raises(UsageError, match="is a directory"):
        runview.show_run(ws, "cassettes")


def test_ingest_tells_known_failures_from_new_ones(ws):
    more = ws.root / "incoming"
    more.mkdir()
    shutil.copy(ws.root / "cassettes" / "refund.yaml", more / "refund-again.yaml")
    shutil.copy(ws.root / "cassettes" / "order-status.yaml", more / "ok.yaml")
    (more / "notes.yaml").write_text("title: not a cassette\n")
    result = service.ingest(ws, "incoming")
    assert (result["runs"], result["failing"]) == (2, 1)
    assert result["skipped"]["total"] == 1 and result["skipped"]["files"][0]["path"] == "incoming/notes.yaml"
    [c] = result["clusters"]
    assert c["kind"] == "duplicate_side_effect" and c["known_runs"] == 1 and c["new_runs"] == 1
    assert c["cases"] == ["refund"] and c["new"] is False
    assert "incoming" in result["working_set"]
    assert service.stats(ws)["runs"] == 10  # the ingested path joined the workspace


def test_annotate_a_case_and_a_cluster_validates_before_writing(ws):
    cluster = service.show_case(ws, "stock-check")["cluster"]
    out = actions.annotate(ws, CaseChange(status="rejected"), cluster=cluster[:5])
    assert out["cluster"] == cluster and [c["name"] for c in out["changed"]] == ["stock-check"]
    assert yaml.safe_load((ws.suite / "stock-check.yaml").read_text())["status"] == "rejected"
    out = actions.annotate(ws, CaseChange(contains=("RF-",), tools=("create_refund",)), cases=["refund"])
    assert out["changed"][0]["assertions"]["final_answer_contains"] == ["RF-"]
    before = {p.name: p.read_text() for p in ws.suite.glob("*.yaml")}
    with pytest.raises(UsageError, match="final_answer_matches: not a valid regex"):
        actions.annotate(ws, CaseChange(status="confirmed", matches="(unclosed"), cases=["lost-order", "refund"])
    assert {p.name: p.read_text() for p in ws.suite.glob("*.yaml")} == before  # nothing half-written
    with pytest.raises(UsageError, match="nothing to change"):
        actions.annotate(ws, CaseChange(), cases=["refund"])
    with pytest.raises(UsageError, match="name the cases"):
        actions.annotate(ws, CaseChange(status="confirmed"))


def test_export_tests_one_case_per_cluster(ws):
    shutil.rmtree(ws.suite)
    out = actions.export_tests(ws, ["cassettes"])
    written = {w["cassette"] for w in out["written"]}
    assert written == {"cassettes/refund.yaml", "cassettes/stock-check.yaml", "cassettes/lost-order.yaml"}
    assert all(w["status"] == "pending" for w in out["written"]) and out["next"]
    assert out["counts"]["skipped"] == 5  # the passing runs (pinned ones, order-status, leak)
    again = actions.export_tests(ws, ["cassettes/refund.yaml"])
    assert again["written"] == [] and "refund" in again["skipped"][0]["why"]
    with pytest.raises(UsageError, match="outside the project root"):
        actions.export_tests(ws, ["../elsewhere"])


def test_run_suite_refuses_commands_off_the_allow_list(tmp_path):
    ws = Workspace.open(make_project(tmp_path / "p"), env={})
    plan = actions.plan_run(ws)
    assert plan["run"] == [] and {r["case"] for r in plan["refused"]} == {"refund", "stock-check", "lost-order"}
    with pytest.raises(SpoolError, match="refused to run 3 case.*SPOOLPROXY_MCP_ALLOW is not set.*"
                                         r"SPOOLPROXY_MCP_ALLOW='python examples/agent_v2.py \*'"):
        actions.run_suite(ws)
    assert not (ws.suite / ".runs").exists()  # nothing ran
    ws.allow = ("python examples/* 'Please refund*'",)
    plan = actions.plan_run(ws)
    assert [name for name, _argv in plan["run"]] == ["refund"] and len(plan["refused"]) == 2
    assert "not on the allow-list" in plan["refused"][0]["why"]
    with pytest.raises(SpoolError, match="refused to run 1 case.*case stock-check"):
        actions.run_suite(ws, ["stock-check"])


def test_write_dashboard_under_the_root(ws):
    out = actions.write_dashboard(ws, "site/index.html", run_reports=False)
    assert out["dashboard"] == "site/index.html" and (ws.root / "site" / "index.html").is_file()
    assert (out["runs"], out["failing"]) == (8, 3)
    assert secret_key() not in (ws.root / "site" / "index.html").read_text()
    with pytest.raises(UsageError, match="give an .html file name"):
        actions.write_dashboard(ws, "site/index.txt")


def test_mcp_command_check_and_missing_sdk(tmp_path):
    project = make_project(tmp_path / "p")
    env = cli_env(tmp_path, SPOOLPROXY_MCP_ALLOW="python examples/agent_v2.py *")
    if _has_sdk():
        r = subprocess.run([sys.executable, "-m", "spoolproxy", "mcp", "--root", str(project), "--check"],
                           capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "runs: cassettes, spool" in r.stdout and "SPOOLPROXY_MCP_ALLOW: python examples/agent_v2.py *" in r.stdout
        assert "tools: stats, list_clusters, list_runs, list_cases, show_case, show_run, ingest, annotate, run_suite, " \
               "export_tests, write_dashboard" in r.stdout
    # an interpreter that cannot import the SDK: a module named mcp that fails to import shadows it
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "mcp.py").write_text("raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n")
    env["PYTHONPATH"] = str(shadow) + os.pathsep + env["PYTHONPATH"]
    r = subprocess.run([sys.executable, "-m", "spoolproxy", "mcp", "--root", str(project)], capture_output=True,
                       text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]  # one line, no traceback
    assert "pip install 'spoolproxy[mcp]'" in r.stderr and r.stderr.startswith("spoolproxy: error: ")


def _has_sdk() -> bool:
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        return False
    return True
