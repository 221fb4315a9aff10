"""The client matrix: real clients recorded by ``spoolproxy record -- <script>``.

Each client runs as a child of a real ``spoolproxy record`` subprocess, believing it talks
to ``https://api.openai.com`` / ``https://api.anthropic.com`` (and a plain-HTTP tool API at
``http://tools.example.test``); ``--connect-to`` sends that traffic to a local
:class:`~tests.fakes.provider.FakeProvider` and ``--upstream-ca`` trusts its test CA.  Only
the environment ``record`` sets up (``HTTPS_PROXY``, ``SSL_CERT_FILE``, ...) points the
clients at the proxy; the scripts do not configure a proxy or CA themselves.

Checked for every client: the script got the right answers (it asserts and reports each
check as JSON), the cassette holds one interaction per request the fake provider saw,
with the real upstream URL, the exact request body and the exact response body the fake
sent (SSE streams byte for byte, chunk sizes adding up), and the planted API key (built
at run time) appears in no file under the cassette directory.  All sessions run in
parallel to keep the module fast.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import vcr

from spoolproxy.cassettes import load, vcrpy_serializer
from spoolproxy.cassettes.model import Cassette
from tests.fakes import FakeProvider

REPO = Path(__file__).resolve().parents[1]
#: built at run time, unique per test session; must never reach the disk
KEY = "sk-proj-" + secrets.token_hex(20)
ANTHROPIC_KEY = "sk-ant-api03-" + secrets.token_hex(20)
GOOGLE_KEY = "AIza" + secrets.token_hex(18)[:35]
PLANTED = (KEY, ANTHROPIC_KEY, GOOGLE_KEY)

PRELUDE = '''
import json, os, sys, traceback
KEY = os.environ["FAKE_OPENAI_KEY"]
ANTHROPIC_KEY = os.environ["FAKE_ANTHROPIC_KEY"]
RESULTS = {}
def check(name):
    def run(fn):
        try:
            RESULTS[name] = {"ok": True, "value": fn()}
        except BaseException as exc:
            RESULTS[name] = {"ok": False, "error": "".join(traceback.format_exception_only(exc)).strip()}
        return fn
    return run
def finish():
    print("RESULTS " + json.dumps(RESULTS))
    sys.exit(0 if all(r["ok"] for r in RESULTS.values()) else 1)
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
'''

SCRIPTS: dict[str, str] = {
    "openai_sync": '''
import openai
client = openai.OpenAI(api_key=KEY, max_retries=0)

@check("chat")
def _():
    r = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "openai sync hello"}])
    assert r.choices[0].message.content == "Echo: openai sync hello", r
    return r.id

@check("stream")
def _():
    s = client.chat.completions.create(model="gpt-4o-mini", stream=True, stream_options={"include_usage": True},
                                       messages=[{"role": "user", "content": "openai sync stream"}])
    chunks = list(s)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Echo: openai sync stream", text
    assert chunks[-1].usage.total_tokens > 0
    return len(chunks)

@check("tools")
def _():
    messages = [{"role": "user", "content": "Paris"}]
    r = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    call = r.choices[0].message.tool_calls[0]
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    messages += [r.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21C"}]
    r2 = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    assert r2.choices[0].message.content == "The tool said: sunny, 21C"
    return call.id

@check("stream_tools")
def _():
    with client.chat.completions.stream(model="gpt-4o", tools=TOOLS,
                                        messages=[{"role": "user", "content": "Oslo, Norway"}]) as st:
        for _ in st:
            pass
        call = st.get_final_completion().choices[0].message.tool_calls[0]
    assert json.loads(call.function.arguments) == {"city": "Oslo, Norway"}

@check("responses")
def _():
    assert client.responses.create(model="gpt-4o-mini", input="responses api").output_text == "Echo: responses api"

finish()
''',
    "openai_async": '''
import asyncio, openai

async def main():
    client = openai.AsyncOpenAI(api_key=KEY, max_retries=0)
    r = await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "async plain"}])
    assert r.choices[0].message.content == "Echo: async plain"
    s = await client.chat.completions.create(model="gpt-4o-mini", stream=True,
                                             messages=[{"role": "user", "content": "async stream"}])
    text = "".join([c.choices[0].delta.content or "" async for c in s if c.choices])
    assert text == "Echo: async stream", text
    many = await asyncio.gather(*[client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": f"async gather {i}"}]) for i in range(4)])
    assert [m.choices[0].message.content for m in many] == [f"Echo: async gather {i}" for i in range(4)]
    await client.close()

@check("async")
def _():
    asyncio.run(main())

finish()
''',
    "anthropic": '''
import anthropic
client = anthropic.Anthropic(api_key=ANTHROPIC_KEY, max_retries=0)
ATOOLS = [{"name": "get_weather", "description": "Weather for a city.",
           "input_schema": TOOLS[0]["function"]["parameters"]}]

@check("plain")
def _():
    m = client.messages.create(model="claude-3-5-haiku-latest", max_tokens=64,
                               messages=[{"role": "user", "content": "anthropic hello"}])
    assert m.content[0].text == "Echo: anthropic hello", m

@check("stream")
def _():
    with client.messages.stream(model="claude-3-5-haiku-latest", max_tokens=64,
                                messages=[{"role": "user", "content": "anthropic stream"}]) as st:
        text = "".join(st.text_stream)
        assert st.get_final_message().stop_reason == "end_turn"
    assert text == "Echo: anthropic stream", text

@check("stream_tools")
def _():
    with client.messages.stream(model="claude-3-5-haiku-latest", max_tokens=64, tools=ATOOLS,
                                messages=[{"role": "user", "content": "Rome"}]) as st:
        final = st.get_final_message()
    assert final.content[-1].input == {"city": "Rome"} and final.stop_reason == "tool_use"

finish()
''',
    "httpx": '''
import httpx
H = {"authorization": f"Bearer {KEY}"}

@check("json")
def _():
    with httpx.Client() as c:
        r = c.post("https://api.openai.com/v1/chat/completions", headers=H,
                   json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "httpx plain"}]})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Echo: httpx plain"

@check("sse")
def _():
    with httpx.Client() as c:
        with c.stream("POST", "https://api.openai.com/v1/chat/completions", headers={**H, "x-fake-delay-ms": "30"},
                      json={"model": "gpt-4o-mini", "stream": True,
                            "messages": [{"role": "user", "content": "httpx stream"}]}) as r:
            lines = [l for l in r.iter_lines() if l]
    assert lines[-1] == "data: [DONE]", lines
    text = "".join(json.loads(l[6:])["choices"][0]["delta"].get("content") or "" for l in lines[:-1])
    assert text == "Echo: httpx stream", text

@check("tool_api_http")
def _():
    r = httpx.get("http://tools.example.test/echo/weather?city=Lima")
    assert r.json()["path"] == "/echo/weather?city=Lima", r.text

finish()
''',
    "requests": '''
import requests
H = {"authorization": f"Bearer {KEY}"}

@check("json")
def _():
    r = requests.post("https://api.openai.com/v1/chat/completions", headers=H, timeout=30,
                      json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "requests plain"}]})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Echo: requests plain"

@check("sse")
def _():
    with requests.post("https://api.anthropic.com/v1/messages", stream=True, timeout=30,
                       headers={"x-api-key": ANTHROPIC_KEY, "anthropic-version": "2023-06-01"},
                       json={"model": "claude-3-5-haiku-latest", "max_tokens": 16, "stream": True,
                             "messages": [{"role": "user", "content": "requests stream"}]}) as r:
        events = [l for l in r.iter_lines(decode_unicode=True) if l.startswith("event: ")]
    assert events[0] == "event: message_start" and events[-1] == "event: message_stop", events

@check("tool_api_http")
def _():
    r = requests.post("http://tools.example.test/echo/lookup", data=b"order=42", timeout=30)
    assert r.json()["body"] == "order=42", r.text

finish()
''',
    "aiohttp": '''
import asyncio, aiohttp

async def main():
    async with aiohttp.ClientSession(trust_env=True) as s:
        async with s.post("https://api.openai.com/v1/chat/completions", headers={"authorization": f"Bearer {KEY}"},
                          json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "aiohttp plain"}]}) as r:
            body = await r.json()
        assert body["choices"][0]["message"]["content"] == "Echo: aiohttp plain", body
        async with s.post("https://api.openai.com/v1/chat/completions", headers={"authorization": f"Bearer {KEY}"},
                          json={"model": "gpt-4o-mini", "stream": True,
                                "messages": [{"role": "user", "content": "aiohttp stream"}]}) as r:
            raw = b""
            async for chunk in r.content.iter_any():
                raw += chunk
        assert raw.endswith(b"data: [DONE]\\n\\n"), raw[-80:]

@check("trust_env")
def _():
    asyncio.run(main())

finish()
''',
    "curl": '''
import subprocess
def curl(*args):
    out = subprocess.run(["curl", "-sS", "--fail-with-body", *args], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout

@check("json")
def _():
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "curl plain"}]})
    out = curl("https://api.openai.com/v1/chat/completions", "-H", f"Authorization: Bearer {KEY}",
               "-H", "content-type: application/json", "-d", body)
    assert json.loads(out)["choices"][0]["message"]["content"] == "Echo: curl plain", out

@check("sse")
def _():
    body = json.dumps({"model": "m", "max_tokens": 8, "stream": True, "messages": [{"role": "user", "content": "curl stream"}]})
    out = curl("-N", "https://api.anthropic.com/v1/messages", "-H", f"x-api-key: {ANTHROPIC_KEY}",
               "-H", "anthropic-version: 2023-06-01", "-H", "content-type: application/json", "-d", body)
    assert out.startswith("event: message_start") and out.endswith("event: message_stop\\ndata: {\\"type\\":\\"message_stop\\"}\\n\\n"), out

finish()
''',
    "gemini_ollama": '''
import httpx
GEMINI = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash"
GOOGLE_KEY = os.environ["FAKE_GOOGLE_KEY"]
PAYLOAD = {"contents": [{"role": "user", "parts": [{"text": "gemini says hi"}]}]}

@check("generate")
def _():
    r = httpx.post(f"{GEMINI}:generateContent?key={GOOGLE_KEY}", json=PAYLOAD)
    assert r.json()["candidates"][0]["content"]["parts"][0]["text"] == "Echo: gemini says hi", r.text

@check("json_array_stream")
def _():
    with httpx.stream("POST", f"{GEMINI}:streamGenerateContent", json=PAYLOAD,
                      headers={"x-goog-api-key": GOOGLE_KEY, "x-fake-delay-ms": "30"}) as r:
        data = b"".join(r.iter_bytes())
    pieces = json.loads(data)
    assert "".join(p["candidates"][0]["content"]["parts"][0]["text"] for p in pieces) == "Echo: gemini says hi"

@check("sse_stream")
def _():
    with httpx.stream("POST", f"{GEMINI}:streamGenerateContent?alt=sse&key={GOOGLE_KEY}", json=PAYLOAD) as r:
        events = [l for l in r.iter_lines() if l.startswith("data: ")]
    assert json.loads(events[-1][6:])["candidates"][0]["finishReason"] == "STOP"

@check("ollama_ndjson")
def _():
    with httpx.stream("POST", "http://localhost:11434/api/chat", headers={"x-fake-delay-ms": "30"},
                      json={"model": "llama3.2", "messages": [{"role": "user", "content": "local model"}]}) as r:
        lines = [json.loads(l) for l in r.iter_lines() if l]
    assert "".join(l["message"]["content"] for l in lines) == "Echo: local model" and lines[-1]["done"]

finish()
''',
    "concurrent": '''
import httpx
from concurrent.futures import ThreadPoolExecutor
H = {"authorization": f"Bearer {KEY}"}

def one(client, i):
    payload = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"concurrent {i}"}]}
    if i % 2:
        payload["stream"] = True
        with client.stream("POST", "https://api.openai.com/v1/chat/completions", headers=H, json=payload) as r:
            data = b"".join(r.iter_bytes())
        assert data.endswith(b"data: [DONE]\\n\\n"), data[-60:]
        return "stream"
    r = client.post("https://api.openai.com/v1/chat/completions", headers=H, json=payload)
    assert r.json()["choices"][0]["message"]["content"] == f"Echo: concurrent {i}"
    return "json"

@check("32_requests")
def _():
    with httpx.Client(timeout=60, limits=httpx.Limits(max_connections=32)) as client:
        with ThreadPoolExecutor(32) as pool:
            kinds = list(pool.map(lambda i: one(client, i), range(32)))
    assert kinds.count("stream") == 16
    return kinds

finish()
''',
}

#: scripts whose requests are sequential: the cassette order must equal the arrival order
SEQUENTIAL = {"openai_sync", "anthropic", "httpx", "requests", "aiohttp", "curl", "gemini_ollama"}
EXPECTED_REQUESTS = {"openai_sync": 6, "openai_async": 6, "anthropic": 3, "httpx": 3, "requests": 3,
                     "aiohttp": 2, "curl": 2, "gemini_ollama": 4, "concurrent": 32}


@dataclass
class Session:
    """One ``spoolproxy record`` run of one client script."""

    name: str
    fake: FakeProvider
    cassette_dir: Path
    cassette: Path
    proc: subprocess.CompletedProcess[str]

    @property
    def results(self) -> dict:
        for line in self.proc.stdout.splitlines():
            if line.startswith("RESULTS "):
                return json.loads(line[len("RESULTS "):])
        return {}

    def explain(self) -> str:
        return f"record exit {self.proc.returncode}\nstdout:\n{self.proc.stdout}\nstderr:\n{self.proc.stderr[-3000:]}"

    def load(self) -> Cassette:
        assert self.cassette.exists(), self.explain()
        return load(self.cassette)


def _record(name: str, base: Path, home: Path) -> Session:
    fake = FakeProvider()
    d = base / name
    d.mkdir()
    script = d.parent / f"{name}_client.py"
    script.write_text(PRELUDE + textwrap.dedent(SCRIPTS[name]))
    cassette = d / "run.yaml"
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith(("_BASE_URL", "_PROXY")) and k.upper() != "NO_PROXY"}
    env.update(SPOOLPROXY_HOME=str(home), FAKE_OPENAI_KEY=KEY, FAKE_ANTHROPIC_KEY=ANTHROPIC_KEY, FAKE_GOOGLE_KEY=GOOGLE_KEY,
               PYTHONPATH=str(REPO), OPENAI_API_KEY="", ANTHROPIC_API_KEY="")
    cmd = [
        sys.executable, "-m", "spoolproxy", "record", "--cassette", str(cassette),
        "--connect-to", f"api.openai.com:443:127.0.0.1:{fake.port}",
        "--connect-to", f"api.anthropic.com:443:127.0.0.1:{fake.port}",
        "--connect-to", f"tools.example.test:80:127.0.0.1:{fake.http_port}",
        "--connect-to", f"generativelanguage.googleapis.com:443:127.0.0.1:{fake.port}",
        "--connect-to", f"localhost:11434:127.0.0.1:{fake.http_port}",
        "--upstream-ca", str(fake.ca_pem_path),
        "--", sys.executable, str(script),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=base, timeout=150)
    return Session(name, fake, d, cassette, proc)


@pytest.fixture(scope="module")
def spool_home(tmp_path_factory) -> Path:
    """A SPOOLPROXY_HOME for this module, its CA created once (before parallel runs race)."""
    home = tmp_path_factory.mktemp("spoolproxy-home")
    subprocess.run([sys.executable, "-m", "spoolproxy", "ca"], env={**os.environ, "SPOOLPROXY_HOME": str(home)},
                   capture_output=True, timeout=60)
    return home


@pytest.fixture(scope="module")
def sessions(tmp_path_factory, spool_home):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    base = tmp_path_factory.mktemp("clients")
    home = spool_home
    with ThreadPoolExecutor(4) as pool:
        done = dict(zip(SCRIPTS, pool.map(lambda n: _record(n, base, home), SCRIPTS)))
    yield done
    for s in done.values():
        s.fake.stop()


def _split(uri_or_path: str) -> tuple[str, dict[str, str]]:
    u = httpx.URL(uri_or_path)
    return u.path, dict(u.params)


def _origin(seen) -> str:
    """The origin the client believed it talked to, from what reached the fake."""
    if seen.scheme == "http":
        return "http://localhost:11434" if seen.path.startswith("/api/") else "http://tools.example.test"
    if "GenerateContent" in seen.path or ":generateContent" in seen.path:
        return "https://generativelanguage.googleapis.com"
    return "https://api.anthropic.com" if seen.path.startswith("/v1/messages") else "https://api.openai.com"


def check_cassette(s: Session, *, sequential: bool) -> Cassette:
    """Every request the fake saw is in the cassette with the exact bodies both ways."""
    cas = s.load()
    log = list(s.fake.log)
    assert len(log) == EXPECTED_REQUESTS[s.name], [r.path for r in log]
    assert len(cas.interactions) == len(log), s.explain()
    remaining = list(cas.interactions)
    order = []
    for seen in log:
        path, params = _split(seen.path)
        match = [i for i in remaining if i.request.method == seen.method and i.request.body == seen.body
                 and _split(i.request.uri)[0] == path]
        assert match, f"{seen.method} {seen.path} {seen.body[:80]!r} missing from {s.cassette}"
        it = match[0]
        remaining.remove(it)
        order.append(cas.interactions.index(it))
        assert it.request.uri.startswith(_origin(seen) + "/"), it.request.uri
        recorded_params = _split(it.request.uri)[1]
        assert recorded_params.keys() == params.keys()
        for name, value in params.items():  # a key in the query is redacted, nothing else changes
            assert recorded_params[name] == value or (name == "key" and recorded_params[name].startswith("REDACTED-"))
        if it.request.json() is not None:  # JSON bodies: parsed request equals what was sent
            assert it.request.json() == seen.json()
        assert it.response is not None and it.response.status == seen.status
        assert it.response.body == seen.response_body, f"{it.request.uri}: response body differs"
        if it.response.chunks:
            assert sum(c.size for c in it.response.chunks) == len(it.response.body)
        if it.response.content_type == "text/event-stream":
            assert it.response.chunks
    if sequential:
        assert order == sorted(order), "interactions are not in request-start order"
    return cas


def assert_no_key_on_disk(s: Session) -> None:
    seen = "\n".join(f"{r.path} {r.headers}" for r in s.fake.log)
    assert any(k in seen for k in PLANTED), "no planted key reached the fake provider"
    files = [f for f in s.cassette_dir.rglob("*") if f.is_file()]
    assert files
    for f in files:
        data = f.read_bytes()
        for k in PLANTED:
            assert k.encode() not in data, f"a planted key was written to {f}"
        assert b"Bearer sk-" not in data, f"bearer key found in {f}"


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_client_gets_right_results(sessions, name):
    s = sessions[name]
    failed = {k: v for k, v in s.results.items() if not v["ok"]}
    assert s.results and not failed, f"{failed}\n{s.explain()}"
    assert s.proc.returncode == 0, s.explain()


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_cassette_holds_every_interaction(sessions, name):
    check_cassette(sessions[name], sequential=name in SEQUENTIAL)


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_planted_key_never_reaches_disk(sessions, name):
    assert_no_key_on_disk(sessions[name])


def test_summary_reports_the_run(sessions):
    err = sessions["openai_sync"].proc.stderr
    assert f"wrote {sessions['openai_sync'].cassette} (6 interactions)" in err, err


def test_concurrent_requests_all_recorded(sessions):
    cas = check_cassette(sessions["concurrent"], sequential=False)
    bodies = sorted(i.request.json()["messages"][0]["content"] for i in cas.interactions)
    assert bodies == sorted(f"concurrent {i}" for i in range(32))
    streams = [i for i in cas.interactions if i.response.content_type == "text/event-stream"]
    assert len(streams) == 16
    starts = [i.started_at for i in cas.interactions]
    assert all(starts) and starts == sorted(starts)


def test_stream_recorded_chunk_by_chunk(sessions):
    """The httpx stream was sent with 30 ms between events: the recording keeps several
    chunks (it was not buffered into one), each one a whole SSE event here."""
    cas = sessions["httpx"].load()
    [stream] = [i for i in cas.interactions if i.response.content_type == "text/event-stream"]
    assert len(stream.response.chunks) > 1
    offsets = [c.offset_ms for c in stream.response.chunks]
    assert offsets == sorted(offsets)


def test_json_array_and_ndjson_streams_recorded_chunk_by_chunk(sessions):
    """Gemini's streamed JSON array and Ollama's NDJSON (30 ms between pieces) are kept
    as several chunks, not one buffered body."""
    cas = sessions["gemini_ollama"].load()
    array = next(i for i in cas.interactions if i.request.uri.endswith(":streamGenerateContent"))
    ndjson = next(i for i in cas.interactions if i.request.uri == "http://localhost:11434/api/chat")
    assert array.response.content_type == "application/json" and len(array.response.chunks) > 1
    assert ndjson.response.content_type == "application/x-ndjson" and len(ndjson.response.chunks) > 1
    assert "x-goog-api-key" in {k.lower() for k in array.request.headers}


def test_recorded_cassettes_pass_scan(sessions):
    dirs = [str(s.cassette_dir) for s in sessions.values()]
    r = subprocess.run([sys.executable, "-m", "spoolproxy", "scan", *dirs], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_plain_json_cassette_replays_through_vcrpy(sessions):
    """The httpx cassette, as recorded (format v1), replays in-process through vcrpy with
    spoolproxy's serializer: same request, same JSON answer, no network."""
    s = sessions["httpx"]
    my_vcr = vcr.VCR(record_mode="none")
    my_vcr.register_serializer("spoolproxy", vcrpy_serializer)
    recorded = next(i for i in s.load().interactions if i.response.content_type == "application/json")
    with my_vcr.use_cassette(str(s.cassette), serializer="spoolproxy") as cass:
        with httpx.Client() as c:
            r = c.post(recorded.request.uri, content=recorded.request.body,
                       headers={"content-type": "application/json"})
        assert cass.play_count == 1
    assert r.status_code == 200
    assert r.json() == json.loads(recorded.response.body)
    assert r.json()["choices"][0]["message"]["content"] == "Echo: httpx plain"


NODE_SCRIPT = """
const base = process.env.FAKE_BASE || "https://api.openai.com";
const out = {node: process.versions.node};
try {
  const r = await fetch(base + "/v1/chat/completions", {
    method: "POST",
    headers: {authorization: `Bearer ${process.env.FAKE_OPENAI_KEY}`, "content-type": "application/json"},
    body: JSON.stringify({model: "gpt-4o-mini", messages: [{role: "user", content: "node fetch"}]}),
    signal: AbortSignal.timeout(3000),
  });
  out.ok = true;
  out.content = (await r.json()).choices[0].message.content;
} catch (e) {
  out.ok = false;
  out.error = String(e);
}
console.log("RESULTS " + JSON.stringify(out));
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_major() -> int:
    out = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30).stdout
    return int(out.strip().lstrip("v").split(".")[0])


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_fetch(tmp_path, fake_provider, spool_home):
    """Node's built-in fetch honours HTTPS_PROXY only from Node 24 (NODE_USE_ENV_PROXY=1,
    which record sets).  Older Node: record says loudly that nothing was recorded, and
    --reverse (base URL pointed at the local port) records it instead."""
    script = tmp_path / "agent.mjs"
    script.write_text(NODE_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    env.update(FAKE_OPENAI_KEY=KEY, SPOOLPROXY_HOME=str(spool_home))
    upstream = ["--connect-to", f"api.openai.com:443:127.0.0.1:{fake_provider.port}",
                "--upstream-ca", str(fake_provider.ca_pem_path)]

    def record(cassette: Path, *extra: str, **more_env: str) -> tuple[subprocess.CompletedProcess[str], dict]:
        proc = subprocess.run([sys.executable, "-m", "spoolproxy", "record", "-c", str(cassette), *upstream, *extra,
                               "--", "node", str(script)], capture_output=True, text=True,
                              env={**env, **more_env}, timeout=120)
        line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULTS ")), "RESULTS {}")
        return proc, json.loads(line[len("RESULTS "):])

    proc, res = record(tmp_path / "env" / "run.yaml")
    if _node_major() >= 24:
        assert res["ok"] and res["content"] == "Echo: node fetch", proc.stderr
        assert len(load(tmp_path / "env" / "run.yaml")) == 1
    else:
        assert not res["ok"], res  # fetch ignored HTTPS_PROXY and there is no network
        assert "nothing went through the proxy" in proc.stderr
        assert len(load(tmp_path / "env" / "run.yaml")) == 0
        assert fake_provider.log == []

    port = _free_port()
    proc, res = record(tmp_path / "rev" / "run.yaml", "--reverse", f"https://api.openai.com@{port}",
                       FAKE_BASE=f"http://127.0.0.1:{port}")
    assert res.get("ok") and res["content"] == "Echo: node fetch", (res, proc.stderr)
    [it] = load(tmp_path / "rev" / "run.yaml").interactions
    assert it.request.uri == "https://api.openai.com/v1/chat/completions"
    assert KEY.encode() not in (tmp_path / "rev" / "run.yaml").read_bytes()
