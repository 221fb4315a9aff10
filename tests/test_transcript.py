"""The transcript: ordered steps, tool results linked to their calls (by id, by name for
Gemini), HTTP/MCP tool interactions linked to the calls they served (byte for byte or
embedded in a wrapper), final answer, token totals, dated cost estimate; and the
``show`` command that prints it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from spoolproxy.cassettes import load
from spoolproxy.detectors import build_transcript
from spoolproxy.detectors.pricing import PRICES_AS_OF, cost_usd, price_of

from .conftest import REPO
from .test_detect_wire import agent_loop, cassette, chat_response, llm

USER = [{"role": "user", "content": "hi"}]


def test_results_link_to_calls_and_http_sources(cases_dir):
    t = build_transcript(load(cases_dir / "13-clean-openai-multi-tool" / "cassette.yaml"))
    assert [s.kind for s in t.steps] == ["llm", "http", "http", "llm", "http", "llm"]
    assert [(r.call_interaction, r.source_interaction, r.interaction) for r in t.tool_results] == [(0, 1, 3), (0, 2, 3), (3, 4, 5)]
    assert t.steps[1].tool_call_ref == (0, t.tool_results[0].call_id)
    assert t.final_answer is not None and t.final_answer.interaction == 5
    assert t.total_tokens == sum(s.llm.usage.total for s in t.steps if s.llm)


def test_wrapped_tool_body_is_linked(cases_dir):
    """Case 02: the 503 HTML page reaches the model inside a JSON wrapper."""
    t = build_transcript(load(cases_dir / "02-tool-503-html-claimed-success" / "cassette.yaml"))
    (res,) = t.tool_results
    assert res.source_interaction == 1 and res.call_interaction == 0 and '"status_code": 503' in res.content.replace('":503', '": 503')


def test_gemini_results_link_by_name(cases_dir):
    t = build_transcript(load(cases_dir / "16-clean-gemini-function-call" / "cassette.yaml"))
    (res,) = t.tool_results
    assert res.name == "get_departures" and res.call_interaction == 0 and res.source_interaction == 1
    assert t.steps[0].llm.tool_calls[0].arguments["from_station"] == "Utrecht Centraal"


def test_anthropic_is_error_result_and_mcp_link(cases_dir):
    t = build_transcript(load(cases_dir / "12-anthropic-search-fails-recovered" / "cassette.yaml"))
    assert [r.is_error for r in t.tool_results] == [True, False]
    t8 = build_transcript(load(cases_dir / "08-mcp-iserror-ignored" / "cassette.yaml"))
    assert [s.kind for s in t8.steps][:3] == ["mcp", "mcp", "mcp"]
    (res,) = t8.tool_results
    assert res.source_interaction == 4 and t8.steps[4].mcp.is_error and t8.steps[4].mcp.tool_name == "close_ticket"


def test_cost_uses_the_dated_table_and_never_guesses():
    assert price_of("gpt-4o-mini-2024-07-18") == price_of("gpt-4o-mini") and price_of("claude-sonnet-4-20250514")
    assert price_of("my-finetune-v3") is None and cost_usd("my-finetune-v3", 10, 10) is None
    known = build_transcript(cassette(llm(USER, chat_response("Hello.", usage=(1_000_000, 0)))))
    assert known.cost_usd == 0.15 and known.price_table_date == PRICES_AS_OF
    unknown_body = chat_response("Hello.").replace(b"gpt-4o-mini-2024-07-18", b"acme-llm-7b")
    unknown = build_transcript(cassette(llm(USER, chat_response("Hi.")), llm(USER, unknown_body)))
    assert unknown.cost_usd is None and unknown.total_tokens == 120


def test_threads_split_independent_runs():
    a = agent_loop("f", [{"x": 1}], ["r"], answer="A.")
    b = agent_loop("f", [{"x": 1}], ["r"], answer="B.")
    t = build_transcript(cassette(*a.interactions, *b.interactions))
    assert [s.conversation for s in t.steps] == [0, 0, 1, 1]


def _run(*args: str, cwd=REPO):
    env = {**os.environ, "COLUMNS": "160"}
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


def test_show_timeline_and_json(cases_dir):
    path = str(cases_dir / "08-mcp-iserror-ignored" / "cassette.yaml")
    out = _run("show", path, "--width", "160")
    assert out.returncode == 0, out.stderr
    for needle in ("tools/call close_ticket", "isError", "openai/gpt-4.1-mini", "tool_error_ignored", "final answer", "verdict", "FAIL"):
        assert needle in out.stdout, needle
    js = _run("show", path, "--json")
    doc = json.loads(js.stdout)
    assert len(doc["transcript"]["steps"]) == 7 and doc["report"]["verdict"] == "fail"
    assert doc["transcript"]["steps"][3]["llm"]["tools"][0]["schema"]["type"] == "object"


def test_cli_errors_are_one_line(cases_dir, tmp_path):
    bad = _run("show", str(cases_dir / "08-mcp-iserror-ignored" / "expected.yaml"))
    assert bad.returncode == 2 and bad.stderr.startswith("spoolproxy: error:") and len(bad.stderr.strip().splitlines()) == 1
    missing = _run("detect", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and missing.stderr.startswith("spoolproxy: error:") and "Traceback" not in missing.stderr
    (tmp_path / "bin.yaml").write_bytes(b"\x00\x01\x02")
    corrupt = _run("detect", str(tmp_path), "--fail-on", "warn")  # binary junk is a corrupt cassette: exit 2
    assert corrupt.returncode == 2 and "bin.yaml" in corrupt.stderr and "0 cassettes" in corrupt.stdout
    skipped = _run("detect", str(tmp_path), "--fail-on", "warn", "--skip-bad")
    assert skipped.returncode == 0 and "warning: skipped" in skipped.stderr and "0 cassettes" in skipped.stdout
