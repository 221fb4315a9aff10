"""``spoolproxy detect`` / ``show`` on awkward input: corrupt files, journals, narrow terminals."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spoolproxy.cassettes import save

from .conftest import REPO
from .test_detect_wire import cassette, chat_response, llm


def _run(*args: str, columns: int = 160):
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=60)


def _good(tmp_path, name="good.yaml"):
    p = tmp_path / name
    save(cassette(llm([{"role": "user", "content": "hi"}], chat_response("Hello there."))), p)
    return p


def test_corrupt_cassettes_are_errors_others_still_analysed_exit_2(tmp_path):
    _good(tmp_path)
    (tmp_path / "expected.yaml").write_text("kind: tool_loop\nseverity: error\n")  # not a cassette: a warning
    (tmp_path / "v7.yaml").write_text("version: 7\ninteractions: []\n")
    (tmp_path / "invalid.yaml").write_text("interactions:\n  - request: {\n  x: [\n")
    (tmp_path / "garbage.yaml").write_bytes(bytes(range(256)) * 4)
    out = _run("detect", str(tmp_path), "--fail-on", "error")
    assert out.returncode == 2, out.stderr
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("spoolproxy: error:")]
    assert any("v7.yaml" in ln and "version 7" in ln for ln in errors)
    assert any("invalid.yaml:" in ln for ln in errors) and any("garbage.yaml" in ln for ln in errors)
    assert any(ln.startswith("spoolproxy: warning: skipped") and "expected.yaml" in ln for ln in out.stderr.splitlines())
    assert "good.yaml" in out.stdout and "1 cassettes" in out.stdout and "3 corrupt" in out.stdout
    assert "Traceback" not in out.stderr

    js = _run("detect", str(tmp_path / "v7.yaml"), "--json")
    assert js.returncode == 2
    doc = json.loads(js.stdout)
    assert doc["verdict"] == "error" and doc["cassette"].endswith("v7.yaml") and "version 7" in doc["error"]

    skip = _run("detect", str(tmp_path), "--skip-bad", "--json", "-j", "2")
    assert skip.returncode == 0, skip.stderr
    assert [json.loads(ln)["verdict"] for ln in skip.stdout.splitlines()] == ["pass"]
    assert skip.stderr.count("warning: skipped") == 4


def test_directory_with_only_a_journal_points_at_recover(tmp_path):
    (tmp_path / ".x.yaml.spooljournal").write_text("{}\n")
    out = _run("detect", str(tmp_path))
    assert out.returncode == 0 and "0 cassettes" in out.stdout
    assert ".x.yaml.spooljournal" in out.stderr and f"spoolproxy recover {tmp_path}" in out.stderr


def test_cut_stream_findings_say_cut_after_n_bytes(tmp_path):
    from spoolproxy.cassettes.model import Failure
    from spoolproxy.detectors import analyze

    from .test_detect_wire import chat_sse

    it = llm([{"role": "user", "content": "hi"}], chat_sse("Hello there, how are", finish=None, done=False)[:300], stream=True)
    it.error = Failure(kind="reset", message="connection reset by peer", during="response")
    found = {f.kind: f for f in analyze(cassette(it)).findings}
    assert "LLM stream cut after 300 bytes (reset)" in found["http_error"].message
    assert "got 200" not in found["http_error"].message
    assert found["no_final_answer"].message.endswith("the last LLM call failed: LLM stream cut after 300 bytes (reset)")
    assert "stream_incomplete" in found
    assert any(e.path == "error.message" and e.quote == "connection reset by peer" for e in found["http_error"].evidence)


def test_show_at_80_columns_keeps_model_names_whole(tmp_path):
    p = tmp_path / "run.yaml"
    long_answer = "The refund for order 1234 was issued to the original card and should arrive in five days. " * 2
    save(cassette(llm([{"role": "user", "content": "hi"}], chat_response(long_answer))), p)
    out = _run("show", str(p), columns=80)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any("openai/gpt-4o-mini" in ln for ln in lines)  # never split mid-word
    assert all(len(ln) <= 80 for ln in lines)
    assert sum("original card" in ln or "refund for" in ln for ln in lines) >= 1  # the summary wraps instead


@pytest.mark.parametrize("columns", [80, 100, 160])
def test_show_keeps_finding_kinds_whole_at_any_width(columns):
    from spoolproxy.cassettes.storage import load
    from spoolproxy.detectors import analyze

    path = REPO / "cassettes" / "stock-check.yaml"
    kinds = {f.kind for f in analyze(load(path)).findings}
    assert {"html_error_page", "tool_error_ignored"} <= kinds
    out = _run("show", str(path), columns=columns)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert all(len(ln) <= columns for ln in lines)
    timeline = "\n".join(lines[:lines.index(next(ln for ln in lines if ln.startswith("final answer")))])
    assert all(k in timeline for k in kinds), timeline  # every kind whole in the timeline, never '✖ht'
    header = lines[1].split()
    if columns != 100:  # a column when it fits, else under each summary
        assert ("findings" in header) == (columns >= 160)


def test_show_names_a_long_model_whole_without_its_date_when_the_column_is_narrow():
    from types import SimpleNamespace

    from spoolproxy.cli.show import _who

    step = SimpleNamespace(llm=SimpleNamespace(provider="anthropic", model="claude-3-5-haiku-20241022"), host="x")
    assert _who(step, 40) == "anthropic/claude-3-5-haiku-20241022"
    assert _who(step, 26) == "anthropic/claude-3-5-haiku"
    assert _who(step, 25) == "claude-3-5-haiku-20241022"
    assert _who(step, 20) == "claude-3-5-haiku"  # at 80 columns: a whole name, not "anthropic/claude-3-…"
    assert _who(SimpleNamespace(llm=None, host="shop.example:8080"), 20) == "shop.example:8080"
