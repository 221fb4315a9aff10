"""``--encode-as-recorded`` (issue 11, item 5) and uploads cut by an early response (item 6).

Encodings: a gzip chat completion recorded through the real proxy from the fake provider
comes back gzip-encoded only when asked; br, zstd and deflate bodies and a gzip SSE stream
(compressed piece by piece at the recorded chunk boundaries) are decoded by the client's
own decoders.  Uploads: a local server answers 413 after the first bytes of a 20 MB upload;
the cassette says the body was cut, with its full length, and the same upload replays as an
exact match under ``--match exact``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import socket
import sys
import threading
import time
import zlib
from contextlib import contextmanager

import brotli
import httpx
import pytest

from spoolproxy.cassettes import load
from spoolproxy.cassettes.model import Interaction, Response

from .test_playback import CHAT, chat_req, client, completion, playback, sse_interaction, write
from .test_proxy_support import recording

if sys.version_info >= (3, 14):  # pragma: no cover
    from compression import zstd
else:
    from backports import zstd

EVENTS = [f'data: {{"n": {i}}}\n\n'.encode() for i in range(5)] + [b"data: [DONE]\n\n"]


def raw(c: httpx.Client, body: bytes) -> tuple[httpx.Headers, bytes]:
    """Headers and the undecoded body bytes of one request."""
    with c.stream("POST", CHAT, content=body, headers={"content-type": "application/json"}) as r:
        return r.headers, b"".join(r.iter_raw())


def test_gzip_recorded_from_the_server_is_served_gzip_only_when_asked(tmp_path, fake_provider):
    path = tmp_path / "gz.yaml"
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "say hi"}]}
    with recording(path, fake=fake_provider) as s, httpx.Client(proxy=s.runner.proxy_url, verify=s.client_ssl()) as c:
        live = c.post(f"{CHAT}", json=body, headers={"accept-encoding": "gzip"})
        assert live.headers["content-encoding"] == "gzip"
    (it,) = load(path).interactions
    assert it.extra["content_encoding"] == "gzip" and it.response.header("content-encoding") is None
    assert json.loads(it.response.body) == live.json()  # stored decoded
    fake_provider.reset()
    for encode in (False, True):
        with playback([str(path)], fake_provider, encode_as_recorded=encode) as (runner, _), client(runner) as c:
            headers, data = raw(c, it.request.body)
        if encode:
            assert headers["content-encoding"] == "gzip" and gzip.decompress(data) == it.response.body
            assert int(headers["content-length"]) == len(data)
        else:
            assert "content-encoding" not in headers and data == it.response.body


@pytest.mark.parametrize("encoding,decode", [
    ("br", brotli.decompress),
    ("zstd", zstd.decompress),
    ("deflate", zlib.decompress),
])
def test_other_encodings_are_served_as_recorded(tmp_path, fake_provider, encoding, decode):
    req = chat_req([{"role": "user", "content": encoding}])
    resp = completion("x" * 500)
    it = Interaction(request=req, response=resp, extra={"content_encoding": encoding})
    path = write(tmp_path, f"{encoding}.yaml", [it, it])
    with playback([path], fake_provider, encode_as_recorded=True) as (runner, _), client(runner) as c:
        headers, data = raw(c, req.body)
        decoded = c.post(CHAT, content=req.body)  # the client's own decoder, where httpx has one
    assert headers["content-encoding"] == encoding and decode(data) == resp.body and len(data) < len(resp.body)
    if encoding in httpx._decoders.SUPPORTED_DECODERS:  # zstd needs the zstandard package
        assert decoded.json()["choices"][0]["message"]["content"] == "x" * 500


def test_a_gzip_stream_keeps_its_chunk_boundaries(tmp_path, fake_provider):
    it = sse_interaction(EVENTS)
    it.extra["content_encoding"] = "gzip"
    path = write(tmp_path, "sse.yaml", [it, sse_interaction(EVENTS)])
    with playback([path], fake_provider, catch_all=True, encode_as_recorded=True) as (runner, _), client(runner) as c:
        with c.stream("POST", CHAT, content=it.request.body, headers={"content-type": "application/json"}) as r:
            assert r.headers["content-encoding"] == "gzip"
            pieces = list(r.iter_raw())
    d = zlib.decompressobj(31)
    got = [d.decompress(p) for p in pieces]
    assert [g for g in got if g] == EVENTS  # each piece decodes to exactly one recorded event
    assert d.flush() == b"" and d.eof


# -- uploads cut by an early response -------------------------------------------------------
@contextmanager
def early_413_server():
    """A plain HTTP server that reads the headers and the first 64 KiB of a request body,
    answers 413 and closes the connection: the rest of the upload never arrives."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            got = len(data.split(b"\r\n\r\n", 1)[1])
            while got < 65536:
                piece = conn.recv(65536)
                if not piece:
                    break
                got += len(piece)
            body = b'{"error": {"message": "request entity too large"}}'
            conn.sendall(b"HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))
            time.sleep(0.2)  # then close with the rest of the upload unread

    def loop() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join()
        srv.close()


def test_an_upload_cut_by_an_early_413_is_marked_and_replays_exactly(tmp_path, fake_provider):
    upload = random.Random(6).randbytes(20_000_000)
    path = tmp_path / "upload.yaml"
    with early_413_server() as port:
        url = f"http://127.0.0.1:{port}/v1/files"
        with recording(path, max_body_size=1024 * 1024) as s, httpx.Client(proxy=s.runner.proxy_url, timeout=30) as c:
            try:
                status = c.post(url, content=upload, headers={"content-type": "application/octet-stream"}).status_code
            except httpx.HTTPError:  # the client may see its upload cut instead of the 413
                status = None
    (it,) = load(path).interactions
    ref = it.extra["request_body"]
    assert it.response.status == 413 and status in (413, None)
    assert ref["truncated"] is True and ref["full_size"] == 20_000_000 and ref["size"] < 20_000_000
    stored = (path.parent / ref["file"]).read_bytes() if ref.get("file") else it.request.body
    assert upload.startswith(stored) and hashlib.sha256(stored).hexdigest() == ref["sha256"]
    with playback([str(path)], fake_provider, match="exact") as (runner, session), \
            httpx.Client(proxy=runner.proxy_url, timeout=30) as c:
        r = c.post(url, content=upload, headers={"content-type": "application/octet-stream"})
        other = c.post(url, content=b"!" + upload[1:], headers={"content-type": "application/octet-stream"})
        report = session.report()
    assert r.status_code == 413 and r.json()["error"]["message"] == "request entity too large"
    assert other.status_code == 400  # an upload that starts differently does not match
    assert [q.outcome for q in report.requests] == ["exact", "miss"]


def test_response_with_no_recorded_encoding_is_served_plain(tmp_path, fake_provider):
    req = chat_req([{"role": "user", "content": "plain"}])
    path = write(tmp_path, "plain.yaml", [Interaction(request=req, response=Response(status=200, body=b"{}"))])
    with playback([path], fake_provider, encode_as_recorded=True) as (runner, _), client(runner) as c:
        headers, data = raw(c, req.body)
    assert "content-encoding" not in headers and data == b"{}"
