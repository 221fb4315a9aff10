"""The playback addon: answers every request from cassettes, so mitmproxy never connects upstream.

In mitmproxy's ``request`` hook the addon asks its :class:`~.session.PlaybackSession` what
to do and then

* **serve**: sets ``flow.response`` to the recorded response (the decoded body, with a
  correct ``content-length``; the recorded ``content-length``/``transfer-encoding`` are
  dropped, and ``content-encoding`` is gone because the cassette loader decoded the body,
  unless the body would not decode and is kept encoded with its header; under
  ``encode_as_recorded`` the body is compressed again with its recorded encoding).  A stream with several recorded chunks, any stream
  under ``realtime``, or a response whose recording failed mid-body is instead routed to the
  in-process :class:`~.streamer.ReplayServer` on 127.0.0.1 and streamed through
  (``flow.response.stream = True``) so the client sees the recorded chunk boundaries;
* **serve a WebSocket session** (a recorded ``101`` handshake): routed to the in-process
  :class:`~.wsserver.WsReplayServer`, which completes the handshake and replays the recorded
  messages in answer to the client's (:mod:`.websocket`); the report entry is amended when the
  connection ends, so a session the client could not use is never reported as served;
* **kill**: the recording holds a transport failure and no response: ``flow.kill()``
  closes the client connection;
* **miss**: a 400 ``x-should-retry: false`` error in the provider's shape (:mod:`.miss`);
* **live**: leaves the flow alone so mitmproxy sends it upstream (``--live`` hosts,
  ``new_episodes`` misses); a recording addon later in the chain records it.

The ``request`` hook never blocks the event loop on a big body or on an explanation: a
body over :data:`INLINE_BODY_MAX` is normalised and looked up on a worker thread, a
divergence is explained in the background, and a miss waits for its explanation at most
:data:`~.explain.MISS_WAIT_S`, so other requests keep being served meanwhile.

Requests to ``spoolproxy.control`` are the control endpoint (:mod:`.control`), also handled
on a worker thread (loading cassettes and closing a report take time).  The addon
sets mitmproxy's ``connection_strategy=lazy`` and ``upstream_cert=false`` when running, so
neither the client's CONNECT nor its TLS handshake opens an upstream connection.

Used in-process with a ready session (``Playback(session)``), or by mitmproxy's own tools
through a two-line script (``from spoolproxy.replayer.addon import Playback; addons =
[Playback()]``) and the ``spoolproxy_*`` options declared in :meth:`Playback.load`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..cassettes.model import Request
from ..cassettes.storage import read_body
from ..errors import SpoolError
from .control import CONTROL_HOST
from .encoding import encode, recorded_encoding
from .explain import MISS_WAIT_S
from .fingerprint import MatchOptions
from .miss import miss_response
from .session import Decision, PlaybackConfig, PlaybackSession
from .streamer import HOP_HEADERS, Job, ReplayServer
from .wsserver import WsReplayServer, serve_websocket

if TYPE_CHECKING:
    from mitmproxy import http

logger = logging.getLogger(__name__)

#: flow.metadata key: the playback decision (serve | kill | miss | live | control)
META = "spoolproxy.playback"
#: request bodies above this many bytes are normalised on a worker thread, off the event loop
INLINE_BODY_MAX = 256 * 1024
#: flow.metadata key: ``(cassette name, interaction index)`` a served (or killed) flow got
SERVED = META + ".served"


def flow_request(flow: http.HTTPFlow) -> Request:
    """The live request as a cassette :class:`Request` (absolute URL, decoded body)."""
    r = flow.request
    headers: dict[str, list[str]] = {}
    for k, v in r.headers.fields:
        headers.setdefault(k.decode("latin-1"), []).append(v.decode("utf-8", "surrogateescape"))
    body = r.get_content(strict=False) or b""
    return Request(method=r.method.upper(), uri=r.url, headers=headers, body=body)


class Playback:
    """mitmproxy addon serving cassettes (see the module docstring).

    ``session``: a ready :class:`PlaybackSession` (else one is built from the
    ``spoolproxy_*`` options when ``spoolproxy_cassettes`` is set).
    """

    def __init__(self, session: PlaybackSession | None = None) -> None:
        self.session = session
        self._from_options = session is None
        self.streamer = ReplayServer()
        self.websockets = WsReplayServer()

    # -- mitmproxy hooks ------------------------------------------------------------------
    def load(self, loader) -> None:
        loader.add_option("spoolproxy_cassettes", Sequence[str], [], "Cassette files or directories to serve.")
        loader.add_option(
            "spoolproxy_match", str, "default",
            "default: exact match, else the next unused interaction with the same method and URL "
            "(reported as a divergence); exact: body and query must match.",
            choices=["default", "exact"],
        )
        loader.add_option("spoolproxy_allow_repeats", bool, False, "Serve an interaction again once its queue is empty.")
        loader.add_option("spoolproxy_ignore_json_path", Sequence[str], [], "JSON paths ignored in request bodies ($.a.b, $.a[*].c).")
        loader.add_option("spoolproxy_normalize", Sequence[str], [], "Regexes replaced by a placeholder on both sides before matching.")
        loader.add_option("spoolproxy_match_header", Sequence[str], [], "Request headers that must match.")
        loader.add_option("spoolproxy_realtime", bool, False, "Replay streams with their recorded chunk timing.")
        loader.add_option(
            "spoolproxy_record_mode", str, "none", "vcrpy record mode.",
            choices=["none", "once", "new_episodes", "all"],
        )
        loader.add_option("spoolproxy_live", Sequence[str], [], "Host globs sent upstream live.")
        loader.add_option("spoolproxy_encode_as_recorded", bool, False,
                          "Serve bodies with their recorded Content-Encoding (gzip, deflate, br, zstd).")
        loader.add_option("spoolproxy_sdk_rules", bool, True,
                          "Apply the built-in volatile-field rules for popular SDKs (see docs/playback.md).")
        loader.add_option("spoolproxy_disable_rule", Sequence[str], [], "Built-in SDK rules to turn off, by name.")
        loader.add_option("spoolproxy_diff_dir", str, "",
                          "Write each divergence's and miss's complete detail (both bodies, every difference) here.")

    def configure(self, updated: set[str]) -> None:
        if not self._from_options or not any(u.startswith("spoolproxy_") for u in updated):
            return
        from mitmproxy import ctx  # mitmproxy is imported once the proxy runs, not with this module

        o = ctx.options
        if not o.spoolproxy_cassettes and o.spoolproxy_record_mode != "all":
            return
        self.session = PlaybackSession(
            PlaybackConfig(
                cassettes=list(o.spoolproxy_cassettes),
                match=o.spoolproxy_match,
                allow_repeats=o.spoolproxy_allow_repeats,
                options=MatchOptions(
                    ignore_json_paths=tuple(o.spoolproxy_ignore_json_path),
                    normalize=tuple(o.spoolproxy_normalize),
                    match_headers=tuple(o.spoolproxy_match_header),
                    sdk_rules=o.spoolproxy_sdk_rules,
                    disabled_rules=tuple(o.spoolproxy_disable_rule),
                ),
                realtime=o.spoolproxy_realtime,
                record_mode=o.spoolproxy_record_mode,
                live=tuple(o.spoolproxy_live),
                diff_dir=o.spoolproxy_diff_dir or None,
                encode_as_recorded=o.spoolproxy_encode_as_recorded,
            )
        )

    async def running(self) -> None:
        from mitmproxy import ctx

        ctx.options.update(connection_strategy="lazy", upstream_cert=False)
        await self.streamer.start()
        await self.websockets.start()

    async def done(self) -> None:
        await self.streamer.stop()
        await self.websockets.stop()

    async def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.error is not None:
            return
        if flow.request.pretty_host == CONTROL_HOST:
            flow.metadata[META] = "control"
            status, doc = await asyncio.to_thread(self._control_answer, flow.request.method,
                                                  flow.request.path, flow.request.get_content(strict=False))
            self._respond(flow, status, {"content-type": "application/json"}, json.dumps(doc).encode())
            return
        if self.session is None:
            self._respond(flow, 400, {"content-type": "text/plain"}, b"spoolproxy playback: no cassette loaded\n")
            flow.metadata[META] = "miss"
            return
        req = flow_request(flow)
        if len(req.body) > INLINE_BODY_MAX:  # normalising megabytes takes milliseconds: not on the event loop
            decision = await asyncio.to_thread(self.session.decide, req)
        else:
            decision = self.session.decide(req)
        await self.carry_out(flow, decision)

    async def carry_out(self, flow: http.HTTPFlow, decision: Decision) -> None:
        """Do what ``decision`` (from the session) says with ``flow``: serve, kill, answer a
        miss (waiting at most :data:`~.explain.MISS_WAIT_S` for its explanation) or leave it
        to go upstream.  Callers that decide themselves (the fork addon) call this directly."""
        flow.metadata[META] = decision.action
        if decision.action in ("serve", "kill") and decision.lookup is not None and decision.lookup.entry is not None:
            entry = decision.lookup.entry  # which recorded interaction this request got (live merges need it)
            flow.metadata[SERVED] = (entry.name, entry.index)
        if decision.action == "serve":
            self._serve(flow, decision)
        elif decision.action == "kill":
            flow.kill()
        elif decision.action == "miss":
            lookup = decision.lookup
            if decision.explained is not None and lookup is not None and not lookup.explained.is_set():
                try:  # the explanation names the nearest request; wait for it a little, never longer
                    await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(decision.explained)), MISS_WAIT_S)
                except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - the miss is answered either way
                    pass
            status, headers, body = miss_response(lookup)  # type: ignore[arg-type]
            self._respond(flow, status, headers, body)
        self._close_after(flow)

    def _close_after(self, flow: http.HTTPFlow) -> None:
        """Under ``close_connections``: an HTTP/1 client connection closes after this
        response, so no pooled connection outlives the test (and event loop) that opened it."""
        s = self.session
        if s is not None and s.config.close_connections and flow.response is not None \
                and flow.request.http_version.startswith("HTTP/1"):
            flow.response.headers["connection"] = "close"

    def server_connect(self, data) -> None:
        """Keep connections to the replay server on loopback even under a catch-all
        ``--connect-to ::HOST:PORT`` rule (which the connect-to addon applied just before)."""
        server = data.server
        mine = {("127.0.0.1", self.streamer.port), ("127.0.0.1", self.websockets.port)}
        if server.address is None or tuple(server.address[:2]) in mine:
            return
        from mitmproxy import ctx

        redirect = ctx.master.addons.get("connectto")
        original = getattr(redirect, "_original", {}).get(server.id) if redirect is not None else None
        if original is not None and tuple(original[:2]) in mine:
            server.address = tuple(original[:2])

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if flow.metadata.get(META + ".stream") and flow.response is not None:
            flow.response.stream = True
            self._close_after(flow)

    # -- helpers ------------------------------------------------------------------------
    @staticmethod
    def _respond(flow: http.HTTPFlow, status: int, headers: dict[str, str], body: bytes) -> None:
        from mitmproxy.http import Response

        flow.response = Response.make(status, body, headers)

    def _serve(self, flow: http.HTTPFlow, decision: Decision) -> None:
        entry = decision.lookup.entry  # type: ignore[union-attr]
        it = entry.interaction
        resp = it.response
        assert resp is not None
        if resp.status == 101:
            serve_websocket(flow, decision, self.session, self.websockets)  # type: ignore[arg-type]
            return
        try:
            body = read_body(entry.cassette, resp)
        except SpoolError as exc:
            self.session.serve_failed(decision, str(exc))  # type: ignore[union-attr]
            self._respond(flow, 400, {"content-type": "text/plain", "x-should-retry": "false", "x-spoolproxy": "miss"},
                          f"spoolproxy playback: {exc}\n".encode())
            return
        headers = [(k, v) for k, vs in resp.headers.items() if k.lower() not in HOP_HEADERS for v in vs]
        encoding = None
        if self.session.config.encode_as_recorded and not any(k.lower() == "content-encoding" for k, _ in headers):  # type: ignore[union-attr]
            encoding = recorded_encoding(it.extra)
            if encoding is not None:
                headers.append(("content-encoding", encoding))
        if resp.body_ref is not None and not resp.body_ref.file:  # recorded with --large-bodies elide
            headers.append(("x-spoolproxy-elided", f"{resp.body_ref.size} bytes not stored; the body is empty"))
        realtime = self.session.config.realtime  # type: ignore[union-attr]
        cut = it.error is not None and it.error.during == "response"
        chunks = resp.chunks
        streamed = cut or (chunks is not None and (len(chunks) > 1 or (realtime and chunks[0].offset_ms > 0)))
        if not streamed or flow.request.method == "HEAD" or resp.status in (204, 304) or resp.status < 200:
            from mitmproxy.http import Response

            r = Response.make(resp.status, b"", [(k.encode("latin-1", "replace"), v.encode("utf-8", "surrogateescape")) for k, v in headers])
            if resp.reason:
                r.reason = resp.reason
            if encoding is not None and body:
                body = encode(body, encoding)
            if flow.request.method != "HEAD":
                r.raw_content = body  # as stored (or encoded as recorded): mitmproxy never re-encodes it
            r.headers["content-length"] = str(len(body))
            flow.response = r
            return
        path = self.streamer.submit(
            Job(resp.status, resp.reason, headers, body, chunks, it.error if cut else None, realtime, encoding)
        )
        flow.metadata[META + ".stream"] = True
        req = flow.request
        req.scheme, req.host, req.port = "http", "127.0.0.1", self.streamer.port
        req.method, req.path = "GET", path
        for h in ("transfer-encoding", "content-encoding", "expect"):
            req.headers.pop(h, None)
        req.content = b""

    def _control_answer(self, method: str, path: str, content: bytes | None) -> tuple[int, dict]:
        """``(status, JSON document)`` for a control-endpoint request (runs on a worker thread)."""
        path = path.split("?", 1)[0].rstrip("/")
        try:
            if path == "/cassettes" and method == "POST":
                data = json.loads(content or b"{}")
                paths = data.get("cassettes") if isinstance(data, dict) else None
                if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
                    raise SpoolError('send {"cassettes": ["path.yaml", ...]}')
                if self.session is None:
                    self.session = PlaybackSession(PlaybackConfig(cassettes=paths))
                    closed = None
                else:
                    closed = self.session.switch(paths)
                return 200, {"ok": True, "interactions": len(self.session.index),
                             "previous": closed.model_dump(mode="json") if closed else None}
            if path == "/checkpoint" and method == "POST":  # close the segment, keep the cassettes
                closed = self.session.checkpoint() if self.session else None
                return 200, {"ok": True, "previous": closed.model_dump(mode="json") if closed else None}
            if path == "/report" and method == "GET":  # the current segment (switch answers the previous)
                return 200, self.session.segment_report().model_dump(mode="json") if self.session else {}
            if path in ("", "/status") and method == "GET":
                s = self.session
                return 200, {"cassettes": s.cassette_paths if s else [], "interactions": len(s.index) if s else 0,
                             "unused": len(s.index.unused()) if s else 0}
            return 404, {"ok": False, "error": f"unknown control request {method} {path or '/'}; see docs/playback.md"}
        except (SpoolError, ValueError) as exc:
            return 400, {"ok": False, "error": str(exc)}
