"""Body codecs: content-encoding decoding and byte-exact JSON layouts.

A cassette stores bodies decoded.  A JSON body is written as a YAML structure only when
one of the :data:`JSON_STYLES` reproduces its exact bytes, so playback serves what the
server sent, byte for byte; any other body stays a string (or ``!!binary``).
"""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any, Callable

from .model import HeaderDict, header_get, header_without


def _dumps(**kw: Any) -> Callable[[Any], str]:
    return lambda obj: json.dumps(obj, **kw)


#: style name -> function rendering a parsed JSON value back to text.
JSON_STYLES: dict[str, Callable[[Any], str]] = {
    "compact": _dumps(separators=(",", ":"), ensure_ascii=False),
    "spaced": _dumps(ensure_ascii=False),
    "compact-ascii": _dumps(separators=(",", ":")),
    "spaced-ascii": _dumps(),
    "indent2": _dumps(indent=2, ensure_ascii=False),
    "indent2-ascii": _dumps(indent=2),
}

#: style used for ``parsed_body`` that carries no style (pydantic-ai's variant).
DEFAULT_STYLE = "spaced"


def json_style(body: bytes) -> tuple[str, Any] | None:
    """``(style, value)`` when a JSON style reproduces ``body`` exactly (a trailing newline
    is kept as the ``+nl`` suffix), else None.  Only objects and arrays qualify."""
    if not body or body.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        text = body.decode("utf-8")
        value = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(value, (dict, list)) or not value:
        return None
    suffix = ""
    core = text
    if text.endswith("\n"):
        core, suffix = text[:-1], "+nl"
    for name, dump in JSON_STYLES.items():
        if dump(value) == core:
            return name + suffix, value
    return None


def render_json(value: Any, style: str | None) -> bytes:
    """Bytes of ``value`` in ``style`` (see :func:`json_style`); unknown style: DEFAULT_STYLE."""
    style = style or DEFAULT_STYLE
    nl = style.endswith("+nl")
    dump = JSON_STYLES.get(style.removesuffix("+nl"), JSON_STYLES[DEFAULT_STYLE])
    return (dump(value) + ("\n" if nl else "")).encode("utf-8")


def _via_mitmproxy(encoding: str) -> Callable[[bytes], bytes]:
    """mitmproxy's decoder for ``encoding`` (it ships brotli and zstd support)."""

    def decode(data: bytes) -> bytes:
        from mitmproxy.net import encoding as mitm_encoding

        out = mitm_encoding.decode(data, encoding)
        return out if isinstance(out, bytes) else out.encode("utf-8")

    return decode


_DECODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.decompress,
    "x-gzip": gzip.decompress,
    "deflate": lambda d: zlib.decompress(d) if d[:1] == b"\x78" else zlib.decompress(d, -15),
    "br": _via_mitmproxy("br"),
    "zstd": _via_mitmproxy("zstd"),
}


def decode_body(headers: HeaderDict, body: bytes) -> tuple[HeaderDict, bytes]:
    """Undo ``Content-Encoding`` on ``body``; return headers without it (and without a
    stale Content-Length).  A header left on an already-decoded body (vcrpy quirk) is
    dropped too.  Bytes that do not decode are returned unchanged with the header kept."""
    encoding = (header_get(headers, "content-encoding") or "").strip().lower()
    if not encoding or encoding == "identity":
        return headers, body
    data = body
    for enc in reversed([e.strip() for e in encoding.split(",") if e.strip()]):
        decoder = _DECODERS.get(enc)
        if decoder is None:
            return headers, body
        try:
            data = decoder(data)
        except Exception:
            if data is body and _looks_decoded(body):
                break  # header on a plain body: keep the body, drop the header
            return headers, body
    return header_without(headers, "content-encoding", "content-length"), data


def _looks_decoded(body: bytes) -> bool:
    head = body.lstrip()[:1]
    return not body or head in (b"{", b"[", b"<", b"d", b"e", b":") or body.isascii()
