"""The agent's own end is part of the run (issue 9, item 2).

``spoolproxy record`` (a real subprocess) keeps CMD's exit status, the signal that killed
it, a ``--timeout`` it overran and the redacted end of its stderr (which still reaches the
terminal) in the cassette; ``detect`` reports a crashed agent as ``agent_crashed`` at error
level quoting the status and the stderr, and such a run can be exported as a test.
``record --`` with nothing after it is a usage error, not standalone mode.
"""

from __future__ import annotations

import json
import signal
import sys
import textwrap

import pytest

from spoolproxy.cassettes import load
from spoolproxy.detectors import analyze, build_transcript
from spoolproxy.detectors.evidence import EvidenceBuilder
from spoolproxy.proxy.child import ChildEnd

from .test_proxy_support import openai_via, run_cli, spawn_cli, spool_home, wait_for  # noqa: F401

pytestmark = pytest.mark.usefixtures("spool_home")

#: an agent that gets its answer (a streamed chat completion, through the real openai SDK)
#: and then dies in its own code, printing a secret in the traceback
AGENT = textwrap.dedent('''
    import os, sys, openai
    key = os.environ["AGENT_KEY"]
    client = openai.OpenAI(api_key=key, max_retries=0)
    s = client.chat.completions.create(model="gpt-4o-mini", stream=True,
                                       messages=[{"role": "user", "content": "summarise the ledger"}])
    answer = "".join(c.choices[0].delta.content or "" for c in s if c.choices)
    print("got:", answer, flush=True)
    for i in range(400):
        print(f"log line {i}: post-processing the answer", file=sys.stderr)
    def post_process(text):
        raise KeyError(f"ledger column 'total' missing (token {key})")
    post_process(answer)
''')


def _upstream(fake) -> list[str]:
    out = ["--upstream-ca", str(fake.ca_pem_path)]
    for rule in openai_via(fake):
        out += ["--connect-to", rule]
    return out


def _report(path):
    cas = load(path)
    t = build_transcript(cas)
    report = analyze(cas, transcript=t)
    ev = EvidenceBuilder(cas, t)
    for f in report.findings:  # every quote is verbatim, run-level ones included
        for e in f.evidence:
            field = ev.resolve(e.interaction, e.path)
            assert field is not None and e.quote in field, (f.kind, e)
    return cas, report


def test_a_traceback_after_the_last_request_fails_the_run(tmp_path, spool_home, fake_provider):
    key = "sk-proj-" + "Tk7" * 14
    (tmp_path / "agent.py").write_text(AGENT)
    path = tmp_path / "crash.yaml"
    proc = run_cli(["record", "-c", str(path), *_upstream(fake_provider), "--", sys.executable, str(tmp_path / "agent.py")],
                   spool_home, AGENT_KEY=key)
    assert proc.returncode == 1
    assert "got: Echo: summarise the ledger" in proc.stdout
    # the child's stderr still reached the terminal, whole
    assert "log line 0: post-processing" in proc.stderr and "log line 399" in proc.stderr
    assert "Traceback (most recent call last)" in proc.stderr and "KeyError" in proc.stderr
    # ... and the summary says the run failed
    assert "detect: fail" in proc.stderr and "agent_crashed" in proc.stderr

    cas, report = _report(path)
    assert cas.meta.exit_code == 1
    end = cas.meta.extra["agent_end"]
    tail = end["stderr_tail"]
    assert len(tail) <= 4096 and end["stderr_bytes"] > 10_000  # bounded: the last 4 KB of ~20 KB
    assert tail.startswith("log line ") and "KeyError" in tail.splitlines()[-1]
    assert key not in path.read_text() and "REDACTED-" in tail  # redacted on the way to disk
    assert report.verdict == "fail"
    (f,) = [f for f in report.findings if f.kind == "agent_crashed"]
    assert f.severity == "error" and "exited with status 1" in f.message and "KeyError" in f.message
    assert {e.path for e in f.evidence} == {"meta.exit_code", "meta.agent_end.stderr_tail"}
    assert all(e.interaction is None for e in f.evidence)
    assert f.interactions == [0]  # anchored at the last interaction: the agent died after it
    # the traffic alone is healthy
    assert [x.kind for x in report.findings] == ["agent_crashed"]

    # and it can be exported as a regression test now
    out = run_cli(["export-test", str(path), "--confirm", "--suite", str(tmp_path / "spool")], spool_home, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    case = next((tmp_path / "spool").glob("*.yaml")).read_text()
    assert "agent_crashed" in case

    # detect and show print it, with the run-level evidence
    det = run_cli(["detect", str(path), "--fail-on", "error"], spool_home)
    assert det.returncode == 1 and "agent_crashed" in det.stdout and "run meta.agent_end.stderr_tail" in det.stdout
    js = json.loads(run_cli(["detect", str(path), "--json"], spool_home).stdout)
    assert js["findings"][0]["evidence"][0] == {"interaction": None, "path": "meta.exit_code", "quote": "1"}


def test_killed_by_a_signal_and_timed_out(tmp_path, spool_home):
    killed = tmp_path / "killed.yaml"
    proc = run_cli(["record", "-c", str(killed), "--", sys.executable, "-c",
                    "import os, signal, sys; print('about to die', file=sys.stderr, flush=True); "
                    "os.kill(os.getpid(), signal.SIGKILL)"], spool_home)
    assert proc.returncode == 128 + signal.SIGKILL
    cas, report = _report(killed)
    assert cas.meta.exit_code == 137 and cas.meta.extra["agent_end"]["signal"] == "SIGKILL"
    (f,) = report.findings
    assert (f.kind, f.severity) == ("agent_crashed", "error")
    assert "killed by SIGKILL (exit status 137)" in f.message and "about to die" in f.message
    assert f.interactions == []  # nothing was recorded before it died

    slow = tmp_path / "slow.yaml"
    proc = run_cli(["record", "-c", str(slow), "--timeout", "0.5", "--", sys.executable, "-c",
                    "import time; time.sleep(60)"], spool_home)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "ran past --timeout 0.5 s" in proc.stderr
    cas, report = _report(slow)
    assert cas.meta.extra["agent_end"]["timed_out"] is True
    (f,) = report.findings
    assert f.kind == "agent_crashed" and f.severity == "error" and "overran its timeout" in f.message


def test_a_clean_exit_is_no_finding_and_an_interrupted_run_is_a_warning(tmp_path, spool_home, fake_provider):
    ok = tmp_path / "ok.yaml"
    proc = run_cli(["record", "-c", str(ok), *_upstream(fake_provider), "--", "curl", "-sS",
                    "https://api.openai.com/v1/models"], spool_home)
    assert proc.returncode == 0 and "detect: pass" in proc.stderr
    cas, report = _report(ok)
    assert cas.meta.exit_code == 0 and report.findings == []
    assert cas.meta.extra["agent_end"] == {"stderr_bytes": 0}

    stopped = tmp_path / "stopped.yaml"
    child = spawn_cli(["record", "-c", str(stopped), "--", sys.executable, "-c",
                       "import time; print('ready', flush=True); time.sleep(60)"], spool_home)
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=30)
    cas, report = _report(stopped)
    assert cas.meta.extra["agent_end"]["interrupted"] == "SIGTERM"
    (f,) = report.findings
    assert f.kind == "agent_crashed" and f.severity == "warn" and "stopped from outside" in f.message
    assert report.verdict == "pass"


@pytest.mark.parametrize("argv", [["record", "--"], ["record", "-c", "X", "--"], ["record", "-q", "--"],
                                  ["playback", "-c", "X", "--"]])
def test_a_separator_with_no_command_is_a_usage_error(tmp_path, spool_home, argv):
    """An empty ``$CMD`` in ``spoolproxy record -- $CMD`` must not start standalone mode
    (which waits for Ctrl-C: a CI job would hang)."""
    args = [a.replace("X", str(tmp_path / "x.yaml")) for a in argv]
    proc = run_cli(args, spool_home, timeout=30)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spoolproxy: error: '--' is followed by no command")
    assert "Traceback" not in proc.stderr and not (tmp_path / "x.yaml").exists()


def test_child_end_meta_redacts_before_cutting():
    """A key that straddles where the 4 KB tail starts is redacted, not cut in half: no piece
    of it survives in the tail."""
    from spoolproxy.cassettes.redact import Redactor

    key = "sk-proj-" + "Qw3" * 14
    raw = ("x" * 5000 + " token=" + key + "\n" + "z" * (4096 - 45) + "\nValueError: boom\n").encode()
    cut = raw[-4096:].decode()
    assert "sk-proj-" not in cut and cut.startswith(key[-20:])  # the raw 4 KB cut falls inside the key
    end = ChildEnd(code=1, stderr_tail=raw[-8192:], stderr_bytes=len(raw))
    meta = end.meta(Redactor(), keep=4096)
    tail = meta["stderr_tail"]
    assert not any(key[i:i + 12] in tail for i in range(len(key) - 11))
    assert tail.endswith("ValueError: boom\n") and len(tail) <= 4096
    assert meta["stderr_bytes"] == len(raw) and "signal" not in meta
