"""Round trip through the command line: ``spoolproxy record`` the real openai and anthropic
SDKs (sync, async, streaming, tool calls) against the fake provider, stop the provider,
``spoolproxy playback --strict`` the same program: identical objects and streamed chunks,
exit 0, and a sentinel on the recorded address sees no connection.  Also the bad-input
paths of ``spoolproxy playback`` (corrupt cassettes: exit 2, one line).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.fakes.provider import FakeProvider

AGENT = r'''
import asyncio, json, sys
import anthropic, openai

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
out = {}
oa = openai.OpenAI()
msgs = [{"role": "user", "content": "Say hello"}]
out["sync"] = oa.chat.completions.create(model="gpt-4o-mini", messages=msgs).model_dump()
out["stream"] = [c.model_dump() for c in oa.chat.completions.create(model="gpt-4o-mini", messages=msgs, stream=True)]
tool = oa.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Weather in Paris?"}], tools=TOOLS)
out["tool"] = tool.model_dump()
call = tool.choices[0].message.tool_calls[0]
out["tool_result"] = oa.chat.completions.create(model="gpt-4o-mini", tools=TOOLS, messages=[
    {"role": "user", "content": "Weather in Paris?"}, tool.choices[0].message.model_dump(exclude_none=True),
    {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]).model_dump()

async def run_async():
    a = openai.AsyncOpenAI()
    r = await a.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "async hi"}])
    s = await a.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "async stream"}], stream=True)
    return r.model_dump(), [c.model_dump() async for c in s]
out["async"], out["async_stream"] = asyncio.run(run_async())

an = anthropic.Anthropic()
out["anthropic"] = an.messages.create(model="claude-3-5-haiku-latest", max_tokens=50,
                                      messages=[{"role": "user", "content": "Hi Claude"}]).model_dump()
with an.messages.stream(model="claude-3-5-haiku-latest", max_tokens=50,
                        messages=[{"role": "user", "content": "Stream please"}]) as st:
    out["anthropic_text"] = list(st.text_stream)
    out["anthropic_final"] = st.get_final_message().model_dump()
out["anthropic_tool"] = an.messages.create(model="claude-3-5-haiku-latest", max_tokens=50,
    tools=[{"name": "get_weather", "description": "weather", "input_schema": {"type": "object",
            "properties": {"city": {"type": "string"}}}}],
    messages=[{"role": "user", "content": "Weather in Rome?"}]).model_dump()
json.dump(out, sys.stdout, sort_keys=True)
'''


def spool(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture
def agent_env(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    env = dict(os.environ)
    env["OPENAI_API_KEY"] = "sk-proj-" + "x" * 40
    env["ANTHROPIC_API_KEY"] = "sk-ant-api03-" + "y" * 40
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        env.pop(name, None)
    return script, env


def connect_to(port: int) -> list[str]:
    return ["--connect-to", f"api.openai.com:443:127.0.0.1:{port}",
            "--connect-to", f"api.anthropic.com:443:127.0.0.1:{port}"]


def test_sdk_round_trip_is_exact_and_offline(tmp_path, agent_env, fake_ca):
    script, env = agent_env
    cassette = tmp_path / "run.yaml"
    with FakeProvider(ca=fake_ca) as provider:
        rec = spool("record", "--cassette", str(cassette), *connect_to(provider.port), "--upstream-ca",
                    str(provider.ca_pem_path), "--", sys.executable, str(script), env=env)
        assert rec.returncode == 0, rec.stderr
        assert len(provider.log) == 9
    recorded = json.loads(rec.stdout)
    assert recorded["tool"]["choices"][0]["message"]["tool_calls"]
    assert len(recorded["stream"]) > 2 and recorded["anthropic_text"]

    report = tmp_path / "report.json"
    with FakeProvider(ca=fake_ca) as sentinel:
        play = spool("playback", "--cassette", str(cassette), "--strict", "--report", str(report),
                     *connect_to(sentinel.port), "--", sys.executable, str(script), env=env)
        assert sentinel.connections == 0
    assert play.returncode == 0, play.stderr
    assert json.loads(play.stdout) == recorded
    assert "served exactly 9, served with divergence 0, missed 0, unused 0" in play.stderr
    doc = json.loads(report.read_text())
    assert [r["outcome"] for r in doc["requests"]] == ["exact"] * 9


def test_strict_exit_status_and_miss_in_child(tmp_path, agent_env, fake_ca):
    script, env = agent_env
    from spoolproxy.cassettes import save
    from spoolproxy.cassettes.model import Cassette

    empty = tmp_path / "empty.yaml"
    save(Cassette(), empty)
    lenient = spool("playback", "-c", str(empty), "--", sys.executable, "-c", "pass", env=env)
    assert lenient.returncode == 0
    child = ("import httpx; r = httpx.post('https://api.openai.com/v1/chat/completions', json={'model': 'm'}); "
             "print(r.status_code, r.headers['x-should-retry'])")
    strict = spool("playback", "-c", str(empty), "--strict", "--", sys.executable, "-c", child, env=env)
    assert strict.stdout.split() == ["400", "false"]
    assert strict.returncode == 3, strict.stderr
    assert "MISS #1 POST https://api.openai.com/v1/chat/completions" in strict.stderr
    assert "missed 1" in strict.stderr


CORRUPT = {
    "invalid.yaml": "interactions:\n  - request: {method: GET\n",
    "nointeractions.yaml": "version: 1\nfoo: []\n",
    "version.yaml": "version: 7\ninteractions: []\n",
    "truncated.yaml": "version: 1\ninteractions:\n- request:\n    method: POST\n    uri: https://api.openai.com/v1/x\n    body: '{\"a\n",
}


@pytest.mark.parametrize("name", [*CORRUPT, "garbage.yaml"])
def test_corrupt_cassette_exits_2_with_one_line(tmp_path, name):
    p = tmp_path / name
    if name == "garbage.yaml":
        p.write_bytes(bytes(range(256)) * 4)
    else:
        p.write_text(CORRUPT[name])
    r = spool("playback", "-c", str(p), "--", sys.executable, "-c", "print('ran')")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spoolproxy: error: ") and name in lines[0]
    assert "ran" not in r.stdout and "Traceback" not in r.stderr


def test_directory_with_one_bad_file_refuses_or_skips(tmp_path):
    from spoolproxy.cassettes import save
    from spoolproxy.cassettes.model import Cassette

    d = tmp_path / "cassettes"
    d.mkdir()
    save(Cassette(), d / "good.yaml")
    (d / "bad.yaml").write_text("interactions: [\n")
    r = spool("playback", "-c", str(d), "--", sys.executable, "-c", "print('ran')")
    assert r.returncode == 2 and "bad.yaml:2" in r.stderr and "--skip-bad" in r.stderr and "ran" not in r.stdout
    ok = spool("playback", "-c", str(d), "--skip-bad", "--", sys.executable, "-c", "print('ran')")
    assert ok.returncode == 0 and "ran" in ok.stdout and "skipped bad cassette" in ok.stderr
