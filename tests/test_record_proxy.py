"""The recording proxy in-process: real mitmproxy, real sockets, the fake provider as upstream.

Streams pass through chunk by chunk and are stored with offsets; interactions are in
request-start order under concurrency; bodies are stored decoded; upstream failures become
interactions with an error; big bodies spill with a matching sha256; reverse mode and
--connect-to record the real upstream URL; secrets reach no file.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time

import httpx
import pytest

from spoolproxy.cassettes import load, read_body
from spoolproxy.cassettes.journal import journal_path
from spoolproxy.cassettes.redact import Redactor
from tests.fakes.provider import Reply, huge_body, sse_reply

from .test_proxy_support import recording, spool_home, wait_for  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("spool_home")

OPENAI = "https://api.openai.com"


def _key() -> str:
    return "sk-proj-" + "Zq9" * 14  # built at run time, never a literal


def _client(s, **kw) -> httpx.Client:
    return httpx.Client(proxy=s.runner.proxy_url, verify=s.client_ssl(), timeout=20, **kw)


def test_sse_chunks_reach_client_as_sent_and_are_stored_with_offsets(tmp_path, fake_provider):
    path = tmp_path / "sse.yaml"
    body = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "count to five please"}]}
    arrivals: list[tuple[float, bytes]] = []
    with recording(path, fake=fake_provider) as s, _client(s) as c:
        with c.stream("POST", f"{OPENAI}/v1/chat/completions", json=body, headers={"x-fake-delay-ms": "120"}) as r:
            assert r.status_code == 200
            for piece in r.iter_raw():
                arrivals.append((time.monotonic(), piece))
    sent = fake_provider.log[-1].sent
    assert len(sent) >= 4
    # the first event reached the client before the server had written the last one:
    # nothing was buffered until the end of the stream
    assert arrivals[0][0] < sent[-1][0]
    assert len(arrivals) >= len(sent) - 1  # arrived in (about) as many pieces as were written
    # event k reached the client before the server wrote event k+1 (it slept 120 ms in
    # between), for most k: the gaps the server made are the gaps the client saw
    got_at, total = [], 0
    for t, piece in arrivals:
        total += len(piece)
        got_at.append((total, t))
    cumulative = 0
    before_next = 0
    for k in range(len(sent) - 1):
        cumulative += sent[k][1]
        arrived = next(t for n, t in got_at if n >= cumulative)
        before_next += arrived < sent[k + 1][0]
    assert before_next >= 0.75 * (len(sent) - 1)

    (it,) = s.cassette.interactions
    assert it.request.uri == f"{OPENAI}/v1/chat/completions"
    resp = it.response
    assert resp.body == b"".join(p for _, p in arrivals)
    assert resp.chunks is not None and len(resp.chunks) == len(sent)
    assert [c.size for c in resp.chunks] == [n for _, n in sent]
    offsets = [c.offset_ms for c in resp.chunks]
    assert offsets == sorted(offsets) and offsets[-1] > offsets[0]
    # and the cassette on disk says the same
    again = load(path).interactions[0].response
    assert again.body == resp.body and [c.size for c in again.chunks] == [c.size for c in resp.chunks]
    assert b"data: [DONE]" in again.body


def test_concurrent_requests_are_in_request_start_order(tmp_path, fake_provider):
    """32 requests (half streaming) started one after another, answered in reverse order."""
    n = 32
    arrived: list[int] = []
    cond = threading.Condition()

    def route(req):
        idx = int(req.path.split("/")[-2])
        with cond:
            arrived.append(idx)
            cond.notify_all()
            cond.wait_for(lambda: len(arrived) == n, timeout=20)
            # answer the last-started first
            cond.wait_for(lambda: _released[0] == n - 1 - idx, timeout=20)
        time.sleep(0.005)
        with cond:
            _released[0] += 1
            cond.notify_all()
        if idx % 2:
            return sse_reply([f"data: {idx}-{k}\n\n".encode() for k in range(3)])
        return Reply(200, [("content-type", "application/json")], json.dumps({"idx": idx}).encode())

    _released = [0]
    fake_provider.add_route("POST", "/go", route)
    results: dict[int, bytes] = {}
    path = tmp_path / "order.yaml"
    with recording(path, fake=fake_provider) as s:
        journal = journal_path(path)

        def one(i: int) -> None:
            with _client(s) as c:
                results[i] = c.post(f"{OPENAI}/v1/ordered/{i}/go", json={"i": i}).content

        threads = []
        for i in range(n):
            t = threading.Thread(target=one, args=(i,))
            t.start()
            threads.append(t)
            with cond:  # start the next request only once this one reached the server
                assert cond.wait_for(lambda: len(arrived) == i + 1, timeout=20)
        for t in threads:
            t.join(30)
        # a client can see a Content-Length body complete a moment before its journal line
        wait_for(lambda: len(journal.read_text().splitlines()) == n + 1, what="all journal lines")
        completed = [json.loads(line)["seq"] for line in journal.read_text().splitlines()[1:]]
    assert len(results) == n
    assert sorted(completed) == list(range(n)) and completed != sorted(completed)  # out of order on the journal
    uris = [it.request.uri for it in s.cassette.interactions]
    assert uris == [f"{OPENAI}/v1/ordered/{i}/go" for i in range(n)]  # ...in start order in the cassette
    streamed = [it for it in s.cassette.interactions if it.response.content_type == "text/event-stream"]
    assert len(streamed) == n // 2 and all(len(it.response.chunks) == 3 for it in streamed)
    assert all(s.cassette.interactions[i].response.body == results[i] for i in range(n))


def test_gzip_body_is_stored_decoded(tmp_path, fake_provider):
    path = tmp_path / "gz.yaml"
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}
    with recording(path, fake=fake_provider) as s, _client(s) as c:
        r = c.post(f"{OPENAI}/v1/chat/completions", json=body, headers={"accept-encoding": "gzip"})
    assert r.headers["content-encoding"] == "gzip"  # the client got the wire bytes untouched
    resp = load(path).interactions[0].response
    assert resp.header("content-encoding") is None and resp.header("content-length") is None
    assert resp.json() == r.json()
    assert sum(c.size for c in resp.chunks) == len(resp.body)
    assert "parsed_body" in path.read_text()  # JSON stored as a YAML structure


def test_refused_upstream_is_recorded_with_error(tmp_path, fake_provider):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    path = tmp_path / "refused.yaml"
    with recording(path, connect_to=[f"api.openai.com:443:127.0.0.1:{dead}"]) as s, _client(s) as c:
        with pytest.raises(httpx.TransportError):  # the connection closes, no made-up 502 page
            c.post(f"{OPENAI}/v1/chat/completions", json={"model": "m"})
    (it,) = load(path).interactions
    assert it.request.uri == f"{OPENAI}/v1/chat/completions"
    assert it.response is None
    assert it.error.kind == "refused" and it.error.during == "connect"


def test_untrusted_upstream_certificate_is_a_tls_failure(tmp_path, fake_provider):
    path = tmp_path / "tls.yaml"
    rule = f"api.openai.com:443:127.0.0.1:{fake_provider.port}"
    with recording(path, connect_to=[rule], options={"record_upstream_errors": "502"}) as s, _client(s) as c:
        r = c.get(f"{OPENAI}/v1/models")  # no --upstream-ca: the fake's certificate is not trusted
    assert r.status_code == 502 and "certificate" in r.text  # mitmproxy's error page, on request
    (it,) = load(path).interactions
    assert it.error.kind == "tls"
    assert fake_provider.requests_to("/models") == []


def test_stream_cut_mid_way_keeps_partial_body_and_error(tmp_path, fake_provider):
    path = tmp_path / "cut.yaml"
    body = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "one two three four"}]}
    fake_provider.fail_next("cut:2")
    with recording(path, fake=fake_provider) as s, _client(s) as c:
        got = b""
        with pytest.raises(httpx.HTTPError):
            with c.stream("POST", f"{OPENAI}/v1/chat/completions", json=body) as r:
                for piece in r.iter_raw():
                    got += piece
    (it,) = load(path).interactions
    assert it.error is not None and it.error.kind == "reset" and it.error.during == "response"
    assert it.response.status == 200
    assert it.response.body == got and it.response.body.count(b"data: ") == 2


def test_big_body_streams_through_and_spills_to_side_file(tmp_path, fake_provider):
    size = 30 * 1024 * 1024
    path = tmp_path / "big.yaml"
    with recording(path, fake=fake_provider, max_body_size=1024 * 1024) as s, _client(s) as c:
        h = hashlib.sha256()
        n = 0
        with c.stream("GET", f"{OPENAI}/v1/files/x/content", headers={"x-fake-fail": f"huge:{size}"}) as r:
            for piece in r.iter_raw():
                h.update(piece)
                n += len(piece)
    assert n == size
    expected = hashlib.sha256(huge_body(size)).hexdigest()
    assert h.hexdigest() == expected
    cas = load(path)
    resp = cas.interactions[0].response
    assert resp.body == b"" and resp.body_ref is not None
    assert resp.body_ref.size == size and resp.body_ref.sha256 == expected
    side = path.parent / resp.body_ref.file
    assert side.parent.name == "big.yaml.bodies"
    assert hashlib.sha256(read_body(cas, resp)).hexdigest() == expected
    assert sum(c.size for c in resp.chunks) == size
    assert path.stat().st_size < 64 * 1024  # the YAML stays small


def test_elided_big_body_keeps_size_and_sha(tmp_path, fake_provider):
    size = 3 * 1024 * 1024
    path = tmp_path / "elide.yaml"
    with recording(path, fake=fake_provider, max_body_size=64 * 1024, large_bodies="elide") as s, _client(s) as c:
        r = c.get(f"{OPENAI}/v1/blob", headers={"x-fake-fail": f"huge:{size}"})
    assert len(r.content) == size
    resp = load(path).interactions[0].response
    assert resp.body_ref.file is None and resp.body_ref.size == size
    assert resp.body_ref.sha256 == hashlib.sha256(huge_body(size)).hexdigest()
    assert "elided: true" in path.read_text()
    assert not (tmp_path / "elide.yaml.bodies").exists()


def test_reverse_mode_records_the_real_upstream_url(tmp_path, fake_provider):
    import openai

    path = tmp_path / "rev.yaml"
    with recording(path, fake=fake_provider, reverse=(OPENAI,)) as s:
        port = s.runner.reverse_ports[OPENAI]
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=_key())
        out = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi there"}])
    assert out.choices[0].message.content
    (it,) = load(path).interactions
    assert it.request.uri == f"{OPENAI}/v1/chat/completions"
    assert it.request.header("host") == "api.openai.com"
    assert fake_provider.log[-1].header("host") == "api.openai.com"


def test_connect_to_keeps_original_host_sni_and_url(tmp_path, fake_provider):
    path = tmp_path / "ct.yaml"
    with recording(path, fake=fake_provider) as s, _client(s) as c:
        r1 = c.get(f"{OPENAI}/v1/models")
        r2 = c.get("https://api.anthropic.com/v1/models", headers={"anthropic-version": "2023-06-01"})
        r3 = c.get(f"{OPENAI}/v1/models")
    assert r1.status_code == r2.status_code == r3.status_code == 200
    # the upstream certificate verified for the original names via the upstream CA (SNI kept)
    assert [q.header("host") for q in fake_provider.log] == ["api.openai.com", "api.anthropic.com", "api.openai.com"]
    uris = [i.request.uri for i in load(path).interactions]
    assert uris == [f"{OPENAI}/v1/models", "https://api.anthropic.com/v1/models", f"{OPENAI}/v1/models"]
    assert fake_provider.connections == 2  # the redirected upstream connection is reused per host


def test_planted_key_reaches_no_file_under_the_cassette_directory(tmp_path, fake_provider):
    key = _key()
    cdir = tmp_path / "cassettes"
    path = cdir / "secret.yaml"
    red = Redactor(extra_headers=["x-custom-auth"])
    seen_in_journal = []
    with recording(path, fake=fake_provider, max_body_size=2048, redactor=red) as s, _client(s) as c:
        r = c.post(
            f"{OPENAI}/echo/tool?key={key}",
            headers={"Authorization": f"Bearer {key}", "x-custom-auth": "opaque-" + "q" * 12},
            json={"note": f"my key is {key}", "pad": "x" * 5000},  # echoed back: > 2048, spilled
        )
        assert key in r.text  # the client itself sees everything
        c.post(f"{OPENAI}/echo/two", headers={"x-api-key": key}, content=b"plain " + key.encode())
        seen_in_journal.append(journal_path(path).read_bytes())
    assert key.encode() not in seen_in_journal[0]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".bin" for p in files)  # the spilled echo
    for f in files:
        data = f.read_bytes()
        assert key.encode() not in data, f
    cas = load(path)
    assert cas.interactions[0].request.header("x-custom-auth").startswith("REDACTED-x-custom-auth-")
    assert cas.interactions[1].request.header("x-api-key").startswith("REDACTED-")


def test_connection_reset_before_any_response_is_recorded(tmp_path, fake_provider):
    path = tmp_path / "reset.yaml"
    fake_provider.fail_next("reset")
    with recording(path, fake=fake_provider) as s, _client(s) as c:
        with pytest.raises(httpx.RemoteProtocolError):  # as if talking to the server directly
            c.post(f"{OPENAI}/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": []})
    (it,) = load(path).interactions
    assert it.response is None
    assert it.error.kind == "reset" and it.error.during == "request", it.error


def test_re_recording_replaces_stale_side_files(tmp_path, fake_provider):
    path = tmp_path / "re.yaml"
    for size in (300_000, 200_000):
        with recording(path, fake=fake_provider, max_body_size=100_000) as s, _client(s) as c:
            c.get(f"{OPENAI}/v1/blob", headers={"x-fake-fail": f"huge:{size}"})
    files = list((tmp_path / "re.yaml.bodies").iterdir())
    ref = load(path).interactions[0].response.body_ref
    assert [f.name for f in files] == [ref.file.split("/")[-1]] and ref.size == 200_000
    with recording(path, fake=fake_provider) as s, _client(s) as c:  # now small: no side dir at all
        c.get(f"{OPENAI}/v1/models")
    assert not (tmp_path / "re.yaml.bodies").exists()


def test_big_upload_streams_upstream_and_is_spilled(tmp_path, fake_provider):
    size = 3 * 1024 * 1024
    blob = bytes(range(256)) * (size // 256)
    path = tmp_path / "up.yaml"
    with recording(path, fake=fake_provider, max_body_size=256 * 1024) as s, _client(s) as c:
        r = c.post(f"{OPENAI}/v1/files", content=blob, headers={"content-type": "application/octet-stream",
                                                               "x-fake-fail": "status:413"})
    assert r.status_code == 413
    assert fake_provider.log[-1].body == blob  # the upstream got every byte
    it = load(path).interactions[0]
    assert it.request.body == b""
    ref = it.extra["request_body"]
    assert ref["size"] == size and ref["sha256"] == hashlib.sha256(blob).hexdigest()
    assert (tmp_path / ref["file"]).read_bytes() == blob
