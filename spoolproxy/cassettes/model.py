"""Typed cassette models: a cassette is an ordered list of HTTP interactions.

Bodies are held *decoded* (no gzip/deflate/br/zstd) as ``bytes``; how they are laid out
on disk (YAML structure, literal block, ``!!binary``, side file) is the business of
:mod:`spoolproxy.cassettes.format`.  Headers keep their recorded case and order as
``{name: [value, ...]}`` (vcrpy's layout); look-ups through :class:`Headers` helpers are
case-insensitive.
"""

from __future__ import annotations

from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from .jsonparse import loads

HeaderDict = dict[str, list[str]]


def header_get(headers: HeaderDict, name: str, default: str | None = None) -> str | None:
    """First value of header ``name`` (case-insensitive) or ``default``."""
    lname = name.lower()
    for key, values in headers.items():
        if key.lower() == lname and values:
            return values[0]
    return default


def header_without(headers: HeaderDict, *names: str) -> HeaderDict:
    """A copy of ``headers`` without the given names (case-insensitive)."""
    drop = {n.lower() for n in names}
    return {k: list(v) for k, v in headers.items() if k.lower() not in drop}


class Chunk(BaseModel):
    """One body chunk as it arrived: ``size`` bytes, ``offset_ms`` after the response headers."""

    model_config = ConfigDict(frozen=True)
    offset_ms: float
    size: int


class Failure(BaseModel):
    """A transport failure instead of (or in the middle of) a response.

    ``kind``: refused | dns | timeout | reset | tls | protocol | other.
    ``during``: connect (no response at all) | response (headers arrived, body cut).
    """

    kind: Literal["refused", "dns", "timeout", "reset", "tls", "protocol", "other"] = "other"
    message: str = ""
    during: Literal["connect", "request", "response"] = "connect"


class BodyRef(BaseModel):
    """A body stored outside the YAML (``file`` relative to the cassette) or elided (``file`` None)."""

    size: int
    sha256: str
    file: str | None = None


class Request(BaseModel):
    """An HTTP request: ``method`` upper-case, ``uri`` absolute (the real upstream URL)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    method: str
    uri: str
    headers: HeaderDict = Field(default_factory=dict)
    body: bytes = b""

    def header(self, name: str, default: str | None = None) -> str | None:
        """First value of a header, case-insensitive."""
        return header_get(self.headers, name, default)

    @cached_property
    def url(self):  # -> urllib.parse.SplitResult
        """The parsed ``uri`` (scheme, netloc, path, query)."""
        return urlsplit(self.uri)

    @property
    def host(self) -> str:
        return self.url.hostname or ""

    @property
    def text(self) -> str:
        """Body decoded as UTF-8 (invalid bytes replaced)."""
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """Body parsed as JSON, or None when it is not JSON."""
        return parse_json(self.body)


class Response(BaseModel):
    """An HTTP response; ``chunks`` (when recorded) partition ``body`` in arrival order."""

    status: int
    reason: str = ""
    headers: HeaderDict = Field(default_factory=dict)
    body: bytes = b""
    body_ref: BodyRef | None = None
    chunks: list[Chunk] | None = None

    def header(self, name: str, default: str | None = None) -> str | None:
        return header_get(self.headers, name, default)

    @property
    def content_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return parse_json(self.body)


class Interaction(BaseModel):
    """One request and what came back: a ``response``, a transport ``error``, or both
    (a stream cut after its headers).  ``started_at``/``duration_ms`` are spoolproxy
    extensions (absent in plain vcrpy cassettes)."""

    request: Request
    response: Response | None = None
    error: Failure | None = None
    started_at: datetime | None = None
    duration_ms: float | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class CassetteMeta(BaseModel):
    """Run-level facts spoolproxy records (never environment values)."""

    recorder: str | None = None
    recorded_at: datetime | None = None
    command: list[str] | None = None
    cwd: str | None = None
    record_mode: str | None = None
    exit_code: int | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class Cassette(BaseModel):
    """A loaded cassette. ``source_format`` tells where it came from:
    ``spoolproxy`` (format v1 with extensions), ``vcrpy`` (plain) or ``parsed_body``
    (pydantic-ai's variant)."""

    interactions: list[Interaction] = Field(default_factory=list)
    meta: CassetteMeta = Field(default_factory=CassetteMeta)
    source_format: Literal["spoolproxy", "vcrpy", "parsed_body"] = "spoolproxy"
    path: Path | None = Field(default=None, exclude=True)

    def __len__(self) -> int:
        return len(self.interactions)


def parse_json(body: bytes) -> Any:
    """``body`` parsed as JSON, or None when empty or not JSON."""
    if not body:
        return None
    head = body[:1]
    if head in _WS:
        body = body.lstrip()
        head = body[:1]
    if head in _LITERALS:  # true, false, null: no parser round trip for "topic 3 fact..."
        word = _LITERALS[head]
        if body.rstrip() != word:
            return None
    elif head not in _JSON_STARTS:
        return None
    try:
        return loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


_WS = (b" ", b"\t", b"\r", b"\n")
_LITERALS = {b"t": b"true", b"f": b"false", b"n": b"null"}
_JSON_STARTS = frozenset([b"{", b"[", b'"', b"-", *(str(d).encode() for d in range(10))])
