"""Matching that survives drift in whole suites (issue 11, item 4), through the real proxy
and the real openai SDK: a pooled directory where several tests hit the same endpoint with
drifted bodies, streamed and not; the stream flag in the fallback key; the built-in SDK
rules; unused interactions counted per loaded set when the control endpoint loads.
"""

from __future__ import annotations

import json

import pytest

from spoolproxy.cassettes.model import Chunk, Interaction, Request, Response
from spoolproxy.replayer.control import checkpoint, switch
from spoolproxy.replayer.fingerprint import MatchOptions
from spoolproxy.replayer.index import Index
from spoolproxy.replayer.rules import BUILTIN, select
from spoolproxy.errors import UsageError

from .test_playback import CHAT, chat_req, client, completion, playback, sdk, write

TRACES = "https://api.openai.com/v1/traces/ingest"
PRICES = "https://raw.githubusercontent.com/BerriAI/litellm/main/model_prices_and_context_window.json"


def streamed(text: str) -> Response:
    """An OpenAI Chat Completions stream (SSE chunks, one per event) answering ``text``."""
    events = []
    for i, piece in enumerate([text[: len(text) // 2], text[len(text) // 2:]]):
        chunk = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-4o-mini",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": piece} if i == 0 else
                              {"content": piece}, "finish_reason": None}]}
        events.append(f"data: {json.dumps(chunk)}\n\n".encode())
    events.append(b"data: [DONE]\n\n")
    return Response(status=200, headers={"content-type": ["text/event-stream"]}, body=b"".join(events),
                    chunks=[Chunk(offset_ms=float(i), size=len(e)) for i, e in enumerate(events)])


def recorded(question: str, answer: str, stream: bool) -> Interaction:
    req = chat_req([{"role": "system", "content": "You are terse."}, {"role": "user", "content": question}],
                   **({"stream": True} if stream else {}))
    return Interaction(request=req, response=streamed(answer) if stream else completion(answer))


def ask(c, question: str, stream: bool) -> str:
    """The real SDK, with drift: a newer prompt and a field the recording lacks."""
    msgs = [{"role": "system", "content": "You are terse. Answer in one word."}, {"role": "user", "content": question}]
    if stream:
        parts = c.chat.completions.create(model="gpt-4o-mini", messages=msgs, stream=True, temperature=0.2)
        return "".join(ch.choices[0].delta.content or "" for ch in parts if ch.choices)
    return c.chat.completions.create(model="gpt-4o-mini", messages=msgs, temperature=0.2).choices[0].message.content


def test_pooled_directory_serves_each_drifted_request_its_own_recording(tmp_path, fake_provider):
    pool = tmp_path / "pool"
    pool.mkdir()
    # four tests' cassettes in one directory, all the same endpoint
    write(pool, "test_a.yaml", [recorded("What is 2+2?", "four", stream=False)])
    write(pool, "test_b.yaml", [recorded("What is 2+2?", "streamed four", stream=True)])
    write(pool, "test_c.yaml", [recorded("Capital of France?", "Paris", stream=False)])
    write(pool, "test_d.yaml", [recorded("Tell a joke", "streamed joke", stream=True)])
    with playback([str(pool)], fake_provider) as (runner, session):
        c = sdk(runner)
        got = [ask(c, "Tell a joke", True), ask(c, "Capital of France?", False),
               ask(c, "What is 2+2?", True), ask(c, "What is 2+2?", False)]
        report = session.report()
    assert got == ["streamed joke", "Paris", "streamed four", "four"]
    assert report.divergences == 4 and report.misses == 0 and report.unused == []
    first = report.requests[0]
    assert first.served.cassette.endswith("test_d.yaml")
    assert any("nearest body among 2 unused interactions" in r for r in first.reasons), first.reasons
    assert {c.path for c in first.differences} == {"$.messages[0].content", "$.temperature"}


def test_a_stream_is_never_served_to_a_plain_request_or_the_reverse(tmp_path, fake_provider):
    path = write(tmp_path, "s.yaml", [recorded("hi", "streamed hi", stream=True)])
    with playback([path], fake_provider) as (runner, session), client(runner) as c:
        r = c.post(CHAT, json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]})
        assert r.status_code == 400 and r.headers["x-spoolproxy"] == "miss"
        # the same drifted request asking for a stream gets it, as a divergence
        with c.stream("POST", CHAT, json={"model": "gpt-4o-mini", "stream": True,
                                          "messages": [{"role": "user", "content": "hello"}]}) as s:
            assert s.headers["content-type"] == "text/event-stream" and b"med hi" in s.read()
        report = session.report()
    assert [r.outcome for r in report.requests] == ["miss", "divergence"]


def test_accept_header_is_the_stream_flag_when_the_body_has_none():
    def req(q, accept=None):
        return Request(method="POST", uri="https://mcp.example/mcp", body=json.dumps({"q": q}).encode(),
                       headers={"content-type": ["application/json"], **({"accept": [accept]} if accept else {})})

    sse = Response(status=200, headers={"content-type": ["text/event-stream"]}, body=b"data: 1\n\n")
    idx = Index([_cassette(Interaction(request=req(1, "text/event-stream"), response=sse))])
    assert idx.lookup(req(2, "application/json")).outcome == "miss"  # drifted, and no stream asked
    assert idx.lookup(req(2, "text/event-stream")).outcome == "divergence"
    # recorded without Accept: the recorded response says it was a stream
    idx = Index([_cassette(Interaction(request=req(1), response=sse))])
    assert idx.lookup(req(2, "application/json")).outcome == "miss"
    assert idx.lookup(req(2, "text/event-stream, application/json")).outcome == "divergence"


def _cassette(*its):
    from spoolproxy.cassettes.model import Cassette

    return Cassette(interactions=list(its))


def agents_call(key_hex: str) -> Request:
    body = {"model": "gpt-4o", "input": [{"role": "user", "content": "hi"}],
            "prompt_cache_key": f"agents-sdk:run:{key_hex}", "stream": False}
    return Request(method="POST", uri="https://api.openai.com/v1/responses",
                   headers={"content-type": ["application/json"]}, body=json.dumps(body).encode())


def trace_batch(trace: str) -> Request:
    body = {"data": [{"object": "trace", "id": f"trace_{trace}", "workflow_name": "Agent workflow"},
                     {"object": "trace.span", "id": "span_" + trace[:24], "trace_id": f"trace_{trace}",
                      "started_at": "2026-12-01T07:11:42.123456+00:00", "span_data": {"type": "agent"}}]}
    return Request(method="POST", uri=TRACES, headers={"content-type": ["application/json"]},
                   body=json.dumps(body).encode())


def test_sdk_rules_make_a_clean_replay_clean_and_can_be_switched_off(tmp_path, fake_provider):
    path = write(tmp_path, "agents.yaml", [
        Interaction(request=agents_call("a" * 32), response=completion("done")),
        Interaction(request=trace_batch("1" * 32), response=Response(status=204)),
        Interaction(request=trace_batch("2" * 32), response=Response(status=204)),
    ])
    with playback([path], fake_provider) as (runner, session), client(runner) as c:
        assert c.post("https://api.openai.com/v1/responses", content=agents_call("b" * 32).body).status_code == 200
        # the exporter's timing differs this run: one batch instead of two, then one more
        assert c.post(TRACES, content=trace_batch("3" * 32).body).status_code == 204
        assert c.post(TRACES, content=trace_batch("4" * 32).body).status_code == 204
        assert c.post(TRACES, content=trace_batch("5" * 32).body).status_code == 204
        assert c.get(PRICES).status_code == 400  # litellm falls back to its bundled price map
        report = session.report()
    assert [r.outcome for r in report.requests] == ["exact", "exact", "exact", "exact", "optional"]
    assert report.clean and report.unused == [] and report.optional == 1
    assert "optional 1" in report.summary_line()
    off = MatchOptions(sdk_rules=False)
    with playback([path], fake_provider, options=off) as (runner, session), client(runner) as c:
        c.post("https://api.openai.com/v1/responses", content=agents_call("b" * 32).body)
        report = session.report()
    assert [r.outcome for r in report.requests] == ["divergence"] and len(report.unused) == 2
    assert report.requests[0].suggestions == ["--ignore-json-path $.prompt_cache_key"]


def test_rule_names_are_checked_and_one_rule_can_be_disabled():
    assert "openai-agents-tracing" not in {r.name for r in select(True, ["openai-agents-tracing"])}
    assert len(select(True)) == len(BUILTIN) and select(False) == ()
    with pytest.raises(UsageError, match="no such rule"):
        select(True, ["nope"])


def test_control_loads_count_unused_for_the_loaded_sets_only(tmp_path, fake_provider):
    a, b = chat_req([{"role": "user", "content": "a"}]), chat_req([{"role": "user", "content": "b"}])
    pool = tmp_path / "pool"
    pool.mkdir()
    pa = write(pool, "test_a.yaml", [Interaction(request=a, response=completion("A"))])
    pb = write(pool, "test_b.yaml", [Interaction(request=b, response=completion("B")),
                                     Interaction(request=b, response=completion("B again"))])
    # started with the whole directory, then driven one cassette per test
    with playback([str(pool)], fake_provider) as (runner, session), client(runner) as c:
        switch(runner.proxy_url, [pa])
        assert c.post(CHAT, content=a.body).json()["choices"][0]["message"]["content"] == "A"
        first = checkpoint(runner.proxy_url)["previous"]
        assert first["unused"] == [] and [r["outcome"] for r in first["requests"]] == ["exact"]
        switch(runner.proxy_url, [pb])
        assert c.post(CHAT, content=b.body).json()["choices"][0]["message"]["content"] == "B"
        second = checkpoint(runner.proxy_url)["previous"]
        report = session.report()
    assert len(second["unused"]) == 1
    # the start-up directory was replaced before it served anything: not counted; test_b's
    # leftover counted once although two segments saw it
    assert [(u.cassette.rsplit("/", 1)[-1], u.interaction) for u in report.unused] == [("test_b.yaml", 1)]
    assert [r.outcome for r in report.requests] == ["exact", "exact"]


def test_nearest_body_choice_is_bounded_and_ties_keep_recorded_order():
    reqs = [chat_req([{"role": "user", "content": f"q{i}"}]) for i in range(300)]
    idx = Index([_cassette(*[Interaction(request=r, response=completion(str(i))) for i, r in enumerate(reqs)])])
    drifted = chat_req([{"role": "user", "content": "q250"}], temperature=1)
    hit = idx.lookup(drifted)  # q250 lies beyond the first 200 candidates: the nearest of those is served
    assert hit.outcome == "divergence" and hit.candidates == 200 and hit.entry.index == 0
    near = chat_req([{"role": "user", "content": "q3"}], temperature=1)
    assert idx.lookup(near).entry.index == 3
    assert idx.lookup(drifted).entry.index == 1  # ties: recorded order
