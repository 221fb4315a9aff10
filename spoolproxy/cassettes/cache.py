"""A per-user cache of parsed cassette documents, so large cassettes load fast the second time.

PyYAML builds Python objects slowly (about 5 MB/s even with libyaml), while JSON parses
at hundreds of MB/s.  For a cassette file of at least :data:`MIN_SIZE` bytes, the parsed
document is kept as JSON under ``$SPOOLPROXY_CACHE`` (default ``~/.cache/spoolproxy/docs``,
mode 0700), keyed by the sha256 of the file's bytes: an edited cassette is a new key, so
the cache is never stale.  Content is exactly what the cassette holds (already redacted).
It keeps its newest entries within :data:`MAX_BYTES`. ``SPOOLPROXY_CACHE=off`` disables it.  Cache failures are never errors: the YAML is read.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .jsonsafe import from_jsonable, to_jsonable

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


def get(data: bytes) -> Any:
    """The cached document for these file bytes, or ``_MISSING``."""
    entry = _entry(data)
    if entry is None:
        return _MISSING
    try:
        return from_jsonable(json.loads(entry.read_bytes()))
    except (OSError, ValueError):
        return _MISSING


def put(data: bytes, doc: Any) -> None:
    """Remember ``doc`` for these file bytes (best effort, atomic)."""
    entry = _entry(data)
    if entry is None:
        return
    try:
        text = json.dumps(to_jsonable(doc), ensure_ascii=False, separators=(",", ":"))
        entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = entry.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, entry)
        _evict(entry.parent)
    except (OSError, TypeError, ValueError):
        pass


def _evict(d: Path, budget: int = MAX_BYTES) -> None:
    """Delete the least recently written entries until the cache fits ``budget`` bytes."""
    entries = sorted(((f.stat().st_mtime, f.stat().st_size, f) for f in d.glob("*.json")), reverse=True)
    total = 0
    for _, size, f in entries:
        total += size
        if total > budget:
            f.unlink(missing_ok=True)
