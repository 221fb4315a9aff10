"""The recording gateway addon (``spoolproxy serve``): many agent sessions, one cassette each.

:class:`Gateway` is one mitmproxy addon that routes every flow to the session it belongs to
(:mod:`.sessions` decides which) and hands the flow's hooks to that session's own
:class:`~.recorder.Recorder`, so a session is recorded exactly as ``spoolproxy record``
records a run: the same conversion, redaction, streaming, side bodies and journal.  Each
session's journal and cassette live in a local spool; when the session ends (idle, its
connection closed, the control request, the gateway stopping) its cassette is written with
the session's tags and handed to a :class:`~spoolproxy.store.publish.Publisher`, which
uploads it to the store on a background thread.

Life of a session: *open* (requests arrive) -> *ending* (no new requests join it; requests
in flight get up to :data:`END_GRACE_S` to complete, then are journalled as cut) ->
*publishing* (cassette written, uploaded) -> a :class:`Published` record.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..cassettes.model import CassetteMeta
from ..cassettes.redact import Redactor
from ..errors import SpoolError
from ..store.publish import Publisher
from ..triage.tags import TAGS_KEY
from .bodysink import DEFAULT_LIMIT
from .recorder import Recorder
from .sessions import (
    CONTROL_HELP, CONTROL_HOST, SESSION_HEADER, TAGS_HEADER, SessionState, connection_session_id, control_request,
    idle_sessions, parse_tags_header, session_id, store_key,
)

logger = logging.getLogger(__name__)

#: seconds an ending session waits for its requests in flight before they are cut
END_GRACE_S = 30.0
#: the ``meta.extra`` key holding the gateway's facts about a session
GATEWAY_KEY = "gateway"


@dataclass
class Published:
    """The outcome of one session: ``session`` id, the cassette's ``url`` in the store (None
    when it could not be published), ``interactions``, why it ``ended`` (``idle``, ``end``,
    ``disconnected``, ``shutdown``), and on failure the ``error`` line and the local file
    ``kept`` in the spool (published at the next start)."""

    session: str
    url: str | None
    interactions: int
    ended: str
    error: str | None = None
    kept: Path | None = None


@dataclass
class _Session:
    key: str  # "h:<id>" for a session header, "c:<client connection id>" otherwise
    id: str
    recorder: Recorder
    last: float
    flows: dict = field(default_factory=dict)  # flow id -> flow, requests in flight
    tags: dict[str, str] = field(default_factory=dict)
    bad_tags: list[str] = field(default_factory=list)
    reason: str | None = None
    submitted: bool = False
    task: asyncio.Task | None = None

    def in_flight(self) -> int:
        for fid in [fid for fid, f in self.flows.items() if not f.live]:
            del self.flows[fid]  # ended without a hook we saw (killed): not in flight
        return len(self.flows)


class Gateway:
    """mitmproxy addon recording each agent session into its own cassette.

    ``publisher``: where cassettes go (its spool holds journals and cassettes until they are
    uploaded).  ``redactor``: applied on every write path, as in ``record``.  ``tags``: run
    tags for every session (a session's ``x-spoolproxy-tags`` win).  ``idle_s``: seconds
    without activity after which a session ends.  ``max_body_size``/``large_bodies``/
    ``upstream_errors``: as for :class:`~.recorder.Recorder`.  ``on_published`` is called
    (on a publishing thread) with each :class:`Published`; ``on_warning`` with one-line
    warnings (malformed tag headers, a session that could not be recorded).
    """

    def __init__(
        self,
        publisher: Publisher,
        *,
        redactor: Redactor | None = None,
        tags: dict[str, str] | None = None,
        idle_s: float = 300.0,
        max_body_size: int = DEFAULT_LIMIT,
        large_bodies: str = "spill",
        upstream_errors: str = "close",
        recorder_name: str = "spoolproxy serve",
        on_published: Callable[[Published], None] | None = None,
        on_warning: Callable[[str], None] | None = None,
        publish_threads: int = 4,
    ) -> None:
        self.publisher = publisher
        self.redactor = redactor or Redactor()
        self.tags = {k: self.redactor.text(v) for k, v in (tags or {}).items()}
        self.idle_s = float(idle_s)
        self.max_body_size = max_body_size
        self.large_bodies = large_bodies
        self.upstream_errors = upstream_errors
        self.recorder_name = recorder_name
        self.on_published = on_published
        self.on_warning = on_warning or (lambda line: logger.warning("%s", line))
        self.published: list[Published] = []
        self._open: dict[str, _Session] = {}
        self._by_flow: dict[str, _Session] = {}
        self._ending: list[_Session] = []
        self._futures: list[Future] = []
        self._pool = ThreadPoolExecutor(publish_threads, thread_name_prefix="spoolproxy-publish")
        self._reaper: asyncio.Task | None = None
        self._closed = False

    # -- sessions ------------------------------------------------------------------------
    def open_sessions(self) -> list[dict]:
        """The open sessions: ``{"session", "interactions", "in_flight", "idle_s", "tags"}``."""
        now = time.monotonic()
        return [{"session": s.id, "interactions": s.recorder.count, "in_flight": s.in_flight(),
                 "idle_s": round(now - s.last, 3), "tags": {**self.tags, **s.tags}} for s in self._open.values()]

    def _start(self, key: str, sid: str | None, tags: dict[str, str]) -> _Session | None:
        started = datetime.now(timezone.utc)
        sid = sid or connection_session_id(started)
        local_key = self.publisher.free_key(store_key(sid, started))
        meta = CassetteMeta(recorder=self.recorder_name, recorded_at=started.replace(microsecond=0), record_mode="all",
                            extra={GATEWAY_KEY: {"session": sid}})
        if self.tags or tags:
            meta.extra[TAGS_KEY] = {**self.tags, **tags}
        rec = Recorder(self.publisher.local(local_key), meta=meta, redactor=self.redactor.fork(),  # one per run
                       max_body_size=self.max_body_size, large_bodies=self.large_bodies,
                       upstream_errors=self.upstream_errors)
        try:
            rec.open()
        except SpoolError as exc:
            self.on_warning(f"session {sid} is not recorded: {exc}")
            return None
        sess = _Session(key=key, id=sid, recorder=rec, last=time.monotonic())
        self._open[key] = sess
        return sess

    def _session_of(self, flow) -> _Session | None:
        """The session of a new request (started when needed); its session and tag headers
        are removed here, before anything goes upstream."""
        headers = flow.request.headers
        sids, tag_values = headers.get_all(SESSION_HEADER), headers.get_all(TAGS_HEADER)
        if sids:
            del headers[SESSION_HEADER]
        if tag_values:
            del headers[TAGS_HEADER]
        tags, bad = parse_tags_header(self.redactor.text(v) for v in tag_values)
        raw = next((s for s in sids if s.strip()), None)
        sid = session_id(self.redactor.text(raw)) if raw is not None else None
        key = f"h:{sid}" if sid is not None else f"c:{flow.client_conn.id}"
        sess = self._open.get(key) or self._start(key, sid, tags)
        if sess is None:
            return None
        sess.tags.update(tags)
        new_bad = [b for b in bad if b not in sess.bad_tags]
        if new_bad:
            sess.bad_tags += new_bad
            self.on_warning(f"session {sess.id}: ignored malformed {TAGS_HEADER} pair(s) {', '.join(new_bad)} "
                            "(expected KEY=VALUE,KEY=VALUE)")
        return sess

    def _schedule_end(self, sess: _Session, reason: str) -> asyncio.Task:
        if sess.task is None:
            sess.reason = reason
            self._open.pop(sess.key, None)
            self._ending.append(sess)
            sess.task = asyncio.get_running_loop().create_task(self._end(sess))
        return sess.task

    async def _end(self, sess: _Session) -> Published:
        deadline = time.monotonic() + END_GRACE_S
        while sess.in_flight() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await sess.recorder.done()  # what is still in flight: journalled as cut
        return await asyncio.wrap_future(self._submit(sess))

    def _submit(self, sess: _Session) -> Future:
        sess.submitted = True
        if sess in self._ending:
            self._ending.remove(sess)
        fut = self._pool.submit(self._finish, sess)
        self._futures.append(fut)
        return fut

    def _finish(self, sess: _Session) -> Published:
        """Write the session's cassette (tags, how it ended) and publish it (a publishing thread)."""
        reason = sess.reason or "shutdown"
        rec = sess.recorder
        try:
            cas = rec.finish(extra=self._facts(sess, reason))
        except Exception as exc:  # noqa: BLE001 - the journal stays for 'spoolproxy recover'
            out = Published(sess.id, None, rec.count, reason, error=str(exc).splitlines()[0] if str(exc) else
                            type(exc).__name__, kept=rec.journal.path if rec.journal else None)
        else:
            try:
                out = Published(sess.id, self.publisher.publish(rec.path), len(cas), reason)
            except Exception as exc:  # noqa: BLE001 - kept in the spool, published at the next start
                out = Published(sess.id, None, len(cas), reason, error=str(exc).splitlines()[0], kept=rec.path)
        self.published.append(out)
        if self.on_published is not None:
            try:
                self.on_published(out)
            except Exception as exc:  # noqa: BLE001 - printing must never cost a cassette
                logger.warning("spoolproxy: on_published failed: %s", exc)
        return out

    def _facts(self, sess: _Session, reason: str) -> dict:
        """The run-level facts the session's cassette gets in ``meta.extra`` (redacted by the
        recorder): its tags (the gateway's, then the session's) and how it ended."""
        facts: dict = {GATEWAY_KEY: {"session": sess.id, "ended": reason}}
        if sess.bad_tags:
            facts[GATEWAY_KEY]["malformed_tags"] = list(sess.bad_tags)
        tags = {**self.tags, **sess.tags}
        if tags:
            facts[TAGS_KEY] = tags
        return facts

    # -- mitmproxy hooks -----------------------------------------------------------------
    def running(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        tick = max(0.05, min(1.0, self.idle_s / 4))
        while True:
            await asyncio.sleep(tick)
            states = [SessionState(k, s.in_flight(), s.last) for k, s in self._open.items()]
            for key in idle_sessions(states, time.monotonic(), self.idle_s):
                self._schedule_end(self._open[key], "idle")

    def requestheaders(self, flow) -> None:
        if self._closed or flow.request.pretty_host == CONTROL_HOST:
            return
        sess = self._session_of(flow)
        if sess is None:
            return
        sess.flows[flow.id] = flow
        sess.last = time.monotonic()
        self._by_flow[flow.id] = sess
        sess.recorder.requestheaders(flow)

    async def request(self, flow) -> None:
        if flow.request.pretty_host == CONTROL_HOST:  # answered here, never recorded or forwarded
            await self._control(flow)
            return
        sess = self._by_flow.get(flow.id)
        if sess is not None:
            sess.recorder.request(flow)

    def responseheaders(self, flow) -> None:
        sess = self._by_flow.get(flow.id)
        if sess is not None:
            sess.recorder.responseheaders(flow)

    async def response(self, flow) -> None:
        sess = self._by_flow.get(flow.id)
        if sess is None:
            return
        await sess.recorder.response(flow)
        if flow.websocket is None:
            self._flow_done(flow)

    def websocket_message(self, flow) -> None:
        sess = self._by_flow.get(flow.id)
        if sess is not None:
            sess.recorder.websocket_message(flow)

    async def websocket_end(self, flow) -> None:
        sess = self._by_flow.get(flow.id)
        if sess is not None:
            await sess.recorder.websocket_end(flow)
            self._flow_done(flow)

    async def error(self, flow) -> None:
        sess = self._by_flow.get(flow.id)
        if sess is not None:
            await sess.recorder.error(flow)
            self._flow_done(flow)

    def client_disconnected(self, client) -> None:
        sess = self._open.get(f"c:{client.id}")
        if sess is not None and not self._closed:
            self._schedule_end(sess, "disconnected")

    def _flow_done(self, flow) -> None:
        sess = self._by_flow.pop(flow.id, None)
        if sess is not None:
            sess.flows.pop(flow.id, None)
            sess.last = time.monotonic()

    async def done(self) -> None:
        """Proxy shutdown: every session not yet publishing journals what is in flight (as
        cut) and waits for :meth:`close`, which publishes it with ``ended: shutdown``."""
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
        todo = list(self._open.values()) + [s for s in self._ending if not s.submitted]
        for s in todo:
            if s.task is not None and not s.submitted:
                s.task.cancel()
            s.reason = s.reason or "shutdown"
        self._open.clear()
        self._ending = todo
        await asyncio.gather(*(s.recorder.done() for s in todo), return_exceptions=True)

    def close(self) -> list[Published]:
        """After the proxy stopped: publish every session still open, wait for all
        publishing to finish and return every :class:`Published` of this gateway."""
        for s in list(self._ending):
            if not s.submitted:
                self._submit(s)
        self._pool.shutdown(wait=True)
        return list(self.published)

    # -- control endpoint ----------------------------------------------------------------
    async def _control(self, flow) -> None:
        from mitmproxy import http

        req = control_request(flow.request.method, flow.request.path)
        status, body = 404, {"ok": False, "error": CONTROL_HELP}
        if req.action == "method":
            status, body = 405, {"ok": False, "error": CONTROL_HELP}
        elif req.action == "list":
            status, body = 200, {"ok": True, "sessions": self.open_sessions()}
        elif req.action == "end":
            sess = self._open.get(f"h:{req.session}")
            if sess is None:
                body = {"ok": False, "error": f"no open session {req.session!r} (it ended already, or no request "
                                              f"carried {SESSION_HEADER}: {req.session})"}
            else:
                out = await self._schedule_end(sess, "end")
                status = 200 if out.url else 500
                body = {"ok": out.url is not None, "session": out.session, "cassette": out.url,
                        "interactions": out.interactions, "error": out.error}
        data = self.redactor.text(json.dumps(body, ensure_ascii=False)).encode("utf-8")
        flow.response = http.Response.make(status, data, {"content-type": "application/json"})
