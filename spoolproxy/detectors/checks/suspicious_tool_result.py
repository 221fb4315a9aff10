"""suspicious_tool_result: a tool result that carried no usable data (empty, truncated, or
whose JSON shape drifted from earlier results of the same tool), followed by a final answer
that states specifics as if it had the data.

A result (not already a failure: those are ``tool_error_ignored``'s) is suspicious when it is

* **empty**: no text, or ``{}``, ``[]``, ``null``, ``""``, or an object whose only values are
  empty lists/objects/null (``{"results": []}``);
* **truncated**: JSON cut before its end (starts with ``{``/``[`` and does not parse, yet
  parses once closed), or text ending in a truncation marker (``...[truncated]``,
  ``(output truncated)``, ``… N more``);
* **drifted**: a JSON object (or the first object of a list) that lacks a key every earlier
  result of the same tool had, or whose shared key changed JSON type (number to string,
  object to null...).

The final answer then *states specifics as if it had data*: it quotes numbers, amounts,
dates, ids or e-mail addresses that appear nowhere in what the run gave the model (tool
results, user and system messages), and it does not admit the gap ("no results", "could not
find", "the data was incomplete", the failure lexicon, ``ack_patterns``).

Severity: error.  One finding per suspicious tool (its results listed), citing the result and
the unsupported specifics.

Public failures: crashlab's ``suspicious_tool_result`` (empty or truncated results, shape
drift from earlier results of the same tool); faultspool's ``unsupported_claim``;
langchain-ai/langchain#12983 and run-llama/llama_index#10624 (agents answering from an empty
retrieval as if it had found documents).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from ...cassettes.model import parse_json
from ..evidence import clip
from .base import Context

KIND = "suspicious_tool_result"
_TRUNC_MARK = re.compile(r"(\[\s*truncated\s*\]|\(\s*(output\s+)?truncated\s*\)|truncated\s*(\.\.\.|…)|"
                         r"(\.\.\.|…)\s*\(?\d+\s+more\b|\[\.\.\.\]\s*$|<truncated>)\s*\W*$", re.IGNORECASE)
#: an answer that admits it had no (complete) data
_GAP = re.compile(r"\b(no (results?|matches|matching|records?|data|information|orders?|entries|items|documents)|"
                  r"nothing (was )?found|found nothing|could ?n[o']t find|can ?n[o']t find|cannot find|unable to find|"
                  r"did ?n[o']t (find|return)|returned no|came back empty|(was|is|were) empty|incomplete|truncated|"
                  r"cut off|partial (data|results?)|not available|unavailable|unknown|missing|does ?n[o']t (show|include|contain))\b",
                  re.IGNORECASE)
#: specifics an answer can state: money, dates, times, decimals, long numbers, ids, e-mails
_SPECIFIC = re.compile(
    r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?|\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP|%)|"
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}:\d{2}\b|\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b|\b\d+\.\d+\b|"
    r"\b[A-Z]{2,}[-_]?\d{2,}\b|\b\d{3,}\b|(?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.]+")
#: every specific holds a digit or an @: the tokens around those are all that is searched
_ANCHOR = re.compile(r"[\d@]+")
_SPACE = re.compile(r"\s")


def specifics(text: str) -> list[str]:
    """The specifics an answer states (see :data:`_SPECIFIC`), in order, without repeats.
    Only the space-delimited tokens holding a digit or an ``@`` are searched (long answers
    without numbers cost one C-level scan)."""
    out: dict[str, None] = {}
    done = -1
    for m in _ANCHOR.finditer(text):
        if m.start() < done:
            continue  # inside a token already searched
        a = m.start()
        while a > 0 and not text[a - 1].isspace():
            a -= 1
        e = _SPACE.search(text, m.end())
        b = e.start() if e else len(text)
        # a specific may span one space ("12 USD", "$ 5", "10:00"): look one token further
        e2 = _SPACE.search(text, b + 1) if b < len(text) else None
        window = text[a:e2.start() if e2 else len(text)]
        for s in _SPECIFIC.finditer(window):
            out.setdefault(s.group(0))
        done = b
    return list(out)


def check(ctx: Context) -> list:
    fa = ctx.transcript.final_answer
    if fa is None:
        return []
    results = [r for r in ctx.transcript.tool_results if r.interaction <= fa.interaction]
    if not results:
        return []
    # cheapest first (most runs stop at the first or second test): an answer with a digit or
    # an @ at all; an empty or cut result (no JSON parsing unless brackets do not balance);
    # shape drift, which parses every result of a repeated tool, before reading the answer
    # when those are few, after it (only for an answer stating unsupported specifics) when many
    answer = fa.text
    if not _ANCHOR.search(answer):
        return []
    suspicious = _suspicious(ctx, results, drift=False)
    if not suspicious:
        counts = Counter(r.name for r in results)
        repeated = sum(n for n in counts.values() if n > 1)
        if not repeated:
            return []
        if repeated <= 64:
            suspicious = _suspicious(ctx, results, drift=True)
            if not suspicious:
                return []
    if ctx.acknowledges(answer) or _GAP.search(answer):
        return []
    known = _Known(_known_text(ctx, fa.interaction))
    unsupported = [s for s in specifics(answer) if not known.has(s)]
    if not unsupported:
        return []
    if not suspicious:
        suspicious = _suspicious(ctx, results, drift=True)
        if not suspicious:
            return []
    by_tool: dict[str, list] = {}
    for r, why in suspicious:
        by_tool.setdefault(r.name or "?", []).append((r, why))
    out = []
    for name, items in by_tool.items():
        r, why = items[-1]
        idxs = [fa.interaction] + [x.interaction for x, _ in items] + [x.source_interaction for x, _ in items
                                                                          if x.source_interaction is not None]
        ev = [_result_ev(ctx, r), *(ctx.ev.quote(fa.interaction, "message.text", u) for u in unsupported[:2])]
        if fa.text and not any(ev[1:]):
            ev.append(ctx.ev.field(fa.interaction, "message.text", max_len=160))
        shown = ", ".join(clip(u, 30) for u in unsupported[:4])
        out.append(ctx.finding(KIND, "error", idxs, f"tool {name} returned {why}, yet the final answer states specifics "
                               f"found in no tool result or message ({shown})", ev))
    return out


def _suspicious(ctx: Context, results: list, drift: bool) -> list[tuple[Any, str]]:
    """(result, why) for every empty, truncated or (with ``drift``) drifted result that did
    not fail.  JSON is parsed only where it decides something: brackets that do not balance
    (truncation), a short document (emptiness), a tool with several results (drift)."""
    several = {name for name, n in Counter(r.name for r in results).items() if n > 1} if drift else set()
    out: list[tuple[Any, str]] = []
    shapes: dict[str | None, list[dict[str, str]]] = {}
    for r in results:
        if ctx.tool_failure(r) is not None:
            continue
        content = r.content
        jsonish = content.lstrip()[:1] in ("{", "[")
        unbalanced = jsonish and (content.count("{") != content.count("}") or content.count("[") != content.count("]"))
        doc = r.content_json
        if doc is None and jsonish and (r.name in several or unbalanced or len(content) < 200):
            doc = parse_json(content.encode("utf-8", "replace"))
        text, doc = _unwrap(content, doc) if doc is not None else (content, None)
        why = _empty(text, doc) or _truncated(text, check_json=unbalanced or text is not content)
        shape = _shape(doc) if r.name in several else None
        if why is None and shape is not None:
            why = _drift(shapes.get(r.name, []), shape)
        if shape is not None:
            shapes.setdefault(r.name, []).append(shape)
        if why is not None:
            out.append((r, why))
    return out


def _unwrap(content: str, doc: Any) -> tuple[str, Any]:
    """(text, parsed JSON) of a tool result, looking inside a one-key wrapper around a string
    (Gemini's ``functionResponse.response: {"result": "..."}``, ``{"output": "..."}``)."""
    if isinstance(doc, dict) and len(doc) == 1:
        (inner,) = doc.values()
        if isinstance(inner, str):
            return inner, parse_json(inner.encode("utf-8", "replace")) if inner.strip()[:1] in ("{", "[") else None
    return content, doc


def _empty(text: str, doc: Any) -> str | None:
    t = text.strip()
    if not t:
        return "an empty result"
    if doc is None and t[:1] in "{[\"n":
        doc = parse_json(t.encode("utf-8", "replace"))
    if t in ("{}", "[]", "null", '""'):
        return f"an empty result ({t})"
    if isinstance(doc, dict) and doc and all(v in (None, [], {}, "") for v in doc.values()):
        return f"an empty result ({clip(t, 40)})"
    return None


def _truncated(text: str, check_json: bool = True) -> str | None:
    t = text.rstrip()
    if check_json and t[:1] in ("{", "[") and parse_json(t.encode("utf-8", "replace")) is None and _closes(t):
        return "truncated JSON (it stops before its end)"
    if _TRUNC_MARK.search(t[-80:]):
        return "a truncated result"
    return None


def _closes(t: str) -> bool:
    """True when ``t`` parses once its open strings, arrays and objects are closed: a cut,
    not just malformed text."""
    stack: list[str] = []
    in_str = esc = False
    for ch in t:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return False
    if not stack and not in_str:
        return False
    tail = t + ('"' if in_str else "")
    tail = re.sub(r"[,:]\s*$", "", tail)
    for closer in (tail + "".join(reversed(stack)), tail + ": null" + "".join(reversed(stack))):
        try:
            json.loads(closer)
            return True
        except ValueError:
            continue
    return False


def _shape(doc: Any) -> dict[str, str] | None:
    if isinstance(doc, list) and doc and isinstance(doc[0], dict):
        doc = doc[0]
    if not isinstance(doc, dict) or not doc:
        return None
    return {k: _jtype(v) for k, v in doc.items()}


def _jtype(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(v), "other")


def _drift(earlier: list[dict[str, str]], now: dict[str, str]) -> str | None:
    if not earlier:
        return None
    common = set(earlier[0])
    for sh in earlier[1:]:
        common &= set(sh)
    missing = sorted(k for k in common if k not in now)
    if missing:
        return f"a result whose shape drifted from its earlier results (missing {', '.join(missing[:4])})"
    for k in sorted(common):
        types = {sh[k] for sh in earlier}
        if len(types) == 1 and now[k] not in types and "null" not in types:
            return f"a result whose shape drifted from its earlier results ({k}: {next(iter(types))} -> {now[k]})"
    return None


_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


class _Known:
    """What the model was given, and whether a specific appears in it: verbatim, without
    currency signs, spaces and thousands separators, or as the same number (``$1,299.00`` is
    supported by ``1299``).  The numbers are read only when a specific is not found as text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._lower: str | None = None
        self._numbers: set[float] | None = None

    def has(self, spec: str) -> bool:
        if spec in self.text:
            return True
        if self._lower is None:
            self._lower = self.text.lower()
        bare = re.sub(r"[\s$€£¥]", "", spec).lower()
        if bare in self._lower or bare.replace(",", "") in self._lower:
            return True
        num = re.sub(r"(usd|eur|gbp|%)$", "", bare).replace(",", "")
        if not re.fullmatch(r"\d+(\.\d+)?", num):
            return False
        if self._numbers is None:
            self._numbers = {float(m.group(0).replace(",", "")) for m in _NUMBER.finditer(self.text)}
        return float(num) in self._numbers


def _known_text(ctx: Context, upto: int) -> str:
    """Everything the model was given before answering: tool results, the messages of the
    final request (user, system, earlier model turns) and their tool-call arguments."""
    parts = [r.content for r in ctx.transcript.tool_results if r.interaction <= upto]
    step = ctx.steps[upto]
    if step.llm is not None:
        parts += [m.text for m in step.llm.messages if m.role in ("user", "system", "developer", "assistant")]
        parts += [tc.arguments_raw for m in step.llm.messages for tc in m.tool_calls]
    return "\n".join(parts)


def _result_ev(ctx: Context, r):
    quote = r.content.strip()[:120] or None
    if r.source_interaction is not None:
        e = ctx.ev.quote(r.source_interaction, "response.body", quote) if quote else None
        if e is not None:
            return e
        src = ctx.steps[r.source_interaction]
        if src.mcp is not None and quote:
            return ctx.ev.quote(r.source_interaction, "mcp.result_text", quote)
        return ctx.ev.quote(r.source_interaction, "response.status", str(src.status)) if src.status else None
    if quote:
        return ctx.ev.quote(r.interaction, "request.body", quote) or ctx.ev.quote(
            r.interaction, "request.body", json.dumps(quote)[1:-1])
    return None
