"""Record modes and per-host routing through the command line, against the fake provider:
``new_episodes`` serves matches and records misses live into the cassette; ``--live GLOB``
(a host, or ``host:port`` as displays show it) sends one host upstream and writes the run
beside the cassette (``<stem>.live.yaml``, or into it with ``--write-back``) while the
others are replayed; ``once`` records a cassette that does not exist yet.  The child is a plain httpx program using the
proxy environment spoolproxy gives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spoolproxy.cassettes import load
from tests.fakes.provider import FakeProvider

AGENT = r'''
import json, os, sys, httpx
out = []
with httpx.Client(timeout=20) as c:   # trust_env: HTTPS_PROXY and SSL_CERT_FILE from spoolproxy
    for step in sys.argv[1:]:
        kind, text = step.split(":", 1)
        if kind == "t":   # a tool API on a plain-HTTP local port
            out.append(c.get(os.environ["TOOL_URL"] + "/echo/" + text).json()["path"])
        elif kind == "o":
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
                           env={**os.environ, "TOOL_URL": provider.http_url})
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

    def asked(path):
        return [(it.request.host, json.loads(it.request.body)["messages"][0]["content"]) for it in load(path).interactions]

    live = tmp_path / "run.live.yaml"
    assert asked(cas) == [("api.openai.com", "q1"), ("api.anthropic.com", "m1")]  # the recorded run is untouched
    assert asked(live) == [("api.openai.com", "q1"), ("api.anthropic.com", "m2")]  # the live host was re-recorded
    assert f"this run is in {live}" in r.stderr and f"{cas} is unchanged" in r.stderr
    meta = load(live).meta
    assert meta.extra["replayed_from"] == str(cas) and meta.extra["live"] == ["api.anthropic.*"]
    assert meta.recorded_at >= load(cas).meta.recorded_at  # when this run happened, not the recording
    d = subprocess.run([sys.executable, "-m", "spoolproxy", "diff", str(live), str(cas)], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "COLUMNS": "200"})
    assert "A is a playback of B with api.anthropic.* live" in d.stdout, d.stdout + d.stderr

    provider.reset()  # a glob with the port every display shows ("host:443") names the same host
    r, out = run("playback", cas, "--live", "api.anthropic.com:443", "--write-back", steps=["o:q1", "a:m3"])
    assert r.returncode == 0, r.stderr
    assert [q.path for q in provider.log] == ["/v1/messages"]
    assert asked(cas) == [("api.openai.com", "q1"), ("api.anthropic.com", "m3")] and f"replaced {cas}" in r.stderr
    assert asked(live)[1] == ("api.anthropic.com", "m2")  # --write-back leaves the earlier .live.yaml alone
    back = load(cas).meta  # written back: stamped as this run, as a .live.yaml is
    assert back.extra["live"] == ["api.anthropic.com:443"] and back.recorded_at >= meta.recorded_at


def test_live_glob_with_a_port_and_one_that_matches_nothing(tmp_path, provider, run):
    cas = tmp_path / "tool.yaml"
    rec, first = run("record", cas, steps=["o:q1", "t:a"])
    assert rec.returncode == 0 and first[1] == "/echo/a", rec.stderr
    port_host = f"127.0.0.1:{provider.http_port}"
    provider.reset()
    r, out = run("playback", cas, "--live", port_host, "--live-out", str(tmp_path / "fixed.yaml"), "--strict",
                 steps=["o:q1", "t:b"])
    assert r.returncode == 0 and out == [first[0], "/echo/b"], r.stderr
    assert [q.path for q in provider.log] == ["/echo/b"]  # only the tool host:port went upstream
    assert [it.request.uri.rsplit("/", 1)[1] for it in load(tmp_path / "fixed.yaml").interactions][1] == "b"
    assert len(load(cas)) == 2 and load(cas).interactions[1].request.uri.endswith("/echo/a")
    assert not (tmp_path / "tool.live.yaml").exists()

    provider.reset()  # a port the cassette never reached: said at start, and nothing goes live
    r, out = run("playback", cas, "--live", "127.0.0.1:1", steps=["o:q1", "t:a"])
    assert r.returncode == 0 and out == first and provider.log == [], r.stderr
    assert (f"warning: --live '127.0.0.1:1' matches no host of the cassette (hosts: api.openai.com, {port_host})"
            in r.stderr)
    assert "no request went live" in r.stderr and not (tmp_path / "tool.live.yaml").exists()


def test_live_output_options_are_checked(tmp_path, provider, run):
    cas = tmp_path / "run.yaml"
    rec, _ = run("record", cas, steps=["o:q1"])
    assert rec.returncode == 0, rec.stderr
    for opts, msg in [(["--write-back"], "add --live GLOB"),
                      (["--live", "api.openai.com", "--live-out", str(cas)], "use --write-back to replace it"),
                      (["--live", "x", "--live-out", "y.yaml", "--write-back"], "not both")]:
        r, _ = run("playback", cas, *opts, steps=["o:q1"])
        assert r.returncode == 2 and r.stderr.startswith("spoolproxy: error: ") and msg in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1


def test_once_records_a_new_cassette_then_replays_it(tmp_path, provider, run):
    cas = tmp_path / "new.yaml"
    r, first = run("playback", cas, "--record-mode", "once", steps=["o:q1"])
    assert r.returncode == 0, r.stderr
    assert len(load(cas)) == 1 and len(provider.log) == 1
    provider.reset()
    again, out = run("playback", cas, "--record-mode", "once", steps=["o:q1"])
    assert again.returncode == 0 and out == first and provider.connections == 0


def test_a_directory_serves_identical_requests_from_the_run_being_followed(tmp_path, provider, run):
    """Two recordings in one directory share an identical tool GET; a run following the
    second one (its model turn exists only there) gets that GET from the second one too, in
    its recorded order, not from the first file loaded."""
    pool = tmp_path / "cassettes"
    pool.mkdir()
    a, b = pool / "a-other.yaml", pool / "b-followed.yaml"
    assert run("record", a, steps=["o:alpha", "t:x"])[0].returncode == 0
    rec, first = run("record", b, steps=["a:beta", "t:x", "t:x"])
    assert rec.returncode == 0, rec.stderr
    provider.reset()
    report = tmp_path / "report.json"
    r, out = run("playback", pool, "--report", str(report), steps=["a:beta", "t:x", "t:x"])
    assert r.returncode == 0 and out == first and provider.log == [], r.stderr
    served = [(Path(q["served"]["cassette"]).name, q["served"]["interaction"], q["outcome"])
              for q in json.loads(report.read_text())["requests"]]
    assert served == [("b-followed.yaml", 0, "exact"), ("b-followed.yaml", 1, "exact"), ("b-followed.yaml", 2, "exact")]
