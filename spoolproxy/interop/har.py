"""HAR 1.2 (HTTP Archive) -> cassette.

Reads what browser devtools (Chromium, Firefox, Safari), Charles, Proxyman, Fiddler,
Insomnia and mitmproxy (``hardump``/``save.har``) write: ``{"log": {"version", "creator",
"entries": [...]}}``, plain JSON or zlib-compressed (mitmproxy's ``.zhar``).  Per entry:

* ``request``: ``method``, ``url``, ``headers`` (HTTP/2 pseudo-headers such as
  ``:authority`` dropped), body from ``postData.text`` (base64 when ``encoding`` says so),
  or rebuilt from ``postData.params`` (URL-encoded form) when the text is absent;
* ``response.content``: ``text``, base64-decoded when ``encoding: base64``; HAR stores
  bodies decoded, so ``Content-Encoding`` (and a then-stale ``Content-Length``) is dropped.
  SSE and NDJSON streams come through as the text they are (one body, no chunk timing);
* a response with ``status: 0`` (and Chromium's ``_error``, e.g. ``net::ERR_CONNECTION_REFUSED``)
  is a transport failure: an interaction with ``error`` and no response;
* ``startedDateTime`` and ``time`` (ms) become ``started_at`` and ``duration_ms``;
* Chromium's and mitmproxy's ``_webSocketMessages`` are kept under the interaction's
  ``websocket_messages`` key (``from``: client | server, ``time``, ``opcode``, ``data``).

mitmproxy also reads HAR into flows (``mitmproxy.io.har``), but drops ``_error`` entries,
form ``params`` and WebSocket messages, and fails on ``postData`` without ``text``, so the
archive is read here directly: it is plain JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from ..cassettes.bodies import decode_body
from ..cassettes.model import Cassette, CassetteMeta, Failure, HeaderDict, Interaction, Request, Response, header_get, header_without
from ..errors import CassetteError
from ..proxy.failures import classify
from .run import ImportedRun

FORMAT = "har"

#: Chromium ``net::ERR_*`` names -> failure kind
_CHROME_ERRORS = {
    "CONNECTION_REFUSED": "refused", "NAME_NOT_RESOLVED": "dns", "NAME_RESOLUTION_FAILED": "dns",
    "TIMED_OUT": "timeout", "CONNECTION_TIMED_OUT": "timeout", "CONNECTION_RESET": "reset",
    "CONNECTION_CLOSED": "reset", "EMPTY_RESPONSE": "reset", "CONNECTION_ABORTED": "reset",
    "SSL_PROTOCOL_ERROR": "tls", "CERT_AUTHORITY_INVALID": "tls", "CERT_COMMON_NAME_INVALID": "tls",
    "HTTP2_PROTOCOL_ERROR": "protocol", "INVALID_HTTP_RESPONSE": "protocol",
}


def looks_like(doc: Any) -> bool:
    """True for a parsed HAR document."""
    return isinstance(doc, dict) and isinstance(doc.get("log"), dict) and isinstance(doc["log"].get("entries"), list)


def unpack(data: bytes) -> bytes:
    """The JSON bytes of a HAR file, inflating mitmproxy's zlib ``.zhar``."""
    if data[:1] == b"\x78":
        try:
            return zlib.decompress(data)
        except zlib.error:
            pass
    return data


def read(path: Path, data: bytes) -> list[ImportedRun]:
    """Read one HAR file into one run.  Raises CassetteError naming the file (and the
    entry) when it is not a HAR 1.x archive."""
    try:
        doc = json.loads(unpack(data).decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CassetteError(path, f"not a HAR file: invalid JSON ({exc})") from None
    if not looks_like(doc):
        raise CassetteError(path, "not a HAR file: no 'log.entries' list")
    log = doc["log"]
    entries = [e for e in log["entries"] if isinstance(e, dict)]
    entries.sort(key=lambda e: str(e.get("startedDateTime") or ""))  # stable: equal times keep file order
    interactions, notes = [], []
    missing = 0
    for i, e in enumerate(entries):
        try:
            it, body_missing = _entry(e)
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            raise CassetteError(path, f"entry {i}: malformed HAR entry ({type(exc).__name__}: {exc})") from None
        missing += body_missing
        interactions.append(it)
    if missing:
        notes.append(f"{missing} response bodies were not saved in the HAR (the tool left them out)")
    creator = log.get("creator") if isinstance(log.get("creator"), dict) else {}
    source = {"format": FORMAT, "file": path.name}
    if creator.get("name"):
        source["creator"] = f"{creator.get('name')} {creator.get('version') or ''}".strip()
    starts = [it.started_at for it in interactions if it.started_at]
    meta = CassetteMeta(recorded_at=min(starts) if starts else None, extra={"imported_from": source})
    return [ImportedRun(Cassette(interactions=interactions, meta=meta), path.stem, tuple(notes))]


def _headers(items: Any) -> HeaderDict:
    out: HeaderDict = {}
    for h in items or []:
        if isinstance(h, dict):
            name, value = h.get("name"), h.get("value")
        elif isinstance(h, (list, tuple)) and len(h) == 2:  # Slack's [name, value] variant
            name, value = h
        else:
            continue
        if not name or str(name).startswith(":"):
            continue
        out.setdefault(str(name), []).append("" if value is None else str(value))
    return out


def _text(text: Any, encoding: Any) -> bytes:
    if text is None:
        return b""
    if str(encoding or "").lower() == "base64":
        return base64.b64decode(text)
    return str(text).encode("utf-8", "surrogateescape")


def _request(r: dict) -> Request:
    headers = _headers(r.get("headers"))
    post = r.get("postData") if isinstance(r.get("postData"), dict) else None
    body = b""
    if post:
        if post.get("text") is not None:
            body = _text(post["text"], post.get("encoding"))
        elif post.get("params"):
            body = urlencode([(p.get("name", ""), p.get("value", "")) for p in post["params"] if isinstance(p, dict)]).encode()
        if body and not header_get(headers, "content-type") and post.get("mimeType"):
            headers["content-type"] = [str(post["mimeType"])]
    if body:
        headers, body = decode_body(headers, body)
    return Request(method=str(r["method"]).upper(), uri=str(r["url"]), headers=headers, body=body)


def _entry(e: dict) -> tuple[Interaction, bool]:
    req = _request(e["request"])
    started = _time(e.get("startedDateTime"))
    duration = e.get("time") if isinstance(e.get("time"), (int, float)) and e.get("time", -1) >= 0 else None
    r = e.get("response") if isinstance(e.get("response"), dict) else {}
    extra: dict[str, Any] = {}
    ws = e.get("_webSocketMessages")
    if isinstance(ws, list) and ws:
        extra["websocket_messages"] = [
            {"from": "client" if m.get("type") == "send" else "server", "time": m.get("time"),
             "opcode": m.get("opcode"), "data": m.get("data")} for m in ws if isinstance(m, dict)]
    status = r.get("status")
    if not isinstance(status, int) or status <= 0:
        err = str(r.get("_error") or e.get("_error") or "no response recorded in the HAR (status 0)")
        return Interaction(request=req, error=_failure(err), started_at=started, duration_ms=duration, extra=extra), False
    content = r.get("content") if isinstance(r.get("content"), dict) else {}
    headers = _headers(r.get("headers"))
    body = _text(content.get("text"), content.get("encoding"))
    missing = content.get("text") is None and (content.get("size") or 0) > 0
    headers, body = decode_body(headers, body)
    if header_get(headers, "content-encoding"):  # HAR bodies are decoded whatever the header says
        headers = header_without(headers, "content-encoding", "content-length")
    resp = Response(status=status, reason=str(r.get("statusText") or ""), headers=headers, body=body)
    return Interaction(request=req, response=resp, started_at=started, duration_ms=duration, extra=extra), missing


def _failure(message: str) -> Failure:
    """A Failure for a HAR error string (Chromium ``net::ERR_*`` or a tool's message)."""
    if message.startswith("net::ERR_"):
        kind = _CHROME_ERRORS.get(message[len("net::ERR_"):].split()[0], "other")
        return Failure(kind=kind, message=message, during="connect" if kind in ("refused", "dns", "tls") else "request")
    return classify(message, had_response=False)


def _time(v: Any) -> datetime | None:
    if not v:
        return None
    try:
        t = datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)
