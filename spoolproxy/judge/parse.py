"""Reading a model's JSON answer, tolerantly.

Models that are asked for JSON answer with a bare object, an object in a Markdown fence,
an object after some prose, or an object with a trailing comma or a ``//`` comment.
:func:`extract_json` finds the first JSON object in such a text; it never guesses beyond
that (a text with no parseable object raises :class:`AnswerError`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import SpoolError

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_LINE_COMMENT = re.compile(r'^(\s*)//.*$', re.MULTILINE)


class AnswerError(SpoolError):
    """The model's answer holds no JSON object (the message quotes its start)."""


def extract_json(text: str) -> dict[str, Any]:
    """The first JSON object in ``text`` (a dict).  Tries, in order: the whole text, each
    fenced block, each balanced ``{...}`` span; each as is, then with trailing commas and
    whole-line ``//`` comments removed.  Raises AnswerError when none parses to an object."""
    if not isinstance(text, str) or not text.strip():
        raise AnswerError("the model's answer is empty")
    candidates = [text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text)), *_objects(text)]
    for cand in candidates:
        for variant in (cand, _TRAILING_COMMA.sub(r"\1", _LINE_COMMENT.sub(r"\1", cand))):
            try:
                doc = json.loads(variant)
            except ValueError:
                continue
            if isinstance(doc, dict):
                return doc
    start = " ".join(text.split())[:120]
    raise AnswerError(f"the model's answer holds no JSON object (it starts: {start!r})")


def _objects(text: str, limit: int = 8):
    """Balanced ``{...}`` spans of ``text`` (string-aware), outermost first, at most ``limit``."""
    found = 0
    i = text.find("{")
    while i != -1 and found < limit:
        depth, in_str, esc = 0, False, False
        for j in range(i, len(text)):
            ch = text[j]
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    yield text[i:j + 1]
                    found += 1
                    break
        else:
            return
        i = text.find("{", i + 1)
