"""Live budgets and the circuit breaker: a runaway agent (the real openai SDK in a loop,
tests/agents/runaway.py) recorded through the real proxy against the fake OpenAI server,
stopped by each budget and by the breaker on a tool loop; the SDK sees one non-retried
error; the cassette says where and why; playback of it stops at the same point.  Plus the
pure budget meter and the after-the-fact detector agreeing with it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spoolproxy.cassettes import load
from spoolproxy.detectors import analyze, build_transcript
from spoolproxy.guards.budget import BudgetMeter, Limits

from .conftest import REPO
from .test_proxy_support import cli_env, spool_home  # noqa: F401

pytestmark = pytest.mark.usefixtures("spool_home")
AGENT = REPO / "tests" / "agents" / "runaway.py"


class Run:
    """One ``spoolproxy record`` of the runaway agent."""

    def __init__(self, proc: subprocess.CompletedProcess, cassette: Path, fake) -> None:
        self.proc, self.path, self.fake = proc, cassette, fake
        self.cassette = load(cassette)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        self.agent = json.loads(lines[-1]) if lines else {}
        self.upstream = len(fake.requests_to("/chat/completions"))
        self.model = [i for i, it in enumerate(self.cassette.interactions) if it.request.url.path.endswith("/chat/completions")]
        self.refused = [i for i in self.model if self.cassette.interactions[i].extra.get("circuit_breaker")]

    def explain(self) -> str:
        return f"exit {self.proc.returncode}\nstdout: {self.proc.stdout}\nstderr: {self.proc.stderr}"


def record(tmp_path: Path, home: Path, fake, *flags: str, agent_args: tuple[str, ...] = (), name: str = "run") -> Run:
    cassette = tmp_path / f"{name}.yaml"
    cmd = [sys.executable, "-m", "spoolproxy", "record", "-c", str(cassette), "--upstream-ca", str(fake.ca_pem_path),
           "--connect-to", f"api.openai.com:443:127.0.0.1:{fake.port}",
           "--connect-to", f"tools.example.test:80:127.0.0.1:{fake.http_port}", *flags,
           "--", sys.executable, str(AGENT), *agent_args]
    (tmp_path / "spoolproxy.toml").write_text("")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(home), cwd=tmp_path, timeout=120)
    return Run(proc, cassette, fake)


def assert_stopped_by_breaker(run: Run) -> dict:
    """The agent got one non-retried 400 in OpenAI's shape; the cassette and summary say where."""
    assert run.proc.returncode == 3, run.explain()
    assert run.agent["status"] == 400 and run.agent["type"] == "BadRequestError" and run.agent["should_retry"] == "false"
    assert "spoolproxy circuit breaker: the run was stopped" in run.agent["message"]
    assert len(run.refused) == 1, "the SDK retried the refusal"  # one refused request: no retry
    assert run.refused == [run.model[-1]] and run.upstream == len(run.model) - 1
    cb = run.cassette.meta.extra["circuit_breaker"]
    assert cb["interaction"] == run.refused[0] and cb["refused"] == 1
    assert f"circuit breaker: stopped the run at interaction {run.refused[0]}" in run.proc.stderr
    refusal = run.cassette.interactions[run.refused[0]].response
    assert refusal.status == 400 and refusal.header("x-spoolproxy") == "circuit-breaker"
    return cb


def test_llm_call_budget_refuses_the_call_beyond_it(tmp_path, spool_home, fake_provider):
    run = record(tmp_path, spool_home, fake_provider, "--max-llm-calls", "3", "--circuit-breaker")
    cb = assert_stopped_by_breaker(run)
    assert run.upstream == 3 and run.agent["calls"] == 4  # exactly the budget went upstream
    assert cb["what"] == "llm_calls" and cb["reason"] == "budget exceeded: LLM calls: 4 exceed the budget of 3"
    assert "spoolproxy: warning: budget at 80%: LLM calls: 3 of 3 used (100%)" in run.proc.stderr  # 3 >= 2.4
    assert run.cassette.meta.extra["budget"]["used"]["llm_calls"] == 3
    (calls,) = [ln for ln in run.proc.stderr.splitlines() if "LLM calls (" in ln]  # the refused one is not a call
    assert " x3;" in calls and "1 more refused by the circuit breaker (never sent)" in calls, calls
    # detect reads it as a failed run; show says where it stopped; the budget detector agrees
    report = analyze(run.cassette, {"max_llm_calls": 3})
    assert report.verdict == "fail"
    (over,) = [f for f in report.findings if f.kind == "budget_exceeded"]
    assert over.interactions == run.refused
    shown = subprocess.run([sys.executable, "-m", "spoolproxy", "show", str(run.path), "--width", "200"],
                           capture_output=True, text=True, env=cli_env(spool_home), timeout=60)
    assert f"stopped by the circuit breaker at interaction {run.refused[0]}" in shown.stdout


def test_tool_call_budget_stops_at_the_next_model_request(tmp_path, spool_home, fake_provider):
    run = record(tmp_path, spool_home, fake_provider, "--max-tool-calls", "2", "--circuit-breaker")
    cb = assert_stopped_by_breaker(run)
    t = build_transcript(run.cassette)
    asked = [len(s.llm.tool_calls) for s in t.llm_steps() if s.index not in run.refused]
    assert sum(asked) == 3 and sum(asked[:-1]) <= 2  # the last upstream call went past the budget, then stop
    assert cb["what"] == "tool_calls" and cb["tripped_after"] == run.model[-2]


def test_token_budget_stops_within_one_request(tmp_path, spool_home, fake_provider):
    run = record(tmp_path, spool_home, fake_provider, "--max-tokens", "300", "--circuit-breaker",
                 agent_args=("--stream",))
    cb = assert_stopped_by_breaker(run)
    totals = [s.llm.usage.total for s in build_transcript(run.cassette).llm_steps() if s.index not in run.refused]
    assert sum(totals) > 300 and sum(totals[:-1]) <= 300  # stopped right after the call that crossed it
    assert cb["what"] == "tokens"


def test_cost_budget_uses_priced_calls(tmp_path, spool_home, fake_provider):
    run = record(tmp_path, spool_home, fake_provider, "--max-cost", "0.00004", "--circuit-breaker")
    cb = assert_stopped_by_breaker(run)
    costs = [s.llm.cost_usd for s in build_transcript(run.cassette).llm_steps() if s.index not in run.refused]
    assert all(c is not None and c > 0 for c in costs)  # gpt-4o-mini at api.openai.com: table prices
    assert sum(costs) > 0.00004 and sum(costs[:-1]) <= 0.00004
    assert cb["what"] == "cost_usd" and "cost (USD)" in cb["reason"]


def test_seconds_budget(tmp_path, spool_home, fake_provider):
    run = record(tmp_path, spool_home, fake_provider, "--max-seconds", "1", "--circuit-breaker",
                 agent_args=("--pause", "0.3"))
    cb = assert_stopped_by_breaker(run)
    assert cb["what"] == "seconds" and run.upstream >= 2


def test_breaker_stops_a_tool_loop_without_any_budget(tmp_path, spool_home, fake_provider):
    run = record(tmp_path, spool_home, fake_provider, "--circuit-breaker", agent_args=("--stream",))
    cb = assert_stopped_by_breaker(run)
    assert cb["what"] == "tool_loop" and cb["cause"] == "finding"
    assert cb["reason"].startswith("tool_loop: lookup called 3 times with the same arguments")
    assert run.upstream == 5  # calls 1, 3, 5 ask for the same lookup; call 6 is refused
    assert cb["tripped_after"] == run.model[4]


def test_budgets_only_warn_without_the_breaker(tmp_path, spool_home, fake_provider):
    run = record(tmp_path, spool_home, fake_provider, "--max-llm-calls", "5", agent_args=("--max-iterations", "6"))
    assert run.proc.returncode == 0 and run.agent == {"calls": 6, "status": None}, run.explain()
    assert run.upstream == 6 and not run.refused
    assert "spoolproxy: warning: budget at 80%: LLM calls: 4 of 5 used (80%)" in run.proc.stderr
    assert ("spoolproxy: warning: budget exceeded: LLM calls: 6 exceed the budget of 5 "
            "(add --circuit-breaker to stop the run)") in run.proc.stderr
    assert "circuit_breaker" not in run.cassette.meta.extra
    assert run.cassette.meta.extra["budget"]["exceeded"] == ["LLM calls: 6 exceed the budget of 5"]


def test_playback_of_a_stopped_run_stops_at_the_same_point(tmp_path, spool_home, fake_provider):
    run = record(tmp_path, spool_home, fake_provider, "--max-llm-calls", "3", "--circuit-breaker")
    assert_stopped_by_breaker(run)
    fake_provider.reset()
    proc = subprocess.run([sys.executable, "-m", "spoolproxy", "playback", "-c", str(run.path), "--match", "exact",
                           "--strict", "--", sys.executable, str(AGENT)],
                          capture_output=True, text=True, env=cli_env(spool_home), cwd=tmp_path, timeout=120)
    again = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    assert proc.returncode == 3, proc.stderr
    assert again == run.agent  # same call refused, same error
    assert fake_provider.connections == 0  # offline


def test_config_budgets_and_bad_values(tmp_path, spool_home, fake_provider):
    (tmp_path / "spoolproxy.toml").write_text("[record]\nmax_llm_calls = 2\ncircuit_breaker = true\n")
    cassette = tmp_path / "cfg.yaml"
    base = [sys.executable, "-m", "spoolproxy", "record", "-c", str(cassette), "--upstream-ca", str(fake_provider.ca_pem_path),
            "--connect-to", f"api.openai.com:443:127.0.0.1:{fake_provider.port}",
            "--connect-to", f"tools.example.test:80:127.0.0.1:{fake_provider.http_port}"]
    proc = subprocess.run([*base, "--", sys.executable, str(AGENT)], capture_output=True, text=True,
                          env=cli_env(spool_home), cwd=tmp_path, timeout=120)
    assert proc.returncode == 3 and load(cassette).meta.extra["circuit_breaker"]["what"] == "llm_calls", proc.stderr
    assert len(fake_provider.requests_to("/chat/completions")) == 2
    (tmp_path / "spoolproxy.toml").write_text("[record]\nmax_llm_call = 2\n")
    bad = subprocess.run([*base, "--", "true"], capture_output=True, text=True, env=cli_env(spool_home), cwd=tmp_path,
                         timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "spoolproxy: error: config [record] max_llm_call: unknown key; did you mean 'max_llm_calls'? fix spoolproxy.toml")
    neg = subprocess.run([*base, "--max-cost", "-1", "--", "true"], capture_output=True, text=True,
                         env=cli_env(spool_home), cwd=tmp_path, timeout=60)
    assert neg.returncode == 2 and "Traceback" not in neg.stderr and "--max-cost" in neg.stderr


def test_meter_warns_once_and_exceeds_once():
    clock = [0.0]
    m = BudgetMeter(Limits(max_llm_calls=5, max_tokens=100, max_seconds=10), clock=lambda: clock[0])
    assert [e.message for e in m.admit(0)] == []
    for i in (1, 2):
        m.admit(i)
    (warn,) = m.admit(3)
    assert warn.level == "warn" and warn.message == "LLM calls: 4 of 5 used (80%)"
    assert m.record(tokens=50, interaction=3) == []
    (tok,) = m.record(tokens=60, interaction=3)
    assert tok.level == "exceeded" and tok.message == "tokens: 110 exceed the budget of 100"
    assert m.record(tokens=60) == []  # once per dimension
    assert m.would_exceed() is None
    m.admit(4)
    assert m.would_exceed(5).message == "LLM calls: 6 exceed the budget of 5"
    clock[0] = 11.0
    assert [e.dimension for e in m.tick()] == ["seconds"]


def test_playback_live_budgets_count_live_model_calls(tmp_path, spool_home, fake_provider):
    base = record(tmp_path, spool_home, fake_provider, agent_args=("--max-iterations", "1"), name="base")
    assert base.proc.returncode == 0, base.explain()
    fake_provider.reset()
    proc = subprocess.run(
        [sys.executable, "-m", "spoolproxy", "playback", "-c", str(base.path), "--upstream-ca", str(fake_provider.ca_pem_path),
         "--connect-to", f"api.openai.com:443:127.0.0.1:{fake_provider.port}",
         "--connect-to", f"tools.example.test:80:127.0.0.1:{fake_provider.http_port}",
         "--live", "api.openai.com", "--live", "tools.example.test", "--max-llm-calls", "2", "--circuit-breaker",
         "--", sys.executable, str(AGENT)],
        capture_output=True, text=True, env=cli_env(spool_home), cwd=tmp_path, timeout=120)
    out = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    assert proc.returncode == 3 and out["calls"] == 3 and out["should_retry"] == "false", proc.stderr
    assert len(fake_provider.requests_to("/chat/completions")) == 2
    assert "circuit breaker: stopped the run" in proc.stderr
    merged = load(base.path.with_name(base.path.stem + ".live.yaml"))  # the recorded run stays as it was
    assert "circuit_breaker" not in load(base.path).meta.extra
    assert merged.meta.extra["circuit_breaker"]["what"] == "llm_calls"
    assert [bool(it.extra.get("circuit_breaker")) for it in merged.interactions].count(True) == 1


def test_refusals_use_each_providers_error_shape():
    from spoolproxy.guards.breaker import Stop
    from spoolproxy.guards.refusal import refusal_response

    stop = Stop(reason="budget exceeded: tokens: 1210 exceed the budget of 1000", cause="budget", what="tokens")
    for host, path, key in (("api.anthropic.com", "/v1/messages", "type"), ("generativelanguage.googleapis.com",
                            "/v1beta/models/gemini-2.5-flash:generateContent", "error"),
                            ("api.openai.com", "/v1/responses", "error")):
        status, headers, body = refusal_response(stop, host, path)
        doc = json.loads(body)
        assert status == 400 and headers["x-should-retry"] == "false" and headers["x-spoolproxy"] == "circuit-breaker"
        assert key in doc and "tokens: 1210 exceed the budget of 1000" in body.decode()
    assert json.loads(refusal_response(stop, "api.anthropic.com", "/v1/messages")[2])["type"] == "error"


def test_record_summary_runs_the_checks_that_apply_to_the_tags(tmp_path, spool_home, fake_provider):
    """record --tag (triage) and [[checks]] by tag: the summary gives the check's verdict."""
    cassette = tmp_path / "tagged.yaml"
    (tmp_path / "spoolproxy.toml").write_text(
        "[[checks]]\nname = 'prod-answers'\ncommand = 'echo the answer names no delivery date; exit 1'\n"
        "tags = { env = 'prod' }\n\n[[checks]]\nname = 'staging-only'\ncommand = 'exit 1'\ntags = { env = 'staging' }\n")
    proc = subprocess.run(
        [sys.executable, "-m", "spoolproxy", "record", "-c", str(cassette), "--tag", "env=prod",
         "--upstream-ca", str(fake_provider.ca_pem_path),
         "--connect-to", f"api.openai.com:443:127.0.0.1:{fake_provider.port}",
         "--connect-to", f"tools.example.test:80:127.0.0.1:{fake_provider.http_port}",
         "--", sys.executable, str(AGENT), "--max-iterations", "2"],
        capture_output=True, text=True, env=cli_env(spool_home), cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "checks: 0 passed, 1 did not (prod-answers: fail)" in proc.stderr
    assert "[error] check_failed: check prod-answers failed: the answer names no delivery date" in proc.stderr
    assert load(cassette).meta.extra["tags"] == {"env": "prod"}
