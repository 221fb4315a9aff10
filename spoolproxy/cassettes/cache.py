"""A per-user cache of parsed cassette documents, so large cassettes load fast the second time.

PyYAML builds Python objects slowly (about 5 MB/s even with libyaml), while JSON parses
at hundreds of MB/s.  For a cassette file of at least :data:`MIN_SIZE` bytes, the parsed
document is kept as JSON Lines (its top-level keys, then one line per interaction, then an
``{"end": n}`` check, so it is written and read one interaction at a time) under ``$SPOOLPROXY_CACHE`` (default ``~/.cache/spoolproxy/docs``,
mode 0700), keyed by the sha256 of the file's bytes: an edited cassette is a new key, so
the cache is never stale.  Content is exactly what the cassette holds (already redacted).
It keeps its newest entries within :data:`MAX_BYTES`. ``SPOOLPROXY_CACHE=off`` disables it.  Cache failures are never errors: the YAML is read.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from .jsonparse import loads
from .jsonsafe import dumps_line, from_jsonable

MIN_SIZE = 256 * 1024
#: the cache keeps its newest entries within this many bytes
MAX_BYTES = 512 * 1024 * 1024
_MISSING = object()


def cache_dir() -> Path | None:
    """The cache directory, or None when disabled."""
    env = os.environ.get("SPOOLPROXY_CACHE")
    if env and env.lower() in ("off", "0", "no", "false"):
        return None
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "spoolproxy" / "docs"




def _entry(data: bytes) -> Path | None:
    d = cache_dir()
    if d is None or len(data) < MIN_SIZE:
        return None
    return d / (hashlib.sha256(data).hexdigest() + ".json")


def entry_for_file(fh: BinaryIO, size: int) -> Path | None:
    """The cache entry of the file open as ``fh`` (hashed in 1 MiB blocks, then rewound), or
    None when the cache is off or the file is small."""
    d = cache_dir()
    if d is None or size < MIN_SIZE:
        return None
    h = hashlib.sha256()
    for block in iter(lambda: fh.read(1 << 20), b""):
        h.update(block)
    fh.seek(0)
    return d / (h.hexdigest() + ".json")


def get(data: bytes) -> Any:
    """The cached document for these file bytes, or ``_MISSING``."""
    entry = _entry(data)
    if entry is None:
        return _MISSING
    pieces = read_entry(entry)
    if pieces is None:
        return _MISSING
    doc: dict[str, Any] = {}
    items = []
    for kind, value in pieces:
        if kind == "top":
            doc[value[0]] = value[1]
        else:
            items.append(value)
    doc["interactions"] = items
    return doc


def read_entry(entry: Path | None) -> Iterator[tuple[str, Any]] | None:
    """The pieces of a cache entry (``("top", (key, value))`` for each top-level key, then
    ``("item", interaction)``), read one line at a time; None when there is no usable entry.
    A damaged entry stops with ValueError part-way (its last line is an ``{"end": n}`` check)."""
    if entry is None:
        return None
    try:
        fh = open(entry, "rb")
    except OSError:
        return None
    try:
        first = loads(fh.readline())
    except ValueError:
        fh.close()
        return None
    if not isinstance(first, dict) or not isinstance(first.get("top"), dict):
        fh.close()
        return None  # not ours (an entry of an older spoolproxy): parse the YAML again

    def pieces() -> Iterator[tuple[str, Any]]:
        with fh:
            for key, value in first["top"].items():
                yield "top", (key, from_jsonable(value))
            n = 0
            for line in fh:
                obj = loads(line)
                if "end" in obj:
                    if obj["end"] != n:
                        raise ValueError("damaged cache entry")
                    for key, value in (obj.get("top") or {}).items():
                        yield "top", (key, from_jsonable(value))
                    return
                n += 1
                yield "item", from_jsonable(obj["i"])
            raise ValueError("cache entry cut short")

    return pieces()


class EntryWriter:
    """Writes a cache entry while a cassette is parsed (``top`` keys first, then each
    ``item``); :meth:`commit` makes it visible, :meth:`abort` drops it.  Best effort: a
    failure to write disables the writer, never the load."""

    def __init__(self, entry: Path | None) -> None:
        self.entry = entry
        self._fh = None
        self._tmp: Path | None = None
        self._top: dict[str, Any] = {}
        self._tail: dict[str, Any] = {}  # top-level keys after the interactions (end_of_cassette)
        self._n = 0

    def top(self, key: str, value: Any) -> None:
        if self.entry is not None:
            (self._top if self._fh is None else self._tail)[key] = value

    def item(self, item: Any) -> None:
        if self.entry is None:
            return
        try:
            self._open()
            self._fh.write(dumps_line({"i": item}))
            self._n += 1
        except (OSError, TypeError, ValueError):
            self.abort()

    def _open(self) -> None:
        if self._fh is None:
            self.entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._tmp = self.entry.with_suffix(f".{os.getpid()}.{id(self)}.tmp")
            self._fh = open(self._tmp, "wb")
            self._fh.write(dumps_line({"top": self._top}))

    def commit(self) -> None:
        """Make the entry visible (atomically) and keep the cache within its budget."""
        if self.entry is None:
            return
        try:
            self._open()
            self._fh.write(dumps_line({"end": self._n, "top": self._tail}))
            self._fh.close()
            os.replace(self._tmp, self.entry)
            _evict(self.entry.parent)
        except (OSError, TypeError, ValueError):
            self.abort()

    def abort(self) -> None:
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError:
                pass
        if self._tmp is not None:
            try:
                self._tmp.unlink()
            except OSError:
                pass
        self.entry = None


def put(data: bytes, doc: Any) -> None:
    """Remember ``doc`` for these file bytes (best effort, atomic)."""
    put_entry(_entry(data), doc)


def put_entry(entry: Path | None, doc: Any) -> None:
    """Write ``doc`` (a whole parsed document) as cache ``entry`` (best effort, atomic)."""
    writer = EntryWriter(entry)
    if writer.entry is None or not isinstance(doc, dict):
        return
    for key, value in doc.items():
        if key != "interactions":
            writer.top(key, value)
    for item in doc.get("interactions") or []:
        writer.item(item)
    writer.commit()


def _evict(d: Path, budget: int = MAX_BYTES) -> None:
    """Delete the least recently written entries until the cache fits ``budget`` bytes."""
    entries = sorted(((f.stat().st_mtime, f.stat().st_size, f) for f in d.glob("*.json")), reverse=True)
    total = 0
    for _, size, f in entries:
        total += size
        if total > budget:
            f.unlink(missing_ok=True)
