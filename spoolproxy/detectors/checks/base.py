"""What every detector gets: the cassette, its transcript, the config, an evidence
builder, and shared judgements (is a step an LLM call, did a tool fail, does an answer
admit a failure, is an HTML body an error page)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

from ...cassettes.model import Cassette, parse_json
from ..config import DetectConfig
from ..evidence import EvidenceBuilder
from ..models import Evidence, Finding, Step, ToolResult, Transcript

#: words by which an answer tells the user that something failed
ACK = re.compile(
    r"\b(fail(ed|s|ure)?|error(s|ed)?|unavailable|down|unable|could ?n[o']t|can ?n[o']t|cannot|not able|"
    r"timed? ?out|time-?out|sorry|unfortunately|did ?n[o']t|was ?n[o']t|were ?n[o']t|is ?n[o']t|not found|"
    r"no longer|conflict|locked|denied|refused|rejected|unsuccessful|try again later|went wrong|problem)\b",
    re.IGNORECASE,
)
#: a Python traceback, or two consecutive Java/JavaScript stack frames ("    at f (file.js:1:2)")
PY_TRACEBACK = "Traceback (most recent call last)"
STACK_FRAMES = re.compile(r"(?:^[ \t]+at [\w$.<>]+ ?\([^\n]*:\d+(?::\d+)?\)\n){2}", re.MULTILINE)


def traceback_in(text: str) -> str | None:
    """The traceback marker in ``text`` (a Python traceback header or two stack frames)."""
    if PY_TRACEBACK in text:
        return PY_TRACEBACK
    if "\n\tat " in text or "\n    at " in text:
        m = STACK_FRAMES.search(text)
        return m.group(0) if m else None
    return None


#: a plain-text tool result that *is* an error report, judged on its first line only and
#: anchored at its start (never a word inside prose, never an exception class name, which
#: search results about errors start with too): ``Error: ...``, ``ERROR ...:``,
#: ``[ERROR] ...``, ``Exception: ...``, ``Fatal error: ...``, the MCP SDKs' ``Error
#: executing tool x: ...``, ``An error occurred ...``, ``HTTP 503 ...``, and a server
#: error's reason phrase as the whole line (``Internal Server Error``, ``502 Bad Gateway``).
PLAIN_ERROR = re.compile(
    r"\A(?:"
    r"(?:error|fatal(?: error)?|exception|unhandled exception|internal error|server error)\s*:"
    r"|\[\s*(?:error|fatal|exception)\s*\]"
    r"|error (?:executing|calling|invoking|running) (?:tool|function)\b"
    r"|an? (?:unexpected |internal |unknown )?error (?:has )?occurred\b"
    r"|HTTP(?:/[\d.]+)?\s+[45]\d\d\b"
    r"|(?:[45]\d\d\s+)?(?:internal server error|bad gateway|service unavailable|gateway time-?out)\W{0,3}\Z"
    r")",
    re.IGNORECASE,
)


#: Error reports recognised only when they are the *whole* result, one line of at most
#: 300 characters with no URL in it (so a search result titled "TypeError: ..." is not one):
#: an exception's text (``TimeoutError: The read operation timed out``, ``KeyError('city')``
#: after "failed:"), "<something> failed ..." and "Failed to <verb> ...: <an error>".
PLAIN_ERROR_LINE = re.compile(
    r"\A(?:"
    r"[A-Z][A-Za-z]*(?:Error|Exception)(?::\s|\()"
    r"|(?:request|tool(?: execution| call)?|function(?: call)?|call|operation|api call|http request|fetch)"
    r"\s+failed(?::|\s+(?:with|because|due to)\b|\s*\(|[.!]?\Z)"
    r"|failed to \w+[^:\n]{0,60}:\s.*\b(?:[45]\d\d|error|exception|timed? ?out|refused|unavailable|denied)\b"
    r")",
    re.IGNORECASE,
)


def plain_error_in(text: str) -> str | None:
    """The first line of a plain-text tool result that starts with an error report
    (:data:`PLAIN_ERROR`, or :data:`PLAIN_ERROR_LINE` when the result is that one line; at most
    120 characters), or None.  JSON and HTML bodies never match (they start with ``{``,
    ``[`` or ``<``)."""
    head = text.lstrip()[:300].split("\n", 1)[0].rstrip()
    whole = text.strip()
    one_line = whole == head and len(whole) <= 300 and "://" not in whole
    if not (PLAIN_ERROR.match(head) or (one_line and PLAIN_ERROR_LINE.match(head))):
        return None
    return head if len(head) <= 120 else head[:119] + "…"


HTML_START = re.compile(rb"^\s*(<!doctype html|<html[\s>]|<head[\s>]|<body[\s>])", re.IGNORECASE)
ERROR_PAGE = re.compile(
    r"<title>[^<]*(\b[45]\d\d\b|error|unavailable|bad gateway|gateway time-?out|attention required|just a moment|"
    r"access denied|forbidden|not found|maintenance|be right back|sign[ -]?in|log[ -]?in|captcha|are you (a )?human|"
    r"checking your browser|request (was )?(blocked|rejected)|security check)[^<]*</title>|cloudflare|cf-error|cf-ray|nginx",
    re.IGNORECASE,
)
_MAYBE_FAILURE = re.compile(r'"(ok|success|errors?|status)"')
NON_RETRYABLE_CODES = {"insufficient_quota", "invalid_api_key", "invalid_request_error", "authentication_error",
                       "permission_error", "not_found_error", "billing_hard_limit_reached", "model_not_found"}


@dataclass
class Context:
    """Input of a detector: ``check(ctx) -> list[Finding]``."""

    cassette: Cassette
    transcript: Transcript
    config: DetectConfig
    ev: EvidenceBuilder
    prior: list[Finding] = field(default_factory=list)  # findings of the detectors that ran before
    _cache: dict[str, Any] = field(default_factory=dict)

    @property
    def steps(self) -> list[Step]:
        return self.transcript.steps

    def finding(self, kind: str, severity: str, interactions: list[int], message: str,
                evidence: list[Evidence | None]) -> Finding:
        return Finding(kind=kind, severity=severity, interactions=sorted(set(interactions)), message=message,  # type: ignore[arg-type]
                       evidence=[e for e in evidence if e is not None])

    def cut_stream(self, i: int) -> str | None:
        """``"LLM stream cut after N bytes (reset)"`` when interaction ``i`` got response
        headers and then a transport failure mid-body (N: body bytes received, the word in
        parentheses: the failure kind), else None."""
        it = self.cassette.interactions[i]
        step = self.steps[i]
        if it.response is None or it.error is None or step.transport_error is None:
            return None  # no failure, or the client hung up (not a cut)
        what = "LLM stream" if step.llm is not None and step.llm.stream.is_stream else "LLM response" if step.kind == "llm" else "response body"
        size = it.response.body_ref.size if it.response.body_ref is not None else len(it.response.body)
        return f"{what} cut after {size} byte{'s' if size != 1 else ''} ({it.error.kind})"

    def body_text(self, i: int) -> str:
        r = self.cassette.interactions[i].response
        return r.text if r is not None else ""

    def body_json(self, i: int) -> Any:
        key = f"json:{i}"
        if key not in self._cache:
            r = self.cassette.interactions[i].response
            self._cache[key] = parse_json(r.body) if r is not None else None
        return self._cache[key]

    def date(self, i: int) -> float | None:
        """The response's ``Date`` header as a POSIX timestamp (1 s resolution), or the
        spoolproxy start time when recorded."""
        it = self.cassette.interactions[i]
        if it.started_at is not None:
            return it.started_at.timestamp()
        d = it.response.header("date") if it.response is not None else None
        if not d:
            return None
        try:
            return parsedate_to_datetime(d).timestamp()
        except (TypeError, ValueError):
            return None

    def acknowledges(self, text: str, extra: list[str] | None = None) -> bool:
        """True when ``text`` tells the user something failed (lexicon + config ``ack_patterns``)."""
        if ACK.search(text):
            return True
        return any(re.search(p, text, re.IGNORECASE) for p in [*self.config.ack_patterns, *(extra or [])])

    def is_html(self, i: int) -> bool:
        r = self.cassette.interactions[i].response
        if r is None or not r.body:
            return False
        if self.steps[i].content_type in ("text/html", "application/xhtml+xml"):
            return True
        head = r.body[:200].lstrip()
        return head[:1] == b"<" and bool(HTML_START.match(head))

    def is_error_page(self, i: int) -> bool:
        """An HTML body that is an error/challenge page (by status or by its markers)."""
        if not self.is_html(i):
            return False
        s = self.steps[i]
        return (s.status or 0) >= 400 or bool(ERROR_PAGE.search(self.body_text(i)[:4000]))

    def recovered_later(self, i: int) -> bool:
        """True when a later LLM call succeeded (a retry or fallback after step ``i``)."""
        return any(s.kind == "llm" and s.ok and s.llm is not None and not s.llm.error for s in self.steps[i + 1:])

    def tool_failure(self, res: ToolResult) -> tuple[str, list[Evidence | None]] | None:
        """Why a tool result signals failure (None when it does not).

        Signals: the HTTP/MCP interaction that produced it failed (4xx/5xx, HTML error
        page, MCP ``isError``/JSON-RPC error); the result is marked ``is_error``; its JSON
        says ``ok: false``, has a non-empty ``error``/``errors`` field or ``status: error``;
        it holds traceback text; as plain text it starts with an error report
        (:data:`PLAIN_ERROR`); or it matches a configured ``error_patterns`` regex.  Memoized
        per result (several detectors ask).
        """
        key = ("tool_failure", id(res))
        if key not in self._cache:
            self._cache[key] = (res, self._tool_failure(res))
        return self._cache[key][1]

    def _tool_failure(self, res: ToolResult) -> tuple[str, list[Evidence | None]] | None:
        src = res.source_interaction
        if src is not None:
            s = self.steps[src]
            if s.kind == "mcp" and s.mcp is not None and s.mcp.is_error:
                return (f"MCP tools/call {s.mcp.tool_name} returned isError",
                        [self.ev.quote(src, "response.body", '"isError":true'), self.ev.field(src, "mcp.result_text")])
            if s.transport_error or (s.status or 0) >= 400:
                return (f"{s.method} {s.host} answered {s.status or s.transport_error}",
                        [self.ev.quote(src, "response.status", str(s.status)) if s.status else self.ev.field(src, "error.message"),
                         self.ev.field(src, "response.body", max_len=120)])
            if self.is_error_page(src):
                return (f"{s.host} sent an HTML error page", [self.ev.field(src, "response.body", max_len=120)])
        if res.is_error:
            return ("the tool result is marked is_error", [self._result_ev(res, res.content[:120])])
        doc = res.content_json
        if doc is None and _MAYBE_FAILURE.search(res.content):  # parse only bodies that could say so
            doc = parse_json(res.content.encode("utf-8", "replace"))
        jf = _json_failure(doc)
        if jf:
            return (f"the tool result says {jf[0]}", [self._result_ev(res, jf[1])])
        tb = traceback_in(res.content)
        if tb:
            return ("the tool result holds a traceback", [self._result_ev(res, tb)])
        if doc is None:
            err = plain_error_in(res.content)
            if err:
                return (f'the tool result is an error report "{err}"', [self._result_ev(res, err.rstrip("…"))])
        for p in self.config.error_patterns:
            m = re.search(p, res.content)
            if m:
                return (f"the tool result matches {p!r}", [self._result_ev(res, m.group(0))])
        return None

    def _result_ev(self, res: ToolResult, quote: str) -> Evidence | None:
        if res.source_interaction is not None:
            e = self.ev.quote(res.source_interaction, "response.body", quote)
            if e:
                return e
        return self.ev.quote(res.interaction, "request.body", quote) or self.ev.quote(
            res.interaction, "request.body", quote.replace('"', '\\"'))


def _json_failure(doc: Any) -> tuple[str, str] | None:
    """(reason, verbatim-ish quote) when a JSON tool body reports failure."""
    if not isinstance(doc, dict):
        return None
    for key in ("ok", "success"):
        if doc.get(key) is False:
            err = doc.get("error")
            if isinstance(err, str) and err:
                return f'{key}: false, error "{err}"', err
            return f"{key}: false", key
    err = doc.get("error") if "error" in doc else doc.get("errors")
    if err not in (None, "", [], {}, False):
        if isinstance(err, str):
            return f'error "{err}"', err
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return f'error "{err["message"]}"', err["message"]
        return "an error field", "error"
    if isinstance(doc.get("status"), str) and doc["status"].lower() == "error":
        return 'status "error"', "error"
    return None
