"""Verbatim evidence: every quote must be a substring of the field it cites.

Paths (``interaction`` selects the interaction; the path the field in it):

* ``request.method`` | ``request.uri`` | ``request.body`` | ``request.headers.<name>``
* ``response.status`` | ``response.body`` | ``response.headers.<name>``
* ``request.body/<json pointer>``, ``response.body/<json pointer>``: a value inside the
  parsed JSON body (RFC 6901 pointer, e.g. ``response.body/choices/0/message/refusal``)
* ``error.message``: the transport failure
* ``message.<field>``: the reassembled model message of an LLM interaction
  (``text``, ``refusal``, ``reasoning``, ``finish_reason_raw``, ``error``,
  ``tool_calls/<n>/name``, ``tool_calls/<n>/arguments_raw``)
* ``mcp.result_text``: the MCP tool result text
* ``input.<n>``: the text of message ``n`` (0-based) of the conversation an LLM request
  sent, as the transcript reads it (a system prompt, a user turn, a tool result fed back)
* run-level evidence (``interaction`` None): ``meta.exit_code``, ``meta.agent_end.<key>``
  (``stderr_tail``, ``signal``), the recorded command's end

:meth:`EvidenceBuilder.quote` resolves the path, checks the quote, and returns None (the
evidence is dropped) when the field is missing or does not contain the quote.
"""

from __future__ import annotations

from typing import Any

from ..cassettes.model import Cassette, parse_json
from .models import Evidence, Transcript

MAX_QUOTE = 200
ELLIPSIS = "…"


def clip(text: str, n: int) -> str:
    """``text`` cut to at most ``n`` characters, ending in ``…`` when it was cut (a shown
    value never looks whole when it is not: tool arguments cut at 60 characters would read
    as broken JSON)."""
    return text if len(text) <= n else text[: max(0, n - 1)] + ELLIPSIS


def _pointer(doc: Any, ptr: str) -> Any:
    for raw in ptr.split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(doc, dict):
            if key not in doc:
                return None
            doc = doc[key]
        elif isinstance(doc, list):
            if not key.isdigit() or int(key) >= len(doc):
                return None
            doc = doc[int(key)]
        else:
            return None
    return doc


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def evidence_text(e: Evidence, width: int = 160) -> tuple[str, str]:
    """(where, quote) for showing evidence ``e`` on one line: ``#3`` or ``run`` (metadata),
    and the quote with escapes for control characters, cut with ``…`` at ``width``."""
    where = "run" if e.interaction is None else f"#{e.interaction}"
    return where, clip(repr(e.quote)[1:-1], width)


class EvidenceBuilder:
    """Resolves evidence paths against one cassette and its transcript."""

    def __init__(self, cassette: Cassette, transcript: Transcript) -> None:
        self.cassette = cassette
        self.transcript = transcript
        self._json: dict[tuple[int, str], Any] = {}

    def resolve(self, index: int | None, path: str) -> str | None:
        """The text of field ``path`` of interaction ``index`` (None when absent); with
        ``index`` None, of the cassette's metadata (``meta.exit_code``, ``meta.agent_end.<key>``)."""
        if index is None:
            return self._meta(path)
        if not 0 <= index < len(self.cassette.interactions):
            return None
        it = self.cassette.interactions[index]
        head, _, rest = path.partition(".")
        if head == "request":
            return self._http(index, "request", it.request, rest)
        if head == "response":
            return None if it.response is None else self._http(index, "response", it.response, rest)
        if head == "error":
            return it.error.message if it.error is not None and rest == "message" else None
        step = self.transcript.steps[index]
        if head == "message" and step.llm is not None:
            field, _, ptr = rest.partition("/")
            value = getattr(step.llm, field, None) if field in ("text", "refusal", "reasoning", "finish_reason_raw", "error") else None
            if field == "tool_calls":
                value = _pointer([tc.model_dump() for tc in step.llm.tool_calls], ptr)
            return _text(value)
        if head == "mcp" and step.mcp is not None and rest == "result_text":
            return step.mcp.result_text
        if head == "input" and step.llm is not None and rest.isdigit():
            n = int(rest)
            return step.llm.messages[n].text if n < len(step.llm.messages) else None
        return None

    def _meta(self, path: str) -> str | None:
        m = self.cassette.meta
        if path == "meta.exit_code":
            return None if m.exit_code is None else str(m.exit_code)
        if path.startswith("meta.agent_end."):
            end = m.extra.get("agent_end")
            return _text(end.get(path[len("meta.agent_end."):])) if isinstance(end, dict) else None
        return None

    def _http(self, index: int, side: str, obj: Any, rest: str) -> str | None:
        if rest == "method":
            return getattr(obj, "method", None)
        if rest == "uri":
            return getattr(obj, "uri", None)
        if rest == "status":
            return str(getattr(obj, "status", ""))
        if rest.startswith("headers."):
            return obj.header(rest[len("headers."):])
        if rest == "body":
            return obj.text
        if rest.startswith("body/"):
            key = (index, side)
            if key not in self._json:
                self._json[key] = parse_json(obj.body)
            return _text(_pointer(self._json[key], rest[len("body/"):]))
        return None

    def quote(self, index: int | None, path: str, quote: str | None, *, max_len: int = MAX_QUOTE) -> Evidence | None:
        """Evidence for ``quote`` (shortened to ``max_len`` characters) if it is verbatim in the field."""
        if not quote:
            return None
        q = quote if len(quote) <= max_len else quote[:max_len]
        field = self.resolve(index, path)
        if field is None or q not in field:
            return None
        return Evidence(interaction=index, path=path, quote=q)

    def field(self, index: int | None, path: str, *, max_len: int = MAX_QUOTE) -> Evidence | None:
        """Evidence quoting the start of the field itself (whitespace-trimmed)."""
        value = self.resolve(index, path)
        if not value:
            return None
        v = value.strip()
        return self.quote(index, path, v[:max_len])
