"""Live budgets and the circuit breaker in ``spoolproxy fork`` and ``spoolproxy verify``: a
runaway agent (the real openai SDK in a tool loop, tests/agents/runaway.py) against the
scripted model server (it looks an unknown order up again and again) and the shop, through
the real proxy.  The fork is stopped within one request of ``--max-llm-calls`` (the prefix
replayed from the parent is not counted), the agent sees one non-retried error; each verify
trial is guarded the same way (budgets from ``[record]``) and a stopped trial is ``failed``
with the breaker's reason.  And the cost of a run, priced with one price book, in ``diff``
(side by side), ``verify`` (per arm) and ``report``: unknown models stay unknown."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from spoolproxy.cassettes import load
from tests.fixproject import REPO, make_project, routes, spoolproxy, start_servers

AGENT_ARGS = ["runaway.py", "--base-url", "http://model.example/v1", "--tool-url", "http://shop.example/orders",
              "--question", "Where is my order ORD-1404?"]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("guardproj"))
    shutil.copy(REPO / "tests" / "agents" / "runaway.py", root / "runaway.py")
    model, shop_server = start_servers()
    r = spoolproxy(root, "record", "-c", "cassettes/runaway.yaml", *routes(model, shop_server), "--",
                   sys.executable, *AGENT_ARGS, "--max-iterations", "4")
    assert r.returncode == 0, r.stderr
    yield root, model, shop_server
    model.shutdown()
    shop_server.shutdown()


def agent_result(stdout: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def test_the_parent_is_a_tool_loop(project):
    root, _model, _shop = project
    cas = load(root / "cassettes" / "runaway.yaml")
    assert [it.request.url.path for it in cas.interactions] == ["/v1/chat/completions", "/orders"] * 4


def test_fork_stops_a_runaway_agent_within_one_request_of_its_budget(project):
    root, model, shop_server = project
    before = len(model.log)
    r = spoolproxy(root, "fork", "cassettes/runaway.yaml", "--at", "2", "--max-llm-calls", "2", "--circuit-breaker",
                   *routes(model, shop_server), "-o", "cassettes/runaway-fork.yaml", "--",
                   sys.executable, *AGENT_ARGS, "--max-iterations", "50")
    assert r.returncode == 3, r.stdout + r.stderr  # the agent's own exit status after the SDK raised
    assert len(model.log) - before == 2  # exactly the budget went upstream; the prefix was replayed
    agent = agent_result(r.stdout)
    assert agent["status"] == 400 and agent["type"] == "BadRequestError" and agent["should_retry"] == "false"
    assert "spoolproxy circuit breaker: the run was stopped" in agent["message"] and agent["calls"] == 4
    cas = load(root / "cassettes" / "runaway-fork.yaml")
    sources = [it.extra["fork"] for it in cas.interactions]
    assert sources == ["cassette", "cassette", "live", "cassette", "live", "cassette", "refused"]
    refused = [i for i, it in enumerate(cas.interactions) if it.extra.get("circuit_breaker")]
    assert refused == [6], "one refusal: the SDK did not retry it"
    assert cas.interactions[6].response.status == 400
    assert cas.interactions[6].response.header("x-spoolproxy") == "circuit-breaker"
    cb = cas.meta.extra["circuit_breaker"]
    assert cb["interaction"] == 6 and cb["what"] == "llm_calls" and cb["refused"] == 1
    assert cb["reason"] == "budget exceeded: LLM calls: 3 exceed the budget of 2"
    assert cas.meta.extra["budget"]["used"]["llm_calls"] == 2 and cas.meta.extra["forked_from"] == "runaway.yaml"
    assert "circuit breaker: stopped the run at interaction 6" in r.stderr
    assert "7 requests: 4 cassette, 2 live, 1 refused" in r.stderr and cas.meta.extra["fork"]["refused"] == 1
    assert "spoolproxy: warning: budget at 80%: LLM calls: 2 of 2 used (100%)" in r.stderr


def test_fork_budgets_only_warn_without_the_breaker(project):
    root, model, shop_server = project
    r = spoolproxy(root, "fork", "cassettes/runaway.yaml", "--at", "2", "--max-llm-calls", "2",
                   *routes(model, shop_server), "-o", "cassettes/runaway-warned.yaml", "--",
                   sys.executable, *AGENT_ARGS, "--max-iterations", "4")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("spoolproxy: warning: budget exceeded: LLM calls: 3 exceed the budget of 2 "
            "(add --circuit-breaker to stop the run)") in r.stderr
    cas = load(root / "cassettes" / "runaway-warned.yaml")
    assert "circuit_breaker" not in cas.meta.extra
    assert cas.meta.extra["budget"]["exceeded"] == ["LLM calls: 3 exceed the budget of 2"]


def test_verify_trials_are_guarded_and_a_stopped_trial_failed(project):
    root, model, _shop = project
    (root / "cooler.yaml").write_text("- kind: model_params\n  temperature: 0.2\n")
    (root / "spoolproxy.toml").write_text("[record]\nmax_llm_calls = 2\ncircuit_breaker = true\n")
    try:
        r = spoolproxy(root, "verify", "cassettes/runaway.yaml", "--patch", "cooler.yaml", "-k", "1", "--at", "2",
                       "--regress", "none", *routes(model), "--out", "v-guard")
    finally:
        (root / "spoolproxy.toml").write_text("")
    assert r.returncode == 1, r.stdout + r.stderr
    v = json.loads((root / "v-guard" / "verification.json").read_text())
    assert [(t["arm"], t["outcome"]) for t in v["trials"]] == [("patched", "failed"), ("control", "failed")]
    for t in v["trials"]:
        assert t["reason"] == ("stopped by the circuit breaker at interaction 6: budget exceeded: LLM calls: 3 "
                               "exceed the budget of 2"), t
        assert t["model_calls"] == 2 and t["cost_usd"] > 0  # the refused call never went out; gpt-4o-mini is priced
        trial = load(root / t["cassette"])
        assert trial.meta.extra["circuit_breaker"]["interaction"] == 6
    # the cost per arm: the trials' live calls priced with the price table
    assert v["patched"]["cost_usd"] == v["trials"][0]["cost_usd"] and not v["patched"]["cost_unknown"]
    assert v["controls"]["cost_usd"] == v["trials"][1]["cost_usd"]
    assert v["verdict"] == "INCONCLUSIVE"
    assert "patched 1: spoolproxy: circuit breaker: stopping the run" in r.stderr  # the guard's line, per trial
    cost = f"${v['patched']['cost_usd']:.6f}"
    assert f"│ {cost}" in r.stdout  # the arms table's cost column, per arm


PRICED = '[prices]\n"shop-scripted-1" = { input = 1.0, output = 2.0 }\n'


def detect_cost(root, cassette: str, *config: str):
    r = spoolproxy(root, "detect", cassette, "--json", *config)
    return json.loads(r.stdout.splitlines()[0])["cost"]


def test_diff_shows_cost_side_by_side_with_the_same_price_book(project):
    root, _model, _shop = project
    (root / "priced.toml").write_text(PRICED)
    # A: gpt-4o-mini (the dated table); B: the scripted model, in no table
    r = spoolproxy(root, "diff", "cassettes/runaway.yaml", "cassettes/stock-check.yaml", "--json")
    assert r.returncode == 0, r.stderr
    a, b = (json.loads(r.stdout)[k]["totals"] for k in ("a", "b"))
    assert a["cost_usd"] == detect_cost(root, "cassettes/runaway.yaml")["usd"] > 0
    assert a["price_sources"] == ["table 2026-12-01"]
    assert b["cost_usd"] is None and b["unpriced_models"] == ["shop-scripted-1"]  # unknown, never guessed
    text = spoolproxy(root, "diff", "cassettes/runaway.yaml", "cassettes/stock-check.yaml").stdout
    assert "unknown (no price for shop-scripted-1)" in text and f"${a['cost_usd']:.6f}" in text
    # a user price in [prices] prices B, exactly as detect prices it with the same config
    r = spoolproxy(root, "diff", "cassettes/runaway.yaml", "cassettes/stock-check.yaml", "--json",
                   "--config", "priced.toml")
    b = json.loads(r.stdout)["b"]["totals"]
    expected = detect_cost(root, "cassettes/stock-check.yaml", "--config", "priced.toml")
    assert b["cost_usd"] == expected["usd"] and expected["usd"] > 0 and b["price_sources"] == ["user"]
    assert b["cost_usd"] == round((b["input_tokens"] * 1.0 + b["output_tokens"] * 2.0) / 1e6, 6)
    text = spoolproxy(root, "diff", "cassettes/runaway.yaml", "cassettes/stock-check.yaml", "--config",
                      "priced.toml").stdout
    delta = a["cost_usd"] - b["cost_usd"]
    assert f"{'+' if delta > 0 else '-'}${abs(delta):.6f}" in text and "prices: table 2026-12-01, user" in text


def test_report_shows_the_runs_cost(project):
    root, _model, _shop = project
    (root / "priced.toml").write_text(PRICED)
    r = spoolproxy(root, "report", "cassettes/runaway.yaml", "-o", "runaway.html")
    assert r.returncode == 0, r.stderr
    usd = detect_cost(root, "cassettes/runaway.yaml")["usd"]
    html = (root / "runaway.html").read_text()
    assert f"${usd:.6f}" in html and "prices: table 2026-12-01" in html
    r = spoolproxy(root, "report", "cassettes/stock-check.yaml", "-o", "stock.html")
    html = (root / "stock.html").read_text()
    assert "unknown" in html and "no price for shop-scripted-1" in html
    r = spoolproxy(root, "report", "cassettes/stock-check.yaml", "-o", "stock-priced.html", "--config", "priced.toml")
    usd = detect_cost(root, "cassettes/stock-check.yaml", "--config", "priced.toml")["usd"]
    html = (root / "stock-priced.html").read_text()
    assert f"${usd:.6f}" in html and "prices: user" in html
