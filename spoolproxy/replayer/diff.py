"""Field-level differences between a recorded request body and the actual one, and the
flag that would make them match.

:func:`diff_json` walks two JSON values and yields one :class:`Change` per differing leaf,
named by a JSON path (``$.messages[1].content``).  Long or multi-line strings carry a unified
line diff.  :func:`suggest` looks at the changes and proposes the exact ``--normalize`` or
``--ignore-json-path`` flag (timestamps, dates, UUIDs, request ids).
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, Iterator, Literal

from pydantic import BaseModel

LONG = 80  #: strings longer than this (or multi-line) get a line diff
MAX_CHANGES = 50


class Change(BaseModel):
    """One difference: ``kind`` changed | added (only in actual) | removed (only recorded).

    ``recorded``/``actual`` are the JSON values (truncated reprs for long strings);
    ``line_diff`` is a unified diff for long strings.
    """

    path: str
    kind: Literal["changed", "added", "removed"]
    recorded: Any = None
    actual: Any = None
    line_diff: list[str] | None = None

    def render(self) -> list[str]:
        """Human lines for the end-of-run report."""
        if self.kind == "added":
            return [f"{self.path}: only in actual: {_short(self.actual)}"]
        if self.kind == "removed":
            return [f"{self.path}: only in recorded: {_short(self.recorded)}"]
        if self.line_diff:
            return [f"{self.path}: text differs:", *("    " + ln for ln in self.line_diff)]
        return [f"{self.path}: recorded {_short(self.recorded)}, actual {_short(self.actual)}"]


def _short(v: Any, limit: int = 120) -> str:
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if re.fullmatch(r"[A-Za-z_][\w\-]*", key) else f"{path}[{json.dumps(key)}]"


def _walk(r: Any, a: Any, path: str) -> Iterator[Change]:
    if isinstance(r, dict) and isinstance(a, dict):
        for k in r:
            if k not in a:
                yield Change(path=_key_path(path, k), kind="removed", recorded=r[k])
            else:
                yield from _walk(r[k], a[k], _key_path(path, k))
        for k in a:
            if k not in r:
                yield Change(path=_key_path(path, k), kind="added", actual=a[k])
        return
    if isinstance(r, list) and isinstance(a, list):
        for i in range(max(len(r), len(a))):
            p = f"{path}[{i}]"
            if i >= len(a):
                yield Change(path=p, kind="removed", recorded=r[i])
            elif i >= len(r):
                yield Change(path=p, kind="added", actual=a[i])
            else:
                yield from _walk(r[i], a[i], p)
        return
    if r == a and type(r) is type(a):
        return
    change = Change(path=path, kind="changed", recorded=r, actual=a)
    if isinstance(r, str) and isinstance(a, str) and (len(r) > LONG or len(a) > LONG or "\n" in r + a):
        change.line_diff = line_diff(r, a)
    yield change


def diff_json(recorded: Any, actual: Any, limit: int = MAX_CHANGES) -> list[Change]:
    """Differences between two JSON values, in document order, at most ``limit``."""
    out = []
    for c in _walk(recorded, actual, "$"):
        out.append(c)
        if len(out) >= limit:
            break
    return out


def line_diff(recorded: str, actual: str, context: int = 1) -> list[str]:
    """A unified line diff (``-`` recorded, ``+`` actual) without the file header lines."""
    lines = list(
        difflib.unified_diff(recorded.splitlines(), actual.splitlines(), "recorded", "actual", n=context, lineterm="")
    )
    return lines[2:]


def diff_bodies(recorded_json: Any, actual_json: Any, recorded: bytes, actual: bytes) -> list[Change]:
    """JSON diff when both bodies are JSON, else one ``$`` change with a line diff of the text."""
    if recorded_json is not None and actual_json is not None:
        return diff_json(recorded_json, actual_json)
    if recorded == actual:
        return []
    rt, at = recorded.decode("utf-8", "replace"), actual.decode("utf-8", "replace")
    return [Change(path="$", kind="changed", recorded=_trunc(rt), actual=_trunc(at), line_diff=line_diff(rt, at))]


def _trunc(s: str, n: int = 200) -> str:
    return s if len(s) <= n else s[:n] + "…"


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


def _changed_text(r: str, a: str) -> tuple[str, str]:
    """The differing middle parts of two strings (recorded, actual), with a little context."""
    sm = difflib.SequenceMatcher(None, r, a, autojunk=False)
    rs, as_ = [], []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op != "equal":
            rs.append(r[max(0, i1 - 25) : i2 + 25])
            as_.append(a[max(0, j1 - 25) : j2 + 25])
    return " ".join(rs), " ".join(as_)


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


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
        if isinstance(c.recorded, str) and isinstance(c.actual, str):
            rpart, apart = _changed_text(c.recorded, c.actual)
            for _name, rx in VOLATILE:
                if re.search(rx, apart) or re.search(rx, rpart):
                    flag = f"--normalize {_quote(rx)}"
                    break
        if flag is None and not isinstance(c.recorded, (dict, list)) and c.path != "$":
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
