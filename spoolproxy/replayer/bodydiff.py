"""Explaining non-JSON request bodies: multipart parts and raw bytes, bounded.

* **multipart** (canonical form: the boundary replaced by ``BOUNDARY``, see
  :mod:`.fingerprint`): the parts are paired by their ``name`` (``name#2`` for a repeated
  one, the position when unnamed) and compared by headers, length and SHA-256.  A differing
  part is one :class:`~.diff.Change` at ``multipart["file"]`` whose values are marked
  excerpts (``<12,000,000 bytes sha256:… 'head…'>``) and whose ``line_diff`` locates the
  first differing byte; a short text part is shown as it is.
* **raw** bodies: text up to :data:`~.excerpt.OPAQUE_CHARS` characters gets a bounded line
  diff; anything longer, or binary, is compared by length and hash with the first
  difference located.

Nothing here is quadratic: splitting, hashing and the first-difference search are O(n).
"""

from __future__ import annotations

import re

from .diff import Budget, Change, Diff, diff_json_bounded, line_diff
from .excerpt import OPAQUE_CHARS, difference_lines, digest, marked

BOUNDARY = b"--BOUNDARY"
_NAME = re.compile(rb'\bname="([^"]*)"|\bname=([^;\s]+)', re.IGNORECASE)
_SHORT_PART = 200  #: text parts up to this many bytes are shown verbatim


def parts(canonical: bytes) -> list[tuple[str, bytes, bytes]] | None:
    """``[(name, headers, content)]`` of a canonical multipart body, or None when it does
    not split into parts."""
    pieces = canonical.split(BOUNDARY)
    if len(pieces) < 3:
        return None
    out: list[tuple[str, bytes, bytes]] = []
    seen: dict[str, int] = {}
    for i, piece in enumerate(pieces[1:-1]):
        piece = piece.removeprefix(b"\r\n").removesuffix(b"\r\n")
        headers, sep, content = piece.partition(b"\r\n\r\n")
        if not sep:
            headers, content = b"", piece
        m = _NAME.search(headers)
        base = (m.group(1) or m.group(2)).decode("utf-8", "replace") if m else f"#{i}"
        seen[base] = seen.get(base, 0) + 1
        out.append((base if seen[base] == 1 else f"{base}#{seen[base]}", headers, content))
    return out


def _show(content: bytes) -> str:
    if len(content) <= _SHORT_PART:
        try:
            return content.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return marked(content)


def diff_multipart(recorded: bytes, actual: bytes, limit: int | None, budget: Budget | None = None) -> Diff | None:
    """Part-by-part differences of two canonical multipart bodies (None when either does
    not split into parts)."""
    rp, ap = parts(recorded), parts(actual)
    if rp is None or ap is None:
        return None
    out = Diff()
    amap = {name: (h, c) for name, h, c in ap}
    rnames = {name for name, _, _ in rp}
    changes: list[Change] = []
    for name, h, c in rp:
        path = f"multipart[{name!r}]"
        if name not in amap:
            changes.append(Change(path=path, kind="removed", recorded=_show(c)))
            continue
        ah, ac = amap[name]
        if h != ah:
            changes.append(Change(path=path + ".headers", kind="changed", recorded=h.decode("utf-8", "replace")[:300],
                                  actual=ah.decode("utf-8", "replace")[:300]))
        if c != ac:
            if len(c) <= _SHORT_PART and len(ac) <= _SHORT_PART:
                changes.append(Change(path=path, kind="changed", recorded=_show(c), actual=_show(ac)))
            else:
                changes.append(Change(path=path, kind="changed", recorded=marked(c), actual=marked(ac),
                                      line_diff=difference_lines(c, ac)))
        if budget is not None and budget.spent():
            out.cut = "the explanation stopped at its time budget"
            break
    for name, _, c in ap:
        if name not in rnames:
            changes.append(Change(path=f"multipart[{name!r}]", kind="added", actual=_show(c)))
    if limit is not None and len(changes) > limit:
        changes, out.cut = changes[:limit], f"only the first {limit} differences are listed"
    out.changes = changes
    return out


def diff_raw(recorded: bytes, actual: bytes) -> Diff:
    """One ``$`` change: a bounded line diff for short text, else length + hash excerpts
    with the first differing byte."""
    if recorded == actual:
        return Diff()
    if len(recorded) <= OPAQUE_CHARS and len(actual) <= OPAQUE_CHARS:
        try:
            rt, at = recorded.decode("utf-8"), actual.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return Diff([Change(path="$", kind="changed", recorded=_clip(rt), actual=_clip(at), line_diff=line_diff(rt, at))])
    return Diff([Change(path="$", kind="changed", recorded=marked(recorded), actual=marked(actual),
                        line_diff=difference_lines(recorded, actual))])


def _clip(s: str, n: int = 200) -> str:
    return s if len(s) <= n else s[:n] + "…"


def bounded_diff(recorded_json, actual_json, recorded: bytes, actual: bytes, *, kinds: tuple[str, str] = ("", ""),
                limit: int | None = 50, budget: Budget | None = None) -> Diff:
    """The bounded explanation of two normalised request bodies: a JSON diff when both are
    JSON, a part-by-part diff when both are multipart, else :func:`diff_raw`.
    ``kinds``: the recorded and actual ``body_kind`` (json | form | multipart | raw | empty)."""
    if recorded_json is not None and actual_json is not None:
        return diff_json_bounded(recorded_json, actual_json, limit, budget)
    if recorded == actual:
        return Diff()
    if kinds == ("multipart", "multipart"):
        found = diff_multipart(recorded, actual, limit, budget)
        if found is not None:
            return found
    return diff_raw(recorded, actual)


def body_summary(body: bytes) -> str:
    """``N bytes sha256:HEX`` of a body (for reasons and miss messages)."""
    return f"{len(body):,} bytes sha256:{digest(body)}"
