"""One recorded run as a transcript a model can read step by step (the MCP ``show_run`` tool).

:func:`show_run` loads a cassette (or a suite case's failing cassette), reads it as an agent
transcript (:func:`spoolproxy.detectors.build_transcript`), runs the detectors and returns
a JSON-ready dict: the run's facts, every finding with its verbatim evidence, the final
answer and the steps, paged, each text clipped to ``max_chars``:

* ``llm``: provider, model, status, the new user message and the tool results this request
  fed back, the model's text, reasoning (clipped harder), tool calls with their argument
  text, finish reason, tokens, whether a stream was cut, the provider's error;
* ``mcp``: JSON-RPC method, tool name, arguments, result text, ``is_error``;
* ``http``: method, URL, status, content type, body size, the response body (text only,
  clipped to 600 characters at most), transport error, and which model tool call it served;

and on each step the kinds of the findings that cite it.
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from .workspace import Workspace, clip, command_line, page

MAX_STEPS = 200
MAX_CHARS = 20_000


def run_path(ws: Workspace, run: str):
    """The cassette ``run`` names: a path under the root, else a suite case's failing
    cassette (``failing_cassette`` of a pinned case, else ``cassette``).  Raises UsageError."""
    from ..suite.files import project_root

    text = run.strip()
    try:
        p = ws.resolve(text, what="run")
    except UsageError as exc:
        if "outside" in str(exc) or not ws.suite.is_dir():
            raise
        from .service import find_case

        try:
            _cp, case = find_case(ws, text)
        except UsageError:
            raise UsageError(f"no cassette {text!r} under {ws.root} and no case of that name in "
                             f"{ws.rel(ws.suite)}; list_runs gives cassette paths, list_cases case names") from None
        p = ws.resolve(str(project_root(ws.suite) / (case.failing_cassette or case.cassette)), what="case cassette")
    if p.is_dir():
        raise UsageError(f"run {text!r} is a directory; name one cassette in it (list_runs with paths=[{text!r}])")
    return p


TEXTUAL = ("json", "text", "xml", "html", "javascript", "x-www-form-urlencoded", "event-stream", "ndjson")


def _body_preview(it, n: int) -> str | None:
    """The response body of a plain HTTP interaction as text, clipped; None when binary or empty."""
    resp = it.response if it is not None else None
    if resp is None or not resp.body or not any(t in resp.content_type for t in TEXTUAL) and resp.content_type:
        return None
    return clip(resp.text, n)


def _step(s, kinds: list[str], n: int, it=None) -> dict[str, Any]:
    out: dict[str, Any] = {"index": s.index, "kind": s.kind}
    if s.llm is not None:
        c = s.llm
        out.update(provider=c.provider, model=c.model, status=s.status)
        last = c.messages[-1] if c.messages else None
        if last is not None and last.role == "user" and last.text.strip():
            out["user"] = clip(last.text, n)
        if s.new_tool_results:
            out["tool_results_in"] = [{"call_id": r.call_id, "name": r.name, "is_error": r.is_error,
                                       "served_by": r.source_interaction, "content": clip(r.content, n)}
                                      for r in s.new_tool_results]
        if c.text.strip():
            out["text"] = clip(c.text, n)
        if c.reasoning.strip():
            out["reasoning"] = clip(c.reasoning, min(n, 400))
        if c.tool_calls:
            out["tool_calls"] = [{"id": tc.id, "name": tc.name, "arguments": clip(tc.arguments_raw, n),
                                  **({"parse_error": tc.parse_error} if tc.parse_error else {})} for tc in c.tool_calls]
        if c.refusal:
            out["refusal"] = clip(c.refusal, n)
        out["finish_reason"] = c.finish_reason_raw or c.finish_reason
        if c.usage.total:
            out["tokens"] = {"input": c.usage.input_tokens, "output": c.usage.output_tokens, "total": c.usage.total}
        if c.stream.is_stream:
            out["stream"] = {"events": c.stream.events, "complete": c.stream.complete}
        if c.error:
            out["error"] = clip(c.error, n)
    elif s.mcp is not None:
        m = s.mcp
        out.update(method=m.method, status=s.status, tool=m.tool_name, is_error=m.is_error)
        if m.arguments is not None:
            import json

            out["arguments"] = clip(json.dumps(m.arguments, ensure_ascii=False), n)
        if m.result_text:
            out["result"] = clip(m.result_text, n)
        if m.tools:
            out["tools"] = m.tools[:50]
        if m.error:
            out["error"] = clip(m.error, n)
    else:
        h = s.http
        out.update(method=s.method, url=clip(s.url, 300), status=s.status, content_type=s.content_type,
                   body_size=h.body_size if h else 0)
        preview = _body_preview(it, min(n, 600))
        if preview:
            out["response"] = preview
    if s.transport_error:
        out["transport_error"] = clip(s.transport_error, 300)
    if s.tool_call_ref:
        out["served_tool_call"] = {"interaction": s.tool_call_ref[0], "call_id": s.tool_call_ref[1]}
    if s.duration_ms is not None:
        out["ms"] = round(s.duration_ms)
    if kinds:
        out["findings"] = kinds
    return out


def _interaction(cas, index: int):
    return cas.interactions[index] if 0 <= index < len(cas.interactions) else None


def show_run(ws: Workspace, run: str, offset: int = 0, limit: int = 40, max_chars: int = 800,
             focus: str = "all") -> dict[str, Any]:
    """The run ``run`` (a cassette path or a case name) as a transcript with findings.

    ``focus``: ``all`` steps, or ``findings``: only the steps a finding cites and the one
    before each.  ``offset`` / ``limit`` page the steps (``page.next_offset`` continues);
    ``max_chars`` clips every text.  Raises UsageError for an unknown run or focus, and
    CassetteError for a file that is not a readable cassette.
    """
    from ..cassettes.storage import load
    from ..detectors import analyze, build_transcript
    from .normalize import failure_text
    from .tags import commit_of, tags_of

    if focus not in ("all", "findings"):
        raise UsageError(f"focus {focus!r}: use all or findings")
    n = max(80, min(max_chars, MAX_CHARS))
    path = run_path(ws, run)
    cas = load(path)
    cfg = ws.detect_config()
    t = build_transcript(cas, cfg)
    report = analyze(cas, cfg, transcript=t)
    cited: dict[int, list[str]] = {}
    for f in report.findings:
        for i in f.interactions:
            cited.setdefault(i, []).append(f.kind)
    steps = t.steps
    if focus == "findings":
        keep = {j for i in cited for j in (i - 1, i)}
        steps = [s for s in t.steps if s.index in keep]
    chunk, info = page(steps, offset, min(limit, MAX_STEPS))
    llm = [s for s in t.steps if s.llm is not None]
    root = failure_text(report, t)
    meta = cas.meta
    return {
        "cassette": ws.rel(path), "verdict": report.verdict,
        "root_failure": None if root is None else {"kind": root.kind, "cause": root.cause,
                                                   "message": clip(root.message, 400)},
        "summary": {
            "recorded_at": meta.recorded_at.isoformat() if meta.recorded_at else None,
            "command": command_line(meta.command) if meta.command else None, "exit_code": meta.exit_code,
            "tags": tags_of(meta), "commit": commit_of(meta), "interactions": len(t.steps),
            "llm_calls": len(llm), "tool_calls": sum(len(s.llm.tool_calls) for s in llm),
            "mcp_calls": sum(1 for s in t.steps if s.kind == "mcp"),
            "http_calls": sum(1 for s in t.steps if s.kind == "http"),
            "models": sorted({f"{s.llm.provider}/{s.llm.model or '?'}" for s in llm}),
            "tokens": {"input": t.input_tokens, "output": t.output_tokens, "total": t.total_tokens},
            "cost_usd": t.cost_usd, "price_table_date": t.price_table_date,
        },
        "findings": [{"kind": f.kind, "severity": f.severity, "interactions": f.interactions,
                      "message": clip(f.message, 600),
                      "evidence": [{"interaction": e.interaction, "path": e.path, "quote": clip(e.quote, 300)}
                                   for e in f.evidence[:5]]} for f in report.findings[:50]],
        "findings_omitted": max(0, len(report.findings) - 50),
        "final_answer": None if t.final_answer is None else {"interaction": t.final_answer.interaction,
                                                             "text": clip(t.final_answer.text, n)},
        "focus": focus, "steps": [_step(s, cited.get(s.index, []), n, _interaction(cas, s.index)) for s in chunk], "page": info,
    }
