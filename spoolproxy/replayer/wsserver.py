"""The loopback WebSocket server playback routes recorded WebSocket handshakes to.

mitmproxy relays a WebSocket connection only after a real ``101`` from a server it is
connected to; an addon cannot fabricate the upgrade.  So, as for streams (:mod:`.streamer`),
the playback addon rewrites a matched handshake to ``http://127.0.0.1:PORT/_spoolproxy/ws/N``
on this in-process server (a loopback socket, never an outbound connection) with the
client's own ``Sec-WebSocket-Key``: the server answers ``101`` with the matching
``Sec-WebSocket-Accept`` (RFC 6455 4.2.2, computed by wsproto), the recorded response
headers and the recorded sub-protocol when the client offered it; mitmproxy then relays
frames between the client and this server, which plays the recorded session
(:class:`~.websocket.Conversation`): the opening messages, then the recorded answers to
each client message, then the recorded server close.  Replies are sent at once, or with
their recorded delays under ``realtime``.

When a connection ends (or playback stops with it still open), :attr:`WsJob.on_end` gets
the conversation so the playback report can say what really happened.  Runs on
mitmproxy's event loop; wsproto does the framing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Callable

import wsproto
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)

from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from ..cassettes.websocket import WsClose, WsMessage
from .streamer import LoopbackServer
from .websocket import Conversation, Step

logger = logging.getLogger(__name__)

#: recorded 101 headers never replayed: the handshake sets them itself
HANDSHAKE_HEADERS = frozenset({
    "upgrade", "connection", "sec-websocket-accept", "sec-websocket-protocol", "sec-websocket-extensions",
    "content-length", "transfer-encoding", "keep-alive",
})
#: close codes that never appear in a close frame (RFC 6455 7.4.1): the TCP connection just ends
NO_FRAME_CODES = frozenset({1005, 1006, 1015})
#: seconds to wait for the client's close frame after ours
CLOSE_WAIT_S = 2.0
#: seconds :meth:`WsReplayServer.drain` waits for open connections to end
DRAIN_S = 1.0

PATH_PREFIX = "/_spoolproxy/ws/"


@dataclass(eq=False)
class WsJob:
    """One WebSocket handshake to answer: the recorded ``status`` (101) line's headers, the
    :class:`Conversation` to play, ``realtime`` pacing and ``on_end(conversation, closed_by)``
    (``closed_by``: client | server | None when playback stopped first)."""

    headers: list[tuple[str, str]]
    conversation: Conversation
    realtime: bool = False
    on_end: Callable[[Conversation, str | None], None] | None = None
    ended: bool = field(default=False, init=False)

    def end(self, closed_by: str | None) -> None:
        """Report the end once (later calls do nothing)."""
        if self.ended:
            return
        self.ended = True
        if self.on_end is not None:
            try:
                self.on_end(self.conversation, closed_by)
            except Exception as exc:  # pragma: no cover - reporting must not break the proxy
                logger.warning("spoolproxy: WebSocket report failed: %s", exc)


class WsReplayServer(LoopbackServer):
    """Serves :class:`WsJob` s by token on ``127.0.0.1:port`` (ephemeral)."""

    path_prefix = PATH_PREFIX

    def __init__(self) -> None:
        super().__init__()
        self.active: set[WsJob] = set()

    async def stop(self) -> None:
        """Stop listening, then :meth:`drain`."""
        await super().stop()
        await self.drain()

    async def drain(self, timeout: float = DRAIN_S) -> None:
        """Give open connections up to ``timeout`` seconds to end (a client that just exited
        has its close on the way), then report those still open, and jobs never fetched, as
        ended while open.  Called between runs of a shared proxy and at shutdown."""
        end = time.monotonic() + timeout
        while self.active and time.monotonic() < end:
            await asyncio.sleep(0.01)
        for job in [*self.active, *self.jobs.values()]:
            job.end(None)
        self.jobs.clear()

    # -- one connection ----------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)
        job: WsJob | None = None
        closed_by: str | None = None
        try:
            request = await self._read_handshake(ws, reader)
            if request is None:
                return
            token = request.target.rsplit("/", 1)[-1] if request.target.startswith(PATH_PREFIX) else ""
            job = self.jobs.pop(token, None)
            if job is None:
                writer.write(ws.send(RejectConnection(status_code=404, headers=[(b"content-length", b"0")])))
                await writer.drain()
                return
            self.active.add(job)
            writer.write(ws.send(self._accept(job, request)))
            await writer.drain()
            closed_by = await self._converse(job, ws, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, LocalProtocolError, RemoteProtocolError):
            closed_by = "client"
        except Exception as exc:  # never report a session that broke here as served
            logger.warning("spoolproxy: WebSocket replay failed: %s", exc)
            if job is not None:
                job.conversation.fail(f"WebSocket: playback failed while replaying this session "
                                      f"({type(exc).__name__}: {exc}); please report it")
        finally:
            if job is not None:
                self.active.discard(job)
                job.end(closed_by)
            try:
                writer.close()
            except Exception:  # pragma: no cover
                pass

    @staticmethod
    async def _read_handshake(ws, reader) -> Request | None:
        """The client's upgrade request (None when it went away first)."""
        while True:
            data = await reader.read(65536)
            if not data:
                return None
            ws.receive_data(data)
            for ev in ws.events():
                if isinstance(ev, Request):
                    return ev

    @staticmethod
    def _accept(job: WsJob, request: Request) -> AcceptConnection:
        """The 101: the recorded headers, and the recorded sub-protocol when the client offers it
        (wsproto adds ``Sec-WebSocket-Accept`` for the client's key)."""
        recorded = [v for k, v in job.headers if k.lower() == "sec-websocket-protocol"]
        sub = recorded[0] if recorded and recorded[0] in list(request.subprotocols) else None
        extra = [(k.encode("latin-1", "replace"), v.encode("utf-8", "surrogateescape"))
                 for k, v in job.headers if k.lower() not in HANDSHAKE_HEADERS]
        return AcceptConnection(subprotocol=sub, extra_headers=extra)

    async def _converse(self, job: WsJob, ws, reader, writer) -> str | None:
        """Play the conversation until either side closes; returns who closed."""
        queue: asyncio.Queue[tuple[float, Step]] = asyncio.Queue()
        sender = asyncio.ensure_future(self._send_steps(job, ws, writer, queue))
        queue.put_nowait((time.monotonic(), job.conversation.opening()))
        parts: list = []
        read: asyncio.Future | None = None
        try:
            while True:
                if read is None:
                    read = asyncio.ensure_future(reader.read(65536))
                done, _ = await asyncio.wait({read, sender}, return_when=asyncio.FIRST_COMPLETED)
                if read not in done:  # we closed (a miss or the recorded server close)
                    sender.result()  # re-raise a failure to send
                    await self._await_close(ws, reader, read)
                    read = None
                    return "server"
                data = read.result()
                read = None
                ws.receive_data(data or None)
                for ev in ws.events():
                    if isinstance(ev, Message):
                        parts.append(ev.data)
                        if not ev.message_finished:
                            continue
                        is_text = isinstance(ev, TextMessage)
                        payload = "".join(parts).encode("utf-8") if is_text else b"".join(parts)
                        parts = []
                        step = job.conversation.receive(WsMessage(from_client=True, data=payload, is_text=is_text))
                        queue.put_nowait((time.monotonic(), step))
                    elif isinstance(ev, Ping):
                        writer.write(ws.send(ev.response()))
                    elif isinstance(ev, CloseConnection):
                        if ws.state == ConnectionState.REMOTE_CLOSING:
                            writer.write(ws.send(ev.response()))
                            await writer.drain()
                        return "client"
                if not data:
                    return "client"
                await writer.drain()
        finally:
            for fut in (sender, read):
                if fut is not None and not fut.done():
                    fut.cancel()

    async def _send_steps(self, job: WsJob, ws, writer, queue: asyncio.Queue) -> None:
        """Send each step's replies (paced under ``realtime``); return once a step closes."""
        while True:
            t0, step = await queue.get()
            for delay_ms, msg in step.replies:
                if job.realtime:
                    wait = t0 + max(0.0, delay_ms) / 1000 - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                ev = TextMessage(data=msg.data.decode("utf-8", "surrogateescape")) if msg.is_text else BytesMessage(data=msg.data)
                writer.write(ws.send(ev))
                await writer.drain()
            if step.close is not None:
                await self._close(ws, writer, step.close)
                return

    @staticmethod
    async def _close(ws, writer, close: WsClose) -> None:
        if close.code in NO_FRAME_CODES:  # recorded as a dropped connection: drop it
            writer.close()
            return
        writer.write(ws.send(CloseConnection(code=close.code, reason=close.reason or None)))
        await writer.drain()

    @staticmethod
    async def _await_close(ws, reader, pending: asyncio.Future) -> None:
        """After our close frame: wait (briefly) for the client's, as RFC 6455 asks."""
        try:
            async with asyncio.timeout(CLOSE_WAIT_S):
                while ws.state != ConnectionState.CLOSED:
                    data = await pending
                    ws.receive_data(data or None)
                    for _ev in ws.events():
                        pass
                    if not data:
                        return
                    pending = asyncio.ensure_future(reader.read(65536))
        except (TimeoutError, ConnectionError):
            if not pending.done():
                pending.cancel()


def serve_websocket(flow, decision, session, server: WsReplayServer) -> None:
    """Carry out a playback decision that matched a recorded WebSocket handshake: route the
    mitmproxy ``flow`` to ``server`` with a :class:`WsJob` whose end amends the report entry
    (:meth:`~.session.PlaybackSession.amend`).  A request that does not ask for an upgrade,
    or a malformed recording, gets a 400 and counts as a miss."""
    from mitmproxy import http

    from ..cassettes.websocket import session_of

    it = decision.lookup.entry.interaction
    problem = None
    try:
        recorded = session_of(it)
    except ValueError as exc:
        recorded, problem = None, f"the recorded WebSocket session is malformed ({exc}); re-record the cassette"
    if problem is None and flow.request.headers.get("upgrade", "").strip().lower() != "websocket":
        problem = "the recording is a WebSocket handshake (101) but this request does not ask for an upgrade"
    if recorded is None or problem is not None:
        session.serve_failed(decision, problem or "not a WebSocket recording")
        flow.response = http.Response.make(400, f"spoolproxy playback: {problem}\n".encode(),
                                           {"content-type": "text/plain", "x-should-retry": "false", "x-spoolproxy": "miss"})
        return
    conv = Conversation(recorded, session.fingerprinter, session.config.match)
    if not recorded.messages and recorded.close is None:
        session.amend(decision, warnings=["WebSocket: the recording holds the handshake only, no messages "
                                          "(recorded by another tool?); re-record it with spoolproxy record"])

    def on_end(c: Conversation, closed_by: str | None) -> None:
        session.amend(decision, outcome=c.outcome, reasons=c.reasons, differences=c.changes,
                      suggestions=c.suggestions, warnings=c.finish(closed_by))

    headers = [(k, v) for k, vs in it.response.headers.items() for v in vs]
    path = server.submit(WsJob(headers, conv, realtime=session.config.realtime, on_end=on_end))
    r = flow.request
    r.scheme, r.host, r.port, r.path = "http", "127.0.0.1", server.port, path
