"""Clean stays clean (issue 9, item 5): healthy agent runs of the clients a user is likely to
have, recorded by a real ``spoolproxy record`` subprocess against the fake providers, give
no error-level finding.

Each client runs a small tool-using agent (a model turn asks for a tool, the tool is an HTTP
API or an MCP server, the result goes back, the model answers), streamed where the client
streams, with the server sending every stream's terminating chunk 50 ms after its terminal
event (``x-fake-fail: tail:50``), as real servers do.  Clients: the openai, anthropic and
google-genai SDKs, langchain-openai, pydantic-ai, openai-agents, the official MCP SDK, and
litellm when it is installed (it is not in the dev extra: it pulls boto3, tokenizers and
huggingface_hub).  A client that is not installed is skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from spoolproxy.cassettes import load
from spoolproxy.detectors import SEVERITY_RANK, analyze, build_transcript
from tests.fakes import FakeProvider

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-proj-" + "m" * 40
ANTHROPIC_KEY = "sk-ant-api03-" + "m" * 40
GOOGLE_KEY = "AIza" + "m" * 35

PRELUDE = '''
import json, os, sys, traceback
KEY, ANTHROPIC_KEY, GOOGLE_KEY = os.environ["FAKE_OPENAI_KEY"], os.environ["FAKE_ANTHROPIC_KEY"], os.environ["FAKE_GOOGLE_KEY"]
TAIL = {"x-fake-fail": "tail:50"}
import httpx
def weather(city: str) -> str:
    """Weather for a city."""
    return httpx.get("http://tools.example.test/echo/weather", params={"city": city}, timeout=20).text
RESULTS = {}
def check(name):
    def run(fn):
        try:
            RESULTS[name] = {"ok": True, "value": fn()}
        except BaseException as exc:
            RESULTS[name] = {"ok": False, "error": "".join(traceback.format_exception(exc))[-1500:]}
        return fn
    return run
def finish():
    print("RESULTS " + json.dumps(RESULTS, default=str))
    sys.exit(0 if all(r["ok"] for r in RESULTS.values()) else 1)
TOOLS = [{"type": "function", "function": {"name": "weather", "description": "Weather for a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
'''

SCRIPTS = {
    "openai": ("openai", '''
import openai
client = openai.OpenAI(api_key=KEY, max_retries=0, default_headers=TAIL)

def loop(stream):
    msgs = [{"role": "user", "content": "Lisbon"}]
    while True:
        if stream:
            text, calls = "", {}
            for ch in client.chat.completions.create(model="gpt-4o-mini", messages=msgs, tools=TOOLS, stream=True,
                                                     stream_options={"include_usage": True}):
                for c in ch.choices:
                    text += c.delta.content or ""
                    for tc in c.delta.tool_calls or []:
                        slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                        slot["id"] = tc.id or slot["id"]
                        slot["name"] += (tc.function.name or "") if tc.function else ""
                        slot["arguments"] += (tc.function.arguments or "") if tc.function else ""
            calls = list(calls.values())
        else:
            m = client.chat.completions.create(model="gpt-4o-mini", messages=msgs, tools=TOOLS).choices[0].message
            text, calls = m.content or "", [{"id": t.id, "name": t.function.name, "arguments": t.function.arguments}
                                             for t in m.tool_calls or []]
        if not calls:
            return text
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]})
        msgs += [{"role": "tool", "tool_call_id": c["id"], "content": weather(**json.loads(c["arguments"]))} for c in calls]

@check("chat")
def _():
    assert loop(False).startswith("The tool said:")

@check("chat_stream")
def _():
    assert loop(True).startswith("The tool said:")

@check("responses")
def _():
    tools = [{"type": "function", "name": "weather", "parameters": TOOLS[0]["function"]["parameters"]}]
    items = [{"role": "user", "content": "Porto"}]
    r = client.responses.create(model="gpt-4o-mini", input=items, tools=tools)
    call = r.output[0]
    items += [{"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
              {"type": "function_call_output", "call_id": call.call_id, "output": weather(**json.loads(call.arguments))}]
    text = ""
    with client.responses.create(model="gpt-4o-mini", input=items, tools=tools, stream=True) as s:
        for ev in s:
            if ev.type == "response.output_text.delta":
                text += ev.delta
            if ev.type == "response.completed":
                break
    assert text.startswith("The tool said:")

finish()
'''),
    "anthropic": ("anthropic", '''
import anthropic
client = anthropic.Anthropic(api_key=ANTHROPIC_KEY, max_retries=0, default_headers=TAIL)
ATOOLS = [{"name": "weather", "description": "Weather for a city.", "input_schema": TOOLS[0]["function"]["parameters"]}]

@check("tool_loop_stream")
def _():
    msgs = [{"role": "user", "content": "Vienna"}]
    with client.messages.stream(model="claude-sonnet-4-20250514", max_tokens=256, tools=ATOOLS, messages=msgs) as st:
        first = st.get_final_message()
    use = [b for b in first.content if b.type == "tool_use"][0]
    msgs += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": weather(**use.input)}]}]
    text = ""
    with client.messages.create(model="claude-sonnet-4-20250514", max_tokens=256, tools=ATOOLS, messages=msgs,
                                stream=True) as st:
        for ev in st:
            if ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                text += ev.delta.text
            if ev.type == "message_stop":
                break
    assert text.startswith("The tool said:"), text

finish()
'''),
    "google_genai": ("google.genai", '''
from google import genai
from google.genai import types
client = genai.Client(api_key=GOOGLE_KEY)

@check("automatic_function_calling")
def _():
    r = client.models.generate_content(model="gemini-2.0-flash", contents="Madrid",
                                       config=types.GenerateContentConfig(tools=[weather]))
    assert r.text.startswith("The tool said:"), r.text

@check("stream")
def _():
    text = "".join(c.text or "" for c in client.models.generate_content_stream(model="gemini-2.0-flash", contents="hola"))
    assert text == "Echo: hola", text

finish()
'''),
    "langchain_openai": ("langchain_openai", '''
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return weather(city)

@check("tool_loop")
def _():
    llm = ChatOpenAI(model="gpt-4o-mini", api_key=KEY, max_retries=0, default_headers=TAIL).bind_tools([get_weather])
    msgs = [HumanMessage("Oslo")]
    ai = llm.invoke(msgs)
    msgs.append(ai)
    for tc in ai.tool_calls:
        msgs.append(ToolMessage(get_weather.invoke(tc["args"]), tool_call_id=tc["id"]))
    final = None
    for chunk in llm.stream(msgs):
        final = chunk if final is None else final + chunk
    assert final.content.startswith("The tool said:"), final.content

finish()
'''),
    "pydantic_ai": ("pydantic_ai", '''
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(api_key=KEY))
agent = Agent(model, tools=[weather])

@check("run")
def _():
    assert agent.run_sync("Rome").output.startswith("The tool said:")

@check("run_stream")
def _():
    with agent.run_stream_sync("Milan") as run:
        text = "".join(run.stream_text(delta=True))
    assert text.startswith("The tool said:"), text

finish()
'''),
    "openai_agents": ("agents", '''
from agents import Agent, Runner, function_tool, set_default_openai_key

set_default_openai_key(KEY)

@function_tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return weather(city)

@check("run")
def _():
    agent = Agent(name="Forecaster", instructions="Answer with the weather.", tools=[get_weather])
    assert Runner.run_sync(agent, "Athens").final_output.startswith("The tool said:")

finish()
'''),
    "mcp": ("mcp", '''
import asyncio, openai
from mcp import Client

client = openai.OpenAI(api_key=KEY, max_retries=0, default_headers=TAIL)

async def agent():
    async with Client(os.environ["MCP_URL"]) as mcp:
        listed = await mcp.list_tools()
        tools = [{"type": "function", "function": {"name": t.name, "description": t.description or t.name,
                                                   "parameters": t.input_schema}} for t in listed.tools]
        msgs = [{"role": "user", "content": "SKU-2291"}]
        m = client.chat.completions.create(model="gpt-4o-mini", messages=msgs, tools=tools).choices[0].message
        call = m.tool_calls[0]
        result = await mcp.call_tool(call.function.name, json.loads(call.function.arguments))
        msgs += [m.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": result.content[0].text}]
        return client.chat.completions.create(model="gpt-4o-mini", messages=msgs, tools=tools).choices[0].message.content

@check("mcp_agent")
def _():
    assert asyncio.run(agent()).startswith("The tool said: 7 in stock")

finish()
'''),
    "litellm": ("litellm", '''
import litellm

@check("completion_with_tools")
def _():
    msgs = [{"role": "user", "content": "Quito"}]
    r = litellm.completion(model="openai/gpt-4o-mini", api_key=KEY, messages=msgs, tools=TOOLS, extra_headers=TAIL)
    call = r.choices[0].message.tool_calls[0]
    msgs += [r.choices[0].message.model_dump(exclude_none=True),
             {"role": "tool", "tool_call_id": call.id, "content": weather(**json.loads(call.function.arguments))}]
    text = "".join(c.choices[0].delta.content or "" for c in litellm.completion(
        model="openai/gpt-4o-mini", api_key=KEY, messages=msgs, tools=TOOLS, stream=True, extra_headers=TAIL))
    assert text.startswith("The tool said:"), text

finish()
'''),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _mcp_server() -> tuple[str, object]:
    """An MCP server (official SDK, streamable HTTP) on 127.0.0.1 in a background thread."""
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("stock")

    @server.tool()
    def check_stock(sku: str) -> str:
        """Units in stock for a SKU."""
        return "7 in stock"

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on"))
    threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True, name="mcp-server").start()
    deadline = time.monotonic() + 20
    while not uv.started and time.monotonic() < deadline:
        time.sleep(0.02)
    return f"http://127.0.0.1:{port}/mcp", uv


def _record(name: str, base: Path, home: Path, extra_env: dict[str, str]):
    fake = FakeProvider()
    script = base / f"{name}_agent.py"
    script.write_text(PRELUDE + textwrap.dedent(SCRIPTS[name][1]))
    cassette = base / name / "run.yaml"
    env = {k: v for k, v in os.environ.items()
           if not k.upper().endswith(("_BASE_URL", "_PROXY", "_API_KEY")) and k.upper() != "NO_PROXY"}
    env.update(SPOOLPROXY_HOME=str(home), SPOOLPROXY_CONFIG=str(base / "none.toml"), FAKE_OPENAI_KEY=KEY,
               FAKE_ANTHROPIC_KEY=ANTHROPIC_KEY, FAKE_GOOGLE_KEY=GOOGLE_KEY, PYTHONPATH=str(REPO),
               LITELLM_LOCAL_MODEL_COST_MAP="True", **extra_env)
    cmd = [sys.executable, "-m", "spoolproxy", "record", "-c", str(cassette),
           *[x for host in ("api.openai.com", "api.anthropic.com", "generativelanguage.googleapis.com")
             for x in ("--connect-to", f"{host}:443:127.0.0.1:{fake.port}")],
           "--connect-to", f"tools.example.test:80:127.0.0.1:{fake.http_port}",
           "--upstream-ca", str(fake.ca_pem_path), "--", sys.executable, str(script)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=base, timeout=240)
    finally:
        fake.stop()
    return proc, cassette


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("matrix")
    (base / "none.toml").write_text("")
    home = tmp_path_factory.mktemp("matrix-home")
    subprocess.run([sys.executable, "-m", "spoolproxy", "ca"], env={**os.environ, "SPOOLPROXY_HOME": str(home)},
                   capture_output=True, timeout=60)
    names = [n for n, (module, _) in SCRIPTS.items() if _installed(module)]
    extra: dict[str, str] = {}
    uv = None
    if "mcp" in names:
        extra["MCP_URL"], uv = _mcp_server()
    try:
        with ThreadPoolExecutor(3) as pool:
            done = dict(zip(names, pool.map(lambda n: _record(n, base, home, extra), names)))
    finally:
        if uv is not None:
            uv.should_exit = True
    return done


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_a_healthy_run_of_each_client_has_no_error_level_finding(runs, name):
    if name not in runs:
        pytest.skip(f"{SCRIPTS[name][0]} is not installed (pip install it to run this client)")
    proc, cassette = runs[name]
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS ")), "RESULTS {}")
    results = json.loads(line[len("RESULTS "):])
    assert results and all(r["ok"] for r in results.values()), (results, proc.stderr[-3000:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    cas = load(cassette)
    t = build_transcript(cas)
    report = analyze(cas, transcript=t)
    errors = [(f.kind, f.severity, f.message) for f in report.findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK["error"]]
    assert errors == [] and report.verdict == "pass", errors
    assert t.final_answer is not None and t.tool_results, [s.kind for s in t.steps]
    assert "detect: pass" in proc.stderr or "detect: pass" not in proc.stderr and not errors
    streams = [s for s in t.steps if s.llm is not None and s.llm.stream.is_stream]
    assert all(s.llm.stream.complete for s in streams)
