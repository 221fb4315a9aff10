"""Cassette format v1: conversion between the YAML document and :class:`Cassette`.

The document keeps vcrpy's layout (``version: 1``, ``interactions: [{request, response}]``)
so diffs read like any vcrpy cassette, with three readability changes and extensions under
keys vcrpy ignores:

* a JSON body whose exact bytes one of :data:`bodies.JSON_STYLES` reproduces is written as a
  YAML structure under ``parsed_body`` with its ``body_style`` (pydantic-ai's idea, made
  byte-exact); other text bodies are strings (multi-line ones as literal blocks, so each SSE
  event is one line); non-UTF-8 bodies are ``!!binary`` (base64);
* response bodies above the size limit are ``body: {file: NAME, size: N, sha256: H}`` (a side
  file next to the cassette) or ``body: {elided: true, size: N, sha256: H}``;
* ``spoolproxy:`` at the top holds run metadata (recorder, time, command line, cwd) and in
  each interaction the start time, duration, chunk list ``[[offset_ms, bytes], ...]`` and any
  transport ``error``.

Reading accepts this format, plain vcrpy / pytest-recording cassettes (string or ``!!binary``
bodies, gzip bodies, a ``Content-Encoding`` header left on a decoded body) and pydantic-ai's
``parsed_body`` variant.  vcrpy itself reads v1 through :mod:`.vcrpy_serializer`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ValidationError

from .bodies import decode_body, json_style, render_json
from .model import BodyRef, Cassette, CassetteMeta, Chunk, Failure, Interaction, Request, Response, header_get

FORMAT_VERSION = 1


class FormatError(ValueError):
    """The document is not a cassette; ``str()`` says why, ``index`` is the interaction (or None)."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message if index is None else f"interaction {index}: {message}")
        self.index = index


class FlowList(list):
    """A list the YAML writer emits in flow style (``[a, b]``), for chunk lists."""


# -- reading --------------------------------------------------------------------------
def _to_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    raise FormatError(f"body must be a string or binary, not {type(value).__name__}")


def _headers(value: Any) -> dict[str, list[str]]:
    if not value:
        return {}
    if not isinstance(value, dict):
        raise FormatError("headers must be a mapping of name to list of values")
    return {str(k): [str(x) for x in (v if isinstance(v, list) else [v])] for k, v in value.items()}


def _request(d: dict) -> Request:
    if not isinstance(d, dict):
        raise FormatError("request must be a mapping")
    if "parsed_body" in d:
        body = render_json(d["parsed_body"], d.get("body_style"))
    else:
        body = _to_bytes(d.get("body"))
    headers = _headers(d.get("headers"))
    headers, body = decode_body(headers, body)
    try:
        return Request(method=str(d["method"]).upper(), uri=str(d["uri"]), headers=headers, body=body)
    except KeyError as exc:
        raise FormatError(f"request has no {exc.args[0]!r}") from None


def _response(d: dict, ext: dict) -> Response:
    if not isinstance(d, dict):
        raise FormatError("response must be a mapping")
    status = d.get("status") or {}
    code = status.get("code") if isinstance(status, dict) else status
    if not isinstance(code, int):
        raise FormatError("response has no status code")
    reason = str(status.get("message") or "") if isinstance(status, dict) else ""
    ref = None
    if "parsed_body" in d:
        body = render_json(d["parsed_body"], d.get("body_style"))
    else:
        raw = d.get("body")
        if isinstance(raw, dict) and ("file" in raw or raw.get("elided")):
            ref = BodyRef(size=int(raw.get("size", 0)), sha256=str(raw.get("sha256", "")), file=raw.get("file"))
            body = b""
        else:
            body = _to_bytes(raw.get("string") if isinstance(raw, dict) else raw)
    headers = _headers(d.get("headers"))
    if ref is None:
        headers, body = decode_body(headers, body)
    chunks = None
    if ext.get("chunks"):
        chunks = [Chunk(offset_ms=float(c[0]), size=int(c[1])) for c in ext["chunks"]]
        if ref is None and sum(c.size for c in chunks) != len(body):
            chunks = None  # body edited by hand: the boundaries no longer apply
    return Response(status=code, reason=reason, headers=headers, body=body, body_ref=ref, chunks=chunks)


def _encoding_decoded(doc: dict, response: Response) -> str | None:
    """The ``Content-Encoding`` a stored response declared and the loader removed (the body
    was decoded), lower-case; None otherwise."""
    declared = header_get(_headers(doc.get("headers")), "content-encoding")
    enc = (declared or "").strip().lower()
    if not enc or enc == "identity" or header_get(response.headers, "content-encoding") is not None:
        return None
    return enc


def _time(v: Any) -> datetime | None:
    if v is None or isinstance(v, datetime):
        return v
    try:
        return datetime.fromisoformat(str(v))
    except ValueError:
        return None


def from_document(doc: Any) -> Cassette:
    """Build a :class:`Cassette` from a parsed YAML/JSON document.

    Raises FormatError (wrong top-level shape, missing ``interactions``, unknown
    ``version``, a malformed interaction).
    """
    if not isinstance(doc, dict):
        raise FormatError("not a cassette: the top level must be a mapping with 'interactions'")
    if "interactions" not in doc:
        raise FormatError("not a cassette: no 'interactions' key")
    reader = DocumentReader()
    for key, value in doc.items():
        if key != "interactions":
            reader.top(key, value)
    reader.top("interactions", None)
    reader.check_version()
    items = doc["interactions"] or []
    if not isinstance(items, list):
        raise FormatError("'interactions' must be a list")
    reader.check_declared(len(items))
    for item in items:
        reader.item(item)
    return reader.finish()


class DocumentReader:
    """Builds a :class:`Cassette` from a document handed over piece by piece, as a streaming
    reader parses it (:mod:`.yamlstream`): :meth:`top` for each top-level key (``version``,
    ``spoolproxy``, ``end_of_cassette``; ``interactions`` announces the list), :meth:`item`
    for each interaction in order (converted at once, so the parsed item can be dropped),
    then :meth:`finish`.  Raises FormatError as :func:`from_document` does."""

    def __init__(self) -> None:
        self.doc: dict[str, Any] = {}
        self.interactions: list[Interaction] = []
        self._parsed = False
        self._checked = False

    def top(self, key: str, value: Any) -> None:
        """One top-level key of the document (``interactions`` with any value: only seen)."""
        self.doc[key] = value

    def check_version(self) -> None:
        """Raise FormatError unless the document has interactions and version 1."""
        if self._checked:
            return
        if "interactions" not in self.doc:
            raise FormatError("not a cassette: no 'interactions' key")
        version = self.doc.get("version", 1)
        if version != FORMAT_VERSION:
            raise FormatError(f"unsupported cassette version {version!r} (this spoolproxy reads version 1)")
        self._checked = True

    def check_declared(self, count: int) -> None:
        """Compare the header's interaction count with ``count`` and ``end_of_cassette``."""
        self.check_version()
        top = self.doc.get("spoolproxy") if isinstance(self.doc.get("spoolproxy"), dict) else None
        if top is not None and isinstance(top.get("interactions"), int):
            declared = top["interactions"]
            if self.doc.get(END_KEY) != declared or count != declared:
                raise FormatError(
                    f"truncated or damaged: the header declares {declared} interactions, the file holds "
                    f"{count}{'' if END_KEY in self.doc else ' and lacks its end_of_cassette line'}; "
                    "restore it from git or re-record it"
                )

    def item(self, item: Any) -> None:
        """Convert the next interaction of the document."""
        self.check_version()
        i = len(self.interactions)
        if not isinstance(item, dict) or "request" not in item:
            raise FormatError("each interaction needs a 'request'", i)
        ext = item.get("spoolproxy") if isinstance(item.get("spoolproxy"), dict) else {}
        if not item.get("response") and not ext.get("error"):
            raise FormatError("has neither a response nor an error (is the file cut short?)", i)
        self._parsed = self._parsed or "parsed_body" in item["request"] or "parsed_body" in (item.get("response") or {})
        try:
            err = ext.get("error")
            response = _response(item["response"], ext) if item.get("response") else None
            extra = {k: v for k, v in ext.items() if k not in _EXT_KEYS}
            if response is not None and "content_encoding" not in extra:
                enc = _encoding_decoded(item["response"], response)
                if enc:
                    extra["content_encoding"] = enc  # a vcrpy body stored encoded: playback can encode it again
            self.interactions.append(
                Interaction(
                    request=_request(item["request"]),
                    response=response,
                    error=Failure.model_validate(err) if err else None,
                    started_at=_time(ext.get("started_at")),
                    duration_ms=ext.get("duration_ms"),
                    extra=extra,
                )
            )
        except FormatError as exc:
            raise FormatError(str(exc), i) from None
        except (ValidationError, TypeError, ValueError) as exc:
            raise FormatError(f"malformed ({str(exc).splitlines()[0]})", i) from None

    def finish(self) -> Cassette:
        """The cassette (checks version and the declared count when no item did)."""
        self.check_version()
        top = self.doc.get("spoolproxy") if isinstance(self.doc.get("spoolproxy"), dict) else None
        meta = CassetteMeta()
        if top:
            meta = CassetteMeta(
                recorder=top.get("recorder"),
                recorded_at=_time(top.get("recorded_at")),
                command=top.get("command"),
                cwd=top.get("cwd"),
                record_mode=top.get("record_mode"),
                exit_code=top.get("exit_code"),
                extra={k: v for k, v in top.items() if k not in _META_KEYS},
            )
        fmt = "spoolproxy" if top is not None else ("parsed_body" if self._parsed else "vcrpy")
        return Cassette(interactions=self.interactions, meta=meta, source_format=fmt)


_EXT_KEYS = {"started_at", "duration_ms", "chunks", "error"}
_META_KEYS = {"format", "recorder", "recorded_at", "command", "cwd", "record_mode", "exit_code", "interactions"}

#: top-level key written last: ``end_of_cassette: N``.  A spoolproxy cassette whose header
#: declares ``interactions: N`` must end with it, so a truncated file is refused.
END_KEY = "end_of_cassette"


# -- writing --------------------------------------------------------------------------
def _body_fields(body: bytes, *, plain: bool) -> dict[str, Any]:
    """``{'parsed_body': ..., 'body_style': ...}`` or ``{'body': str|bytes}``."""
    if not plain:
        found = json_style(body)
        if found:
            return {"parsed_body": found[1], "body_style": found[0]}
    try:
        return {"body": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body": body}


def _request_doc(req: Request, *, plain: bool, json_bodies: bool = True) -> dict[str, Any]:
    d: dict[str, Any] = {"method": req.method, "uri": req.uri, "headers": req.headers}
    if plain or req.body:
        d.update(_body_fields(req.body, plain=plain or not json_bodies))
    else:
        d["body"] = None
    return d


def _response_doc(resp: Response, *, plain: bool, json_bodies: bool = True) -> dict[str, Any]:
    d: dict[str, Any] = {"status": {"code": resp.status, "message": resp.reason}, "headers": resp.headers}
    if resp.body_ref is not None:
        ref = resp.body_ref
        if plain:
            d["body"] = {"string": f"[spoolproxy: {ref.size}-byte body stored outside the cassette]"}
        elif ref.file:
            d["body"] = {"file": ref.file, "size": ref.size, "sha256": ref.sha256}
        else:
            d["body"] = {"elided": True, "size": ref.size, "sha256": ref.sha256}
        return d
    fields = _body_fields(resp.body, plain=plain or not json_bodies)
    if "body" in fields:
        fields["body"] = {"string": fields["body"]}
    d.update(fields)
    return d


def to_document(cas: Cassette, *, plain: bool = False, json_bodies: bool = True) -> dict[str, Any]:
    """The YAML document for ``cas``.  ``plain=True`` writes vcrpy's plain layout: string
    bodies, no ``parsed_body``, no extensions, and interactions without a response left out.
    ``json_bodies=False`` keeps the extensions but writes every body as a string (cheaper:
    the journal uses it, the final cassette gets the YAML structures).
    Bodies must already be redacted (see :mod:`.redact`)."""
    doc: dict[str, Any] = {"version": FORMAT_VERSION}
    if not plain:
        m = cas.meta
        top: dict[str, Any] = {"format": FORMAT_VERSION}
        for key in ("recorder", "recorded_at", "command", "cwd", "record_mode", "exit_code"):
            v = getattr(m, key)
            if v is not None:
                top[key] = v.isoformat() if isinstance(v, datetime) else v
        top.update(m.extra)
        top["interactions"] = sum(1 for it in cas.interactions)
        doc["spoolproxy"] = top
    items = []
    for it in cas.interactions:
        if plain and it.response is None:
            continue
        item: dict[str, Any] = {"request": _request_doc(it.request, plain=plain, json_bodies=json_bodies)}
        if it.response is not None:
            item["response"] = _response_doc(it.response, plain=plain, json_bodies=json_bodies)
        if not plain:
            ext: dict[str, Any] = {}
            if it.started_at is not None:
                ext["started_at"] = it.started_at.isoformat()
            if it.duration_ms is not None:
                ext["duration_ms"] = round(it.duration_ms, 3)
            if it.response is not None and it.response.chunks:
                ext["chunks"] = FlowList(FlowList((round(c.offset_ms, 3), c.size)) for c in it.response.chunks)
            if it.error is not None:
                ext["error"] = it.error.model_dump()
            ext.update(it.extra)
            if ext:
                item["spoolproxy"] = ext
        items.append(item)
    doc["interactions"] = items
    if not plain:
        doc[END_KEY] = len(items)  # the last line: a file cut short lacks it
    return doc
