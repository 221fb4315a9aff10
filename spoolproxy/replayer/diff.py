"""Field-level differences between a recorded request body and the actual one, bounded in
time and size, and the flag that would make them match.

:func:`diff_json` walks two JSON values and yields one :class:`Change` per differing leaf,
named by a JSON path (``$.messages[1].content``).  Every explanation is bounded whatever the
body size:

* at most ``limit`` changes (:data:`MAX_CHANGES`) and, with a :class:`Budget`, at most its
  time; the walk stops there and says so (:class:`Diff`.``cut``);
* a long string (over :data:`~.excerpt.OPAQUE_CHARS`) or base64 / ``data:`` URL is compared
  by equality, length and SHA-256 and shown as a marked excerpt with the first difference,
  never diffed character by character;
* a multi-line text gets a unified line diff of the lines between the common head and tail,
  at most :data:`MAX_DIFF_LINES` lines;
* a value that only one side has (a whole added message) is shown as a bounded preview.

Multipart and other non-JSON bodies are explained by :mod:`.bodydiff`.  :func:`distance`
counts differing JSON paths cheaply (no :class:`Change` objects, early exit) to pick the
nearest recorded request.  :func:`suggest` proposes the exact ``--normalize`` or
``--ignore-json-path`` flag (timestamps, dates, UUIDs, request ids).
"""

from __future__ import annotations

import difflib
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal

from pydantic import BaseModel, PrivateAttr

from .excerpt import changed_window, difference_lines, looks_opaque, marked, preview

LONG = 80  #: strings longer than this (or multi-line) get a line diff (up to OPAQUE_CHARS)
MAX_CHANGES = 50  #: differences kept per request
MAX_DIFF_LINES = 40  #: lines of one line diff
MAX_LINE_CHARS = 200  #: characters of one line of a line diff
_DIFFLIB_LINES = 400  #: lines per side handed to difflib (after the common head and tail)


class Budget:
    """A time budget for explanation work: ``seconds`` from now (None: unlimited).
    :meth:`spent` is cheap enough to call every few nodes."""

    def __init__(self, seconds: float | None) -> None:
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.hit = False

    def spent(self) -> bool:
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.hit = True
        return self.hit


class Change(BaseModel):
    """One difference: ``kind`` changed | added (only in actual) | removed (only recorded).

    ``recorded``/``actual`` are bounded previews of the JSON values (a long or base64
    string as ``<N chars sha256:HEX 'head…'>``, a big object as a one-line summary);
    ``line_diff`` is a unified line diff for text, or three lines locating the first
    difference of two long values (``@ first difference at char N``, ``-…``, ``+…``).
    """

    path: str
    kind: Literal["changed", "added", "removed"]
    recorded: Any = None
    actual: Any = None
    line_diff: list[str] | None = None
    #: for two strings: their differing middle parts (recorded, actual), read by :func:`suggest`
    _window: tuple[str, str] | None = PrivateAttr(default=None)

    def render(self) -> list[str]:
        """Human lines for the end-of-run report."""
        if self.kind == "added":
            return [f"{self.path}: only in actual: {_short(self.actual)}"]
        if self.kind == "removed":
            return [f"{self.path}: only in recorded: {_short(self.recorded)}"]
        if self.line_diff:
            if self.line_diff[0].startswith("@ first difference"):
                return [f"{self.path}: recorded {_short(self.recorded)}, actual {_short(self.actual)}",
                        *("    " + ln for ln in self.line_diff)]
            return [f"{self.path}: text differs:", *("    " + ln for ln in self.line_diff)]
        return [f"{self.path}: recorded {_short(self.recorded)}, actual {_short(self.actual)}"]


@dataclass
class Diff:
    """A bounded explanation: ``changes`` in document order and ``cut`` saying why the list
    may be incomplete (None when it is complete)."""

    changes: list[Change] = field(default_factory=list)
    cut: str | None = None


def _short(v: Any, limit: int = 120) -> str:
    s = v if isinstance(v, str) and v.startswith("<") and v.endswith(">") else json.dumps(v, ensure_ascii=False)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if re.fullmatch(r"[A-Za-z_][\w\-]*", key) else f"{path}[{json.dumps(key)}]"


def _changed(path: str, r: Any, a: Any) -> Change:
    if not (isinstance(r, str) and isinstance(a, str)):
        return Change(path=path, kind="changed", recorded=preview(r), actual=preview(a))
    if looks_opaque(r) or looks_opaque(a):
        c = Change(path=path, kind="changed", recorded=marked(r), actual=marked(a), line_diff=difference_lines(r, a))
    elif len(r) > LONG or len(a) > LONG or "\n" in r + a:
        c = Change(path=path, kind="changed", recorded=preview(r), actual=preview(a), line_diff=line_diff(r, a))
    else:
        c = Change(path=path, kind="changed", recorded=r, actual=a)
    _, rs, as_ = changed_window(r, a, context=25)
    c._window = (rs, as_)
    return c


def _walk(r: Any, a: Any, path: str, budget: Budget | None) -> Iterator[Change]:
    if budget is not None and budget.spent():
        return
    if isinstance(r, dict) and isinstance(a, dict):
        for k in r:
            if k not in a:
                yield Change(path=_key_path(path, k), kind="removed", recorded=preview(r[k]))
            else:
                yield from _walk(r[k], a[k], _key_path(path, k), budget)
        for k in a:
            if k not in r:
                yield Change(path=_key_path(path, k), kind="added", actual=preview(a[k]))
        return
    if isinstance(r, list) and isinstance(a, list):
        for i in range(max(len(r), len(a))):
            p = f"{path}[{i}]"
            if i >= len(a):
                yield Change(path=p, kind="removed", recorded=preview(r[i]))
            elif i >= len(r):
                yield Change(path=p, kind="added", actual=preview(a[i]))
            else:
                yield from _walk(r[i], a[i], p, budget)
        return
    if type(r) is type(a) and r == a:  # strings compare at C speed, whatever their length
        return
    yield _changed(path, r, a)


def diff_json_bounded(recorded: Any, actual: Any, limit: int | None = MAX_CHANGES, budget: Budget | None = None) -> Diff:
    """Differences between two JSON values in document order: at most ``limit`` (None: all)
    and within ``budget``; :attr:`Diff.cut` says when the walk stopped early."""
    out = Diff()
    for c in _walk(recorded, actual, "$", budget):
        out.changes.append(c)
        if limit is not None and len(out.changes) >= limit:
            out.cut = f"only the first {limit} differences are listed"
            break
    if budget is not None and budget.hit and out.cut is None:
        out.cut = "the explanation stopped at its time budget"
    return out


def diff_json(recorded: Any, actual: Any, limit: int = MAX_CHANGES) -> list[Change]:
    """Differences between two JSON values, in document order, at most ``limit``."""
    return diff_json_bounded(recorded, actual, limit).changes


def diff_bodies(recorded_json: Any, actual_json: Any, recorded: bytes, actual: bytes,
                limit: int | None = MAX_CHANGES) -> list[Change]:
    """Differences between two normalised request bodies as a plain list: a JSON diff when
    both are JSON, part by part for two multipart bodies, else one ``$`` change (a bounded
    line diff for short text, length + hash excerpts otherwise).  See
    :func:`~.bodydiff.bounded_diff` for time budgets and the reason a list was cut."""
    from .bodydiff import BOUNDARY, bounded_diff

    both_multipart = recorded.startswith(BOUNDARY) and actual.startswith(BOUNDARY)
    kinds = ("multipart", "multipart") if both_multipart else ("", "")
    return bounded_diff(recorded_json, actual_json, recorded, actual, kinds=kinds, limit=limit).changes


def line_diff(recorded: str, actual: str, context: int = 1) -> list[str]:
    """A unified line diff (``-`` recorded, ``+`` actual) without the file header lines,
    bounded: only the lines between the common head and tail go to difflib (at most
    ``_DIFFLIB_LINES`` per side), at most :data:`MAX_DIFF_LINES` lines of
    :data:`MAX_LINE_CHARS` characters come out."""
    rl, al = recorded.splitlines(), actual.splitlines()
    head = 0
    while head < min(len(rl), len(al)) and rl[head] == al[head]:
        head += 1
    tail = 0
    while tail < min(len(rl), len(al)) - head and rl[-1 - tail] == al[-1 - tail]:
        tail += 1
    lo = max(0, head - context)
    rmid, amid = rl[lo : len(rl) - tail + context], al[lo : len(al) - tail + context]
    if len(rmid) > _DIFFLIB_LINES or len(amid) > _DIFFLIB_LINES:
        lines = [f"@@ -{lo + 1},{len(rmid)} +{lo + 1},{len(amid)} @@ (too many changed lines to diff; first ones:)"]
        lines += ["-" + ln for ln in rmid[:3]] + ["+" + ln for ln in amid[:3]]
    else:
        lines = list(difflib.unified_diff(rmid, amid, "recorded", "actual", n=context, lineterm=""))[2:]
        lines = [_renumber(ln, lo) for ln in lines]
    out = [ln if len(ln) <= MAX_LINE_CHARS else ln[: MAX_LINE_CHARS - 1] + "…" for ln in lines[:MAX_DIFF_LINES]]
    if len(lines) > MAX_DIFF_LINES:
        out.append(f"… {len(lines) - MAX_DIFF_LINES} more diff lines")
    return out


def _renumber(line: str, offset: int) -> str:
    """Shift the line numbers of a ``@@ -a,b +c,d @@`` hunk header by ``offset``."""
    if not offset or not line.startswith("@@"):
        return line
    return re.sub(r"([-+])(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) + offset}", line, count=2)


# -- nearest candidate ------------------------------------------------------------------
def distance(recorded: Any, actual: Any, stop_at: int | None = None, budget: Budget | None = None) -> int:
    """How many JSON leaf paths differ: a changed scalar counts once, a subtree only one side
    has (or whose type differs) counts its leaves, so a whole extra message weighs more than
    a changed temperature.  Counting stops once ``stop_at`` is exceeded or the budget is
    spent.  Cheap: strings are compared for equality only."""
    count = 0

    def walk(r: Any, a: Any) -> bool:  # False: stop
        nonlocal count
        if stop_at is not None and count > stop_at:
            return False
        if isinstance(r, dict) and isinstance(a, dict):
            for k in r.keys() ^ a.keys():
                count += _leaves(r[k] if k in r else a[k])
            return all(walk(r[k], a[k]) for k in r if k in a)
        if isinstance(r, list) and isinstance(a, list):
            longer = r if len(r) > len(a) else a
            for x in longer[min(len(r), len(a)):]:
                count += _leaves(x)
            if budget is not None and budget.spent():
                return False
            return all(walk(x, y) for x, y in zip(r, a, strict=False))  # the longer tail was counted above
        if type(r) is type(a) and r == a:
            return True
        count += max(_leaves(r), _leaves(a)) if isinstance(r, (dict, list)) or isinstance(a, (dict, list)) else 1
        return True

    walk(recorded, actual)
    return count


def _leaves(v: Any, cap: int = 1000) -> int:
    """Scalars in ``v`` (at least 1, at most ``cap``)."""
    if not isinstance(v, (dict, list)):
        return 1
    n, stack = 0, [v]
    while stack and n < cap:
        x = stack.pop()
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
        else:
            n += 1
    return max(n, 1)


# -- suggestions ------------------------------------------------------------------------
#: (name, regex) for volatile text; the regex is what ``--normalize`` is given.
VOLATILE: tuple[tuple[str, str], ...] = (
    ("ISO timestamp", r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"),
    ("UUID", r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
    ("date", r"\d{4}-\d{2}-\d{2}"),
    ("clock time", r"\d{1,2}:\d{2}:\d{2}"),
    ("Unix timestamp", r"\b1[6-9]\d{8}(\.\d+)?\b"),
    ("human date", r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? \w+ \d{1,2},? \d{4}"),
)


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


def _texts(c: Change) -> tuple[str, str] | None:
    """The differing middle parts (recorded, actual) of a changed string, with a little
    context: everything between the common prefix and suffix (an O(n) scan), clipped."""
    if c._window is not None:
        return c._window
    if isinstance(c.recorded, str) and isinstance(c.actual, str):  # a Change built elsewhere
        _, rs, as_ = changed_window(c.recorded, c.actual, context=25)
        return rs, as_
    return None


def suggest(changes: list[Change]) -> list[str]:
    """Command-line flags that would make the recorded and actual bodies match.

    A string whose differing part is a timestamp/date/UUID gives ``--normalize '<regex>'``;
    any other changed scalar gives ``--ignore-json-path <path>`` (array indices widened to
    ``[*]`` when the same field differs in several items).  Structural changes (fields added
    or removed) get no suggestion: they are real differences.
    """
    out: list[str] = []
    for c in changes:
        if c.kind != "changed":
            continue
        flag = None
        texts = _texts(c)
        if texts is not None:
            rpart, apart = texts
            for _name, rx in VOLATILE:
                if re.search(rx, apart) or re.search(rx, rpart):
                    flag = f"--normalize {_quote(rx)}"
                    break
        if flag is None and not isinstance(c.recorded, (dict, list)) and c.path.startswith(("$.", "$[")):
            flag = f"--ignore-json-path {_quote(c.path) if '[\"' in c.path else c.path}"
        if flag and flag not in out:
            out.append(flag)
    # the same field in several list items: one [*] path
    widened: list[str] = []
    for f in out:
        w = re.sub(r"\[\d+\]", "[*]", f) if f.startswith("--ignore-json-path") else f
        if w != f and sum(1 for g in out if re.sub(r"\[\d+\]", "[*]", g) == w) > 1:
            f = w
        if f not in widened:
            widened.append(f)
    return widened
