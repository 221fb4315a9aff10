"""``spoolproxy show CASSETTE``: the cassette as an agent transcript timeline.

One row per interaction: index, kind (llm / mcp / http), provider and model or host, a
summary (the model's text or tool calls, the tool's status and size, the MCP method),
tokens (``?`` when an answered call reported no usage), cost in USD (``?`` for a model no
price source knows), duration (ms, spoolproxy recordings only) and the findings that concern
it.  A value cut to fit always ends in ``…``.  Below: the final answer, token totals (and
how many calls reported no usage), the run's cost (and where the prices came from), the user
checks' results, where a circuit breaker stopped the run, and the verdict.  ``--json``
prints the run document (:mod:`spoolproxy.detectors.document`: ``{"schema_version",
"cassette", "meta", "transcript", "report"}``, JSON Schema in
``spoolproxy/detectors/transcript.schema.json``), the same JSON user checks read on stdin.
"""

from __future__ import annotations

import json
import re
import sys
from urllib.parse import urlsplit

import click

from ..cassettes.storage import load
from ..detectors.evidence import clip, evidence_text
from .detect import ranges

MARK = {"info": "·", "warn": "!", "error": "✖", "critical": "✖✖"}
STYLE = {"info": "dim", "warn": "yellow", "error": "bold red", "critical": "bold white on red"}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("cassette", type=click.Path())
@click.option("--json", "as_json", is_flag=True,
              help="Print the run document as JSON (schema: spoolproxy/detectors/transcript.schema.json).")
@click.option("--width", type=int, default=None, help="Terminal width for the table (default: detected).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="spoolproxy.toml to read [detect] from (default: the usual lookup).")
def command(cassette: str, as_json: bool, width: int | None, config_path: str | None) -> None:
    """Show a cassette as an agent transcript timeline, with findings inline."""
    from ..detectors import analyze, build_transcript, load_detect_config
    from ..detectors.document import run_document

    cfg = load_detect_config(config_path)
    cas = load(cassette)
    t = build_transcript(cas, cfg)
    report = analyze(cas, cfg, transcript=t)
    if as_json:
        sys.stdout.write(json.dumps(run_document(cas, t, report), ensure_ascii=False, indent=2) + "\n")
        return
    _render(t, report, cassette, width, cas.meta.extra)
    _judged(cassette, width)


def _judged(cassette: str, width: int | None) -> None:
    """The stored diagnosis and fixes of the run (``spoolproxy diagnose`` / ``fix``), if any."""
    from rich.console import Console
    from rich.markup import escape

    from ..judge.service import stored

    d, fixes = stored(cassette)
    if d is None:
        return
    console = Console(highlight=False, width=width)
    at = f" at interaction {d.interaction}" if d.interaction is not None else ""
    style = "green" if d.label == "no_failure" else "yellow" if d.label == "unknown" else "bold red"
    console.print(f"[bold]diagnosis[/] ({escape(str(d.model))}, {d.prompt_version}): [{style}]{d.label}[/]{at}"
                  + (f" [dim](the model said {escape(d.claimed_label)})[/]" if d.claimed_label else ""))
    if d.root_cause:
        console.print(f"  {escape(d.root_cause)}")
    for e in d.evidence:
        console.print(f"        [dim]#{e.interaction} {escape(e.path)}:[/] [cyan]{escape(repr(e.quote)[1:-1][:140])}[/]")
    for p in fixes.kept if fixes is not None else []:
        console.print(f"  [bold]fix-{p.rank}[/]: {escape(p.file or '')} [dim]{escape(p.rationale[:120])}[/]")


def summary(step) -> str:
    """One line describing a step (used by the timeline and the record summary).  A value
    cut to fit ends in ``…``: a cut never passes for the whole value."""
    if step.llm is not None:
        c = step.llm
        if not step.ok:
            return f"{step.status or step.transport_error} {clip(c.error or '', 160)}".strip()
        parts = []
        if c.refusal:
            parts.append(f"refusal: {clip(c.refusal, 90)}")
        if c.text.strip():
            parts.append(repr(clip(c.text.strip(), 90)))
        for tc in c.tool_calls:
            parts.append(f"{tc.name}({clip(tc.arguments_raw, 60)})")
        if step.new_tool_results:
            parts.insert(0, f"[{len(step.new_tool_results)} tool result{'s' if len(step.new_tool_results) > 1 else ''} in]")
        fin = c.finish_reason_raw or ("cut" if c.stream.is_stream and not c.stream.finish_seen else "")
        how = ", stream" if c.stream.is_stream else ""
        if step.client_closed and c.stream.is_stream:
            how += ", client closed" if c.stream.complete else ", client closed early"
        text = " ".join(parts) or "(empty)"
        return f"{text}  [{fin}{how}]" if fin or how else text
    if step.mcp is not None:
        m = step.mcp
        what = m.method or "?"
        if m.tool_name:
            what += f" {m.tool_name}"
        if m.is_error:
            what += f"  isError: {clip(m.result_text or m.error or '', 70)}"
        elif m.tools:
            what += f"  -> {clip(', '.join(m.tools), 70)}"
        elif m.result_text:
            what += f"  -> {clip(m.result_text, 70)!r}"
        served = f"  (tool call {step.tool_call_ref[1]})" if step.tool_call_ref else ""
        return f"{what}  ({step.status}){served}"
    h = step.http
    path = urlsplit(step.url).path
    served = f"  (tool call {step.tool_call_ref[1]})" if step.tool_call_ref else ""
    status = step.status if step.status is not None else step.transport_error
    return f"{step.method} {path} -> {status} {step.content_type} {h.body_size if h else 0}B{served}"


def tokens_cell(step) -> str:
    """The tokens column: the reported total, ``?`` for an answered LLM call that reported no
    usage (unknown is not 0), empty for anything else."""
    if step.llm is None:
        return ""
    u = step.llm.usage
    if u.reported:
        return str(u.total)
    return "?" if step.ok and not step.llm.error else ""


_DATE_SUFFIX = re.compile(r"[-@](?:\d{8}|\d{4}-\d{2}-\d{2})$")  # claude-3-5-haiku-20241022, gpt-4o-2024-08-06


def _who(step, width: int) -> str:
    """The "who" cell: the first of ``provider/model``, ``provider/model`` without the model's
    date suffix, the model alone, the model without its date that fits in ``width`` (a whole
    name says more than a cut one; else the first, cut by the table); a host for a non-LLM
    step."""
    if not step.llm:
        return step.host
    model = step.llm.model or "?"
    undated = _DATE_SUFFIX.sub("", model)
    for who in (f"{step.llm.provider}/{model}", f"{step.llm.provider}/{undated}", model, undated):
        if len(who) <= width:
            return who
    return f"{step.llm.provider}/{model}"


def usd(value: float | None) -> str:
    """``$0.0012``-style money with enough digits for small per-call amounts; ``?`` for unknown."""
    if value is None:
        return "?"
    if value == 0:
        return "$0"
    return f"${value:.4f}" if value >= 0.01 else f"${value:.6f}"


def _render(t, report, name: str, width: int | None, extra: dict | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False, width=width)
    by_step: dict[int, list] = {}
    for f in report.findings:
        for i in f.interactions:
            by_step.setdefault(i, []).append(f)
    table = Table(title=escape(name), box=None, header_style="bold", pad_edge=False)
    who_width = max(18, min(34, console.width // 4))
    rows = []
    for s in t.steps:
        who = _who(s, who_width)
        tokens = tokens_cell(s)
        reported = s.llm is not None and (s.llm.usage.input_tokens is not None or s.llm.usage.output_tokens is not None)
        cost = usd(s.llm.cost_usd) if reported else ""
        ms = f"{s.duration_ms:.0f}" if s.duration_ms is not None else ""
        fs = [(f"{MARK[f.severity]}{f.kind}", STYLE[f.severity]) for f in by_step.get(s.index, [])]
        rows.append((str(s.index), s.kind, escape(who), escape(summary(s)), tokens, cost, ms, fs))
    # identifiers (model names, hosts, numbers, finding kinds) never wrap mid-word: too long ->
    # ellipsis; the summary column takes the remaining width and wraps.  Empty columns (no
    # tokens, no per-request clock in vcrpy cassettes, no findings) are left out.
    columns = (("#", {"justify": "right", "no_wrap": True}), ("kind", {"no_wrap": True}),
               ("who", {"no_wrap": True, "overflow": "ellipsis", "max_width": who_width}),
               ("summary", {"overflow": "fold", "ratio": 1, "min_width": SUMMARY_MIN}),
               ("tokens", {"justify": "right", "no_wrap": True}), ("cost", {"justify": "right", "no_wrap": True}),
               ("ms", {"justify": "right", "no_wrap": True}),
               ("findings", {"no_wrap": True}))
    keep = [i for i in range(len(columns)) if i < 4 or any(r[i] for r in rows)]
    inline = 7 in keep and _findings_inline(rows, keep, [c[0] for c in columns], who_width, console.width)
    if inline:  # too narrow for a findings column: each step's findings go under its summary, whole
        keep.remove(7)
    for i in keep:
        table.add_column(columns[i][0], **columns[i][1])
    for r in rows:
        marks = [f"[{style}]{label}[/]" for label, style in r[7]]
        cells = [*r[:7], "\n".join(marks)]
        if inline and marks:
            cells[3] = "\n".join([r[3], *marks])
        table.add_row(*(cells[i] for i in keep))
    console.print(table)
    fa = t.final_answer
    console.print(f"[bold]final answer[/] (#{fa.interaction}): {escape(clip(fa.text.strip(), 300))}" if fa else
                  "[bold]final answer[/]: [red]none[/]")
    n_llm = sum(1 for s in t.steps if s.llm is not None)
    unknown = t.calls_without_usage
    missing = (f" ({unknown} of {n_llm} model call{'s' if n_llm != 1 else ''} reported no usage: "
               f"{'their' if unknown != 1 else 'its'} tokens are unknown, not counted)") if unknown else ""
    console.print(f"[bold]tokens[/]: {t.input_tokens} in, {t.output_tokens} out, {t.total_tokens} total{missing}; "
                  f"[bold]cost[/]: {escape(cost_line(t))}")
    for line in breaker_lines(extra or {}):
        console.print(f"[bold red]{escape(line)}[/]")
    for c in report.checks:
        style = "green" if c.status == "pass" else STYLE[c.severity]
        console.print(f"[bold]check[/] {escape(c.name)}: [{style}]{c.status}[/]"
                      + (f" ({escape(clip(c.message, 200))})" if c.message else "") + f" [dim]{c.duration_ms:.0f} ms[/]")
    verdict = "[bold red]FAIL[/]" if report.verdict == "fail" else "[green]pass[/]"
    console.print(f"[bold]verdict[/]: {verdict}")
    for f in report.findings:
        console.print(f"  [{STYLE[f.severity]}]{f.severity:5}[/] {f.kind} at {ranges(f.interactions)}: {escape(f.message)}")
        for e in f.evidence:
            where, quote = evidence_text(e, 140)
            console.print(f"        [dim]{where} {escape(e.path)}:[/] [cyan]{escape(quote)}[/]")


#: the narrowest the summary column gets before the findings move under it
SUMMARY_MIN = 20


def _findings_inline(rows, keep: list[int], headers: list[str], who_width: int, width: int) -> bool:
    """True when the findings column, at the width of its longest kind name, does not fit
    beside the other columns (at their natural widths, ``who`` at most ``who_width`` and the
    summary at least :data:`SUMMARY_MIN`) in ``width`` terminal columns."""
    def natural(i: int) -> int:
        if i == 3:
            return SUMMARY_MIN
        longest = max((len(line) for r in rows for line in (
            [label for label, _ in r[7]] if i == 7 else str(r[i]).splitlines() or [""])), default=0)
        n = max(len(headers[i]), longest)
        return min(n, who_width) if i == 2 else n

    padding = 2 * (len(keep) - 1)  # one space each side of every column but the outer edges
    return sum(natural(i) for i in keep) + padding > width


def cost_line(t) -> str:
    """The run's cost in one line: amount and price sources, or why it is unknown."""
    if t.cost_usd is not None:
        return f"{usd(t.cost_usd)} (prices: {', '.join(t.price_sources) or 'table ' + str(t.price_table_date)})"
    if t.unpriced_models:
        return f"unknown: no price for {', '.join(t.unpriced_models)} (add it to [prices] in spoolproxy.toml)"
    if getattr(t, "calls_without_usage", 0):
        return "unknown (tokens unknown for some calls)"
    if not t.total_tokens:
        return "none (no tokens reported)"
    return "unknown"


def breaker_lines(extra: dict) -> list[str]:
    """Where a circuit breaker stopped the recording (``meta.extra['circuit_breaker']``)."""
    cb = extra.get("circuit_breaker")
    if not isinstance(cb, dict):
        return []
    at = cb.get("interaction")
    where = f"at interaction {at}" if at is not None else "before the next model request"
    return [f"stopped by the circuit breaker {where}: {cb.get('reason', '?')}"
            f" ({cb.get('refused', 0)} model request(s) refused)"]
