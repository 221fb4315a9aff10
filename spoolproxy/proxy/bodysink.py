"""Capturing a streamed response body as it passes through, with bounded memory.

A :class:`BodySink` is installed as mitmproxy's ``flow.response.stream`` callable: every
chunk goes on to the client unchanged and at once, while the sink

* notes the chunk's arrival offset (ms after the response headers) and size,
* undoes ``Content-Encoding`` (gzip, x-gzip, deflate, br, zstd) incrementally, so stored
  bytes and chunk sizes are the *decoded* ones,
* keeps the decoded body in memory up to ``limit`` bytes; past that it either spills the
  body to a side file (redacted on the way, :class:`StreamRedactor`, so no secret reaches
  the disk) or elides it, keeping only its size and sha256.

:meth:`BodySink.finish` returns a :class:`Captured` result.  Nothing here raises on bad
data: a body that does not decode is stored as received, with its encoding header kept.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..cassettes.model import BodyRef, Chunk
from ..cassettes.redact import Redactor

DEFAULT_LIMIT = 10 * 1024 * 1024


class _Decoder:
    """Incremental decoder for a ``Content-Encoding`` list (applied in reverse order)."""

    def __init__(self, encodings: list[str]) -> None:
        self.steps = [self._make(e) for e in reversed(encodings)]

    @staticmethod
    def _make(enc: str):
        if enc in ("gzip", "x-gzip"):
            d = zlib.decompressobj(wbits=31)
            return (lambda b: d.decompress(b)), d.flush
        if enc == "deflate":
            state: dict = {}

            def feed(b: bytes) -> bytes:
                if "d" not in state:
                    if not b:
                        return b""
                    # RFC 9110 says zlib-wrapped; some servers send raw deflate
                    state["d"] = zlib.decompressobj(wbits=15 if (b[0] & 0x0F) == 8 else -15)
                return state["d"].decompress(b)

            return feed, (lambda: state["d"].flush() if "d" in state else b"")
        if enc == "br":
            import brotli

            d = brotli.Decompressor()
            return d.process, (lambda: b"")
        if enc == "zstd":
            try:
                from compression import zstd  # type: ignore[import-not-found]
            except ImportError:
                from backports import zstd  # type: ignore[no-redef]  # mitmproxy depends on it

            state = {"d": zstd.ZstdDecompressor()}

            def feed_z(b: bytes) -> bytes:
                out = b""
                while b:
                    d = state["d"]
                    out += d.decompress(b)
                    if d.eof:  # concatenated frames
                        b = d.unused_data
                        state["d"] = zstd.ZstdDecompressor()
                    else:
                        b = b""
                return out

            return feed_z, (lambda: b"")
        raise ValueError(enc)

    def feed(self, data: bytes) -> bytes:
        for step, _ in self.steps:
            data = step(data)
        return data

    def flush(self) -> bytes:
        out = b""
        for i, (step, fl) in enumerate(self.steps):
            out = step(out) if i and out else out
            out += fl()
        return out


class StreamRedactor:
    """Redacts a byte stream written in pieces: holds back a tail of ``hold`` bytes so a
    secret split across two writes is still found.  ``sink(bytes)`` receives the output."""

    def __init__(self, redactor: Redactor, sink: Callable[[bytes], None], hold: int = 4096) -> None:
        self.redactor = redactor
        self.sink = sink
        self.hold = hold
        self.buf = bytearray()

    def write(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) < 4 * self.hold:
            return
        cut = self._safe_cut(len(self.buf) - self.hold)
        if cut > 0:
            self.sink(self.redactor.bytes_(bytes(self.buf[:cut])))
            del self.buf[:cut]

    def _safe_cut(self, cut: int) -> int:
        """Move ``cut`` back so no secret-shaped match straddles it."""
        start = max(0, cut - self.hold)
        window = bytes(self.buf[start:])
        moved = True
        while moved and cut > start:
            moved = False
            for s, e in self.redactor.spans(window):  # what bytes_() could replace
                s, e = s + start, e + start
                if s < cut < e:
                    cut, moved = s, True
        return cut

    def close(self) -> None:
        if self.buf:
            self.sink(self.redactor.bytes_(bytes(self.buf)))
            self.buf.clear()


@dataclass
class Captured:
    """What a :class:`BodySink` captured: ``body`` (decoded bytes, empty when stored
    outside), ``body_ref`` (side file or elided), ``chunks`` (decoded sizes, arrival
    offsets), ``decoded`` (False when the encoding was kept), ``wire_size`` (bytes seen)."""

    body: bytes = b""
    body_ref: BodyRef | None = None
    chunks: list[Chunk] = field(default_factory=list)
    decoded: bool = True
    wire_size: int = 0


class BodySink:
    """mitmproxy ``flow.response.stream`` callable that records what passes through.

    ``encoding``: the response's ``Content-Encoding`` value (or None).  ``limit``: bytes
    kept in memory (decoded); beyond it the body is spilled (``spill_dir`` given, ``mode``
    "spill") or elided (``mode`` "elide").  ``redactor`` redacts spilled bytes.  ``t0``:
    the ``time.perf_counter()`` of the response headers (chunk offsets count from it).
    """

    def __init__(
        self,
        *,
        encoding: str | None = None,
        limit: int = DEFAULT_LIMIT,
        mode: str = "spill",
        spill_dir: Path | None = None,
        redactor: Redactor | None = None,
        t0: float | None = None,
    ) -> None:
        self.t0 = time.perf_counter() if t0 is None else t0
        self.limit = limit
        self.mode = mode if spill_dir is not None else "elide"
        self.spill_dir = spill_dir
        self.redactor = redactor or Redactor()
        encs = [e.strip().lower() for e in (encoding or "").split(",") if e.strip() and e.strip().lower() != "identity"]
        self.decoder: _Decoder | None = None
        self.decoded = True
        if encs:
            try:
                self.decoder = _Decoder(encs)
            except ValueError:
                self.decoded = False  # unknown encoding: store as received
        self.raw = bytearray()  # encoded bytes, kept (within the limit) to fall back on
        self.raw_ok = self.decoder is not None
        self.mem = bytearray()
        self.chunks: list[Chunk] = []
        self.wire_size = 0
        self.stored = 0
        self.sha = hashlib.sha256()
        self._file = None
        self._tmp: Path | None = None
        self._redact_stream: StreamRedactor | None = None
        self.over = False
        self.broken = False  # decoding failed after the raw bytes were dropped: elide
        self.finished = False

    # -- the mitmproxy stream callable ----------------------------------------------
    def __call__(self, data: bytes) -> bytes:
        if not data or self.finished:  # finished early by a shutdown: just pass bytes on
            return data
        offset = (time.perf_counter() - self.t0) * 1000.0
        self.wire_size += len(data)
        if self.broken:
            return data
        out = data
        if self.decoder is not None and self.decoded:
            if self.raw_ok:
                if len(self.raw) + len(data) <= self.limit:
                    self.raw += data
                else:
                    self.raw_ok = False
                    self.raw.clear()
            try:
                out = self.decoder.feed(data)
            except Exception:
                out = self._decode_failed(data)
                if self.broken:
                    return data
        self._store(out, offset)
        return data

    def _decode_failed(self, data: bytes) -> bytes:
        """Decoding broke: restart from the raw bytes if we still have them."""
        self.decoded = False
        self.decoder = None
        if self.raw_ok and not self.over:
            self.mem.clear()
            self.stored = 0
            self.sha = hashlib.sha256()
            raw = bytes(self.raw)
            # one chunk per recorded boundary is no longer knowable: merge so far into the first
            first = self.chunks[0].offset_ms if self.chunks else 0.0
            self.chunks = []
            prior = raw[: len(raw) - len(data)]
            if prior:
                self._store(prior, first)
            return data
        self.broken = True
        return b""

    def _store(self, out: bytes, offset: float) -> None:
        if not out:
            return
        self.chunks.append(Chunk(offset_ms=round(offset, 3), size=len(out)))
        self.stored += len(out)
        if not self.over and len(self.mem) + len(out) <= self.limit:
            self.mem += out
            return
        if not self.over:
            self.over = True
            if self.mode == "spill":
                self._open_spill()
                self._spill(bytes(self.mem))
            else:
                self.sha.update(self.mem)
            self.mem = bytearray()
        if self.mode == "spill":
            self._spill(out)
        else:
            self.sha.update(out)

    def _open_spill(self) -> None:
        assert self.spill_dir is not None
        self.spill_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".spill-", suffix=".tmp", dir=self.spill_dir)
        os.fchmod(fd, 0o600)
        self._file = os.fdopen(fd, "wb")
        self._tmp = Path(tmp)
        self.spilled_size = 0

        def sink(b: bytes) -> None:
            self._file.write(b)
            self.sha.update(b)
            self.spilled_size += len(b)

        self._redact_stream = StreamRedactor(self.redactor, sink)

    def _spill(self, data: bytes) -> None:
        if data:
            assert self._redact_stream is not None
            self._redact_stream.write(data)

    # -- end -------------------------------------------------------------------------
    def finish(self, prefix: str = "") -> Captured:
        """Flush the decoder and any spill file, named ``<prefix>-<sha256[:16]>.bin``
        inside ``spill_dir``.  Returns the :class:`Captured` body."""
        if self.finished:
            return self._result
        self.finished = True
        if self.decoder is not None and self.decoded:
            try:
                tail = self.decoder.flush()
            except Exception:
                tail = b""
            if tail:
                last = self.chunks[-1].offset_ms if self.chunks else 0.0
                self._store(tail, last)
                # keep one chunk per arrival: fold the tail into the last chunk
                if len(self.chunks) >= 2:
                    t = self.chunks.pop()
                    prev = self.chunks.pop()
                    self.chunks.append(Chunk(offset_ms=prev.offset_ms, size=prev.size + t.size))
        chunks = self.chunks
        if self.broken:
            self.abort()
            self._result = Captured(
                body_ref=BodyRef(size=self.wire_size, sha256="", file=None), chunks=[], decoded=False, wire_size=self.wire_size
            )
            return self._result
        if not self.over:
            self._result = Captured(body=bytes(self.mem), chunks=chunks, decoded=self.decoded, wire_size=self.wire_size)
            return self._result
        if self.mode == "spill":
            assert self._redact_stream is not None and self._file is not None and self._tmp is not None
            self._redact_stream.close()
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            digest = self.sha.hexdigest()
            final = self.spill_dir / f"{prefix + '-' if prefix else ''}{digest[:16]}.bin"
            os.replace(self._tmp, final)
            size = self.spilled_size
            chunks = _fit(chunks, size)
            ref = BodyRef(size=size, sha256=digest, file=f"{self.spill_dir.name}/{final.name}")
        else:
            ref = BodyRef(size=self.stored, sha256=self.sha.hexdigest(), file=None)
        self._result = Captured(body_ref=ref, chunks=chunks, decoded=self.decoded, wire_size=self.wire_size)
        return self._result

    def abort(self) -> None:
        """Drop a half-written spill file (the response was cut and will not be kept)."""
        if self._file is not None and not self._file.closed:
            self._file.close()
        if self._tmp is not None and self._tmp.exists():
            self._tmp.unlink()


def _fit(chunks: list[Chunk], size: int) -> list[Chunk]:
    """Adjust the last chunks so sizes sum to ``size`` (redaction changed the length)."""
    total = sum(c.size for c in chunks)
    delta = size - total
    out = list(chunks)
    while delta and out:
        last = out.pop()
        new = last.size + delta
        if new > 0:
            out.append(Chunk(offset_ms=last.offset_ms, size=new))
            delta = 0
        else:
            delta = new
    return out
