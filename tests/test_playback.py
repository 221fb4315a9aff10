"""Playback through the real proxy: misses with the real openai SDK, stale bodies, repeats,
concurrency, stream chunk boundaries, recorded failures, the control endpoint.

Every test points api.openai.com / api.anthropic.com (``--connect-to``) at a fake provider
used as a sentinel: it must see zero connections.
"""

from __future__ import annotations

import json
import ssl
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import openai
import pytest

from spoolproxy.cassettes import save
from spoolproxy.cassettes.model import Cassette, Chunk, Failure, Interaction, Request, Response
from spoolproxy.proxy.ca import ensure_ca
from spoolproxy.proxy.runner import ProxyRunner
from spoolproxy.replayer.addon import Playback
from spoolproxy.replayer.control import report, switch
from spoolproxy.replayer.session import PlaybackConfig, PlaybackSession

CHAT = "https://api.openai.com/v1/chat/completions"
KEY = "sk-proj-" + "x" * 40


def chat_req(messages, **extra) -> Request:
    body = {"model": "gpt-4o-mini", "messages": messages, **extra}
    return Request(method="POST", uri=CHAT, headers={"content-type": ["application/json"]}, body=json.dumps(body).encode())


def completion(text: str) -> Response:
    doc = {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return Response(status=200, headers={"content-type": ["application/json"]}, body=json.dumps(doc).encode())


def write(tmp_path, name, interactions) -> str:
    p = tmp_path / name
    save(Cassette(interactions=interactions), p)
    return str(p)


@contextmanager
def playback(paths, fake_provider, catch_all=False, **cfg):
    session = PlaybackSession(PlaybackConfig(cassettes=list(paths), **cfg))
    rules = [f"api.openai.com:443:127.0.0.1:{fake_provider.port}", f"api.anthropic.com:443:127.0.0.1:{fake_provider.port}"]
    if catch_all:  # every other connection too, including the loopback replay server's
        rules.append(f"::127.0.0.1:{fake_provider.http_port}")
    with ProxyRunner([Playback(session)], options={"connection_strategy": "lazy", "upstream_cert": False}, connect_to=rules) as runner:
        yield runner, session
    assert fake_provider.connections == 0


_TLS: list[ssl.SSLContext] = []


def tls() -> ssl.SSLContext:
    """One client SSL context trusting the spoolproxy CA bundle (building one costs ~0.1 s)."""
    if not _TLS:
        _TLS.append(ssl.create_default_context(cafile=str(ensure_ca().bundle)))
    return _TLS[0]


def client(runner) -> httpx.Client:
    return httpx.Client(proxy=runner.proxy_url, verify=tls(), timeout=20)


def sdk(runner) -> openai.OpenAI:
    http = openai.DefaultHttpxClient(proxy=runner.proxy_url, verify=tls())
    return openai.OpenAI(api_key=KEY, http_client=http)


def test_openai_sdk_surfaces_a_timestamp_miss_without_retrying(tmp_path, fake_provider):
    sysmsg = {"role": "system", "content": "You are helpful."}
    rec = chat_req([sysmsg, {"role": "user", "content": "Now is 2025-03-04T12:00:00Z. Say hi"}])
    path = write(tmp_path, "ts.yaml", [Interaction(request=rec, response=completion("hi"))])
    with playback([path], fake_provider, match="exact") as (runner, session):
        with pytest.raises(openai.BadRequestError) as err:
            sdk(runner).chat.completions.create(
                model="gpt-4o-mini",
                messages=[sysmsg, {"role": "user", "content": "Now is 2026-12-01T07:11:42Z. Say hi"}],
            )
        rep = session.report()
    msg = str(err.value)
    assert "spoolproxy" in msg and "ts.yaml #0" in msg and "$.messages[1].content" in msg
    assert [r.outcome for r in rep.requests] == ["miss"]  # one request: the SDK did not retry
    miss = rep.requests[0]
    assert miss.nearest is not None and miss.differences[0].path == "$.messages[1].content"
    assert miss.suggestions[0].startswith("--normalize ") and miss.suggestion_verified is True
    assert "to match, add: --normalize" in rep.render()


def test_stale_bodies_replay_in_order_with_divergences_and_miss_under_exact(tmp_path, fake_provider):
    recorded = [Interaction(request=chat_req([{"role": "user", "content": f"q{i}"}], temperature=0), response=completion(f"a{i}"))
                for i in range(3)]
    path = write(tmp_path, "stale.yaml", recorded)
    with playback([path], fake_provider) as (runner, session):
        api = sdk(runner)
        answers = [api.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": f"q{i}"}],
                                               max_completion_tokens=5).choices[0].message.content for i in range(3)]
        rep = session.report()
    assert answers == ["a0", "a1", "a2"]
    assert [r.outcome for r in rep.requests] == ["divergence"] * 3
    paths = {c.path: c.kind for c in rep.requests[0].differences}
    assert paths == {"$.temperature": "removed", "$.max_completion_tokens": "added"}
    with playback([path], fake_provider, match="exact") as (runner, session):
        with pytest.raises(openai.BadRequestError):
            sdk(runner).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "q0"}],
                                                max_completion_tokens=5)
        assert session.report().misses == 1


def test_identical_requests_get_successive_recorded_responses(tmp_path, fake_provider):
    r = chat_req([{"role": "user", "content": "again"}])
    path = write(tmp_path, "rep.yaml", [Interaction(request=r, response=completion(f"n{i}")) for i in range(3)])
    with playback([path], fake_provider) as (runner, session), client(runner) as c:
        got = [c.post(CHAT, content=r.body, headers={"content-type": "application/json"}).json() for _ in range(4)]
    assert [g["choices"][0]["message"]["content"] for g in got[:3]] == ["n0", "n1", "n2"]
    assert got[3]["error"]["code"] == "spoolproxy_miss"


def test_32_parallel_identical_and_distinct_requests_each_served_once(tmp_path, fake_provider):
    same = chat_req([{"role": "user", "content": "same"}])
    distinct = [chat_req([{"role": "user", "content": f"d{i}"}]) for i in range(16)]
    inter = [Interaction(request=same, response=completion(f"s{i}")) for i in range(16)]
    inter += [Interaction(request=d, response=completion(f"d{i}")) for i, d in enumerate(distinct)]
    path = write(tmp_path, "par.yaml", inter)
    with playback([path], fake_provider) as (runner, session), client(runner) as c:
        def one(r):  # one shared client: up to 32 connections in parallel
            return c.post(CHAT, content=r.body, headers={"content-type": "application/json"}).json()

        with ThreadPoolExecutor(32) as pool:
            out = list(pool.map(one, [same] * 16 + distinct))
        rep = session.report()
    texts = [o["choices"][0]["message"]["content"] for o in out]
    assert sorted(texts[:16]) == sorted(f"s{i}" for i in range(16))
    assert texts[16:] == [f"d{i}" for i in range(16)]
    assert rep.exact == 32 and rep.unused == []
    assert len({(r.served.interaction) for r in rep.requests}) == 32


def sse_interaction(events: list[bytes], error: Failure | None = None) -> Interaction:
    body = b"".join(events)
    chunks = [Chunk(offset_ms=5.0 * i, size=len(e)) for i, e in enumerate(events)]
    resp = Response(status=200, headers={"content-type": ["text/event-stream"], "transfer-encoding": ["chunked"]},
                    body=body, chunks=chunks)
    return Interaction(request=chat_req([{"role": "user", "content": "s"}], stream=True), response=resp, error=error)


EVENTS = [f'data: {{"n": {i}}}\n\n'.encode() for i in range(5)] + [b"data: [DONE]\n\n"]


def test_stream_is_served_with_recorded_chunk_boundaries(tmp_path, fake_provider):
    path = write(tmp_path, "sse.yaml", [sse_interaction(EVENTS), sse_interaction(EVENTS)])
    for realtime in (False, True):
        with playback([path], fake_provider, catch_all=True, realtime=realtime) as (runner, session), client(runner) as c:
            r = sse_interaction(EVENTS).request
            with c.stream("POST", CHAT, content=r.body, headers={"content-type": "application/json"}) as resp:
                assert resp.headers["content-type"] == "text/event-stream"
                got = list(resp.iter_raw())
        assert got == EVENTS


def test_cut_stream_stops_early_and_reset_connection_resets(tmp_path, fake_provider):
    cut = sse_interaction(EVENTS[:2], Failure(kind="other", message="cut", during="response"))
    refused = Interaction(request=chat_req([{"role": "user", "content": "boom"}]),
                          error=Failure(kind="reset", message="reset", during="connect"))
    path = write(tmp_path, "fail.yaml", [cut, refused])
    with playback([path], fake_provider) as (runner, session), client(runner) as c:
        received = []
        with pytest.raises(httpx.RemoteProtocolError):
            with c.stream("POST", CHAT, content=cut.request.body, headers={"content-type": "application/json"}) as resp:
                for piece in resp.iter_raw():
                    received.append(piece)
        assert received == EVENTS[:2]
        with pytest.raises(httpx.RemoteProtocolError):
            c.post(CHAT, content=refused.request.body, headers={"content-type": "application/json"})
        assert session.report().exact == 2


def test_control_endpoint_switches_cassettes_and_reports(tmp_path, fake_provider):
    a = chat_req([{"role": "user", "content": "a"}])
    b = chat_req([{"role": "user", "content": "b"}])
    pa = write(tmp_path, "a.yaml", [Interaction(request=a, response=completion("A"))])
    pb = write(tmp_path, "b.yaml", [Interaction(request=b, response=completion("B")),
                                    Interaction(request=a, response=completion("unused"))])
    bad = tmp_path / "bad.yaml"
    bad.write_text("interactions: [\n")
    with playback([pa], fake_provider) as (runner, session), client(runner) as c:
        assert c.post(CHAT, content=a.body).json()["choices"][0]["message"]["content"] == "A"
        answer = switch(runner.proxy_url, [pb])
        assert answer["previous"]["requests"][0]["outcome"] == "exact" and answer["interactions"] == 2
        assert c.post(CHAT, content=b.body).json()["choices"][0]["message"]["content"] == "B"
        with pytest.raises(Exception, match="bad.yaml:2"):
            switch(runner.proxy_url, [bad])
        assert c.post(CHAT, content=a.body).json()["choices"][0]["message"]["content"] == "unused"  # b.yaml still loaded
        full = report(runner.proxy_url)
    assert [r["outcome"] for r in full["requests"]] == ["exact", "exact"]  # b.yaml's segment only
    assert [r.outcome for r in session.report().requests] == ["exact", "exact", "exact"]  # the whole run


def test_http2_client_gets_streams_and_plain_responses(tmp_path, fake_provider):
    import shutil
    import subprocess

    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    plain = Interaction(request=Request(method="GET", uri="https://api.openai.com/v1/models"),
                        response=Response(status=200, headers={"content-type": ["application/json"], "Connection": ["keep-alive"]},
                                          body=b'{"object": "list", "data": []}'))
    stream = sse_interaction(EVENTS)
    stream.response.headers["Connection"] = ["keep-alive"]  # hop-by-hop: must not reach an HTTP/2 client
    path = write(tmp_path, "h2.yaml", [stream, plain])
    with playback([path], fake_provider) as (runner, session):
        base = ["curl", "-sS", "--http2", "-w", "\\n%{http_version}", "-x", runner.proxy_url, "--cacert", str(ensure_ca().bundle)]
        s = subprocess.run([*base, "-d", stream.request.body.decode(), CHAT], capture_output=True, timeout=30)
        p = subprocess.run([*base, "https://api.openai.com/v1/models"], capture_output=True, timeout=30)
        assert session.report().exact == 2
    assert s.returncode == 0 and s.stdout == b"".join(EVENTS) + b"\n2", s.stderr
    assert p.returncode == 0 and p.stdout == b'{"object": "list", "data": []}\n2', p.stderr


def test_anthropic_sdk_surfaces_a_miss_in_its_error_shape_without_retrying(tmp_path, fake_provider):
    import anthropic

    path = write(tmp_path, "empty.yaml", [])
    with playback([path], fake_provider) as (runner, session):
        http = anthropic.DefaultHttpxClient(proxy=runner.proxy_url, verify=tls())
        api = anthropic.Anthropic(api_key="sk-ant-api03-" + "y" * 40, http_client=http)
        with pytest.raises(anthropic.BadRequestError) as err:
            api.messages.create(model="claude-3-5-haiku-latest", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        rep = session.report()
    assert err.value.body["type"] == "error" and err.value.body["error"]["type"] == "invalid_request_error"
    assert "spoolproxy playback: no recorded interaction matches POST https://api.anthropic.com/v1/messages" in str(err.value)
    assert rep.misses == 1 and len(rep.requests) == 1
