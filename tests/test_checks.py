"""User checks (oracles) in shell, Python and Node against real SDK recordings (the demo
agent's cassettes, recorded with the openai SDK and httpx through the real proxy): the run
document they read (and its shipped JSON Schema), verdicts in ``detect``, ``show``,
``spoolproxy check`` and ``spoolproxy test``, applicability by tag and host, and checks that
crash or hang (never a pass)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml

from spoolproxy.cassettes import load, save
from spoolproxy.checks import evaluate
from spoolproxy.checks.spec import CheckSpec
from spoolproxy.detectors import analyze, build_transcript, load_detect_config
from spoolproxy.detectors.document import json_schema, shipped_schema

from .conftest import REPO

REFUND_Q = "Please refund order ORD-1002, the mug arrived broken."
needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (the shell check uses it)")
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

#: the shell check: a refund the payment gateway did not confirm needs a follow-up ticket
REFUND_FOLLOWUP_SH = """\
#!/bin/sh
# Policy: a refund the payment gateway did not confirm (5xx) needs a follow-up ticket.
set -eu
doc=$(cat)
unconfirmed=$(printf '%s' "$doc" | jq '[.transcript.steps[] | select(.method == "POST" and (.url | endswith("/refunds")) and (.status // 0) >= 500)] | length')
tickets=$(printf '%s' "$doc" | jq '[.transcript.steps[] | select(.method == "POST" and (.url | endswith("/tickets")))] | length')
if [ "$unconfirmed" -gt 0 ] && [ "$tickets" -eq 0 ]; then
  echo "refund not confirmed by the gateway ($unconfirmed POST /refunds answered 5xx) and no follow-up ticket opened"
  exit 1
fi
"""

#: the Node check: an answer must not promise a delivery window the tools never gave
NO_PROMISE_JS = """\
let data = "";
process.stdin.on("data", (c) => (data += c));
process.stdin.on("end", () => {
  const run = JSON.parse(data);
  const answer = run.transcript.final_answer ? run.transcript.final_answer.text : "";
  const m = answer.match(/\\d+\\s*-\\s*\\d+ business days/);
  if (m) {
    const said = run.transcript.tool_results.some((r) => r.content.includes(m[0]));
    if (!said) {
      console.log(JSON.stringify({reason: `the answer promises "${m[0]}", which no tool said`,
                                  interactions: [run.transcript.final_answer.interaction]}));
      process.exit(1);
    }
  }
});
"""

#: Python checks: functions of the Transcript (and the run document)
POLICY_PY = """\
import time


def cites_tracking(transcript):
    answer = transcript.final_answer.text if transcript.final_answer else ""
    for r in transcript.tool_results:
        data = r.content_json or {}
        for order in data.get("orders", []) if isinstance(data, dict) else []:
            if order.get("tracking") and order["tracking"] not in answer:
                return f"order {order['id']} has tracking {order['tracking']}, the answer does not give it"
    return None


def answers_in_few_calls(transcript, run):
    calls = len(transcript.llm_steps())
    assert calls <= 2, f"{calls} model calls for {run['meta']['command'][-1]!r}"


def raises(transcript):
    return {}["missing"]


def hangs(transcript):
    time.sleep(30)
"""


def spoolproxy(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "COLUMNS": "200", **env}
    full.pop("SPOOLPROXY_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=cwd, capture_output=True, text=True,
                          env=full, timeout=240)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project with the demo cassettes and one check per language in spoolproxy.toml."""
    root = tmp_path_factory.mktemp("checks-project")
    shutil.copytree(REPO / "cassettes", root / "cassettes")
    shutil.copy(REPO / "examples" / "agent_v2.py", root / "agent_v2.py")
    checks = root / "checks"
    checks.mkdir()
    (checks / "refund_followup.sh").write_text(REFUND_FOLLOWUP_SH)
    (checks / "refund_followup.sh").chmod(0o755)
    (checks / "no_promise.js").write_text(NO_PROMISE_JS)
    (checks / "policy.py").write_text(POLICY_PY)
    (checks / "__init__.py").write_text("")
    (root / "spoolproxy.toml").write_text(textwrap.dedent("""\
        [[checks]]
        name = "refund-followup"
        command = "./checks/refund_followup.sh"
        hosts = ["shop.example"]

        [[checks]]
        name = "cites-tracking"
        function = "checks.policy:cites_tracking"
        severity = "warn"
        """))
    return root


def _doc(path: Path, cwd: Path) -> dict:
    out = spoolproxy("show", str(path), "--json", cwd=cwd)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_run_document_schema_is_shipped_and_matches_real_output(tmp_path):
    schema = shipped_schema()
    assert schema == json_schema(), "run `python -m spoolproxy.detectors.document` to regenerate the schema file"
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for cassette in sorted((REPO / "cassettes").glob("*.yaml")):
        doc = _doc(cassette, tmp_path)
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
        assert not errors, (cassette.name, errors[:3])
        assert doc["schema_version"] == 1 and doc["transcript"]["steps"] and doc["meta"]["command"]


def test_a_check_reads_exactly_what_show_json_prints(tmp_path):
    """The document on a check's stdin is the show --json document (same schema, same content)."""
    cassette = tmp_path / "order-status.yaml"
    shutil.copy(REPO / "cassettes" / "order-status.yaml", cassette)
    got = tmp_path / "stdin.json"
    (tmp_path / "spoolproxy.toml").write_text(f"[[checks]]\nname = 'copy'\ncommand = \"cat > '{got}'\"\n")
    out = spoolproxy("check", str(cassette), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    received = json.loads(got.read_text())
    jsonschema.validate(received, shipped_schema())
    shown = _doc(cassette, tmp_path)
    assert received["transcript"] == shown["transcript"] and received["meta"] == shown["meta"]
    assert received["report"]["findings"] == shown["report"]["findings"]


@needs_jq
def test_shell_check_fails_a_run_the_detectors_pass(project):
    pinned = "cassettes/refund.pinned.yaml"
    assert analyze(load(project / pinned)).verdict == "pass"  # built-in detectors alone
    out = spoolproxy("detect", pinned, "--json", "--fail-on", "error", cwd=project)
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["verdict"] == "fail"
    (finding,) = [f for f in doc["findings"] if f["kind"] == "check_failed"]
    assert finding["severity"] == "error"
    assert finding["message"].startswith("check refund-followup failed: refund not confirmed by the gateway (1 POST")
    assert [c["name"] for c in doc["checks"]] == ["refund-followup", "cites-tracking"]
    assert [c["status"] for c in doc["checks"]] == ["fail", "pass"]
    # the same cassette, the same check, re-run on its own
    again = spoolproxy("check", pinned, "--check", "refund-followup", cwd=project)
    assert again.returncode == 1 and "refund-followup fail (error)" in again.stdout, again.stdout + again.stderr
    shown = spoolproxy("show", pinned, "--width", "200", cwd=project)
    assert "check refund-followup: fail" in shown.stdout and "verdict: FAIL" in shown.stdout
    # a run where the gateway answered is fine
    fine = spoolproxy("check", "cassettes/order-status.yaml", "--json", cwd=project)
    assert fine.returncode == 0, fine.stdout
    assert {c["name"]: c["status"] for c in json.loads(fine.stdout)["checks"]} == {
        "refund-followup": "pass", "cites-tracking": "pass"}


def test_python_function_checks_pass_fail_crash_and_hang(project):
    cas = load(project / "cassettes" / "lost-order.yaml")
    t = build_transcript(cas)
    report = analyze(cas)
    base = str(project)
    specs = [CheckSpec(name="few-calls", function="checks.policy:answers_in_few_calls", base_dir=base),
             CheckSpec(name="raises", function="checks.policy:raises", base_dir=base),
             CheckSpec(name="hangs", function="checks.policy:hangs", timeout=1, base_dir=base),
             CheckSpec(name="no-module", function="checks.nope:f", base_dir=base),
             CheckSpec(name="cites", function="checks.policy:cites_tracking", base_dir=base)]
    results = {r.name: r for r in evaluate(cas, t, specs=specs, report=report)}
    assert results["few-calls"].status == "fail"
    assert results["few-calls"].message == "5 model calls for \"Where is my order ORD-1404? It's been two weeks.\""
    assert results["raises"].status == "crashed" and "KeyError: 'missing'" in results["raises"].message
    assert results["hangs"].status == "timeout" and results["hangs"].message.startswith("no verdict within 1 s")
    assert results["no-module"].status == "crashed" and "could not import" in results["no-module"].message
    assert results["cites"].status == "pass"
    shipped = load(project / "cassettes" / "order-status.yaml")  # the order shipped: the answer gives its tracking
    (ok,) = evaluate(shipped, build_transcript(shipped), specs=specs[-1:])
    assert ok.status == "pass"


@needs_node
def test_node_check_names_the_interaction(project):
    spec = "node checks/no_promise.js"
    out = spoolproxy("check", "cassettes/refund.yaml", "cassettes/refund.pinned.yaml", "--command", spec, "--json",
                     cwd=project)
    assert out.returncode == 1, out.stderr
    v1, v2 = (json.loads(line) for line in out.stdout.splitlines())
    (bad,) = v1["checks"]
    assert bad["status"] == "fail" and bad["interactions"] == [5]
    assert bad["message"] == 'the answer promises "3-5 business days", which no tool said'
    assert v2["checks"][0]["status"] == "pass"


def test_shell_checks_that_crash_or_hang_never_pass(tmp_path):
    cas = load(REPO / "cassettes" / "order-status.yaml")
    t = build_transcript(cas)
    specs = [CheckSpec(name="segv", command="kill -SEGV $$"),
             CheckSpec(name="missing", command="no-such-checker --strict"),
             CheckSpec(name="slow", command="sleep 20; echo late", timeout=0.5),
             CheckSpec(name="silent", command="exit 4"),
             CheckSpec(name="argv", command=[sys.executable, "-c", "import sys, json; json.load(sys.stdin)"])]
    results = {r.name: r for r in evaluate(cas, t, specs=specs)}
    assert results["segv"].status == "crashed" and results["segv"].message.startswith("killed by SIGSEGV")
    assert results["missing"].status == "crashed" and "could not run (exit 127)" in results["missing"].message
    assert results["slow"].status == "timeout" and "late" not in results["slow"].message
    assert results["silent"].status == "fail" and results["silent"].message == "exited 4 without a reason"
    assert results["argv"].status == "pass"
    report = analyze(cas, {"checks": [s.model_dump() for s in specs[:3]]})
    assert report.verdict == "fail"
    assert sorted(f.message.split(":")[0] for f in report.findings if f.kind == "check_failed") == [
        "check missing crashed (no verdict)", "check segv crashed (no verdict)", "check slow timed out (no verdict)"]


def test_checks_apply_by_tag_and_host(tmp_path):
    cas = load(REPO / "cassettes" / "order-status.yaml")
    cas.meta.extra["tags"] = {"agent": "support-bot", "env": "staging"}
    tagged = tmp_path / "tagged.yaml"
    save(cas, tagged)
    (tmp_path / "spoolproxy.toml").write_text(textwrap.dedent("""\
        [[checks]]
        name = "prod-only"
        command = "exit 1"
        tags = { env = "prod*" }

        [[checks]]
        name = "support"
        command = "echo checked; exit 1"
        tags = { agent = "support-*" }
        hosts = ["shop.example"]

        [[checks]]
        name = "openai-only"
        command = "exit 1"
        hosts = ["api.openai.com"]
        """))
    out = spoolproxy("check", "tagged.yaml", "--json", cwd=tmp_path)
    doc = json.loads(out.stdout)
    assert [c["name"] for c in doc["checks"]] == ["support"] and doc["checks"][0]["message"] == "checked"
    assert {s["name"]: s["why"] for s in doc["skipped"]} == {
        "prod-only": "tag env=staging does not match prod*",
        "openai-only": "the run reached none of api.openai.com"}


def test_bad_check_config_is_one_line(tmp_path):
    shutil.copy(REPO / "cassettes" / "order-status.yaml", tmp_path / "run.yaml")
    (tmp_path / "spoolproxy.toml").write_text("[[checks]]\nname = 'x'\nfunction = 'not a function'\n")
    out = spoolproxy("detect", "run.yaml", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == ("spoolproxy: error: config [[checks]] #1.function: function 'not a function': "
                                  "write it as module:function (e.g. checks.refunds:within_total); fix spoolproxy.toml")
    (tmp_path / "spoolproxy.toml").write_text("[[checks]]\nname = 'x'\n")
    out = spoolproxy("check", "run.yaml", cwd=tmp_path)
    assert out.returncode == 2 and "give exactly one of command" in out.stderr
    (tmp_path / "spoolproxy.toml").write_text("")
    out = spoolproxy("check", "run.yaml", cwd=tmp_path)
    assert out.returncode == 2 and "no check to run" in out.stderr
    out = spoolproxy("check", "run.yaml", "--check", "nope", cwd=tmp_path)
    assert out.returncode == 2 and "no check named nope" in out.stderr


@needs_jq
@needs_node
def test_checks_decide_regression_cases(project):
    """export-test turns a run only the shell check fails into a case; spoolproxy test replays
    the agent and the check fails it again (still_fails); a case's own Node check fails a
    run everything else passes (fails_differently)."""
    suite = project / "spool"
    out = spoolproxy("export-test", "cassettes/refund.pinned.yaml", "--suite", "spool", "--confirm",
                     "--cmd", f"python agent_v2.py '{REFUND_Q}'", cwd=project)
    assert out.returncode == 0 and "signature: check_failed" in out.stdout, out.stdout + out.stderr
    case = yaml.safe_load((suite / "refund.pinned.yaml").read_text())
    assert case["signature"][0]["kind"] == "check_failed"
    (suite / "order-status.yaml").write_text(yaml.safe_dump({
        "name": "order-status", "status": "confirmed",
        "command": {"argv": ["python", "agent_v2.py", "--no-stream", "Where is my order ORD-1001?"]},
        "cassette": "cassettes/order-status.yaml",
        "checks": [{"name": "must-give-eta", "command": "node -e 'process.exit(1)'; echo no ETA in the answer; exit 1",
                    "severity": "error"}]}, sort_keys=False))
    run = spoolproxy("test", "--suite", "spool", "--json", "--fail-on", "any", cwd=project,
                     OPENAI_API_KEY="replayed-no-key-needed")
    assert run.returncode == 1, run.stderr
    results = {r["name"]: r for r in json.loads(run.stdout)["results"]}
    refund = results["refund.pinned"]
    assert refund["outcome"] == "still_fails", refund
    assert refund["explanation"].startswith("signature came back: check_failed: check refund-followup failed")
    status = results["order-status"]
    assert status["outcome"] == "fails_differently", status
    assert status["explanation"] == "new failure: check_failed: check must-give-eta failed: no ETA in the answer"
