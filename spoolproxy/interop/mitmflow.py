"""mitmproxy flow files -> cassette.

A flow file is what ``mitmdump -w FILE``, mitmproxy's ``save_stream_file`` option and the
``w`` key of mitmproxy's console write: tnetstring-serialised flow states.  They are read
with mitmproxy's own reader (:class:`mitmproxy.io.FlowReader`, which also migrates files
written by older mitmproxy versions), then converted exactly as spoolproxy's recorder
converts a live flow (:func:`~spoolproxy.proxy.recorder.request_of`, decoded bodies,
:func:`~spoolproxy.proxy.failures.classify` for ``flow.error``):

* each HTTP flow is one interaction (request-start order): absolute URL, headers in wire
  order, bodies decoded; ``flow.error`` becomes the interaction's ``error`` (with the
  response, when the body was cut);
* ``started_at`` from the request start, ``duration_ms`` to the response end, and one
  chunk spanning the response body (a flow file keeps no chunk boundaries);
* a WebSocket flow keeps its handshake as the interaction and its messages under
  ``websocket_messages`` (``from``: client | server, ``time``, ``type``: text | binary,
  ``data``: text, or base64 for binary);
* TCP, UDP and DNS flows are skipped (cassettes hold HTTP); a note says how many;
* a response that was streamed through mitmproxy (``stream_large_bodies``) has no body in
  the flow file; a note says so.
"""

from __future__ import annotations

import base64
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..cassettes.bodies import decode_body
from ..cassettes.model import Cassette, CassetteMeta, Chunk, Interaction, Response
from ..errors import CassetteError
from .run import ImportedRun

FORMAT = "mitmproxy"


def looks_like(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts a tnetstring flow dump:
    ``<digits>:`` then a dictionary payload."""
    digits = head[:12].split(b":", 1)[0]
    return bool(digits) and digits.isdigit() and b":" in head[:12]


def read(path: Path, data: bytes | None = None) -> list[ImportedRun]:
    """Read one flow file into one run.  Raises CassetteError naming the file when
    mitmproxy cannot read it."""
    from mitmproxy import exceptions, http
    from mitmproxy.io import FlowReader

    try:
        with open(path, "rb") as fh:
            flows = list(FlowReader(fh).stream())
    except exceptions.FlowReadException as exc:
        raise CassetteError(path, f"not a mitmproxy flow file mitmproxy can read ({str(exc).splitlines()[0]})") from None
    except OSError as exc:
        raise CassetteError(path, f"cannot read: {exc.strerror}") from None
    http_flows = [f for f in flows if isinstance(f, http.HTTPFlow)]
    http_flows.sort(key=lambda f: f.request.timestamp_start or 0.0)
    notes = []
    if len(http_flows) < len(flows):
        notes.append(f"skipped {len(flows) - len(http_flows)} non-HTTP flows (TCP/UDP/DNS)")
    interactions, streamed = [], 0
    for f in http_flows:
        it, lost = _interaction(f)
        streamed += lost
        interactions.append(it)
    if streamed:
        notes.append(f"{streamed} responses were streamed through mitmproxy, so the flow file holds no body for them")
    starts = [it.started_at for it in interactions if it.started_at]
    meta = CassetteMeta(recorded_at=min(starts) if starts else None,
                        extra={"imported_from": {"format": FORMAT, "file": path.name}})
    return [ImportedRun(Cassette(interactions=interactions, meta=meta), path.stem, tuple(notes))]


def _interaction(flow) -> tuple[Interaction, bool]:
    from ..proxy.failures import classify
    from ..proxy.recorder import headers_of, request_of

    req = request_of(flow.request)
    t0 = flow.request.timestamp_start
    resp, lost, end = None, False, None
    r = flow.response
    if r is not None:
        raw = r.raw_content
        lost = raw is None
        headers, body = decode_body(headers_of(r), raw or b"")
        chunks = None
        if body and r.timestamp_start and r.timestamp_end:
            chunks = [Chunk(offset_ms=max(0.0, (r.timestamp_end - r.timestamp_start) * 1000.0), size=len(body))]
        resp = Response(status=r.status_code, reason=r.reason or "", headers=headers, body=body, chunks=chunks)
        end = r.timestamp_end
    failure = None
    if flow.error is not None:
        failure = classify(flow.error.msg, had_response=r is not None)
        end = end or flow.error.timestamp
    extra: dict[str, Any] = {}
    if getattr(flow, "websocket", None) is not None:
        extra["websocket_messages"] = [_ws(m) for m in flow.websocket.messages]
    if r is None and failure is None:
        failure = classify("no response in the flow file (the flow was intercepted or killed)", had_response=False)
    return Interaction(
        request=req,
        response=resp,
        error=failure,
        started_at=datetime.fromtimestamp(t0, timezone.utc) if t0 else None,
        duration_ms=round((end - t0) * 1000.0, 3) if t0 and end else None,
        extra=extra,
    ), lost


def _ws(m) -> dict[str, Any]:
    text = m.is_text
    return {"from": "client" if m.from_client else "server", "time": m.timestamp,
            "type": "text" if text else "binary",
            "data": m.text if text else base64.b64encode(m.content).decode("ascii")}
