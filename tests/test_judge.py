"""The model judge: checked quotes, the heuristic, the recorded judge, fix proposals.

The judge's client is httpx (the real HTTP client the judge ships with) against
tests.fakes.judge_server, a fake OpenAI-compatible / Anthropic server with scripted
judgements; its traffic goes through spoolproxy's own recorder and playback in-process.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from spoolproxy.detectors.evidence import EvidenceBuilder
from spoolproxy.judge import JudgeOptions, JudgeSettings, diagnose, load_run, off_track, propose
from spoolproxy.judge.cache import judge_cassette, results_path
from spoolproxy.judge.parse import AnswerError, extract_json
from spoolproxy.judge.proposals import run_literals, validate
from spoolproxy.judge.quotes import find_verbatim, settle
from spoolproxy.judge.taxonomy import FAILURE_LABELS, normalize_label
from tests.conftest import REPO
from tests.fakes.judge_server import JudgeServer, asks_for_fixes
from tests.judge_fixture import ANSWER, DATA

SPOOL = [sys.executable, "-m", "spoolproxy"]
STOCK = REPO / "cassettes" / "stock-check.yaml"

GOOD = ANSWER
INVENTED = {"evidence": [{"interaction": 1, "field": "response.body", "quote": "Database connection refused"},
                         {"interaction": 2, "field": "message.text", "quote": "sorry, the kettle is sold out"},
                         {"interaction": 7, "field": "message.text", "quote": "anything"}],
            "failing_interaction": 1, "label": "external_failure",
            "root_cause": "The database was down.", "confidence": 0.95}
FIXES = {"proposals": [
    {"patch": {"kind": "system_prompt", "op": "append", "text": "If check_stock says KET-BLU is an HTML page, say so."},
     "rationale": "names this run's product", "expected_effect": "-"},
    {"patch": {"kind": "tool_description", "tool": "get_inventory", "op": "append", "text": "HTML means down."},
     "rationale": "a tool the run does not have", "expected_effect": "-"},
    {"patch": {"kind": "system_prompt", "op": "append", "old": "", "tool": "",
               "text": "A tool result that is an HTML page is a failure: tell the customer the service is unavailable."},
     "rationale": "the model took an HTML error page for data", "expected_effect": "the customer hears the truth"},
    {"patch": {"kind": "tool_description", "tool": "check_stock", "op": "append",
               "text": "An HTML page instead of JSON means the inventory service is down."},
     "rationale": "say it where the tool is described", "expected_effect": "-"},
]}


@pytest.fixture(scope="module")
def judge():
    """One fake judge server for the module; tests set its script and knobs."""
    with JudgeServer(lambda req: GOOD) as server:
        yield server


@pytest.fixture
def run_copy(tmp_path, judge):
    judge.script, judge.refuse_schema, judge.fence = (lambda req: GOOD), False, False
    judge.log.clear()
    dst = tmp_path / "stock-check.yaml"
    shutil.copyfile(STOCK, dst)
    return dst


def opts(server, **kw) -> JudgeOptions:
    return JudgeOptions(settings=JudgeSettings(model="fake-judge-1", base_url=server.url, **kw.pop("settings", {})), **kw)


# -- pure core ------------------------------------------------------------------------------------
def test_find_verbatim_normalises_but_returns_the_field_text():
    field = "Good news:\n  KET-BLU is \u201cin stock\u201d \u2014 ready"
    assert find_verbatim(field, '...KET-BLU is "in stock" - ready...') == "KET-BLU is \u201cin stock\u201d \u2014 ready"
    assert find_verbatim(field, "Good news: KET-BLU") == "Good news:\n  KET-BLU"
    assert find_verbatim(field, "ket-blu is") is None  # case-sensitive
    assert find_verbatim(field, "ok") is None  # too short to be evidence
    assert find_verbatim(field, "sold out") is None


def test_extract_json_reads_fenced_embedded_and_trailing_comma_answers():
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('Sure!\n```json\n{"a": {"b": [1, 2,]},}\n```\nbye') == {"a": {"b": [1, 2]}}
    assert extract_json('I think {"label": "x", "q": "a } brace"} is it') == {"label": "x", "q": "a } brace"}
    with pytest.raises(AnswerError, match="no JSON object"):
        extract_json("I cannot judge this run.")


def test_labels_are_read_from_any_spelling():
    assert normalize_label("TOOL_ERROR_MISHANDLED") == "tool_error_mishandled"
    assert normalize_label("hallucinated result") == "unsupported_claim"
    assert normalize_label("No-Failure") == "no_failure"
    assert normalize_label("broken agent") is None


def test_settle_keeps_verbatim_quotes_and_turns_invented_ones_into_unknown():
    run = load_run(STOCK)
    ev = EvidenceBuilder(run.cassette, run.transcript)
    good = settle(GOOD, ev, run.report)
    assert (good.label, good.interaction) == ("tool_error_mishandled", 1)
    assert [e.quote for e in good.evidence] == [q["quote"] for q in GOOD["evidence"]]
    for e in good.evidence:  # every kept quote is a substring of the field it cites
        assert e.quote in ev.resolve(e.interaction, e.path)
    bad = settle(INVENTED, ev, run.report)
    assert bad.label == "unknown" and bad.claimed_label == "external_failure" and bad.interaction is None
    assert bad.evidence == [] and len(bad.rejected) == 3 and bad.confidence <= 0.2
    assert "interaction 7 is not in the run" in bad.rejected[2].reason
    assert any("no evidence quote checked out" in n for n in bad.notes)


def test_settle_moves_a_quote_cited_in_the_wrong_field_and_refuses_no_failure_on_a_failing_run():
    run = load_run(STOCK)
    ev = EvidenceBuilder(run.cassette, run.transcript)
    wrong_field = {**GOOD, "evidence": [{"interaction": 2, "field": "input.0", "quote": "ready to ship today"}]}
    d = settle(wrong_field, ev, run.report, {(2, "message.text"), (2, "input.0")})
    assert d.label == "tool_error_mishandled" and d.evidence[0].path == "message.text"
    ok = settle({"label": "no_failure", "evidence": [], "failing_interaction": None}, ev, run.report)
    assert ok.label == "unknown" and "contradicts the detectors" in ok.notes[-1]


def test_heuristic_labels_every_failing_shared_case_with_its_failing_interaction(cases_dir):
    from bench.judge_eval import load_manifest, right_label

    gold = {c["cassette"].removeprefix("shared:cases/").split("/")[0]: c for c in load_manifest()
            if c["cassette"].startswith("shared:")}
    out = subprocess.run([*SPOOL, "diagnose", "--heuristic", "--json", str(cases_dir)], capture_output=True,
                         text=True, check=True, cwd=REPO).stdout
    seen = 0
    for line in out.splitlines():
        doc = json.loads(line)
        case = gold[Path(doc["cassette"]).parent.name]
        expected = yaml.safe_load((Path(doc["cassette"]).parent / "expected.yaml").read_text())
        d = doc["diagnosis"]
        if expected["verdict"] == "fail":
            seen += 1
            assert d["label"] in FAILURE_LABELS and right_label(case, d["label"]), (case["name"], d)
            assert d["interaction"] in case["interactions"], (case["name"], d)
        else:
            assert d["label"] == "no_failure", (case["name"], d)
    assert seen == 15


# -- the model judge over HTTP, recorded and replayed -------------------------------------------------
def test_diagnose_records_the_judge_and_replays_it_offline(judge, run_copy):
    d = diagnose(run_copy, opts(judge))
    assert (d.label, d.interaction, d.source) == ("tool_error_mishandled", 1, "model")
    assert len(judge.log) == 1 and judge.log[0]["response_format"]["type"] == "json_schema"
    assert judge.log[0]["response_format"]["json_schema"]["strict"] is True
    recorded = judge_cassette(run_copy)
    assert recorded.name == ".stock-check.judge.yaml" and d.judge_cassette == recorded.name
    assert "fake-judge-1" in recorded.read_text() and results_path(run_copy).is_file()
    # cached: no second call
    assert diagnose(run_copy, opts(judge)).cached and len(judge.log) == 1
    # replayed: no call, same answer
    again = diagnose(run_copy, opts(judge, offline=True, refresh=True))
    assert (again.label, again.evidence) == (d.label, d.evidence) and len(judge.log) == 1


def test_invented_quotes_become_unknown_and_off_track_stays_below_error(judge, run_copy):
    judge.script = lambda req: INVENTED
    d = diagnose(run_copy, opts(judge))
    assert d.label == "unknown" and d.claimed_label == "external_failure" and not d.evidence
    finding = off_track(d)
    assert finding is not None and finding.severity == "warn"
    res = subprocess.run([*SPOOL, "detect", "--json", "--judge", "--offline", str(run_copy)], capture_output=True,
                         text=True, cwd=run_copy.parent)
    doc = json.loads(res.stdout)
    judged = [f for f in doc["findings"] if f["kind"] == "off_track"]
    assert judged and judged[0]["severity"] == "warn" and judged[0]["evidence"] == []


def test_a_server_without_structured_output_and_a_fenced_answer(judge, run_copy):
    judge.refuse_schema, judge.fence = True, True
    d = diagnose(run_copy, opts(judge))
    assert d.label == "tool_error_mishandled"
    formats = [r.get("response_format", {}) for r in judge.log]
    assert [f.get("type") for f in formats] == ["json_schema", "json_object"] and formats[1]["schema"]["required"]
    assert any("json_object_schema" in n for n in d.notes)
    finding = off_track(d)
    assert finding.severity == "error" and finding.evidence == d.evidence


def test_anthropic_messages_with_a_forced_tool(judge, run_copy):
    d = diagnose(run_copy, JudgeOptions(settings=JudgeSettings(model="claude-judge", base_url=judge.url.removesuffix("/v1"),
                                                               provider="anthropic"), record=False))
    req = judge.log[-1]
    assert req["tool_choice"] == {"type": "tool", "name": "diagnosis"} and "system" in req
    assert req["tools"][0]["input_schema"]["required"][0] == "evidence"
    assert d.label == "tool_error_mishandled" and d.judge_cassette is None


def test_the_committed_recorded_judge_replays_offline(tmp_path):
    for f in (DATA / "stock-check.yaml", DATA / ".stock-check.judge.yaml"):
        shutil.copyfile(f, tmp_path / f.name)
    res = subprocess.run([*SPOOL, "diagnose", "--offline", "--json", str(tmp_path / "stock-check.yaml")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)["diagnosis"]
    assert (d["label"], d["interaction"], d["model"]) == ("tool_error_mishandled", 1, "fake-judge-1")
    assert [e["quote"] for e in d["evidence"]] == [q["quote"] for q in ANSWER["evidence"]]
    shown = subprocess.run([*SPOOL, "show", str(tmp_path / "stock-check.yaml")], capture_output=True, text=True).stdout
    assert "diagnosis (fake-judge-1, diagnose-1): tool_error_mishandled at interaction 1" in " ".join(shown.split())


def test_offline_without_a_recording_and_a_dead_endpoint_say_what_to_do(tmp_path):
    run = tmp_path / "stock-check.yaml"
    shutil.copyfile(STOCK, run)
    res = subprocess.run([*SPOOL, "diagnose", "--offline", "--model", "m", str(run)], capture_output=True, text=True)
    assert res.returncode == 2 and "run it once without --offline" in res.stderr and "Traceback" not in res.stderr
    dead = JudgeServer(lambda req: GOOD)
    url = dead.url
    dead.stop()
    res = subprocess.run([*SPOOL, "diagnose", "--model", "m", "--base-url", url, str(run)], capture_output=True, text=True)
    assert res.returncode == 2 and "cannot reach the judge model" in res.stderr
    assert not judge_cassette(run).exists()  # a failed call records nothing


def test_show_prompt_calls_nothing(run_copy, judge):
    res = subprocess.run([*SPOOL, "diagnose", "--show-prompt", str(run_copy)], capture_output=True, text=True)
    assert res.returncode == 0 and "[1 response.body]" in res.stdout and "tool_error_mishandled" in res.stdout
    assert judge.log == [] and not results_path(run_copy).exists()


# -- fix proposals ------------------------------------------------------------------------------------
def test_proposals_that_copy_run_data_or_target_a_missing_tool_are_dropped():
    run = load_run(STOCK)
    assert {"KET-BLU"} <= run_literals(run.cassette, run.transcript)
    props = validate(FIXES, run.cassette, run.transcript)
    assert [p.kept for p in props] == [False, False, True, True]
    assert "copies this run's data: 'KET-BLU'" in props[0].problems[0]
    assert "no tool named 'get_inventory'" in props[1].problems[0]
    assert [p.rank for p in props if p.kept] == [1, 2]
    assert props[2].patch == {"kind": "system_prompt", "op": "append", "text": FIXES["proposals"][2]["patch"]["text"]}
    big = validate({"proposals": [{"patch": {"kind": "system_prompt", "op": "replace", "text": "x " * 300}},
                                  {"patch": {"kind": "route", "host": "shop.example", "to": "http://127.0.0.1:1"}},
                                  {"patch": {"kind": "model_params", "temperature": -1}}]}, run.cassette, run.transcript)
    assert not any(p.kept for p in big)
    copied = validate({"proposals": [{"patch": {"kind": "system_prompt", "op": "append", "text": "..."},
                                      "rationale": "...", "expected_effect": "..."},  # a small model parrots the prompt
                                     {"patch": {"kind": "tool_description", "tool": "check_stock", "op": "append",
                                                "text": "<a clarification>"}, "rationale": "it is clearer so"}]},
                      run.cassette, run.transcript)
    assert not any(p.kept for p in copied)
    assert "says nothing" in copied[0].problems[0] and "no rationale" in copied[0].problems[-1]
    assert "says nothing" in copied[1].problems[0]
    assert "replaces the whole system prompt" in " ".join(big[0].problems)
    assert "not proposed automatically" in big[1].problems[0] and "does not parse" in big[2].problems[0]


def test_fix_writes_patch_files_that_fork_dry_run_accepts(judge, run_copy):
    judge.script = lambda req: FIXES if asks_for_fixes(req) else GOOD
    fixes = propose(run_copy, opts(judge))
    assert [p.file for p in fixes.kept] == ["stock-check.fix-1.yaml", "stock-check.fix-2.yaml"]
    assert judge_cassette(run_copy, "fixes").is_file()
    res = subprocess.run([*SPOOL, "fork", str(run_copy), "--patch", str(run_copy.with_name("stock-check.fix-1.yaml")),
                          "--dry-run"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "+A tool result that is an HTML page is a failure" in res.stdout
    # the CLI, offline: the same proposals from the recorded fix call, and detect skips the patch files quietly
    res = subprocess.run([*SPOOL, "fix", "--offline", "--refresh", str(run_copy)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    out = " ".join(res.stdout.split())
    assert "fix-1 system prompt: append" in out and "dropped proposal 1" in out and "copies this run's data" in out
    det = subprocess.run([*SPOOL, "detect", str(run_copy.parent)], capture_output=True, text=True)
    assert det.returncode == 0 and "warning" not in det.stderr and "1 cassettes" in det.stdout
    html = subprocess.run([*SPOOL, "report", str(run_copy), "-o", str(run_copy.with_suffix(".html"))],
                          capture_output=True, text=True)
    assert html.returncode == 0
    page = run_copy.with_suffix(".html").read_text()
    assert 'id="diagnosis"' in page and "stock-check.fix-1.yaml" in page


def test_a_real_small_models_recorded_answer_replays_and_its_invented_quote_is_rejected(tmp_path):
    """tests/data/judge/gemma: Gemma 3 270M (Q4_K_M GGUF from PyPI, llama-cpp-python's server)
    judged a planted stale-value run once (bench/judge_eval.py); its traffic was recorded by
    spoolproxy: json_schema refused (500), then json_object with the schema (a grammar)."""
    src = DATA / "gemma"
    for f in ("planted-stale-stock.yaml", ".planted-stale-stock.judge.yaml"):
        shutil.copyfile(src / f, tmp_path / f)
    res = subprocess.run([*SPOOL, "diagnose", "--json", "--offline", "--no-system-role", "--max-chars", "8000",
                          "--max-tokens", "300", str(tmp_path / "planted-stale-stock.yaml")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)["diagnosis"]
    assert d["model"] == "gemma-3-270m-it-q4_k_m" and d["label"] == "unknown"
    assert d["claimed_label"] in FAILURE_LABELS and d["evidence"] == [] and d["rejected"]
    assert any("json_object_schema" in n for n in d["notes"])
