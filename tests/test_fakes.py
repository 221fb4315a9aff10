"""The fake provider speaks the real wire formats: the real SDKs parse everything it sends."""

from __future__ import annotations

import gzip
import json
import socket

import anthropic
import httpx
import openai
import pytest

from tests.fakes import FakeProvider, huge_body

KEY = "sk-proj-" + "x" * 40
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
ANTHROPIC_TOOLS = [
    {"name": "get_weather", "description": "Weather for a city.", "input_schema": TOOLS[0]["function"]["parameters"]}
]


def oai(fp: FakeProvider, **kw) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=fp.url + "/v1", max_retries=0,
                         http_client=openai.DefaultHttpxClient(verify=fp.ssl_context()), **kw)


def ant(fp: FakeProvider) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=fp.url, max_retries=0,
                               http_client=anthropic.DefaultHttpxClient(verify=fp.ssl_context()))


def test_openai_chat_plain(fake_provider):
    r = oai(fake_provider).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello there"}]
    )
    assert r.choices[0].message.content == "Echo: hello there"
    assert r.choices[0].finish_reason == "stop"
    assert r.model == "gpt-4o-mini" and r.usage.total_tokens > 0
    [req] = fake_provider.log
    assert req.method == "POST" and req.path == "/v1/chat/completions" and req.scheme == "https"
    assert req.header("authorization") == f"Bearer {KEY}"
    assert req.json()["messages"][0]["content"] == "hello there"


def test_openai_chat_stream_with_usage(fake_provider):
    stream = oai(fake_provider).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "a b c"}],
        stream=True, stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Echo: a b c"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    # one chunk written per SSE event, [DONE] included
    assert len(fake_provider.log[0].sent) == len(chunks) + 1
    assert fake_provider.log[0].status == 200
    assert fake_provider.log[0].response_body.endswith(b"data: [DONE]\n\n")


def test_openai_chat_tool_call_then_answer(fake_provider):
    client = oai(fake_provider)
    messages = [{"role": "user", "content": "Paris"}]
    r = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    [call] = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    messages += [r.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    r2 = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    assert r2.choices[0].message.content == "The tool said: sunny"


def test_openai_chat_stream_tool_call_deltas(fake_provider):
    with oai(fake_provider).chat.completions.stream(
        model="gpt-4o", messages=[{"role": "user", "content": "New York, NY"}], tools=TOOLS
    ) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    [call] = final.choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == {"city": "New York, NY"}
    deltas = [e for e in events if e.type == "tool_calls.function.arguments.delta"]
    assert len(deltas) > 1  # arguments arrive incrementally


def test_openai_responses_plain_and_stream(fake_provider):
    client = oai(fake_provider)
    assert client.responses.create(model="gpt-4o-mini", input="hi there").output_text == "Echo: hi there"
    with client.responses.stream(model="gpt-4o-mini", input="hi there") as stream:
        kinds = [e.type for e in stream]
        assert stream.get_final_response().output_text == "Echo: hi there"
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    r = client.responses.create(model="gpt-4o-mini", input="Oslo",
                                tools=[{"type": "function", "name": "get_weather",
                                        "parameters": TOOLS[0]["function"]["parameters"]}])
    assert r.output[0].type == "function_call" and json.loads(r.output[0].arguments) == {"city": "Oslo"}


def test_models_lists(fake_provider):
    assert "gpt-4o-mini" in [m.id for m in oai(fake_provider).models.list()]
    assert ant(fake_provider).models.list().data[0].id.startswith("claude")


def test_anthropic_plain_and_tool_result(fake_provider):
    client = ant(fake_provider)
    m = client.messages.create(model="claude-3-5-haiku-latest", max_tokens=64,
                               messages=[{"role": "user", "content": "hey"}])
    assert m.content[0].text == "Echo: hey" and m.stop_reason == "end_turn"
    t = client.messages.create(model="claude-3-5-haiku-latest", max_tokens=64, tools=ANTHROPIC_TOOLS,
                               messages=[{"role": "user", "content": "Rome"}])
    use = t.content[-1]
    assert t.stop_reason == "tool_use" and use.type == "tool_use" and use.input == {"city": "Rome"}
    follow = client.messages.create(
        model="claude-3-5-haiku-latest", max_tokens=64, tools=ANTHROPIC_TOOLS,
        messages=[{"role": "user", "content": "Rome"},
                  {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in t.content]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "warm"}]}],
    )
    assert follow.content[0].text == "The tool said: warm"


def test_anthropic_stream_text_and_tool_use(fake_provider):
    client = ant(fake_provider)
    with client.messages.stream(model="claude-3-5-haiku-latest", max_tokens=64,
                                messages=[{"role": "user", "content": "one two"}]) as stream:
        assert "".join(stream.text_stream) == "Echo: one two"
        assert stream.get_final_message().stop_reason == "end_turn"
    with client.messages.stream(model="claude-3-5-haiku-latest", max_tokens=64, tools=ANTHROPIC_TOOLS,
                                messages=[{"role": "user", "content": "Rome"}]) as stream:
        final = stream.get_final_message()
    assert final.content[-1].input == {"city": "Rome"} and final.stop_reason == "tool_use"
    assert [r.json()["stream"] for r in fake_provider.log] == [True, True]
    assert fake_provider.log[0].header("x-stainless-stream-helper") == "messages"


def _raw_http(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_sse_is_chunked_one_event_per_chunk(fake_provider):
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "x y"}]}).encode()
    raw = _raw_http(fake_provider.http_port,
                    b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(body), body))
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    events = []
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        events.append(rest[:size])
        rest = rest[size + 2:]
    assert all(e.startswith(b"data: ") and e.endswith(b"\n\n") and e.count(b"\n\n") == 1 for e in events)
    assert events[-1] == b"data: [DONE]\n\n"


def test_sse_delay_header_spaces_events(fake_provider):
    with httpx.Client(verify=fake_provider.ssl_context()) as c:
        r = c.post(fake_provider.url + "/v1/messages", headers={"x-fake-delay-ms": "20"},
                   json={"model": "m", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    assert r.text.startswith("event: message_start\n") and r.text.endswith("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
    times = [t for t, _ in fake_provider.log[0].sent]
    assert all(b - a >= 0.019 for a, b in zip(times, times[1:]))  # sleep() is a lower bound


def test_gzip_json_when_accepted(fake_provider):
    payload = {"model": "m", "messages": [{"role": "user", "content": "zip"}]}
    with httpx.Client(verify=fake_provider.ssl_context()) as c:
        with c.stream("POST", fake_provider.url + "/v1/chat/completions", json=payload,
                      headers={"accept-encoding": "gzip"}) as raw:
            wire = b"".join(raw.iter_raw())
        plain = c.post(fake_provider.url + "/v1/chat/completions", json=payload, headers={"accept-encoding": "identity"})
    assert raw.headers["content-encoding"] == "gzip"
    assert json.loads(gzip.decompress(wire)) == plain.json()
    assert plain.json()["choices"][0]["message"]["content"] == "Echo: zip"
    assert "content-encoding" not in plain.headers
    fake_provider.gzip = False
    with httpx.Client(verify=fake_provider.ssl_context()) as c:
        assert "content-encoding" not in c.post(fake_provider.url + "/v1/chat/completions", json=payload).headers


def test_failure_knobs(fake_provider):
    client = oai(fake_provider)
    fake_provider.fail_next("429")
    with pytest.raises(openai.RateLimitError) as rate:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert rate.value.response.headers["retry-after"] == "0"
    with pytest.raises(openai.InternalServerError):
        oai(fake_provider, default_headers={"x-fake-fail": "500"}).models.list()
    with httpx.Client(verify=fake_provider.ssl_context()) as c:
        page = c.get(fake_provider.url + "/_fake/502/v1/models")
        assert page.status_code == 502 and page.headers["content-type"] == "text/html"
        assert fake_provider.log[-1].path == "/v1/models"
        big = c.get(fake_provider.url + "/_fake/huge:300000/blob")
        assert big.content == huge_body(300000)
        with pytest.raises(httpx.RemoteProtocolError):
            c.post(fake_provider.url + "/_fake/cut/v1/chat/completions",
                   json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "a b c d"}]})
        with pytest.raises(httpx.TransportError):
            c.get(fake_provider.url + "/_fake/reset/v1/models")
    with pytest.raises(anthropic.RateLimitError):
        ant(fake_provider).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}],
                                           extra_headers={"x-fake-fail": "429"})


def test_cut_stream_lacks_terminal_event(fake_provider):
    with httpx.Client(verify=fake_provider.ssl_context()) as c:
        got = b""
        with pytest.raises(httpx.RemoteProtocolError):
            with c.stream("POST", fake_provider.url + "/v1/chat/completions", headers={"x-fake-fail": "cut:2"},
                          json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "a b c"}]}) as r:
                for part in r.iter_raw():
                    got += part
    assert got.count(b"data: ") == 2 and b"[DONE]" not in got


def test_log_connections_and_plain_http(fake_provider):
    assert fake_provider.connections == 0
    r = httpx.post(fake_provider.http_url + "/echo/tool?q=1", content=b"ping")
    assert r.json() == {"method": "POST", "path": "/echo/tool?q=1", "headers": r.json()["headers"], "body": "ping"}
    httpx.get(fake_provider.http_url + "/nope")
    assert [(q.method, q.path, q.scheme) for q in fake_provider.log] == [
        ("POST", "/echo/tool?q=1", "http"), ("GET", "/nope", "http")]
    assert fake_provider.connections == 2
    fake_provider.reset()
    assert fake_provider.connections == 0 and fake_provider.log == []


def test_deterministic_ids(fake_provider):
    client = oai(fake_provider)
    kwargs = dict(model="gpt-4o-mini", messages=[{"role": "user", "content": "same"}])
    assert client.chat.completions.create(**kwargs).id == client.chat.completions.create(**kwargs).id


def test_gemini_generate_and_both_stream_shapes(fake_provider):
    base = fake_provider.url + "/v1beta/models/gemini-2.0-flash"
    payload = {"contents": [{"role": "user", "parts": [{"text": "hola amigo"}]}]}
    with httpx.Client(verify=fake_provider.ssl_context()) as c:
        one = c.post(base + ":generateContent", json=payload).json()
        assert one["candidates"][0]["content"]["parts"][0]["text"] == "Echo: hola amigo"
        arr = c.post(base + ":streamGenerateContent", json=payload)
        sse = c.post(base + ":streamGenerateContent?alt=sse", json=payload)
        tool = c.post(base + ":generateContent", json={**payload, "tools": [{"functionDeclarations": [
            {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]}]}).json()
        err = c.post(base + ":generateContent", json=payload, headers={"x-fake-fail": "429"})
    pieces = json.loads(arr.content)  # the whole streamed array is valid JSON
    assert arr.content.startswith(b"[{\n") and b"\n,\r\n{" in arr.content and arr.content.endswith(b"\n]")
    assert "".join(p["candidates"][0]["content"]["parts"][0]["text"] for p in pieces) == "Echo: hola amigo"
    events = [json.loads(e[len("data: "):]) for e in sse.text.split("\r\n\r\n") if e]
    assert sse.headers["content-type"] == "text/event-stream" and len(events) == len(pieces)
    assert events[-1]["candidates"][0]["finishReason"] == "STOP" and "usageMetadata" in events[-1]
    assert tool["candidates"][0]["content"]["parts"][0]["functionCall"] == {"name": "lookup", "args": {"q": "hola amigo"}}
    assert err.status_code == 429 and err.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert len(fake_provider.log[1].sent) == len(pieces) + 1  # one write per array piece, then "]"


def test_ollama_ndjson_stream(fake_provider):
    with httpx.Client() as c:
        r = c.post(fake_provider.http_url + "/api/chat", json={"model": "llama3.2", "messages": [{"role": "user", "content": "x y"}]})
        plain = c.post(fake_provider.http_url + "/api/chat",
                       json={"model": "llama3.2", "stream": False, "messages": [{"role": "user", "content": "x y"}]})
    lines = [json.loads(l) for l in r.text.splitlines()]
    assert r.headers["content-type"] == "application/x-ndjson"
    assert "".join(l["message"]["content"] for l in lines) == "Echo: x y" and lines[-1]["done"] is True
    assert plain.json()["message"]["content"] == "Echo: x y"
