"""The recording addon: every HTTP exchange through the proxy becomes a cassette interaction.

Life of a flow (mitmproxy hooks):

* ``requestheaders``: the interaction gets its sequence number, so the cassette lists
  interactions in request-start order even when they complete out of order;
* ``request``: the request (decoded body) is captured, with any per-interaction facts an
  addon earlier in the chain put in ``flow.metadata[EXTRA_META]`` (a dict merged into
  ``Interaction.extra``, e.g. where a fork served the request from); a request body declared larger than
  ``record_max_body_size`` is streamed upstream instead of buffered and stored like a big
  response body, named in the interaction's ``spoolproxy.request_body`` extension
  (``{file|elided, size, sha256}``) with an empty ``body``.  When the upstream answers
  before such an upload is complete (a 413 after the first megabytes), the rest of the body
  never reaches the proxy: the interaction keeps what arrived and the extension says
  ``{truncated: true, full_size: <Content-Length>, size, sha256}`` so playback matches the
  whole upload against it;
* ``responseheaders``: a :class:`~.bodysink.BodySink` becomes ``flow.response.stream``, so
  every chunk goes to the client unbuffered as it arrives while its size and arrival offset
  are noted and the body is decoded (gzip/deflate/br/zstd) and kept up to
  ``record_max_body_size`` bytes, beyond which it is spilled to ``<cassette>.bodies/``
  (redacted on the way) or elided;
* ``websocket_message`` / ``websocket_end``: an upgraded (``101``) connection's messages are
  collected (:mod:`.websocket`) and its interaction is written when the connection ends,
  with the messages in its ``websocket`` extension;
* ``response`` / ``error``: the interaction (with a :class:`Failure` for refused, DNS,
  timeout, TLS or a stream cut mid-way by the upstream) is redacted and appended to the journal (flushed; fsynced in
  the background) before the client sees the end of a chunked or HTTP/2 response (an HTTP/1 Content-Length
  body is complete for the client with its last byte; its write is queued at once).

A client that hangs up after the response headers (the openai SDK closes a stream once it
read ``data: [DONE]``, often before the server's terminating chunk) is not an upstream
failure: the interaction gets no ``error`` but the extension ``client_closed: {during:
response, message}``, and its body is what arrived until then.  A client that hangs up
before any response header is still recorded with a :class:`Failure` (it gave up waiting).

A response another addon made (a playback miss, a circuit-breaker refusal) is recorded like
an upstream one; ``flow.metadata[EXTRA_META]`` (a dict), read again when the exchange completes,
is merged into the interaction's extensions, and ``flow.metadata["spoolproxy.seq"]`` holds its index.
``observers`` are called on the proxy's event loop with ``(index, interaction)`` (not yet
redacted) as each exchange completes, before the client can send its next request on the
same connection: live guards (:mod:`spoolproxy.guards`) count there.

On ``done`` (proxy shutdown) interactions still in flight are journalled as cut by the
shutdown.  :meth:`Recorder.finish` then writes the cassette atomically from the journal
and removes it.  A stale journal found by :meth:`Recorder.open` (a crashed earlier run of
the same cassette) is first recovered into ``<stem>.recovered-<time>.yaml``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..cassettes.bodies import decode_body
from ..cassettes.journal import Journal, is_locked, journal_path, read_journal
from ..cassettes.model import (Cassette, CassetteMeta, Chunk, Failure, HeaderDict, Interaction, Request, Response,
                               header_get, header_without)
from ..cassettes.redact import Redactor
from ..cassettes.redact_late import late_pass
from ..cassettes.storage import save, side_dir
from ..errors import CassetteError
from .bodysink import DEFAULT_LIMIT, BodySink
from .failures import classify, closed_by_client
from .journalwriter import JournalWriter
from .summary import RunSummary
from .websocket import WsRecording

logger = logging.getLogger(__name__)

#: seconds a shutdown waits for responses whose headers already arrived
SHUTDOWN_GRACE_S = 1.0


#: flow.metadata key: a dict of per-interaction facts an addon wants in ``Interaction.extra``
EXTRA_META = "spoolproxy.extra"

#: request headers a client sends only because it talks to a proxy (not recorded)
PROXY_ONLY_HEADERS = ("proxy-connection",)


def headers_of(msg) -> HeaderDict:
    """mitmproxy headers as ``{name: [values]}`` in wire order (names keep their case)."""
    out: HeaderDict = {}
    for k, v in msg.headers.fields:
        name = k.decode("utf-8", "surrogateescape")
        out.setdefault(name, []).append(v.decode("utf-8", "surrogateescape"))
    return out


def request_of(req) -> Request:
    """A cassette :class:`Request` from a mitmproxy request: absolute URL, decoded body."""
    headers = header_without(headers_of(req), *PROXY_ONLY_HEADERS)
    body = req.raw_content or b""
    if body:
        headers, body = decode_body(headers, body)
    return Request(method=req.method.upper(), uri=req.url, headers=headers, body=body)


@dataclass
class _Capture:
    seq: int
    started: float  # time.time() of the request start
    request: Request | None = None
    status: int | None = None
    reason: str = ""
    headers: HeaderDict = field(default_factory=dict)
    sink: BodySink | None = None
    request_sink: BodySink | None = None
    response_after_ms: float | None = None
    headers_at: float = 0.0  # time.perf_counter() when the response headers arrived
    request_body: dict | None = None  # a big request body stored outside (extension key)
    client_closed: str | None = None  # mitmproxy's message when the client hung up mid-response
    extra: dict = field(default_factory=dict)  # facts from flow.metadata[EXTRA_META]
    done: bool = False
    websocket: WsRecording | None = None  # an upgraded connection's messages


class Recorder:
    """mitmproxy addon that records every HTTP(S) exchange into ``cassette_path``.

    ``meta``: run metadata written first to the journal.  ``redactor``: applied to every
    interaction before it reaches the disk (journal, side files, cassette).
    ``max_body_size``: bytes of a response body kept in memory/YAML (option
    ``record_max_body_size``); ``large_bodies``: "spill" (side file) or "elide" (option
    ``record_large_bodies``); ``upstream_errors``: "close" (the client's connection closes
    when the upstream is unreachable, as it would without a proxy) or "502" (mitmproxy's
    error page; option ``record_upstream_errors``).  ``summary`` is fed every completed interaction.
    Raises CassetteError from :meth:`open`/:meth:`finish` when the cassette or journal
    cannot be written.
    """

    def __init__(
        self,
        cassette_path: str | Path,
        *,
        meta: CassetteMeta | None = None,
        redactor: Redactor | None = None,
        max_body_size: int = DEFAULT_LIMIT,
        large_bodies: str = "spill",
        upstream_errors: str = "close",
        summary: RunSummary | None = None,
        on_interaction: Callable[[Interaction], None] | None = None,
        observers: list[Callable[[int, Interaction], None]] | None = None,
    ) -> None:
        self.path = Path(cassette_path)
        self.meta = meta or CassetteMeta(recorder="spoolproxy", record_mode="all")
        self.redactor = redactor or Redactor()
        self.max_body_size = int(max_body_size)
        self.large_bodies = large_bodies
        self.upstream_errors = upstream_errors
        self.summary = summary if summary is not None else RunSummary()
        self.on_interaction = on_interaction
        self.observers = list(observers or [])
        self.journal: Journal | None = None
        self.recovered: tuple[Path, int] | None = None
        self.write_errors: list[str] = []
        #: run-level facts written to ``meta.extra`` by :meth:`finish` (e.g. ``tls_rejected``)
        self.run_facts: dict = {}
        self._seq = itertools.count()
        self._pending: dict[str, _Capture] = {}
        self._writer = JournalWriter(self._write_batch, after=self._count_batch)
        self._closed = False
        self.count = 0

    # -- mitmproxy options -------------------------------------------------------------
    def load(self, loader) -> None:
        loader.add_option(
            "record_max_body_size", int, self.max_body_size,
            "Response bytes kept in the cassette; larger bodies stream through and are spilled or elided.",
        )
        loader.add_option(
            "record_upstream_errors", str, self.upstream_errors,
            "What the client gets when the upstream cannot be reached or drops the connection before "
            "responding: close (the connection closes, as without a proxy) or 502 (mitmproxy's error page).",
            choices=("close", "502"),
        )
        loader.add_option(
            "record_large_bodies", str, self.large_bodies,
            "What to do with bodies above record_max_body_size: spill (side file next to the cassette) or elide.",
            choices=("spill", "elide"),
        )

    def configure(self, updated) -> None:
        from mitmproxy import ctx

        if "record_max_body_size" in updated:
            self.max_body_size = ctx.options.record_max_body_size
        if "record_large_bodies" in updated:
            self.large_bodies = ctx.options.record_large_bodies
        if "record_upstream_errors" in updated:
            self.upstream_errors = ctx.options.record_upstream_errors

    # -- set-up ------------------------------------------------------------------------
    def open(self) -> tuple[Path, int] | None:
        """Recover a stale journal of this cassette (returns (path, interactions) when one
        was found) and start a fresh journal.  Idempotent.

        Raises CassetteError (one line) when another live ``spoolproxy record`` holds the
        journal: its recording is left alone (never "recovered" under it), so call this
        before CMD starts."""
        if self.journal is not None:
            return self.recovered
        jp = journal_path(self.path)
        if is_locked(jp):
            raise CassetteError(
                self.path, "is being recorded by another spoolproxy process; use another --cassette"
            )
        if jp.exists():
            self.recovered = self._recover_stale(jp)
        self.journal = Journal(self.path, self.meta, self.redactor)
        return self.recovered

    def _recover_stale(self, jp: Path) -> tuple[Path, int] | None:
        """Turn the crashed run's journal ``jp`` into ``<stem>.recovered-<time>.yaml``,
        holding its lock meanwhile (a recorder starting at the same moment cannot have its
        new journal taken for a stale one).  Raises CassetteError when it is live."""
        import fcntl
        import os

        try:
            fd = os.open(jp, os.O_RDONLY)
        except FileNotFoundError:
            return None  # recovered by someone else meanwhile
        except OSError as exc:
            raise CassetteError(jp, f"cannot read the journal of an earlier recording: {exc.strerror}") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise CassetteError(
                    self.path, "is being recorded by another spoolproxy process; use another --cassette"
                ) from None
            cas = read_journal(jp)
            cas.meta.extra["recovered_from_journal"] = True
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            target = self.path.with_name(f"{self.path.stem}.recovered-{stamp}{self.path.suffix or '.yaml'}")
            save(cas, target)
            if cas.meta.extra.get("damaged_journal_lines"):
                jp.replace(jp.with_name(jp.name + ".damaged"))  # keep the evidence
            else:
                jp.unlink()
            return target, len(cas)
        finally:
            os.close(fd)

    def running(self) -> None:
        self.open()

    # -- hooks -------------------------------------------------------------------------
    def requestheaders(self, flow) -> None:
        if self._closed:
            return
        cap = _Capture(seq=next(self._seq), started=flow.request.timestamp_start or time.time())
        self._pending[flow.id] = cap
        flow.metadata["spoolproxy.seq"] = cap.seq
        try:
            declared = int(flow.request.headers.get("content-length", "0"))
        except ValueError:
            declared = 0
        if declared > self.max_body_size and not flow.request.stream:
            # a big upload: stream it upstream too instead of letting mitmproxy buffer it
            cap.request_sink = BodySink(
                encoding=flow.request.headers.get("content-encoding"),
                limit=self.max_body_size,
                mode=self.large_bodies,
                spill_dir=side_dir(self.path) if self.large_bodies == "spill" else None,
                redactor=self.redactor,
            )
            flow.request.stream = cap.request_sink

    def request(self, flow) -> None:
        cap = self._pending.get(flow.id)
        if cap is not None:
            cap.request = self._request(cap, flow)
            facts = flow.metadata.get(EXTRA_META)
            if isinstance(facts, dict):
                cap.extra = dict(facts)

    def _request(self, cap: _Capture, flow) -> Request:
        req = request_of(flow.request)
        sink = cap.request_sink
        if sink is None or not sink.wire_size:
            return req
        got = sink.finish(prefix=f"{cap.seq:04d}-request")
        headers = req.headers
        if got.decoded and _encoded(headers):
            headers = header_without(headers, "content-encoding", "content-length")
        cut = _cut_upload(flow, sink.wire_size)
        if got.body_ref is None:
            if cut is not None:  # an early response stopped the upload: say so, with what is known
                cap.request_body = {"size": len(got.body), "sha256": hashlib.sha256(got.body).hexdigest(), **cut}
            return req.model_copy(update={"body": got.body, "headers": headers})
        ref = got.body_ref
        cap.request_body = {"file": ref.file, "size": ref.size, "sha256": ref.sha256} if ref.file else {
            "elided": True, "size": ref.size, "sha256": ref.sha256}
        if cut is not None:
            cap.request_body.update(cut)
        return req.model_copy(update={"body": b"", "headers": headers})

    def responseheaders(self, flow) -> None:
        cap = self._pending.get(flow.id)
        if cap is None:
            return
        resp = flow.response
        t0 = time.perf_counter()
        cap.status, cap.reason = resp.status_code, resp.reason or ""
        cap.headers = headers_of(resp)
        cap.response_after_ms = (time.time() - cap.started) * 1000.0
        cap.headers_at = t0
        if resp.status_code == 101 or flow.websocket is not None:
            return  # protocol switch: mitmproxy handles it; only the handshake is recorded
        if _small_whole_body(resp, self.max_body_size):
            return  # mitmproxy's buffered path is cheaper; the body is read in ``response``
        cap.sink = BodySink(
            encoding=resp.headers.get("content-encoding"),
            limit=self.max_body_size,
            mode=self.large_bodies,
            spill_dir=side_dir(self.path) if self.large_bodies == "spill" else None,
            redactor=self.redactor,
            t0=t0,
        )
        resp.stream = cap.sink

    async def response(self, flow) -> None:
        cap = self._pending.get(flow.id)
        if cap is not None and flow.websocket is not None:  # written when the connection ends
            cap.websocket = WsRecording(flow.response.timestamp_end if flow.response is not None else None)
            return
        await self._complete(flow, None)

    def websocket_message(self, flow) -> None:
        cap = self._pending.get(flow.id)
        if cap is not None and cap.websocket is not None and flow.websocket is not None and flow.websocket.messages:
            cap.websocket.add(flow.websocket.messages[-1])

    async def websocket_end(self, flow) -> None:
        cap = self._pending.get(flow.id)
        if cap is not None and cap.websocket is not None:
            cap.websocket.closed(flow.websocket)
            await self._complete(flow, None)

    async def error(self, flow) -> None:
        cap = self._pending.get(flow.id)
        if cap is None:
            return
        msg = flow.error.msg if flow.error else "unknown error"
        if cap.status is not None and closed_by_client(msg):
            cap.client_closed = msg  # the client stopped reading: not an upstream failure
            await self._complete(flow, None)
            return
        failure = classify(msg, had_response=cap.status is not None, request_sent=cap.request is not None)
        if cap.status is None and self.upstream_errors == "close" and flow.killable:
            flow.kill()  # no 502 page: the client sees its connection close, as without a proxy
        await self._complete(flow, failure)

    async def done(self) -> None:
        """Proxy shutdown: give responses already on their way a moment (up to
        ``SHUTDOWN_GRACE_S``) to complete, then journal what is still in flight, marked as
        cut by the shutdown."""
        import asyncio  # on the proxy's thread, with mitmproxy: not needed to start a recording

        end = time.monotonic() + SHUTDOWN_GRACE_S
        while any(c.status is not None and c.websocket is None for c in self._pending.values()) and time.monotonic() < end:
            await asyncio.sleep(0.01)
        self._closed = True
        for fid in list(self._pending):
            cap = self._pending.pop(fid)
            if cap.request is None:
                continue
            if cap.websocket is not None:  # a WebSocket still open: its messages so far, no close
                self._writer.submit(cap.seq, self._interaction(cap, None, None))
                continue
            failure = Failure(
                kind="other",
                message="recording stopped before the exchange completed",
                during="response" if cap.status is not None else "request",
            )
            it = self._interaction(cap, None, failure)
            self._writer.submit(cap.seq, it)

    # -- building and writing ------------------------------------------------------------
    async def _complete(self, flow, failure: Failure | None) -> None:
        cap = self._pending.pop(flow.id, None)
        if cap is None:
            return
        if cap.request is None:
            cap.request = self._request(cap, flow)
        if cap.status is None and failure is None and flow.response is not None:  # made by another addon
            cap.status, cap.reason = flow.response.status_code, flow.response.reason or ""
            cap.headers = headers_of(flow.response)
        it = self._interaction(cap, flow, failure)
        extra = flow.metadata.get(EXTRA_META)
        if isinstance(extra, dict):
            it.extra.update(extra)
        for observe in self.observers:
            try:
                observe(cap.seq, it)
            except Exception as exc:  # noqa: BLE001 - an observer must never cost the recording
                logger.warning("spoolproxy: observer failed: %s", exc)
        if failure is None and (cap.sink is None or _client_already_has_it(flow)):
            self._writer.submit(cap.seq, it)  # waiting would only delay the next request on this connection
            return
        import asyncio

        loop = asyncio.get_running_loop()
        written = loop.create_future()
        self._writer.submit(cap.seq, it, lambda: loop.call_soon_threadsafe(_resolve, written))
        # shielded: a shutdown cancelling this handler must not drop the queued write
        await asyncio.shield(written)

    def _interaction(self, cap: _Capture, flow, failure: Failure | None) -> Interaction:
        response = None
        if cap.status is not None:
            headers = cap.headers
            body, ref, chunks = b"", None, None
            if cap.sink is not None and cap.sink.wire_size:
                got = cap.sink.finish(prefix=f"{cap.seq:04d}")
                body, ref, chunks = got.body, got.body_ref, got.chunks or None
                if got.decoded:
                    headers = header_without(headers, "content-encoding") if _encoded(headers) else headers
                    if _encoded(cap.headers):
                        headers = header_without(headers, "content-length")
            elif flow is not None and flow.response is not None and flow.response.raw_content:
                headers, body = decode_body(headers, flow.response.raw_content)
                if cap.headers_at:  # buffered whole (see _small_whole_body): one chunk, when it completed
                    chunks = [Chunk(offset_ms=(time.perf_counter() - cap.headers_at) * 1000.0, size=len(body))]
            response = Response(status=cap.status, reason=cap.reason, headers=headers, body=body, body_ref=ref, chunks=chunks)
        if failure is not None and failure.message:
            failure = failure.model_copy(update={"message": self.redactor.text(failure.message)})
        extra: dict = dict(cap.extra)
        if response is not None:
            enc = (header_get(cap.headers, "content-encoding") or "").strip().lower()
            if enc and enc != "identity" and header_get(response.headers, "content-encoding") is None:
                extra["content_encoding"] = enc  # decoded for the cassette; --encode-as-recorded re-applies it
        if cap.request_body is not None:
            extra["request_body"] = cap.request_body
        if cap.response_after_ms is not None:
            extra["response_after_ms"] = round(cap.response_after_ms, 3)
        if cap.client_closed is not None:
            extra["client_closed"] = {"during": "response", "message": cap.client_closed}
        if cap.websocket is not None:
            extra["websocket"] = cap.websocket.extension(self.redactor, cap.request)
        return Interaction(
            request=cap.request,
            response=response,
            error=failure,
            started_at=datetime.fromtimestamp(cap.started, timezone.utc),
            duration_ms=(time.time() - cap.started) * 1000.0,
            extra=extra,
        )

    def _write_batch(self, items: list[tuple[int, Interaction]]) -> list[tuple[int, Interaction]]:
        """The writer thread's job: journal ``items`` (one write for the batch; one by one
        when that fails, so only the interaction at fault is reported); returns those written."""
        try:
            if self.journal is None:
                self.open()
            self.journal.append_many(items)
            return items
        except Exception:  # noqa: BLE001 - retried one by one below
            return [item for item in items if self._write_one(*item)]

    def _count_batch(self, written: list[tuple[int, Interaction]]) -> None:
        """Count journalled interactions into the summary (after the responses they held
        back were let go: the summary parses bodies, which no client should wait for)."""
        for _, it in written:
            self.count += 1
            try:
                self.summary.add(it)
                if self.on_interaction is not None:
                    self.on_interaction(it)
            except Exception as exc:  # pragma: no cover - summary bugs must not lose data
                logger.warning("spoolproxy: summary failed: %s", exc)

    def _write_one(self, seq: int, it: Interaction) -> bool:
        try:
            if self.journal is None:
                self.open()
            self.journal.append(seq, it)
            return True
        except Exception as exc:  # disk full etc.: never break the client's traffic
            self.write_errors.append(self.redactor.text(f"{it.request.method} {it.request.uri}: {exc}"))
            logger.error("spoolproxy: cannot journal an interaction: %s", exc)
            return False

    # -- the end -------------------------------------------------------------------------
    def abort(self) -> None:
        """Nothing worth keeping (the proxy never started): drop the journal, write nothing."""
        self._closed = True
        self._writer.close()
        if self.journal is not None:
            self.journal.close(remove=True)

    def finish(self, exit_code: int | None = None, extra: dict | None = None, *,
               target: Callable[[Cassette], Path] | None = None) -> Cassette:
        """Write the cassette atomically from the journal and remove the journal.

        Call after the proxy stopped.  Every secret the redactor learned during the run is
        replaced once more in the whole cassette and its side files (:func:`late_pass`);
        :attr:`run_facts` and ``extra`` (run-level facts from the caller, e.g. a guard's
        ``budget`` and ``circuit_breaker``; ``record`` puts ``agent_end`` in :attr:`run_facts`) go to ``meta.extra``, redacted.  ``target(cassette)``
        may choose another path than the cassette's (e.g. to keep a good cassette when this
        run failed).  Returns the cassette as written (redacted).  Raises CassetteError when
        the cassette cannot be written (the journal is kept then, for ``spoolproxy recover``).
        """
        self._closed = True
        self._writer.close()
        if self.journal is None:
            self.open()
        assert self.journal is not None
        self.journal.close(remove=False)
        cas = read_journal(self.journal.path)
        cas.meta.exit_code = exit_code
        cas.meta.extra.update(self.run_facts)
        if extra:
            cas.meta.extra.update(extra)
        try:
            cas = late_pass(cas, self.path, self.redactor)
        except OSError as exc:  # pragma: no cover - the cassette itself is still written
            logger.warning("spoolproxy: could not rewrite a side body file: %s", exc)
        path = target(cas) if target is not None else self.path
        save(cas, path)
        self.journal.close(remove=True)
        cas.path = path
        if path == self.path:
            self._prune_side_dir(cas)
        return cas

    def _prune_side_dir(self, cas: Cassette) -> None:
        """Remove side files of an earlier recording of this cassette that the new one does
        not reference (kept when a recovered sibling cassette may still refer to them)."""
        d = side_dir(self.path)
        if not d.is_dir() or any(self.path.parent.glob(f"{self.path.stem}.recovered-*")):
            return
        keep = {
            Path(it.response.body_ref.file).name
            for it in cas.interactions
            if it.response is not None and it.response.body_ref is not None and it.response.body_ref.file
        }
        keep |= {
            Path(str(it.extra["request_body"].get("file"))).name
            for it in cas.interactions
            if isinstance(it.extra.get("request_body"), dict) and it.extra["request_body"].get("file")
        }
        try:
            for f in d.iterdir():
                if (f.suffix == ".bin" and f.name not in keep) or f.name.startswith(".spill-"):
                    f.unlink()
            if not any(d.iterdir()):
                d.rmdir()
        except OSError as exc:  # pragma: no cover - never fail a finished recording over this
            logger.warning("spoolproxy: could not tidy %s: %s", d, exc)


#: response content types that are streams even when they carry a Content-Length
STREAM_TYPES = ("text/event-stream", "application/x-ndjson", "application/ndjson", "application/jsonl",
                "application/json-seq", "application/vnd.amazon.eventstream", "multipart/")

#: bodies up to this size with a Content-Length are buffered by mitmproxy instead of streamed
#: (mitmproxy's buffered path costs less CPU per response than its streaming one, also at
#: 100 KB: bench/analysis.md, B1); larger ones stream through with bounded memory
BUFFER_MAX = 1024 * 1024


def _small_whole_body(resp, max_body_size: int) -> bool:
    """True for a response whose body arrives whole anyway: a Content-Length of at most
    ``BUFFER_MAX`` (and ``max_body_size``), not chunked, not a stream content type.  Such a
    body gains nothing from streaming, and mitmproxy's buffered path costs less per
    response; it is recorded as one piece (no chunk list)."""
    try:
        size = int(resp.headers.get("content-length", ""))
    except ValueError:
        return False
    if size > min(BUFFER_MAX, max_body_size) or "chunked" in resp.headers.get("transfer-encoding", "").lower():
        return False
    ctype = resp.headers.get("content-type", "").lower()
    return not any(t in ctype for t in STREAM_TYPES)


def _resolve(fut) -> None:
    if not fut.done():
        fut.set_result(None)


def _cut_upload(flow, wire_size: int) -> dict | None:
    """``{"truncated": True, "full_size": N}`` when a streamed upload stopped before its
    declared ``Content-Length`` (the upstream answered early, e.g. 413, and the rest of the
    body never passed through the proxy), else None.  The cassette then holds the first
    ``size`` bytes with their sha256, and playback matches a request of ``full_size`` bytes
    that starts with them."""
    try:
        declared = int(flow.request.headers.get("content-length", ""))
    except ValueError:
        return None
    if wire_size >= declared or _encoded(headers_of(flow.request)):
        return None
    return {"truncated": True, "full_size": declared}


def _client_already_has_it(flow) -> bool:
    """True when an HTTP/1 client has seen the whole response before the ``response`` hook
    (a Content-Length body is complete with its last byte).  Chunked and HTTP/2 responses end
    only after the hook, so there the journal write is awaited first: what such a client saw
    complete is on disk."""
    resp = flow.response
    if resp is None or not flow.request.http_version.startswith("HTTP/1"):
        return False
    return "content-length" in resp.headers and "chunked" not in resp.headers.get("transfer-encoding", "").lower()


def _encoded(headers: HeaderDict) -> bool:
    from ..cassettes.model import header_get

    enc = (header_get(headers, "content-encoding") or "").strip().lower()
    return bool(enc) and enc != "identity"
