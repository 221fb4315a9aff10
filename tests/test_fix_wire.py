"""Patches at the wire, one per provider format: an agent using the real openai and
anthropic SDKs and httpx talks to six LLM wire formats (OpenAI Chat Completions streamed,
OpenAI Responses streamed, Anthropic Messages streamed, Gemini streamed over SSE, Ollama
NDJSON, an OpenAI-compatible server) and to a tool, through ``spoolproxy record``; then
``spoolproxy fork --at 0`` reruns it with a system prompt, a tool description and a
sampling parameter patched.  What the fake provider receives is what the patch says, with
a correct Content-Length; the streamed answers still reach the SDKs; the identical tool
POST is replayed, never sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spoolproxy.cassettes import load
from tests.fakes.provider import FakeProvider

AGENT = r'''
import json, httpx, openai, anthropic
SYSTEM = "You are a terse support agent."
SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
FN = {"name": "lookup_order", "description": "Find an order.", "parameters": SCHEMA}
out = {}
key = "sk-proj-" + "x" * 40
oc = openai.OpenAI(base_url="https://api.openai.com/v1", api_key=key, max_retries=0)
chunks = oc.chat.completions.create(model="gpt-4o-mini", stream=True, stream_options={"include_usage": True},
    messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Where is ORD-1?"}],
    tools=[{"type": "function", "function": FN}])
args = "".join(c.choices[0].delta.tool_calls[0].function.arguments or "" for c in chunks
               if c.choices and c.choices[0].delta.tool_calls)
out["openai-chat"] = args
events = oc.responses.create(model="gpt-4o-mini", instructions=SYSTEM, input="Where is ORD-1?", stream=True,
                             tools=[{"type": "function", **FN}])
out["openai-responses"] = [e.type for e in events][-1]
ac = anthropic.Anthropic(base_url="https://api.anthropic.com", api_key="sk-ant-" + "x" * 40, max_retries=0)
with ac.messages.stream(model="claude-3-5-haiku-latest", max_tokens=64, system=SYSTEM,
                        messages=[{"role": "user", "content": "Where is ORD-1?"}],
                        tools=[{"name": FN["name"], "description": FN["description"], "input_schema": SCHEMA}]) as s:
    out["anthropic-messages"] = s.get_final_message().stop_reason
with httpx.Client(timeout=20) as h:
    r = h.post("https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
               json={"systemInstruction": {"parts": [{"text": SYSTEM}]},
                     "contents": [{"role": "user", "parts": [{"text": "Where is ORD-1?"}]}],
                     "tools": [{"functionDeclarations": [FN]}]})
    out["gemini-generateContent"] = r.text.count("data: ")
    r = h.post("http://ollama.local:11434/api/chat", json={"model": "llama3.2", "messages": [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": "Where is ORD-1?"}],
        "tools": [{"type": "function", "function": FN}]})
    out["ollama-chat"] = "".join(json.loads(line)["message"]["content"] for line in r.text.splitlines())
    out["tool"] = h.post("http://tools.example/echo/refunds", json={"order_id": "ORD-1"}).json()["method"]
compat = openai.OpenAI(base_url="http://compat.example/v1", api_key="local", max_retries=0)
msg = compat.chat.completions.create(model="qwen2.5", messages=[{"role": "system", "content": SYSTEM},
                                                                {"role": "user", "content": "Say hi"}])
out["openai-compatible"] = msg.choices[0].message.content
print(json.dumps(out, sort_keys=True))
'''

PATCHES = """\
- kind: system_prompt
  op: append
  text: Answer in French.
- kind: tool_description
  tool: lookup_order
  text: Ids look like ORD-nnnn.
  op: append
- kind: model_params
  temperature: 0.25
"""
PATCHED_SYSTEM = "You are a terse support agent.\nAnswer in French."


@pytest.fixture(scope="module")
def runs(tmp_path_factory, fake_ca):
    tmp = tmp_path_factory.mktemp("wire")
    (tmp / "agent.py").write_text(AGENT)
    (tmp / "fix.yaml").write_text(PATCHES)
    with FakeProvider(ca=fake_ca) as p:
        upstream = [f"--connect-to={h}:443:127.0.0.1:{p.port}" for h in
                    ("api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com")]
        upstream += [f"--connect-to=ollama.local:11434:127.0.0.1:{p.http_port}",
                     f"--connect-to=compat.example:80:127.0.0.1:{p.http_port}",
                     f"--connect-to=tools.example:80:127.0.0.1:{p.http_port}", "--upstream-ca", str(p.ca_pem_path)]
        env = dict(os.environ)

        def spool(*args):
            r = subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=tmp, capture_output=True, text=True,
                               timeout=120, env=env)
            assert "Traceback" not in r.stderr, r.stderr
            return r

        rec = spool("record", "-c", "multi.yaml", *upstream, "--", sys.executable, "agent.py")
        recorded = list(p.log)
        p.reset()
        fork = spool("fork", "multi.yaml", "--at", "0", "--patch", "fix.yaml", *upstream, "-o", "fork.yaml")
        yield {"rec": rec, "fork": fork, "recorded": recorded, "forked": list(p.log), "dir": tmp}


def _received(log, suffix: str, scheme: str = "https"):
    hits = [r for r in log if r.path.split("?")[0].endswith(suffix) and r.scheme == scheme]
    assert len(hits) == 1, [r.path for r in log]
    return hits[0]


FORMATS = {  # name -> (path suffix, scheme, system prompt, tool description, temperature) as received
    "openai-chat": ("/v1/chat/completions", "https", lambda b: b["messages"][0]["content"],
                    lambda b: b["tools"][0]["function"]["description"], lambda b: b["temperature"]),
    "openai-responses": ("/v1/responses", "https", lambda b: b["instructions"], lambda b: b["tools"][0]["description"],
                         lambda b: b["temperature"]),
    "anthropic-messages": ("/v1/messages", "https", lambda b: b["system"], lambda b: b["tools"][0]["description"],
                           lambda b: b["temperature"]),
    "gemini-generateContent": (":streamGenerateContent", "https", lambda b: b["systemInstruction"]["parts"][0]["text"],
                               lambda b: b["tools"][0]["functionDeclarations"][0]["description"],
                               lambda b: b["generationConfig"]["temperature"]),
    "ollama-chat": ("/api/chat", "http", lambda b: b["messages"][0]["content"],
                    lambda b: b["tools"][0]["function"]["description"], lambda b: b["options"]["temperature"]),
    "openai-compatible": ("/v1/chat/completions", "http", lambda b: b["messages"][0]["content"], None,
                          lambda b: b["temperature"]),
}


def test_record_and_fork_ran(runs):
    assert runs["rec"].returncode == 0, runs["rec"].stderr
    assert runs["fork"].returncode == 0, runs["fork"].stderr
    assert "7 requests: 1 cassette, 6 patched" in runs["fork"].stderr
    # the streamed answers reached the SDKs in the fork as in the recording
    assert json.loads(runs["fork"].stdout) == json.loads(runs["rec"].stdout)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_provider_receives_the_patched_request(runs, fmt):
    suffix, scheme, system, description, temperature = FORMATS[fmt]
    before = _received(runs["recorded"], suffix, scheme)
    after = _received(runs["forked"], suffix, scheme)
    b, a = before.json(), after.json()
    assert system(b) == "You are a terse support agent." and system(a) == PATCHED_SYSTEM
    if description is not None:
        assert description(b) == "Find an order." and description(a) == "Find an order. Ids look like ORD-nnnn."
    assert temperature(a) == 0.25
    assert int(after.header("content-length")) == len(after.body)  # fixed up for the new body
    # nothing else changed: undo the three edits and the bodies are equal
    assert _unpatched(fmt, a) == b


def _unpatched(fmt: str, a: dict) -> dict:
    a = json.loads(json.dumps(a))
    if fmt in ("openai-chat", "openai-compatible", "ollama-chat"):
        a["messages"][0]["content"] = "You are a terse support agent."
    elif fmt == "openai-responses":
        a["instructions"] = "You are a terse support agent."
    elif fmt == "anthropic-messages":
        a["system"] = "You are a terse support agent."
    else:
        a["systemInstruction"]["parts"][0]["text"] = "You are a terse support agent."
    for t in a.get("tools") or []:
        holder = t.get("function", t)
        for d in [holder, *holder.get("functionDeclarations", [])]:
            if d.get("description", "").endswith(" Ids look like ORD-nnnn."):
                d["description"] = "Find an order."
    if fmt == "gemini-generateContent":
        del a["generationConfig"]
    elif fmt == "ollama-chat":
        del a["options"]
    else:
        del a["temperature"]
    return a


def test_identical_tool_request_is_replayed_not_sent(runs):
    assert any(r.path.startswith("/echo") for r in runs["recorded"])
    assert not any(r.path.startswith("/echo") for r in runs["forked"])
    cas = load(runs["dir"] / "fork.yaml")
    tool = [it for it in cas.interactions if it.request.host == "tools.example"]
    assert [it.extra.get("fork") for it in tool] == ["cassette"]
    assert [it.extra.get("fork") for it in cas.interactions].count("patched") == 6
    assert cas.meta.extra["forked_from"] == "multi.yaml" and cas.meta.extra["fork_at"] == 0
    assert [p["kind"] for p in cas.meta.extra["patches"]] == ["system_prompt", "tool_description", "model_params"]
    # the fork cassette records what was sent: the patched request, with keys redacted
    first = json.loads(cas.interactions[0].request.body)
    assert first["messages"][0]["content"] == PATCHED_SYSTEM
    assert "x" * 40 not in (runs["dir"] / "fork.yaml").read_text()
