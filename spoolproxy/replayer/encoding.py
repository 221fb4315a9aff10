"""Serving bodies with their recorded ``Content-Encoding`` (``--encode-as-recorded``).

Cassettes store bodies decoded; the encoding the server used is kept in the interaction's
``content_encoding`` extension (``spoolproxy: {content_encoding: gzip}``).  By default
playback serves the decoded body without the header, which every client accepts.  A client
bug that only shows with compressed responses (a missing decompressor, a stream parser that
assumes one event per chunk of compressed data) reproduces offline only when the body is
served encoded again: :func:`encode` for a whole body, :class:`StreamEncoder` for a
stream, which flushes the compressor at every recorded chunk boundary so the client still
receives one compressed piece per recorded chunk.

Supported: ``gzip`` (``x-gzip``), ``deflate`` (zlib format, RFC 9110), ``br`` (brotli) and
``zstd`` — the encodings mitmproxy decodes, using the same libraries it ships with.
"""

from __future__ import annotations

import sys
import zlib

import brotli

if sys.version_info >= (3, 14):  # pragma: no cover
    from compression import zstd
else:
    from backports import zstd

SUPPORTED = ("gzip", "x-gzip", "deflate", "br", "zstd")


def recorded_encoding(extra: dict) -> str | None:
    """The ``Content-Encoding`` an interaction was served with (lower-case), or None when
    it was served unencoded or with an encoding playback cannot produce."""
    enc = str(extra.get("content_encoding") or "").strip().lower()
    return enc if enc in SUPPORTED else None


class StreamEncoder:
    """Compresses a body piece by piece: :meth:`piece` returns the compressed bytes of one
    recorded chunk (flushed, so the client can decode it at once), :meth:`finish` the end
    of the compressed stream.  Raises ValueError for an unsupported encoding."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        if encoding in ("gzip", "x-gzip"):
            self._z = zlib.compressobj(6, zlib.DEFLATED, 31)
        elif encoding == "deflate":
            self._z = zlib.compressobj(6, zlib.DEFLATED, 15)
        elif encoding == "br":
            self._br = brotli.Compressor()
        elif encoding == "zstd":
            self._zs = zstd.ZstdCompressor()
        else:
            raise ValueError(f"cannot encode a body as {encoding!r}; supported: {', '.join(SUPPORTED)}")

    def piece(self, data: bytes) -> bytes:
        if self.encoding == "br":
            return self._br.process(data) + self._br.flush()
        if self.encoding == "zstd":
            return self._zs.compress(data, mode=zstd.ZstdCompressor.FLUSH_BLOCK)
        return self._z.compress(data) + self._z.flush(zlib.Z_SYNC_FLUSH)

    def finish(self) -> bytes:
        if self.encoding == "br":
            return self._br.finish()
        if self.encoding == "zstd":
            return self._zs.flush(zstd.ZstdCompressor.FLUSH_FRAME)
        return self._z.flush(zlib.Z_FINISH)


def encode(body: bytes, encoding: str) -> bytes:
    """``body`` compressed as ``encoding`` in one piece."""
    enc = StreamEncoder(encoding)
    return (enc.piece(body) if body else b"") + enc.finish()
