"""Record modes and per-host routing through the command line, against the fake provider:
``new_episodes`` serves matches and records misses live into the cassette; ``--live GLOB``
sends one host upstream (and re-records it) while the others are replayed; ``once``
records a cassette that does not exist yet.  The child is a plain httpx program using the
proxy environment spoolproxy gives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spoolproxy.cassettes import load
from tests.fakes.provider import FakeProvider

AGENT = r'''
import json, sys, httpx
out = []
with httpx.Client(timeout=20) as c:   # trust_env: HTTPS_PROXY and SSL_CERT_FILE from spoolproxy
    for step in sys.argv[1:]:
        kind, text = step.split(":", 1)
        if kind == "o":
            r = c.post("https://api.openai.com/v1/chat/completions", headers={"authorization": "Bearer " + "sk-proj-" + "x" * 40},
                       json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]})
            out.append(r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else r.status_code)
        else:
            r = c.post("https://api.anthropic.com/v1/messages", headers={"anthropic-version": "2023-06-01"},
                       json={"model": "claude-3-5-haiku-latest", "max_tokens": 20, "messages": [{"role": "user", "content": text}]})
            out.append(r.json()["content"][0]["text"] if r.status_code == 200 else r.status_code)
print(json.dumps(out))
'''


@pytest.fixture
def provider(fake_ca):
    with FakeProvider(ca=fake_ca) as p:
        yield p


@pytest.fixture
def run(tmp_path, provider):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    upstream = ["--connect-to", f"api.openai.com:443:127.0.0.1:{provider.port}",
                "--connect-to", f"api.anthropic.com:443:127.0.0.1:{provider.port}",
                "--upstream-ca", str(provider.ca_pem_path)]

    def go(subcommand: str, cassette, *opts: str, steps: list[str]):
        r = subprocess.run([sys.executable, "-m", "spoolproxy", subcommand, "--cassette", str(cassette), *upstream, *opts,
                            "--", sys.executable, str(script), *steps], capture_output=True, text=True, timeout=90,
                           env=dict(os.environ))
        assert "Traceback" not in r.stderr, r.stderr
        return r, (json.loads(r.stdout) if r.stdout.strip() else None)

    return go


def test_new_episodes_serves_matches_and_records_misses(tmp_path, provider, run):
    cas = tmp_path / "run.yaml"
    rec, first = run("record", cas, steps=["o:q1", "a:m1"])
    assert rec.returncode == 0, rec.stderr
    provider.reset()
    r, out = run("playback", cas, "--record-mode", "new_episodes", steps=["o:q1", "a:m1", "o:q2"])
    assert r.returncode == 0, r.stderr
    assert out[:2] == first
    assert [q.path for q in provider.log] == ["/v1/chat/completions"]  # only the miss went upstream
    assert json.loads(provider.log[0].body)["messages"][0]["content"] == "q2"
    assert "recorded 1 live interaction" in r.stderr
    assert len(load(cas)) == 3
    provider.reset()
    again, out2 = run("playback", cas, "--strict", steps=["o:q1", "a:m1", "o:q2"])
    assert again.returncode == 0, again.stderr
    assert out2 == out and provider.connections == 0


def test_live_host_goes_upstream_while_others_are_replayed(tmp_path, provider, run):
    cas = tmp_path / "run.yaml"
    rec, first = run("record", cas, steps=["o:q1", "a:m1"])
    assert rec.returncode == 0, rec.stderr
    provider.reset()
    r, out = run("playback", cas, "--live", "api.anthropic.*", "--strict", steps=["o:q1", "a:m2"])
    assert r.returncode == 0, r.stderr
    assert out[0] == first[0]
    assert [q.path for q in provider.log] == ["/v1/messages"]
    assert "served exactly 1" in r.stderr and "live 1" in r.stderr
    hosts = [(it.request.host, json.loads(it.request.body)["messages"][0]["content"]) for it in load(cas).interactions]
    assert hosts == [("api.openai.com", "q1"), ("api.anthropic.com", "m2")]  # the live host was re-recorded


def test_once_records_a_new_cassette_then_replays_it(tmp_path, provider, run):
    cas = tmp_path / "new.yaml"
    r, first = run("playback", cas, "--record-mode", "once", steps=["o:q1"])
    assert r.returncode == 0, r.stderr
    assert len(load(cas)) == 1 and len(provider.log) == 1
    provider.reset()
    again, out = run("playback", cas, "--record-mode", "once", steps=["o:q1"])
    assert again.returncode == 0 and out == first and provider.connections == 0
