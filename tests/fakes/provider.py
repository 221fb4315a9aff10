"""A local fake LLM provider: real sockets, real TLS, the providers' real wire formats.

:class:`FakeProvider` serves, on 127.0.0.1 with ephemeral ports, both HTTPS (with a test
CA generated at run time, see :mod:`tests.fakes.certs`) and plain HTTP:

========================================  ============================================
``POST …/chat/completions``               OpenAI Chat Completions, plain or SSE
``POST …/responses``                      OpenAI Responses, plain or SSE
``POST …/messages``                       Anthropic Messages, plain or SSE
``GET  …/models``                         OpenAI model list (Anthropic's when the request
                                          has ``anthropic-version``)
``POST …/models/M:generateContent``       Gemini, one JSON response
``POST …/models/M:streamGenerateContent`` Gemini, streamed JSON array (SSE with ``alt=sse``)
``POST /api/chat``                        Ollama chat, NDJSON stream (JSON with
                                          ``"stream": false``)
``POST /v2/chat``                         Cohere v2 chat, plain or SSE
``POST …/model/M/converse-stream``        Bedrock ConverseStream (AWS event stream)
``ANY  /echo…``                           JSON echo of the request (a stand-in tool API)
========================================  ============================================

Content is deterministic (see :mod:`tests.fakes.common`).  SSE responses use chunked
transfer encoding, one chunk per SSE event, written and flushed separately, with
``sse_delay_s`` seconds (or the request header ``x-fake-delay-ms``) between events.
JSON responses are gzip-compressed when the client accepts gzip and ``gzip=True``.

Failure knobs, chosen per request by the header ``x-fake-fail: DIRECTIVE``, by a path
prefix ``/_fake/DIRECTIVE/`` (stripped before routing, e.g. ``base_url=".../_fake/429/v1"``)
or for the next requests by :meth:`FakeProvider.fail_next`:

* ``429``: rate-limit error in the provider's shape with ``retry-after`` (header
  ``x-fake-retry-after``, default ``0``).  ``500``: server error in the provider's shape.
  ``status:N``: status N with a provider error body.
* ``502``: an HTML "Bad gateway" page (``text/html``), as a CDN sends.
* ``cut`` / ``cut:K``: a stream (or JSON body) that stops after K SSE events (default:
  half) and the socket closes without the terminal chunk.
* ``reset``: the connection is reset (RST) before any response byte.
* ``huge:N``: a ``200`` ``application/octet-stream`` body of exactly N bytes, written in
  64 KiB pieces; byte ``i`` is ``HUGE_PATTERN[i % len(HUGE_PATTERN)]``.
* ``delay:MS``: MS milliseconds between SSE events (same as ``x-fake-delay-ms``).
* ``tail:MS``: a stream's last event (``data: [DONE]``, ``message_stop``, the closing ``]``)
  is sent at once, but the chunked body's terminating ``0\r\n\r\n`` only MS milliseconds
  later, as servers do that flush the last event before finishing the response (llama.cpp's
  server, proxies): a client that stops reading at the terminal event closes first.
* ``abort``: a stream sends every event, then the connection closes without the
  terminating chunk (an upstream failure after the terminal event).

Every request is logged (:attr:`FakeProvider.log`, in arrival order) and every accepted
TCP connection counted (:attr:`FakeProvider.connections`), so playback tests can assert
that no connection was opened.
"""

from __future__ import annotations

import gzip as gzip_module
import socket
import ssl
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .certs import TestCA, shared_ca
from .routes import (  # noqa: F401  (Reply, json_reply, sse_reply, LoggedRequest are re-exported)
    BUILTIN_ROUTES,
    LoggedRequest,
    Reply,
    Route,
    error_reply,
    json_reply,
    route_echo,
    sse_reply,
)

#: The repeating content of ``huge:N`` bodies.
HUGE_PATTERN = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-\n"

BAD_GATEWAY_HTML = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n"
    b"</body>\r\n</html>\r\n"
)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, provider: "FakeProvider", scheme: str, context: ssl.SSLContext | None) -> None:
        self.provider = provider
        self.scheme = scheme
        self.context = context
        super().__init__(("127.0.0.1", 0), _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = self.socket.accept()
        # flush every write at once (as real API front ends do): without this, Nagle's
        # algorithm holds small SSE events back until the client's delayed ACK (~40 ms)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.provider._accepted(sock)
        if self.context is not None:
            sock = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            try:
                request.settimeout(10)
                request.do_handshake()
                request.settimeout(None)
            except (OSError, ssl.SSLError):
                return  # client gave up or distrusts the CA: nothing to serve
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # broken pipes from clients that hang up are expected in tests


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-provider"
    sys_version = ""
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        provider = self.server.provider
        body = self._read_body()
        path = self.path
        if path.startswith(("http://", "https://")):  # absolute-form (a proxy talking to us)
            parts = urlsplit(path)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
        directives = []
        while path.startswith("/_fake/"):
            directive, _, rest = path[len("/_fake/"):].partition("/")
            directives.append(directive)
            path = "/" + rest
        if self.headers.get("x-fake-fail"):
            directives.append(self.headers["x-fake-fail"])
        queued = provider._pop_failure()
        if queued:
            directives.append(queued)
        req = LoggedRequest(self.command, path, list(self.headers.items()), body,
                            self.server.scheme, id(self.connection))
        provider._log(req)

        delay = provider.sse_delay_s
        if self.headers.get("x-fake-delay-ms"):
            delay = float(self.headers["x-fake-delay-ms"]) / 1000
        cut: int | None = None
        tail = 0.0
        reply: Reply | None = None
        for directive in directives:
            name, _, arg = directive.partition(":")
            if name == "delay":
                delay = float(arg) / 1000
            elif name == "cut":
                cut = int(arg) if arg else -1
            elif name == "tail":
                tail = float(arg) / 1000
            elif name == "abort":
                cut = -2
            elif name == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()
                return
            elif name == "huge":
                self._send_huge(req, int(arg))
                return
            elif name == "429":
                retry = self.headers.get("x-fake-retry-after", "0")
                reply = error_reply(req, 429, "Rate limit reached (fake provider).", [("retry-after", retry)])
            elif name == "500":
                reply = error_reply(req, 500, "The server had an error while processing your request (fake provider).")
            elif name == "502":
                reply = Reply(502, [("content-type", "text/html")], BAD_GATEWAY_HTML)
            elif name == "status":
                reply = error_reply(req, int(arg), f"fake provider status {arg}")
        if reply is None:
            reply = provider._route(req)
        self._send(req, reply, delay, cut, tail)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

    def _write(self, req: LoggedRequest, data: bytes, size: int) -> None:
        self.wfile.write(data)
        self.wfile.flush()
        req.sent.append((time.monotonic(), size))

    def _start(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()

    def _cut(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send(self, req: LoggedRequest, reply: Reply, delay: float, cut: int | None, tail: float = 0.0) -> None:
        if isinstance(reply.body, list):
            events = reply.body
            stop = len(events) if cut in (None, -2) else (len(events) // 2 if cut < 0 else cut)
            req.status, req.response_body = reply.status, b"".join(events[:stop])
            self._start(reply.status, reply.headers + [("transfer-encoding", "chunked")])
            for i, event in enumerate(events[:stop]):
                if i and delay:
                    time.sleep(delay)
                self._write(req, b"%x\r\n%s\r\n" % (len(event), event), len(event))
            if cut is not None:
                self._cut()
                return
            if tail:
                time.sleep(tail)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        body = reply.body
        req.status, req.response_body = reply.status, body if cut is None else body[: len(body) // 2]
        headers = list(reply.headers)
        accepts_gzip = "gzip" in (req.header("accept-encoding") or "")
        if self.server.provider.gzip and accepts_gzip and len(body) > 0 and cut is None:
            body = gzip_module.compress(body, mtime=0)
            headers.append(("content-encoding", "gzip"))
        headers.append(("content-length", str(len(body))))
        self._start(reply.status, headers)
        if cut is not None:
            self._write(req, body[: len(body) // 2], len(body) // 2)
            self._cut()
            return
        self._write(req, body, len(body))

    def _send_huge(self, req: LoggedRequest, n: int) -> None:
        req.status = 200
        self._start(200, [("content-type", "application/octet-stream"), ("content-length", str(n))])
        block = HUGE_PATTERN * (65536 // len(HUGE_PATTERN))
        sent = 0
        while sent < n:
            piece = block[: min(len(block), n - sent)]
            self._write(req, piece, len(piece))
            sent += len(piece)


def huge_body(n: int) -> bytes:
    """The exact body a ``huge:N`` directive sends (for comparisons in tests)."""
    reps = n // len(HUGE_PATTERN) + 1
    return (HUGE_PATTERN * reps)[:n]


class FakeProvider:
    """A running fake provider (HTTPS and HTTP listeners on 127.0.0.1, ephemeral ports).

    Attributes: ``port`` / ``url`` (HTTPS, e.g. ``https://127.0.0.1:PORT``), ``http_port``
    / ``http_url`` (plain HTTP), ``ca_pem_path`` (the test CA to trust), ``log`` (list of
    :class:`LoggedRequest` in arrival order), ``connections`` (TCP connections accepted on
    either listener), ``sse_delay_s`` (seconds between SSE events; default 0) and
    ``gzip`` (gzip JSON replies for clients that accept it; default True).

    Use as a context manager or call :meth:`stop`.  Raises OSError when it cannot bind.
    """

    def __init__(self, *, sse_delay_s: float = 0.0, gzip: bool = True, ca: TestCA | None = None) -> None:
        self.ca = ca or shared_ca()
        self.ca_pem_path: Path = self.ca.ca_pem_path
        self.sse_delay_s = sse_delay_s
        self.gzip = gzip
        self.log: list[LoggedRequest] = []
        self._lock = threading.Lock()
        self._connections = 0
        self._sockets: list[socket.socket] = []
        self._failures: list[str] = []
        self.routes: list[tuple[str, str, Route]] = list(BUILTIN_ROUTES)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.ca.cert_pem_path, self.ca.key_pem_path)
        context.set_alpn_protocols(["http/1.1"])
        self._https = _Server(self, "https", context)
        self._http = _Server(self, "http", None)
        self.port: int = self._https.server_address[1]
        self.http_port: int = self._http.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.http_url = f"http://127.0.0.1:{self.http_port}"
        self._threads = [
            threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05},
                             name=f"fake-provider-{s.scheme}", daemon=True)
            for s in (self._https, self._http)
        ]
        for t in self._threads:
            t.start()

    def ssl_context(self) -> ssl.SSLContext:
        """A client-side SSL context trusting the test CA (for ``verify=`` of httpx, the
        SDKs' ``DefaultHttpxClient``, aiohttp's ``ssl=``)."""
        return ssl.create_default_context(cafile=str(self.ca_pem_path))

    # -- configuration ---------------------------------------------------------

    def add_route(self, method: str, path_suffix: str, route: Route) -> None:
        """Serve ``method`` requests whose path (without query) ends with *path_suffix*
        with *route*; added routes take precedence over the built-in ones."""
        self.routes.insert(0, (method.upper(), path_suffix, route))

    def fail_next(self, directive: str, times: int = 1) -> None:
        """Apply a failure *directive* (``"429"``, ``"500"``, ``"502"``, ``"cut"``,
        ``"reset"``, ``"huge:N"``, ...) to the next *times* requests."""
        with self._lock:
            self._failures.extend([directive] * times)

    # -- observation -----------------------------------------------------------

    @property
    def connections(self) -> int:
        """TCP connections accepted so far on both listeners."""
        with self._lock:
            return self._connections

    def requests_to(self, path_suffix: str) -> list[LoggedRequest]:
        """Logged requests whose path (without query) ends with *path_suffix*."""
        return [r for r in list(self.log) if r.path.split("?")[0].endswith(path_suffix)]

    def reset(self) -> None:
        """Clear the request log, the connection counter and queued failures."""
        with self._lock:
            self.log.clear()
            self._connections = 0
            self._failures.clear()

    # -- lifecycle -------------------------------------------------------------

    def stop(self) -> None:
        """Stop both listeners and close open client connections (idempotent)."""
        for server in (self._https, self._http):
            server.shutdown()
            server.server_close()
        with self._lock:
            socks, self._sockets = self._sockets, []
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self._threads:
            t.join(timeout=5)
        self._https.shutdown = self._http.shutdown = lambda: None  # type: ignore[method-assign]

    def __enter__(self) -> "FakeProvider":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals used by the handler ------------------------------------------

    def _accepted(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections += 1
            self._sockets.append(sock)

    def _log(self, req: LoggedRequest) -> None:
        with self._lock:
            self.log.append(req)

    def _pop_failure(self) -> str | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    def _route(self, req: LoggedRequest) -> Reply:
        bare = req.path.split("?")[0]
        if bare.startswith("/echo"):
            return route_echo(req)
        for method, suffix, route in self.routes:
            if req.method == method and bare.endswith(suffix):
                return route(req)
        return error_reply(req, 404, f"Unknown request URL: {req.method} {bare} (fake provider).")
