"""The run as a judge reads it: a compacted transcript of bounded size.

:func:`compact` renders a cassette's :class:`~spoolproxy.detectors.models.Transcript` as
plain text, one block per interaction, each shown field labelled with the address a quote
must cite: ``[3 message.text]`` is field ``message.text`` of interaction 3, in the path
syntax of :mod:`spoolproxy.detectors.evidence` (``input.N`` is message N of the
conversation an LLM request sent, ``response.body`` a tool's answer ...).  What a model
quotes from a labelled field is checked against that very field of the cassette.

Compaction, so that a long run fits a small model's context:

* an LLM request shows only the messages its conversation had not shown yet (later
  requests resend the whole history); the declared tools once per distinct set;
* a tool result fed back that is byte for byte the body of an HTTP interaction shown
  above is not repeated (``= response body of #4``);
* whitespace runs are shown as one space (quotes are compared the same way);
* a field longer than the field limit keeps its head and tail around a
  ``…[cut: N chars]…`` marker; the limit shrinks (800, 500, 300, 180 characters) until the
  text fits ``max_chars``; if it still does not, interactions in the middle that no finding
  names are left out (``… 12 interactions omitted (#5-#16) …``).

The deterministic findings are listed first as hints.  Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..cassettes.model import Cassette
from ..detectors.models import Report, Step, Transcript

DEFAULT_MAX_CHARS = 16_000
FIELD_LIMITS = (800, 500, 300, 180)
_WS = re.compile(r"\s+")


@dataclass
class Compacted:
    """The compacted run: ``text`` (what the model reads), ``fields`` (``(interaction,
    path)`` of every labelled field shown), ``omitted`` (interactions left out),
    ``field_limit`` (characters per field used) and ``chars`` (``len(text)``)."""

    text: str
    fields: set[tuple[int, str]] = field(default_factory=set)
    omitted: list[int] = field(default_factory=list)
    field_limit: int = FIELD_LIMITS[0]

    @property
    def chars(self) -> int:
        return len(self.text)


def flat(text: str) -> str:
    """``text`` with every whitespace run as one space, stripped."""
    return _WS.sub(" ", text or "").strip()


def cut(text: str, limit: int) -> str:
    """``text`` (flattened) kept whole up to ``limit`` characters, else its head (2/3) and
    tail (1/3) around a ``…[cut: N chars]…`` marker."""
    t = flat(text)
    if len(t) <= limit:
        return t
    head, tail = limit * 2 // 3, limit // 3
    return f"{t[:head]} …[cut: {len(t) - head - tail} chars]… {t[len(t) - tail:]}"


def compact(cassette: Cassette, transcript: Transcript, report: Report | None = None,
            max_chars: int = DEFAULT_MAX_CHARS) -> Compacted:
    """The run as labelled text of at most about ``max_chars`` characters (see the module
    docstring).  Never raises for odd runs."""
    keep = _important(transcript, report)
    best: Compacted | None = None
    for limit in FIELD_LIMITS:
        best = _render(cassette, transcript, report, limit, set())
        if best.chars <= max_chars:
            return best
    steps = [s.index for s in transcript.steps]
    droppable = [i for i in steps if i not in keep]
    mid = len(droppable) // 2
    order = sorted(droppable, key=lambda i: abs(droppable.index(i) - mid))  # from the middle outwards
    omitted: set[int] = set()
    for i in order:
        omitted.add(i)
        if len(omitted) % 4 and i != order[-1]:
            continue
        best = _render(cassette, transcript, report, FIELD_LIMITS[-1], omitted)
        if best.chars <= max_chars:
            break
    assert best is not None
    return best


def _important(t: Transcript, report: Report | None) -> set[int]:
    idx = [s.index for s in t.steps]
    keep = set(idx[:2]) | set(idx[-3:])
    if report is not None:
        for f in report.findings:
            if f.severity in ("error", "critical", "warn"):
                keep.update(f.interactions[:3])
                keep.update(f.interactions[-1:])
    if t.final_answer is not None:
        keep.add(t.final_answer.interaction)
    return keep


def _where(url: str) -> str:
    u = urlsplit(url)
    return f"{u.hostname or ''}{':' + str(u.port) if u.port else ''}{u.path}{'?' + u.query if u.query else ''}"


def _render(cas: Cassette, t: Transcript, report: Report | None, limit: int, omitted: set[int]) -> Compacted:
    out = Compacted(text="", field_limit=limit, omitted=sorted(omitted))
    lines: list[str] = []
    llm = [s for s in t.steps if s.llm is not None]
    task = next((m.text for s in llm for m in s.llm.messages if m.role == "user" and m.text.strip()), "")
    n_tool = sum(1 for s in t.steps if s.llm is None)
    lines.append(f"RUN: {len(t.steps)} interactions ({len(llm)} model calls, {n_tool} tool/HTTP requests); "
                 f"the detectors' verdict: {report.verdict if report else 'not run'}")
    if task:
        lines.append(f"TASK (first user message): {cut(task, 400)}")
    lines.append("FINAL ANSWER: " + (f"interaction {t.final_answer.interaction}" if t.final_answer else "none"))
    if report is not None:
        shown = [f for f in report.findings if f.severity != "info"]
        lines.append("FINDINGS of the deterministic detectors (reliable hints; they miss silent failures):"
                     if shown else "FINDINGS of the deterministic detectors: none above info level")
        for f in shown[:12]:
            at = ",".join(str(i) for i in f.interactions[:8]) + ("…" if len(f.interactions) > 8 else "")
            lines.append(f"- {f.severity} {f.kind} at {at}: {cut(f.message, 220)}")
    lines.append("TRANSCRIPT (each [N field] label is what a quote cites: interaction N, that field):")
    seen: dict[int | None, set] = {}
    tool_sets: set[tuple] = set()
    shown_bodies: dict[int, str] = {}
    gap: list[int] = []

    def flush_gap() -> None:
        if gap:
            lines.append(f"… {len(gap)} interaction{'s' if len(gap) > 1 else ''} omitted (#{gap[0]}-#{gap[-1]}) …")
            gap.clear()

    def put(i: int, path: str, label: str, text: str) -> None:
        out.fields.add((i, path))
        lines.append(f"  [{i} {path}] {label}{': ' if label else ''}{cut(text, limit)}")

    for s in t.steps:
        if s.index in omitted:
            gap.append(s.index)
            continue
        flush_gap()
        if s.llm is not None:
            _llm(cas, s, put, lines, seen.setdefault(s.conversation, set()), tool_sets, shown_bodies, limit)
        else:
            _tool(cas, s, put, lines, shown_bodies)
    flush_gap()
    out.text = "\n".join(lines)
    return out


def _llm(cas, s: Step, put, lines, seen: set, tool_sets: set, shown_bodies: dict, limit: int) -> None:
    c = s.llm
    assert c is not None
    fin = c.finish_reason_raw or ("cut (no terminal event)" if c.stream.is_stream and not c.stream.finish_seen else "")
    status = s.status if s.status is not None else s.transport_error
    lines.append(f"#{s.index} model call {c.provider}/{c.model or '?'} {s.method} {_where(s.url)} -> {status}"
                 + (f", finish {fin}" if fin else "") + (", streamed" if c.stream.is_stream else ""))
    results = {r.call_id: r for r in s.new_tool_results if r.call_id}
    for n, m in enumerate(c.messages):
        key = (m.role, flat(m.text), tuple((tc.name, tc.arguments_raw) for tc in m.tool_calls))
        if key in seen:
            continue
        seen.add(key)
        if m.role == "tool":
            r = results.get(m.tool_call_id) if m.tool_call_id else None
            name = m.tool_name or (r.name if r else None) or "?"
            src = r.source_interaction if r is not None else None
            if src is not None and src in shown_bodies and shown_bodies[src] == flat(m.text):
                out_label = f"tool result ({name}{', marked error' if m.is_error else ''}) = response body of #{src}"
                lines.append(f"  [{s.index} input.{n}] {out_label}")
                continue
            put(s.index, f"input.{n}", f"tool result ({name}{', marked error' if m.is_error else ''})", m.text)
        elif m.role == "assistant":
            calls = ", ".join(f"{tc.name}({flat(tc.arguments_raw)[:120]})" for tc in m.tool_calls)
            if m.text.strip():
                put(s.index, f"input.{n}", "assistant turn in the history" + (f" (calls {calls})" if calls else ""), m.text)
            elif calls:
                lines.append(f"  [{s.index} input.{n}] assistant turn in the history calls {calls}")
        elif m.text.strip():
            put(s.index, f"input.{n}", m.role, m.text)
    if c.tools:
        names = tuple(sorted(tl.name for tl in c.tools))
        if names not in tool_sets:
            tool_sets.add(names)
            sig = []
            for tl in c.tools[:20]:
                props = list(((tl.schema_ or {}).get("properties") or {}).keys()) if isinstance(tl.schema_, dict) else []
                sig.append(f"{tl.name}({', '.join(props[:6])})")
            lines.append(f"  tools declared: {', '.join(sig)}" + (f" (+{len(c.tools) - 20} more)" if len(c.tools) > 20 else ""))
    if not s.ok or c.error:
        if s.transport_error:
            lines.append(f"  transport failure: {cut(s.transport_error, 200)}")
        it = cas.interactions[s.index]
        if it.response is not None and it.response.body:
            put(s.index, "response.body", "error response", it.response.text)
        elif c.error:
            put(s.index, "message.error", "error", c.error)
        return
    if c.reasoning.strip():
        put(s.index, "message.reasoning", "reasoning", c.reasoning)
    if c.refusal:
        put(s.index, "message.refusal", "refusal", c.refusal)
    if c.text.strip():
        put(s.index, "message.text", "assistant says", c.text)
    for k, tc in enumerate(c.tool_calls):
        put(s.index, f"message.tool_calls/{k}/arguments_raw", f"calls tool {tc.name} with", tc.arguments_raw or "(none)")
    if not c.text.strip() and not c.tool_calls and not c.refusal:
        lines.append("  (the model sent no text and no tool call)")


def _tool(cas, s: Step, put, lines, shown_bodies: dict) -> None:
    it = cas.interactions[s.index]
    status = s.status if s.status is not None else s.transport_error
    if s.mcp is not None:
        m = s.mcp
        lines.append(f"#{s.index} MCP {m.method or '?'}{' ' + m.tool_name if m.tool_name else ''} {_where(s.url)} -> {status}"
                     + (" isError" if m.is_error else ""))
        if m.method == "tools/call" and it.request.body:
            put(s.index, "request.body", "request", it.request.text)
        if m.result_text:
            put(s.index, "mcp.result_text", "result", m.result_text)
            shown_bodies[s.index] = flat(m.result_text)
        elif m.error:
            lines.append(f"  error: {cut(m.error, 200)}")
        return
    ctype = f" {s.content_type}" if s.content_type else ""
    lines.append(f"#{s.index} tool/HTTP {s.method} {_where(s.url)} -> {status}{ctype}")
    if it.request.body and s.method not in ("GET", "HEAD"):
        put(s.index, "request.body", "request body", it.request.text)
    if s.transport_error:
        lines.append(f"  transport failure: {cut(s.transport_error, 200)}")
    if it.response is not None and it.response.body:
        put(s.index, "response.body", "response body", it.response.text)
        shown_bodies[s.index] = flat(it.response.text)
