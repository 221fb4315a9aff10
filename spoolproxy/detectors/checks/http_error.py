"""http_error: a provider or tool request got a 4xx/5xx response, a transport failure, or
a provider error object inside a 200 body or stream (``event: error``, ``{"error": ...}``).

Severity (an error the run recovered from is never error):

* LLM call: ``warn`` when a later LLM call succeeded (SDK retry, fallback), else ``error``;
* tool interaction (its body was fed back to the model): ``warn`` when the run still
  reaches a final answer, else ``error``;
* other traffic (telemetry, downloads): ``info`` with a final answer, else ``warn``;
* statuses listed in ``[detect] expected_status``: ``info``;
* a connection that broke after an LLM stream's content was whole: ``warn``.

A client that hung up (it stopped reading a stream it had what it needed from) is no
failure at all.

Public failures: openai/openai-python 429/400 handling, BR-10 (pydantic-ai 400 after an
unknown tool), BR-16 (504 gateway timeout).
"""

from __future__ import annotations

from ..evidence import clip
from .base import Context

KIND = "http_error"


def check(ctx: Context) -> list:
    out = []
    fa = ctx.transcript.final_answer
    sources = {r.source_interaction for r in ctx.transcript.tool_results if r.source_interaction is not None}
    for s in ctx.steps:
        failed = s.transport_error is not None or (s.status is not None and s.status >= 400)
        in_body = not failed and s.llm is not None and s.llm.error is not None
        if not failed and not in_body:
            continue
        i = s.index
        if s.status in ctx.config.expected_status:
            sev = "info"
        elif s.delivered_before_failure:
            sev = "warn"  # the stream's content was whole before the connection broke
        elif s.kind == "llm":
            sev = "warn" if ctx.recovered_later(i) else "error"
        elif i in sources or s.kind == "mcp":
            sev = "warn" if fa is not None and fa.interaction > i else "error"
        else:
            sev = "info" if fa is not None else "warn"
        what = f"{s.status}" if s.status is not None else f"transport failure ({s.transport_error})"
        cut = ctx.cut_stream(i) if s.transport_error is not None else None
        if cut is not None and s.delivered_before_failure:
            cut += " after the stream's terminal event (its content is whole)"
        if in_body:
            what = f"an error inside its {s.status} {'stream' if s.llm.stream.is_stream else 'body'}"
        detail = ""
        ev = [None if in_body else ctx.ev.field(i, "error.message") if cut is not None
              else ctx.ev.quote(i, "response.status", str(s.status)) if s.status is not None
              else ctx.ev.field(i, "error.message")]
        if s.llm is not None and s.llm.error:
            detail = f": {clip(s.llm.error, 160)}"
            ev.append(ctx.ev.quote(i, "response.body", s.llm.error))
        elif s.status is not None and cut is None:
            ev.append(ctx.ev.field(i, "response.body", max_len=160))
        role = "LLM call" if s.kind == "llm" else "MCP call" if s.kind == "mcp" else "tool call" if i in sources else "request"
        key = (role, s.method, s.url, s.status, sev, detail)
        if out and out[-1][0] == key:
            f = out[-1][1]
            f.interactions.append(i)
            f.message = _message(role, s, what, cut, detail, len(f.interactions))
            continue
        out.append((key, ctx.finding(KIND, sev, [i], _message(role, s, what, cut, detail, 1), ev)))
    return [f for _, f in out]


def _message(role: str, s, what: str, cut: str | None, detail: str, times: int) -> str:
    """``LLM call POST host/path got 500 3 times: ...``, or for a body cut after its headers
    ``LLM call POST host/path: LLM stream cut after 812 bytes (reset), status 200``."""
    head = f"{role} {s.method} {s.host}{_path(s.url)}"
    n = f" {times} times" if times > 1 else ""
    if cut is not None and s.status is not None and s.status >= 400:
        return f"{head} got {s.status}; {cut}{n}{detail}"
    if cut is not None:
        return f"{head}: {cut}, status {s.status}{n}{detail}"
    return f"{head} got {what}{n}{detail}"


def _path(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).path
