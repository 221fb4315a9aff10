"""Assertions learned from a fixed run: a failing and a passing run of the same task, both
recorded here through the real proxy (the order agent, tests/agents/order_agent.py, real
openai SDK + httpx, against a scripted model and an order API on the fake server), diffed
into proposed facts, tools and budgets; shown for review, written only when accepted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from spoolproxy.cassettes import load
from spoolproxy.detectors import analyze
from spoolproxy.suite.learn import learn, select

from .conftest import REPO
from .fakes.routes import json_reply
from .test_proxy_support import cli_env, spool_home  # noqa: F401

pytestmark = pytest.mark.usefixtures("spool_home")
AGENT = REPO / "tests" / "agents" / "order_agent.py"
QUESTION = "Where is my order ORD-1001?"
ORDER = {"id": "ORD-1001", "status": "shipped", "carrier": "ParcelCo", "tracking": "PC-77120034",
         "eta": "2026-12-04", "total_cents": 4900}


def scripted_model(req):
    """OpenAI Chat Completions: look the order up, then answer from the tool result; a failed
    lookup is (wrongly) glossed over, as a weak model does."""
    messages = req.json()["messages"]
    last = messages[-1]
    message: dict = {"role": "assistant", "content": None}
    if last["role"] == "user":
        message["tool_calls"] = [{"id": "call_1", "type": "function",
                                  "function": {"name": "lookup_order", "arguments": json.dumps({"order_id": "ORD-1001"})}}]
    else:
        data = json.loads(last["content"])
        order = (data.get("orders") or [None])[0]
        message["content"] = (f"Your order {order['id']} has shipped with {order['carrier']} (tracking number "
                              f"{order['tracking']}) and should arrive on {order['eta']}." if order else
                              "Good news: your order has shipped and will arrive soon!")
    body = {"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}}
    return json_reply(200, body)


def order_api(req):
    return json_reply(200, {"orders": [ORDER] if "ORD-1001" in req.path else []})


@pytest.fixture(scope="module")
def pair(tmp_path_factory, spool_home, fake_ca):
    """(project dir, failing cassette, passing cassette), recorded with spoolproxy record."""
    from .fakes.provider import FakeProvider

    root = tmp_path_factory.mktemp("learn")
    (root / "spoolproxy.toml").write_text("")
    with FakeProvider(ca=fake_ca) as fake:
        fake.add_route("POST", "/chat/completions", scripted_model)
        fake.add_route("GET", "/orders", order_api)
        paths = []
        for version in (1, 2):
            cassette = root / "cassettes" / f"order-v{version}.yaml"
            proc = subprocess.run(
                [sys.executable, "-m", "spoolproxy", "record", "-c", str(cassette), "--upstream-ca", str(fake.ca_pem_path),
                 "--connect-to", f"api.openai.com:443:127.0.0.1:{fake.port}",
                 "--connect-to", f"tools.example.test:80:127.0.0.1:{fake.http_port}",
                 "--", sys.executable, str(AGENT), "--version", str(version), QUESTION],
                capture_output=True, text=True, env=cli_env(spool_home), cwd=root, timeout=120)
            assert proc.returncode == 0, proc.stderr
            paths.append(cassette)
    return root, paths[0], paths[1]


def test_the_pair_is_a_failing_and_a_passing_run(pair):
    _root, failing, passing = pair
    bad = analyze(load(failing))
    assert bad.verdict == "fail" and "tool_error_ignored" in {f.kind for f in bad.findings}
    assert analyze(load(passing)).verdict == "pass"


def test_learned_facts_tools_and_budgets(pair):
    _root, failing, passing = pair
    learned = learn(load(failing), load(passing))
    assert learned.same_task
    by_kind = {}
    for p in learned.proposals:
        by_kind.setdefault(p.kind, []).append(p)
    facts = [p.value for p in by_kind["final_answer_contains"]]
    assert facts == ["PC-77120034", "2026-12-04", "ParcelCo"]  # from the tool result; ORD-1001 came from the user
    assert all(p.separates and p.recommended for p in by_kind["final_answer_contains"])
    assert by_kind["final_answer_contains"][0].why == ("in the tool result of lookup_order (interaction 2) and the "
                                                       "passing answer; absent from the failing run's answer")
    assert "tools_called" not in by_kind  # both runs call lookup_order
    (llm_budget,) = by_kind["max_llm_calls"]
    assert llm_budget.value == 3 and not llm_budget.separates  # 2 calls each: a guard, not a separator
    assert [p.describe() for p in select(learned, "recommended")] == [
        "final answer contains 'PC-77120034'", "final answer contains '2026-12-04'", "final answer contains 'ParcelCo'"]
    with pytest.raises(ValueError, match="not one of 1-5"):
        select(learned, "9")


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], capture_output=True, text=True, cwd=root,
                          stdin=subprocess.DEVNULL, timeout=120)


def test_export_test_shows_proposals_and_writes_only_accepted_ones(pair):
    root, failing, passing = pair
    out = _cli(root, "export-test", str(failing), "--suite", "spool", "--learn-from", str(passing))
    assert out.returncode == 0, out.stderr
    assert "*[1] final answer contains 'PC-77120034'" in out.stdout
    assert "not added: review them, then rerun with --accept-learned 1,2,3" in out.stdout
    case = yaml.safe_load((root / "spool" / "order-v1.yaml").read_text())
    assert "final_answer_contains" not in case["assertions"]  # shown, not written
    out = _cli(root, "export-test", str(failing), "--suite", "spool", "--force", "--learn-from", str(passing),
               "--accept-learned", "recommended")
    assert "added: final answer contains 'PC-77120034'" in out.stdout, out.stdout + out.stderr
    case = yaml.safe_load((root / "spool" / "order-v1.yaml").read_text())
    assert case["assertions"]["final_answer_contains"] == ["PC-77120034", "2026-12-04", "ParcelCo"]
    # annotate learns on an existing case; numbers pick single proposals
    out = _cli(root, "annotate", "spool/order-v1.yaml", "--clear-assertions", "--learn-from", str(passing),
               "--accept-learned", "1,4")
    assert out.returncode == 0, out.stderr
    case = yaml.safe_load((root / "spool" / "order-v1.yaml").read_text())
    assert case["assertions"] == {"signature_absent": True, "final_answer_contains": ["PC-77120034"], "max_llm_calls": 3}
    bad = _cli(root, "annotate", "spool/order-v1.yaml", "--learn-from", str(passing), "--accept-learned", "7")
    assert bad.returncode == 2 and bad.stderr.startswith("spoolproxy: error: --accept-learned '7': '7' is not one of 1-5")
