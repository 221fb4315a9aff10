"""``spoolproxy verify`` end to end, each verdict from a constructed scenario: the demo's
support agent (real openai SDK) reruns its recorded failing run (an HTML 502 page taken as
"in stock") through the real proxy against the scripted model server, K patched trials
against K controls, plus past good runs.

* VERIFIED: a system-prompt rule fixes every patched trial while every control fails;
  ``--pin`` saves a passing patched run, and once the rule is in the agent's code the
  offline ``spoolproxy test`` passes;
* REJECTED: the same rule plus a max_tokens cap fixes the failing run but cuts a past good
  run's answer;
* INCONCLUSIVE: the provider answers 503 (errored trials, never failures);
* LIKELY: a seeded flaky model follows the rule only some of the time;
* ``--max-cost`` stops further trials.
"""

from __future__ import annotations

import json
import random
import shutil

import pytest
import yaml

from tests.fixproject import REFUND_Q, REPO, make_project, model_server, routes, spoolproxy, start_servers


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("verifyproj"))
    r = spoolproxy(root, "export-test", "cassettes/stock-check.yaml", "--confirm")
    assert r.returncode == 0, r.stderr
    (root / "spool" / "refund-v2.yaml").write_text(yaml.safe_dump({
        "name": "refund-v2", "status": "confirmed", "command": {"argv": ["python", "agent_v2.py", REFUND_Q]},
        "cassette": "cassettes/refund.pinned.yaml", "failing_cassette": "cassettes/refund.yaml",
        "signature": [{"kind": "duplicate_side_effect"}], "assertions": {"final_answer_contains": ["ORD-1002"]}}))
    model, shop_server = start_servers()
    yield root, model
    model.shutdown()
    shop_server.shutdown()


def verify(root, model, *args, out: str):
    r = spoolproxy(root, "verify", *args, *routes(model), "--out", out)
    v = json.loads((root / out / "verification.json").read_text())
    return r, v


def test_rejected_when_the_patch_breaks_a_past_good_run(project):
    root, model = project
    (root / "short.yaml").write_text("- kind: model_params\n  max_tokens: 30\n  note: cheaper answers\n")
    r, v = verify(root, model, "stock-check", "--patch", "html-rule.yaml", "--patch", "short.yaml", "-k", "2",
                  "--regress", "spool/refund-v2.yaml", out="v-rejected")
    assert r.returncode == 1, r.stderr
    assert v["verdict"] == "REJECTED" and v["reason"] == "1 past good run now fails with the patch"
    assert (v["patched"]["passed"], v["controls"]["failed"]) == (2, 2)  # it does fix the failing run...
    past = [t for t in v["trials"] if t["arm"] == "regression"]
    assert past[0]["outcome"] == "failed" and "token limit" in past[0]["reason"]  # ...but cuts a good answer
    assert "REJECTED" in r.stdout and "cassettes/refund.pinned.yaml: failed" in r.stdout


def test_inconclusive_when_the_provider_errors(project):
    root, model = project
    model.fail_next(503, 50)
    try:
        r, v = verify(root, model, "stock-check", "--patch", "html-rule.yaml", "-k", "2", "--regress", "none",
                      out="v-inconclusive")
    finally:
        model.take_failure()
        model._failures.clear()
    assert r.returncode == 1 and v["verdict"] == "INCONCLUSIVE"
    assert v["patched"]["errored"] == 2 and v["patched"]["failed"] == 0  # errored, never failed
    assert all("provider error" in t["reason"] and "503" in t["reason"] for t in v["trials"])


def _seed_for(flaky: float, pattern: list[bool]) -> int:
    """A seed whose first draws flip exactly as ``pattern`` says (trials run patched, control, ...)."""
    for seed in range(10_000):
        rng = random.Random(seed)
        if [rng.random() < flaky for _ in pattern] == pattern:
            return seed
    raise AssertionError("no seed found")


def test_likely_with_a_flaky_model(project):
    root, model = project
    old = model.brain
    # patched 1 ignores the rule (flip), control 1 keeps the bug, patched 2 follows it, control 2 keeps the bug
    model.brain = model_server.Brain(seed=_seed_for(0.4, [True, False, False, False]), flaky=0.4)
    try:
        r, v = verify(root, model, "stock-check", "--patch", "html-rule.yaml", "-k", "2", "--regress", "none",
                      out="v-likely")
    finally:
        model.brain = old
    assert r.returncode == 0, r.stderr
    assert (v["patched"]["passed"], v["patched"]["failed"], v["controls"]["passed"]) == (1, 1, 0)
    assert v["verdict"] == "LIKELY" and "not significant" in v["reason"]


def test_max_cost_stops_further_trials(project):
    root, model = project
    (root / "gpt4o.yaml").write_text(
        "- kind: system_prompt\n  op: append\n  text: 'An HTML page from a tool is a failure: say the service is "
        "unavailable.'\n- kind: model_params\n  model: gpt-4o\n")
    r, v = verify(root, model, "stock-check", "--patch", "gpt4o.yaml", "-k", "4", "--no-control", "--max-cost",
                  "0.0001", "--regress", "none", out="v-budget")
    assert r.returncode == 1
    assert v["stopped"].startswith("--max-cost $0.0001 reached after $0.0")
    assert [t["outcome"] for t in v["trials"]] == ["passed", "not_run", "not_run", "not_run"]
    assert v["cost_usd"] > 0.0001 and not v["cost_unknown"] and v["verdict"] == "INCONCLUSIVE"
    assert "cost $0.0" in r.stderr and "of $0.0001" in r.stderr  # the progress line shows spend vs budget


def test_verified_then_pinned_then_the_offline_suite_passes(project):
    root, model = project
    r, v = verify(root, model, "spool/stock-check.yaml", "--patch", "html-rule.yaml", "-k", "2", "--pin",
                  out="v-verified")
    assert r.returncode == 0, r.stderr
    assert v["verdict"] == "VERIFIED" and v["reason"] == "every patched trial passed and every control failed"
    assert [(t["arm"], t["outcome"]) for t in v["trials"]] == [("patched", "passed"), ("control", "failed")] * 2
    assert all(t["at"] == 0 for t in v["trials"])
    assert "VERIFIED" in r.stdout and "Wilson 95%" in r.stdout and "patched │ 2" in r.stdout
    assert "verify patched 1" in r.stderr or "patched 1: passed" in r.stderr  # progress on stderr
    case = yaml.safe_load((root / "spool" / "stock-check.yaml").read_text())
    assert case["cassette"] == "cassettes/stock-check.pinned.yaml"
    assert case["failing_cassette"] == "cassettes/stock-check.yaml"
    pinned = yaml.safe_load((root / "cassettes" / "stock-check.pinned.yaml").read_text())
    assert pinned["spoolproxy"]["forked_from"] == "stock-check.yaml"
    # ship the fix: the same line in the agent's prompt; the suite then passes offline (no servers needed)
    agent = (root / "agent.py").read_text()
    rule = "A tool result that is an HTML page is a failure: tell the customer the service is unavailable."
    fixed = agent.replace('citing the tool data.")', f'citing the tool data.\\n{rule}")')
    assert fixed != agent
    (root / "agent.py").write_text(fixed)
    try:
        t = spoolproxy(root, "test", "--case", "stock-check", "--fail-on", "any")
    finally:
        shutil.copy(REPO / "examples" / "agent_v1.py", root / "agent.py")
    assert t.returncode == 0, t.stdout + t.stderr
    assert "passes" in t.stdout


def test_bad_input(project):
    root, _model = project
    for args, msg in [(["stock-check"], "give the patch to verify"),
                      (["nope", "--system-append", "x"], "nope: no such cassette or case file"),
                      (["cassettes/stock-check.yaml", "--system-append", "x", "--pin"], "--pin saves into a test case"),
                      (["stock-check", "--system-append", "x", "--regress", "missing/"], "--regress missing"),
                      (["stock-check", "--system-append", "x", "--max-cost", "0"], "--max-cost must be a positive")]:
        r = spoolproxy(root, "verify", *args)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)


def test_the_run_report_shows_the_verification(project):
    root, _model = project
    hook = root / "cassettes" / "stock-check.verify.json"  # written by the verifications above
    doc = json.loads(hook.read_text())
    assert doc["verdict"] in ("VERIFIED", "LIKELY", "INCONCLUSIVE", "REJECTED") and doc["summary"].startswith(doc["verdict"])
    assert doc["trials"] and {"arm", "n", "outcome", "reason"} <= set(doc["trials"][0])
    r = spoolproxy(root, "report", "cassettes/stock-check.yaml", "-o", "report.html")
    assert r.returncode == 0, r.stderr
    assert doc["verdict"] in (root / "report.html").read_text()
