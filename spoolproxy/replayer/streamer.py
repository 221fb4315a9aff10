"""The local replay server: writes recorded streams with their chunk boundaries.

An addon that sets ``flow.response`` hands mitmproxy the whole body at once (one write), so
recorded chunk boundaries and timing would be lost.  For streams the playback addon
therefore routes the flow to this server on ``127.0.0.1`` (a loopback socket inside the
proxy process, never an outbound connection) and sets ``flow.response.stream = True``; the
server answers with ``Transfer-Encoding: chunked``, one HTTP chunk per recorded chunk.
mitmproxy reads chunked bodies chunk by chunk (h11's ChunkedReader) and forwards each as one
chunk to the client, so the client sees the recorded boundaries.

Chunks are written as fast as possible, or at their recorded ``offset_ms`` under
``realtime``.  A recording that failed mid-response (``Failure.during == "response"``)
stops after its recorded chunks without the terminating chunk; ``kind == "reset"`` closes
with a TCP RST.  Runs on mitmproxy's event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
import time
from dataclasses import dataclass

from ..cassettes.model import Chunk, Failure
from .encoding import StreamEncoder

#: recorded response headers never replayed: the proxy sets framing itself.  A recorded
#: ``content-encoding`` is dropped by the cassette loader when it decoded the body; one still
#: present means the body is stored encoded (it did not decode), so it is replayed as is.
HOP_HEADERS = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "trailer", "upgrade", "proxy-connection"}
)


@dataclass
class Job:
    """One response to stream: status line, headers (already filtered), body, chunk list;
    ``encoding``: compress each chunk with this Content-Encoding (``--encode-as-recorded``;
    the header is already among ``headers``)."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    chunks: list[Chunk] | None
    error: Failure | None
    realtime: bool
    encoding: str | None = None


def pieces(body: bytes, chunks: list[Chunk] | None) -> list[tuple[float, bytes]]:
    """``(offset_ms, bytes)`` per recorded chunk (one piece at 0 ms when none recorded)."""
    if not chunks:
        return [(0.0, body)] if body else []
    out, pos = [], 0
    for c in chunks:
        out.append((c.offset_ms, body[pos : pos + c.size]))
        pos += c.size
    if pos < len(body):
        out.append((chunks[-1].offset_ms, body[pos:]))
    return out


class LoopbackServer:
    """A server on ``127.0.0.1:port`` (ephemeral) that hands out registered jobs by token:
    :meth:`submit` returns the request path (``path_prefix`` + token) that fetches one;
    subclasses define ``_handle(reader, writer)``."""

    path_prefix = "/_spoolproxy/"

    def __init__(self) -> None:
        self.jobs: dict[str, object] = {}
        self._ids = itertools.count(1)
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)  # type: ignore[attr-defined]
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening (connections already open go on)."""
        if self.server is not None:
            self.server.close()
            self.server = None

    def submit(self, job) -> str:
        """Register a job; returns the request path that fetches it."""
        token = str(next(self._ids))
        self.jobs[token] = job
        return self.path_prefix + token


class ReplayServer(LoopbackServer):
    """Serves :class:`Job` s (recorded responses, chunk by chunk) at ``/_spoolproxy/N``."""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                target = head.split(b" ", 2)[1].decode("latin-1") if head.count(b" ") >= 2 else ""
                job = self.jobs.pop(target.rsplit("/", 1)[-1], None)
                if job is None:
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                    await writer.drain()
                    continue
                if not await self._write(job, writer):
                    return
        finally:
            try:
                writer.close()
            except Exception:  # pragma: no cover
                pass

    async def _write(self, job: Job, writer: asyncio.StreamWriter) -> bool:
        """Write one response; False when the connection must close (a recorded failure)."""
        lines = [f"HTTP/1.1 {job.status} {job.reason or 'OK'}"]
        lines += [f"{k}: {v}" for k, v in job.headers]
        lines.append("transfer-encoding: chunked")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape"))
        await writer.drain()
        t0 = time.monotonic()
        enc = StreamEncoder(job.encoding) if job.encoding else None
        for offset_ms, data in pieces(job.body, job.chunks):
            if job.realtime:
                delay = t0 + offset_ms / 1000 - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            if enc is not None and data:
                data = enc.piece(data)
            if data:
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                await writer.drain()
        if job.error is not None:
            if job.error.kind == "reset":
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        tail = enc.finish() if enc is not None else b""
        if tail:
            writer.write(b"%x\r\n%s\r\n" % (len(tail), tail))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True
