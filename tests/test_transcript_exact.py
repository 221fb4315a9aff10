"""Transcripts that are exactly right (issue 9, item 3), on real recordings of the real
openai SDK against the fake provider:

* a tool call a server returns both as ``tool_calls`` and in the legacy ``function_call``
  field (llama.cpp's server does) is one call, streamed or not;
* a streamed call without usage is "tokens unknown": ``show`` prints ``?`` and the totals
  say how many calls lack usage, never a silent 0 (the record summary too);
* ``show`` never cuts a value without an ellipsis;
* ``playback --live`` writes the cassette in wire order, so a replayed tool call sits
  between the live model turn that asked for it and the one that read its result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import openai
import pytest

from spoolproxy.cassettes import load
from spoolproxy.detectors import analyze, build_transcript
from tests.fakes import openai_wire
from tests.fakes.provider import Reply, json_reply, sse_reply

from .test_proxy_support import recording, run_cli, spool_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("spool_home")

TOOLS = [{"type": "function", "function": {"name": "lookup_order", "description": "Find an order.",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                          "required": ["query"]}}}]


def _sdk(s, path: str = "/v1") -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", max_retries=0, base_url=f"https://api.openai.com{path}",
                         http_client=openai.DefaultHttpxClient(proxy=s.runner.proxy_url, verify=s.client_ssl()))


def _llamacpp(req) -> Reply:
    """llama.cpp's server: the tool call in ``tool_calls`` and again in ``function_call``
    (in the message, and in the stream's deltas)."""
    body = json.loads(req.body)
    if body.get("stream"):
        chunks = openai_wire.chat_chunks(body, req.body)
        for ch in chunks:
            for c in ch.get("choices") or []:
                for tc in c["delta"].get("tool_calls") or []:
                    fn = tc["function"]
                    c["delta"]["function_call"] = {k: v for k, v in fn.items() if k in ("name", "arguments")}
        return sse_reply([b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"])
    doc = openai_wire.chat_completion(body, req.body)
    msg = doc["choices"][0]["message"]
    if msg.get("tool_calls"):
        msg["function_call"] = dict(msg["tool_calls"][0]["function"])
    return json_reply(200, doc)


def test_a_call_sent_as_tool_calls_and_function_call_is_one_call(tmp_path, fake_provider):
    fake_provider.add_route("POST", "/llamacpp/v1/chat/completions", _llamacpp)
    with recording(tmp_path / "llama.yaml", fake=fake_provider) as s:
        c = _sdk(s, "/llamacpp/v1")
        r = c.chat.completions.create(model="qwen2.5", tools=TOOLS, messages=[{"role": "user", "content": "order 1002"}])
        msg = r.choices[0].message
        assert msg.tool_calls and msg.function_call is not None  # the SDK sees both fields
        history = [{"role": "user", "content": "order 1002"}, msg.model_dump(exclude_none=True),
                   {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": '{"status": "shipped"}'}]
        c.chat.completions.create(model="qwen2.5", tools=TOOLS, messages=history)
        stream = c.chat.completions.create(model="qwen2.5", tools=TOOLS, stream=True,
                                           messages=[{"role": "user", "content": "order 1003"}])
        deltas = [ch for ch in stream]
        assert any(ch.choices and ch.choices[0].delta.function_call for ch in deltas)
    t = build_transcript(load(s.path))
    first, second, third = (st.llm for st in t.steps)
    assert [(tc.name, tc.arguments) for tc in first.tool_calls] == [("lookup_order", {"query": "order 1002"})]
    # the history the agent sent back repeats both fields: still one call, and its result links to it
    assert [m.tool_calls for m in second.messages if m.role == "assistant"][0][0].name == "lookup_order"
    assert len([m for m in second.messages if m.role == "assistant"][0].tool_calls) == 1
    assert [(r.call_id, r.call_interaction) for r in t.tool_results] == [(first.tool_calls[0].id, 0)]
    assert [(tc.name, tc.arguments) for tc in third.tool_calls] == [("lookup_order", {"query": "order 1003"})]
    assert not [f for f in analyze(load(s.path)).findings if f.kind in ("tool_loop", "unknown_tool")]


def test_a_stream_without_usage_is_tokens_unknown(tmp_path, fake_provider, spool_home):
    path = tmp_path / "usage.yaml"
    with recording(path, fake=fake_provider) as s:
        c = _sdk(s)
        c.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "with usage"}])
        list(c.chat.completions.create(model="gpt-4o-mini", stream=True,  # no stream_options: no usage event
                                       messages=[{"role": "user", "content": "without usage"}]))
    t = build_transcript(load(path))
    assert t.steps[1].llm.usage.reported is False and t.calls_without_usage == 1
    assert t.total_tokens == t.steps[0].llm.usage.total > 0 and t.cost_usd is None  # never a silent undercount
    out = run_cli(["show", str(path), "--width", "200"], spool_home).stdout
    import re

    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()[:1].isdigit()}
    tokens = {k: re.search(r"\]\s+(\S+)", row).group(1) for k, row in rows.items()}  # the column after the summary
    assert tokens["1"] == "?" and tokens["0"] == str(t.steps[0].llm.usage.total)
    assert "(1 of 2 model calls reported no usage: its tokens are unknown, not counted)" in out
    assert "cost: unknown (tokens unknown for some calls)" in out
    doc = json.loads(run_cli(["show", str(path), "--json"], spool_home).stdout)
    assert doc["transcript"]["calls_without_usage"] == 1

    # the record summary says it as well
    from spoolproxy.proxy.summary import RunSummary

    summary = RunSummary()
    for it in load(path).interactions:
        summary.add(it)
    assert any("(1 call reported no usage: tokens unknown)" in line for line in summary.lines())


def test_show_never_cuts_without_an_ellipsis(tmp_path, fake_provider, spool_home):
    long_query = "the order placed on the fourteenth of March by Ms Abernathy-Featherstonehaugh for delivery"
    path = tmp_path / "long.yaml"
    with recording(path, fake=fake_provider) as s:
        _sdk(s).chat.completions.create(model="gpt-4o-mini", tools=TOOLS, messages=[{"role": "user", "content": long_query}])
    out = run_cli(["show", str(path), "--width", "400"], spool_home).stdout
    args = json.dumps({"query": long_query})
    assert args not in out  # too long for the column...
    shown = out[out.index("lookup_order(") + len("lookup_order("):].split(")")[0]
    assert shown.endswith("…") and args.startswith(shown[:-1])  # ...so it is cut visibly


AGENT = r'''
import json, sys, httpx, openai
TOOLS = json.loads(sys.argv[2])
client = openai.OpenAI(api_key="sk-" + "z" * 20, max_retries=0)
messages = [{"role": "user", "content": "where is order 1002"}]
r = client.chat.completions.create(model="gpt-4o-mini", tools=TOOLS, messages=messages)
call = r.choices[0].message.tool_calls[0]
result = httpx.get(sys.argv[1] + "/echo/orders/1002", timeout=20).text
messages += [r.choices[0].message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": call.id, "content": result}]
print(client.chat.completions.create(model="gpt-4o-mini", tools=TOOLS, messages=messages).choices[0].message.content)
'''


def test_playback_live_merges_in_wire_order(tmp_path, fake_provider, spool_home):
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    path = tmp_path / "run.yaml"
    upstream = ["--connect-to", f"api.openai.com:443:127.0.0.1:{fake_provider.port}",
                "--upstream-ca", str(fake_provider.ca_pem_path)]
    argv = ["--", sys.executable, str(script), fake_provider.http_url, json.dumps(TOOLS)]
    rec = run_cli(["record", "-c", str(path), *upstream, *argv], spool_home)
    assert rec.returncode == 0, rec.stderr
    kinds = [s.kind for s in build_transcript(load(path)).steps]
    assert kinds == ["llm", "http", "llm"]
    fake_provider.reset()
    play = run_cli(["playback", "-c", str(path), "--live", "api.openai.com", *upstream, *argv], spool_home)
    assert play.returncode == 0, play.stderr
    assert [q.path.split("?")[0] for q in fake_provider.log] == ["/v1/chat/completions"] * 2  # the tool was replayed
    cas = load(tmp_path / "run.live.yaml")  # the run with the model live; run.yaml stays the recording
    t = build_transcript(cas)
    assert [s.kind for s in t.steps] == ["llm", "http", "llm"]  # not [http, llm, llm]
    starts = [it.started_at for it in cas.interactions]
    assert starts == sorted(starts)
    (res,) = t.tool_results
    assert (res.call_interaction, res.source_interaction, res.interaction) == (0, 1, 2)
    assert analyze(cas).verdict == "pass"
