"""Bounded views of big values: what a report shows of a 20 MB base64 string or a 12 MB
binary upload without copying, diffing or printing it.

Explanations never run a character- or byte-level diff over a long value.  A string longer
than :data:`OPAQUE_CHARS` (or one that looks like base64 / a ``data:`` URL, and any binary
body) is compared by length and SHA-256 and shown as a short **marked excerpt**::

    <2,796,204 chars sha256:1a2b3c4d5e6f 'data:image/png;base64,iVBORw0KGgo…'>

plus, when two such values differ, the offset of the first difference and a few characters
around it on each side.  Every function here costs O(n) memory comparison at most (no
quadratic step), and the excerpts are at most a few hundred characters.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

#: single-line strings longer than this are opaque (length + hash + excerpt)
OPAQUE_CHARS = 4096
#: any text longer than this is opaque; multi-line text up to it gets a bounded line diff
MAX_TEXT_CHARS = 1 << 20
#: characters of an excerpt (head of an opaque value, context around a difference)
EXCERPT_CHARS = 48
#: a JSON value's preview in a report is at most this many characters
PREVIEW_CHARS = 200
#: block size of the first-difference search (slices this size are compared at C speed)
_BLOCK = 1 << 16

_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=_-]{256,}")


def looks_opaque(s: str) -> bool:
    """True for a string shown by length and hash rather than diffed: at least 256
    characters of base64 or a ``data:`` URL (an image, audio, a file), a single line longer
    than :data:`OPAQUE_CHARS`, or any text longer than :data:`MAX_TEXT_CHARS`.  (Multi-line
    text up to that size gets a bounded line diff instead.)"""
    if len(s) < 256:
        return False
    if len(s) > MAX_TEXT_CHARS or s.startswith("data:") or _BASE64_RUN.fullmatch(s) is not None:
        return True
    return len(s) > OPAQUE_CHARS and "\n" not in s


def digest(data: str | bytes, n: int = 12) -> str:
    """The first ``n`` hex digits of the SHA-256 of ``data`` (a string as UTF-8)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()[:n]


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n] + "…"


def _head(data: str | bytes, n: int) -> str:
    """A printable excerpt: text as a Python string literal, bytes that are not UTF-8 text
    as a bytes literal (``b'\\x89PNG…'``)."""
    if isinstance(data, bytes):
        try:
            out = repr(data[:n].decode("utf-8"))
        except UnicodeDecodeError:
            out = repr(data[:n])
    else:
        out = repr(data[:n])
    return out if len(out) <= 4 * EXCERPT_CHARS else out[: 4 * EXCERPT_CHARS] + "…"


def marked(value: str | bytes, *, unit: str | None = None) -> str:
    """The marked excerpt of a long string or a byte string:
    ``<N chars|bytes sha256:HEX12 'head…'>``."""
    unit = unit or ("bytes" if isinstance(value, bytes) else "chars")
    more = "…" if len(value) > EXCERPT_CHARS else ""
    return f"<{len(value):,} {unit} sha256:{digest(value)} {_head(value, EXCERPT_CHARS)}{more}>"


def first_difference(a: str | bytes, b: str | bytes) -> int:
    """Index of the first position where ``a`` and ``b`` differ (``min(len)`` when one is a
    prefix of the other).  Compares 64 KiB blocks at C speed, then narrows down: O(n)."""
    n = min(len(a), len(b))
    pos = 0
    while pos < n and a[pos : pos + _BLOCK] == b[pos : pos + _BLOCK]:
        pos += _BLOCK
    if pos >= n:
        return n
    lo, hi = pos, min(pos + _BLOCK, n)  # the difference lies in [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo if a[lo : lo + 1] != b[lo : lo + 1] else hi


def common_suffix(a: str | bytes, b: str | bytes, limit: int) -> int:
    """Length of the common suffix of ``a`` and ``b``, at most ``limit`` (O(n))."""
    if limit <= 0:
        return 0
    return first_difference(a[len(a) - limit :][::-1], b[len(b) - limit :][::-1])


def changed_window(a: str | bytes, b: str | bytes, context: int = EXCERPT_CHARS) -> tuple[int, Any, Any]:
    """``(offset, recorded part, actual part)``: the differing middle of two values between
    their common prefix and common suffix, with ``context`` characters around, each part
    clipped to about ``4 * context`` characters (an O(n) scan, no diff algorithm)."""
    start = first_difference(a, b)
    tail = common_suffix(a, b, min(len(a), len(b)) - start)
    lo = max(0, start - context)
    ra, rb = a[lo : len(a) - tail + context], b[lo : len(b) - tail + context]
    width = 4 * context
    return start, ra[:width], rb[:width]


def difference_lines(a: str | bytes, b: str | bytes) -> list[str]:
    """Three lines locating the first difference of two opaque values:
    ``@ first difference at char|byte N`` then ``-recorded excerpt`` and ``+actual excerpt``."""
    offset, ra, rb = changed_window(a, b)
    unit = "byte" if isinstance(a, bytes) else "char"
    return [f"@ first difference at {unit} {offset:,}", "-" + _head(ra, len(ra)), "+" + _head(rb, len(rb))]


def preview(value: Any, limit: int = PREVIEW_CHARS) -> Any:
    """A bounded stand-in for a JSON value in a report: scalars and short strings as they
    are, an opaque string as its marked excerpt, a container whose JSON would exceed
    ``limit`` characters as ``<object|array, N items: '{...head...}'…>`` (built without
    serialising the whole container)."""
    if isinstance(value, str):
        return marked(value) if looks_opaque(value) or len(value) > limit else value
    if isinstance(value, bytes):
        return marked(value)
    if not isinstance(value, (dict, list)):
        return value
    head = _bounded_json(value, limit + 1)
    if len(head) <= limit:
        return json.loads(head)  # the value itself, long strings inside as marked excerpts
    kind = "object" if isinstance(value, dict) else "array"
    return f"<{kind}, {len(value):,} {'keys' if kind == 'object' else 'items'}: {_clip(head, limit // 2)!s}>"


def _bounded_json(value: Any, limit: int) -> str:
    """JSON text of ``value`` cut after about ``limit`` characters; long strings inside are
    replaced by their marked excerpts, so the cost is bounded by ``limit``, not the value."""
    out: list[str] = []
    size = 0

    def emit(s: str) -> bool:
        nonlocal size
        out.append(s)
        size += len(s)
        return size < limit

    def walk(v: Any) -> bool:
        if isinstance(v, dict):
            if not emit("{"):
                return False
            for i, (k, x) in enumerate(v.items()):
                if (i and not emit(",")) or not emit(json.dumps(str(k))[:limit] + ":") or not walk(x):
                    return False
            return emit("}")
        if isinstance(v, list):
            if not emit("["):
                return False
            for i, x in enumerate(v):
                if (i and not emit(",")) or not walk(x):
                    return False
            return emit("]")
        if isinstance(v, str):
            return emit(json.dumps(marked(v) if len(v) > limit or looks_opaque(v) else v, ensure_ascii=False))
        return emit(json.dumps(v))

    walk(value)
    return "".join(out)[:limit]
