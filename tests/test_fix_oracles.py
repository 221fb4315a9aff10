"""User checks judge ``spoolproxy verify`` trials, and the verify winner teaches assertions.

The demo's support agent v2 (real openai SDK, httpx) refunds order ORD-1002; the payment
gateway answers the refund POST with a 504 and v2, rightly, does not retry.  The built-in
detectors pass that run, but the project's shell check (``[[checks]]``, jq) says a refund the
gateway did not confirm needs a follow-up ticket: it fails.  ``verify`` with a counterfactual
tool result (the gateway confirms the refund) reruns it through the real proxy against the
scripted model: every control fails *by the check alone*, every patched trial passes:
VERIFIED.  ``--pin`` keeps the winner; ``annotate --learn-from pinned`` then proposes the
refund id as a fact the answer must contain, and the offline suite passes with it."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest
import yaml

from spoolproxy.cassettes import load
from spoolproxy.detectors import analyze
from tests.fixproject import REFUND_Q, make_project, routes, spoolproxy, start_servers

pytestmark = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (the shell check uses it)")

#: the policy as a shell check: a refund the gateway did not confirm (5xx) needs a follow-up ticket
REFUND_FOLLOWUP_SH = """\
#!/bin/sh
set -eu
doc=$(cat)
unconfirmed=$(printf '%s' "$doc" | jq '[.transcript.steps[] | select(.method == "POST" and (.url | endswith("/refunds")) and (.status // 0) >= 500)] | length')
tickets=$(printf '%s' "$doc" | jq '[.transcript.steps[] | select(.method == "POST" and (.url | endswith("/tickets")))] | length')
if [ "$unconfirmed" -gt 0 ] && [ "$tickets" -eq 0 ]; then
  echo "refund not confirmed by the gateway and no follow-up ticket opened"; exit 1
fi
"""
CONFIRMED = {"refund_id": "R-5071", "order_id": "ORD-1002", "amount_cents": 1299, "status": "succeeded"}


def case(name: str, cassette: str) -> dict:
    return {"name": name, "status": "confirmed", "command": {"argv": ["python", "agent_v2.py", REFUND_Q]},
            "cassette": cassette, "signature": [{"kind": "check_failed"}], "assertions": {}}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("oracleproj"))
    (root / "checks").mkdir()
    (root / "checks" / "refund_followup.sh").write_text(REFUND_FOLLOWUP_SH)
    (root / "checks" / "refund_followup.sh").chmod(0o755)
    (root / "spoolproxy.toml").write_text(textwrap.dedent("""\
        [[checks]]
        name = "refund-followup"
        command = "./checks/refund_followup.sh"
        hosts = ["shop.example"]
        """))
    (root / "gateway-confirms.yaml").write_text(yaml.safe_dump([{
        "kind": "tool_result", "method": "POST", "host": "shop.example", "path": "/refunds", "status": 201,
        "body": CONFIRMED, "note": "what if the payment gateway had confirmed the refund"}]))
    shutil.copy(root / "cassettes" / "refund.pinned.yaml", root / "cassettes" / "refund-v2.yaml")
    (root / "spool").mkdir()
    (root / "spool" / "refund-v2.yaml").write_text(yaml.safe_dump(case("refund-v2", "cassettes/refund-v2.yaml")))
    model, shop_server = start_servers()
    yield root, model
    model.shutdown()
    shop_server.shutdown()


def test_the_run_passes_the_detectors_and_fails_the_shell_check(project):
    root, _model = project
    run = load(root / "cassettes" / "refund-v2.yaml")
    assert analyze(run).verdict == "pass"  # the built-in detectors see nothing wrong
    r = spoolproxy(root, "detect", "cassettes/refund-v2.yaml", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["verdict"] == "fail"
    assert "check_failed" in [f["kind"] for f in json.loads(r.stdout)["findings"]]


def test_verify_trials_honour_the_checks_then_the_winner_teaches_an_assertion(project):
    root, model = project
    r = spoolproxy(root, "verify", "refund-v2", "--patch", "gateway-confirms.yaml", "-k", "2", "--regress", "none",
                   "--pin", *routes(model), "--out", "v-check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "learn assertions from it: spoolproxy annotate refund-v2 --learn-from pinned" in r.stdout
    v = json.loads((root / "v-check" / "verification.json").read_text())
    assert [(t["arm"], t["outcome"]) for t in v["trials"]] == [("patched", "passed"), ("control", "failed")] * 2
    assert v["verdict"] == "VERIFIED"
    for t in v["trials"]:
        trial = load(root / t["cassette"])
        if t["arm"] == "control":
            # failed by the shell check alone: the detectors pass the very same trial
            assert t["reason"] == ("check_failed: check refund-followup failed: refund not confirmed by the "
                                   "gateway and no follow-up ticket opened"), t
            assert analyze(trial).verdict == "pass"
        else:
            assert json.loads(trial.interactions[3].response.body)["refund_id"] == "R-5071"
    # --pin kept the winner and the failing run; learn from the pinned winner
    spec = yaml.safe_load((root / "spool" / "refund-v2.yaml").read_text())
    assert (spec["cassette"], spec["failing_cassette"]) == ("cassettes/refund-v2.pinned.yaml",
                                                            "cassettes/refund-v2.yaml")
    r = spoolproxy(root, "annotate", "refund-v2", "--learn-from", "pinned", "--accept-learned", "recommended")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "learned from" in r.stdout and "refund-v2.pinned.yaml (passing)" in r.stdout
    assert "*[1] final answer contains 'R-5071'" in r.stdout
    spec = yaml.safe_load((root / "spool" / "refund-v2.yaml").read_text())
    assert "R-5071" in spec["assertions"]["final_answer_contains"]
    # the suite replays the winner offline: the check and the learned assertion both hold
    t = spoolproxy(root, "test", "--case", "refund-v2", "--fail-on", "any")
    assert t.returncode == 0, t.stdout + t.stderr
    assert "passes" in t.stdout


def test_pin_never_overwrites_the_verified_run(project):
    """A case whose own run is named *.pinned.yaml (exported from a pinned run): the winner goes beside it."""
    root, model = project
    (root / "spool" / "refund-pinned.yaml").write_text(
        yaml.safe_dump(case("refund-pinned", "cassettes/refund.pinned.yaml")))
    before = (root / "cassettes" / "refund.pinned.yaml").read_bytes()
    r = spoolproxy(root, "verify", "refund-pinned", "--patch", "gateway-confirms.yaml", "-k", "2", "--no-control",
                   "--regress", "none", "--pin", *routes(model), "--out", "v-pinned")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (root / "cassettes" / "refund.pinned.yaml").read_bytes() == before
    spec = yaml.safe_load((root / "spool" / "refund-pinned.yaml").read_text())
    assert spec["cassette"] == "cassettes/refund.pinned.pinned.yaml"
    assert spec["failing_cassette"] == "cassettes/refund.pinned.yaml"
    assert json.loads(load(root / spec["cassette"]).interactions[3].response.body)["refund_id"] == "R-5071"
