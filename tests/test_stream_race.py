"""A complete stream the client closes is a clean stream (issue 9, item 1).

The fake provider sends a stream's terminal event (``data: [DONE]``, ``message_stop``,
``response.completed``, Gemini's last ``finishReason`` event or closing ``]``, Ollama
``done: true``, Cohere ``message-end``, Bedrock ``messageStop``) at once but the chunked
body's terminating ``0\\r\\n\\r\\n`` only ``TAIL_MS`` later (directive ``tail:MS``).  A client
that stops reading at the terminal event (the openai SDK does at ``[DONE]``; agents break
out of their event loop at ``message_stop`` / ``response.completed``) hangs up first, every
time: the race is provoked deterministically, not by luck.  Each test records through the
real in-process proxy with a real client and checks that

* the client got the whole answer;
* the recorder kept the hang-up apart from an upstream failure (``client_closed``
  extension, no ``error``);
* ``analyze`` says ``pass`` with no ``stream_incomplete``, ``http_error`` or
  ``no_final_answer``, and the reassembled stream is complete;
* the same cassette written the way recorders before this change wrote it (the hang-up as
  an ``error``) reads clean too.

Real upstream failures stay findings: a stream cut mid-way is ``stream_incomplete`` at
error; a connection that breaks after the terminal event is a warn-level ``http_error``.
"""

from __future__ import annotations

import json
import struct

import anthropic
import httpx
import openai
import pytest

from spoolproxy.cassettes import load
from spoolproxy.cassettes.model import Failure
from spoolproxy.detectors import analyze, build_transcript

from .test_proxy_support import recording, spool_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("spool_home")

#: how long the server waits between the terminal event and its terminating chunk: long
#: enough that a client doing its first (slow, lazily built) model parsing on a busy machine
#: still hangs up first.  Costs no test time: nobody waits for it.
TAIL_MS = 3000
GEMINI = "https://generativelanguage.googleapis.com"
BEDROCK = "https://bedrock-runtime.us-east-1.amazonaws.com"
COHERE = "https://api.cohere.com"


def _rules(fake) -> list[str]:
    return [f"{h.split('//')[1]}:443:127.0.0.1:{fake.port}" for h in (GEMINI, BEDROCK, COHERE)]


def _http(s) -> httpx.Client:
    return httpx.Client(proxy=s.runner.proxy_url, verify=s.client_ssl(), timeout=20)


# -- clients: each reads until its format's terminal event, then closes the response ----------

def openai_chat(s, fake, directive):
    c = openai.OpenAI(api_key="sk-test", max_retries=0, base_url=f"https://api.openai.com/_fake/{directive}/v1",
                      http_client=openai.DefaultHttpxClient(proxy=s.runner.proxy_url, verify=s.client_ssl()))
    stream = c.chat.completions.create(model="gpt-4o-mini", stream=True, stream_options={"include_usage": True},
                                       messages=[{"role": "user", "content": "race one"}])
    return "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)  # the SDK stops at [DONE]


def openai_responses(s, fake, directive):
    c = openai.OpenAI(api_key="sk-test", max_retries=0, base_url=f"https://api.openai.com/_fake/{directive}/v1",
                      http_client=openai.DefaultHttpxClient(proxy=s.runner.proxy_url, verify=s.client_ssl()))
    text = ""
    with c.responses.create(model="gpt-4o-mini", input="race two", stream=True) as stream:
        for ev in stream:
            if ev.type == "response.output_text.delta":
                text += ev.delta
            if ev.type == "response.completed":
                break  # as agent loops do: the answer is complete
    return text


def anthropic_messages(s, fake, directive):
    c = anthropic.Anthropic(api_key="sk-ant-test", max_retries=0, base_url=f"https://api.anthropic.com/_fake/{directive}",
                            http_client=anthropic.DefaultHttpxClient(proxy=s.runner.proxy_url, verify=s.client_ssl()))
    text = ""
    with c.messages.create(model="claude-sonnet-4-20250514", max_tokens=64, stream=True,
                           messages=[{"role": "user", "content": "race three"}]) as stream:
        for ev in stream:
            if ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                text += ev.delta.text
            if ev.type == "message_stop":
                break  # older SDKs stopped here themselves
    return text


def _lines_until(s, url, body, stop, *, sep=b"\n"):
    """POST ``body`` and read ``sep``-separated records until ``stop(record)``; then close."""
    got = []
    with _http(s) as c, c.stream("POST", url, json=body) as r:
        buf = b""
        for piece in r.iter_raw():
            buf += piece
            *done, buf = buf.split(sep)
            for rec in done:
                got.append(rec)
                if stop(rec):
                    return got
    return got


def gemini_sse(s, fake, directive):
    url = f"{GEMINI}/_fake/{directive}/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
    recs = _lines_until(s, url, {"contents": [{"role": "user", "parts": [{"text": "race four"}]}]},
                        lambda rec: b'"finishReason"' in rec, sep=b"\r\n\r\n")
    return "".join(json.loads(r[6:])["candidates"][0]["content"]["parts"][0]["text"] for r in recs if r.startswith(b"data: "))


def gemini_array(s, fake, directive):
    url = f"{GEMINI}/_fake/{directive}/v1beta/models/gemini-2.0-flash:streamGenerateContent"
    with _http(s) as c, c.stream("POST", url, json={"contents": [{"role": "user", "parts": [{"text": "race five"}]}]}) as r:
        buf = b""
        for piece in r.iter_raw():
            buf += piece
            if buf.rstrip().endswith(b"]"):
                break  # the array is closed: the answer is whole
    return "".join(p["candidates"][0]["content"]["parts"][0]["text"] for p in json.loads(buf))


def ollama_ndjson(s, fake, directive):
    url = f"{fake.http_url}/_fake/{directive}/api/chat"
    recs = _lines_until(s, url, {"model": "llama3.2", "messages": [{"role": "user", "content": "race six"}]},
                        lambda rec: json.loads(rec).get("done") is True)
    return "".join(json.loads(r)["message"]["content"] for r in recs)


def cohere_sse(s, fake, directive):
    url = f"{COHERE}/_fake/{directive}/v2/chat"
    recs = _lines_until(s, url, {"model": "command-r-plus", "stream": True,
                                 "messages": [{"role": "user", "content": "race seven"}]},
                        lambda rec: rec.startswith(b"event: message-end"), sep=b"\n\n")
    text = ""
    for r in recs:
        d = json.loads(r.split(b"\ndata: ", 1)[1])
        if d["type"] == "content-delta":
            text += d["delta"]["message"]["content"]["text"]
    return text


def bedrock_eventstream(s, fake, directive):
    url = f"{BEDROCK}/_fake/{directive}/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"
    text = ""
    with _http(s) as c, c.stream("POST", url, json={"messages": [{"role": "user", "content": [{"text": "race eight"}]}]}) as r:
        buf = b""
        for piece in r.iter_raw():
            buf += piece
            while len(buf) >= 12 and len(buf) >= struct.unpack(">I", buf[:4])[0]:
                total, hlen = struct.unpack(">II", buf[:8])
                payload = json.loads(buf[12 + hlen:total - 4])
                buf = buf[total:]
                if "delta" in payload:
                    text += payload["delta"]["text"]
                if "stopReason" in payload:
                    return text  # messageStop: the message is whole
    return text


CLIENTS = {
    "openai-chat": (openai_chat, "Echo: race one"),
    "openai-responses": (openai_responses, "Echo: race two"),
    "anthropic-messages": (anthropic_messages, "Echo: race three"),
    "gemini-sse": (gemini_sse, "Echo: race four"),
    "gemini-json-array": (gemini_array, "Echo: race five"),
    "ollama-ndjson": (ollama_ndjson, "Echo: race six"),
    "cohere-sse": (cohere_sse, "Echo: race seven"),
    "bedrock-eventstream": (bedrock_eventstream, "Echo: race eight"),
}


def _record(tmp_path, fake, name: str, directive: str):
    client, expected = CLIENTS[name]
    with recording(tmp_path / f"{name}.yaml", fake=fake, connect_to=_rules(fake)) as s:
        answer = client(s, fake, directive)
    assert answer == expected
    (it,) = s.cassette.interactions
    return load(s.path), it


def _clean(cas) -> None:
    report = analyze(cas)
    assert report.verdict == "pass", [(f.kind, f.severity, f.message) for f in report.findings]
    assert not [f for f in report.findings if f.kind in ("stream_incomplete", "http_error", "no_final_answer")]
    (step,) = build_transcript(cas).steps
    assert step.llm is not None and step.llm.stream.is_stream and step.llm.stream.complete
    assert step.transport_error is None


@pytest.mark.parametrize("name", list(CLIENTS))
def test_a_complete_stream_the_client_closes_is_clean(tmp_path, fake_provider, name):
    cas, it = _record(tmp_path, fake_provider, name, f"tail:{TAIL_MS}")
    # the race happened: the client hung up before the server finished the response, and the
    # recorder kept that apart from an upstream failure
    assert it.error is None
    assert it.extra["client_closed"] == {"during": "response", "message": "Client disconnected."}
    assert cas.interactions[0].extra["client_closed"]["during"] == "response"
    _clean(cas)
    step = build_transcript(cas).steps[0]
    assert step.client_closed and CLIENTS[name][1].split(": ")[1] in step.llm.text

    # a cassette recorded before the recorder knew the difference stored the hang-up as an
    # error; it reads clean too
    old = cas.model_copy(deep=True)
    old.interactions[0].extra.pop("client_closed")
    old.interactions[0].error = Failure(kind="other", message="Client disconnected.", during="response")
    _clean(old)


def test_client_hang_up_messages_are_told_apart_from_upstream_failures():
    """mitmproxy's words for a client that went first: HTTP/1 ``Client disconnected.``,
    HTTP/2 ``stream reset by client (CANCEL)`` (the fake provider speaks only HTTP/1.1, so
    the HTTP/2 wording is checked here)."""
    from spoolproxy.proxy.failures import classify, closed_by_client

    assert closed_by_client("Client disconnected.") and closed_by_client("stream reset by client (CANCEL)")
    assert classify("stream reset by client (CANCEL)", had_response=True).kind == "other"
    for upstream in ("Server disconnected.", "stream reset by server (INTERNAL_ERROR)", "Connection reset by peer",
                     "peer closed connection without sending complete message body: incomplete chunked read"):
        assert not closed_by_client(upstream)
        assert classify(upstream, had_response=True).kind == "reset"


def test_a_client_that_reads_to_the_end_records_no_hang_up(tmp_path, fake_provider):
    with recording(tmp_path / "whole.yaml", fake=fake_provider) as s:
        with _http(s) as c:
            r = c.post("https://api.openai.com/_fake/tail:50/v1/chat/completions",
                       json={"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "all"}]})
    assert r.text.endswith("data: [DONE]\n\n")
    (it,) = s.cassette.interactions
    assert it.error is None and "client_closed" not in it.extra
    _clean(load(s.path))


def test_an_upstream_cut_before_the_terminal_event_is_still_an_error(tmp_path, fake_provider):
    with recording(tmp_path / "cut.yaml", fake=fake_provider) as s:
        c = anthropic.Anthropic(api_key="sk-ant-test", max_retries=0, base_url="https://api.anthropic.com/_fake/cut:4",
                                http_client=anthropic.DefaultHttpxClient(proxy=s.runner.proxy_url, verify=s.client_ssl()))
        with pytest.raises(Exception, match="incomplete chunked read|peer closed"):  # the SDK's own httpx fork
            with c.messages.stream(model="claude-sonnet-4-20250514", max_tokens=64,
                                   messages=[{"role": "user", "content": "cut me"}]) as st:
                st.get_final_text()
    (it,) = s.cassette.interactions
    assert it.error is not None and "client_closed" not in it.extra
    report = analyze(load(s.path))
    kinds = {(f.kind, f.severity) for f in report.findings}
    assert ("stream_incomplete", "error") in kinds and report.verdict == "fail"
    msg = next(f.message for f in report.findings if f.kind == "stream_incomplete")
    assert "no finish reason; no terminal event" in msg and "terminal event seen" not in msg


def test_an_upstream_failure_after_the_terminal_event_is_a_warning(tmp_path, fake_provider):
    """Every event arrived, then the connection closed without the terminating chunk: the
    content is whole (pass), the broken connection is noted at warn."""
    with recording(tmp_path / "abort.yaml", fake=fake_provider) as s:
        with _http(s) as c, c.stream("POST", "https://api.openai.com/_fake/abort/v1/chat/completions",
                                     json={"model": "gpt-4o-mini", "stream": True,
                                           "messages": [{"role": "user", "content": "abort after"}]}) as r:
            got = b""
            with pytest.raises(httpx.HTTPError):
                for piece in r.iter_raw():
                    got += piece
    assert got.endswith(b"data: [DONE]\n\n")
    (it,) = s.cassette.interactions
    assert it.error is not None and it.error.during == "response"
    report = analyze(load(s.path))
    assert report.verdict == "pass"
    (f,) = [f for f in report.findings if f.kind == "http_error"]
    assert f.severity == "warn" and "after the stream's terminal event" in f.message
    assert not [f for f in report.findings if f.kind in ("stream_incomplete", "no_final_answer")]
