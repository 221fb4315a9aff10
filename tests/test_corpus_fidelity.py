"""Corpus fidelity: every real cassette in ../shared/corpus replays byte-identically.

One in-process playback proxy (real mitmproxy) serves each corpus cassette in turn,
switched through the control endpoint.  Every recorded request is re-issued through the
proxy with httpx (recorded method, URL, headers and body, trusting the spoolproxy CA
bundle); status and decoded body must equal the recording, each request must be an exact
match, and nothing may stay unused.  Every recorded host:port is pointed (``--connect-to``)
at a sentinel server, which must see zero connections.
"""

from __future__ import annotations

import ssl

import httpx
import pytest

from spoolproxy.cassettes import load
from spoolproxy.proxy.ca import ensure_ca
from spoolproxy.proxy.runner import ProxyRunner
from spoolproxy.replayer.addon import Playback
from spoolproxy.replayer.control import switch
from spoolproxy.replayer.session import PlaybackConfig, PlaybackSession
from tests.conftest import corpus_files
from tests.fakes.provider import FakeProvider

FILES = corpus_files()
SKIP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "content-encoding", "proxy-connection"}


def _endpoints() -> set[tuple[str, str, int]]:
    out = set()
    for f in FILES:
        for it in load(f).interactions:
            u = it.request.url
            out.add((u.scheme, u.hostname, u.port or (443 if u.scheme == "https" else 80)))
    return out


@pytest.fixture(scope="module")
def corpus_proxy(corpus_dir):
    sentinel = FakeProvider()
    rules = [
        f"{host}:{port}:127.0.0.1:{sentinel.port if scheme == 'https' else sentinel.http_port}"
        for scheme, host, port in sorted(_endpoints())
    ]
    session = PlaybackSession(PlaybackConfig(cassettes=[]))
    runner = ProxyRunner(
        [Playback(session)],
        options={"connection_strategy": "lazy", "upstream_cert": False},
        connect_to=rules,
    )
    runner.start()
    client = httpx.Client(proxy=runner.proxy_url, verify=ssl.create_default_context(cafile=str(ensure_ca().bundle)), timeout=30, trust_env=False)
    try:
        yield runner, client, sentinel
    finally:
        client.close()
        runner.stop()
        sentinel.stop()


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem[:60]}" for p in FILES])
def test_cassette_replays_byte_identical(corpus_proxy, path):
    runner, client, sentinel = corpus_proxy
    switch(runner.proxy_url, [path])
    cas = load(path)
    assert cas.interactions, f"{path} has no interactions"
    for i, it in enumerate(cas.interactions):
        rq = it.request
        headers = [(k, v) for k, vs in rq.headers.items() if k.lower() not in SKIP_HEADERS for v in vs]
        r = client.request(rq.method, rq.uri, headers=headers, content=rq.body)
        assert it.response is not None
        assert r.status_code == it.response.status, f"interaction {i}: {r.text[:300]}"
        assert r.content == it.response.body, f"interaction {i}: body differs"
    seg = switch(runner.proxy_url, [])["previous"]
    outcomes = [q["outcome"] for q in seg["requests"]]
    assert outcomes == ["exact"] * len(cas.interactions)
    assert seg["unused"] == []
    assert sentinel.connections == 0


def test_no_upstream_connection_during_corpus_playback(corpus_proxy):
    runner, client, sentinel = corpus_proxy
    # an unknown request to a recorded host is a miss, still without a connection
    switch(runner.proxy_url, [FILES[0]])
    r = client.post("https://api.openai.com/v1/chat/completions", json={"model": "none", "messages": []})
    assert r.status_code == 400 and "spoolproxy" in r.text
    assert sentinel.connections == 0
    assert sentinel.log == []
