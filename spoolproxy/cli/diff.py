"""``spoolproxy diff A [B]``: compare run A with run B (default: A's parent, the cassette a
fork names in ``forked_from``).

Prints how the runs relate, verdicts and findings that changed, totals side by side, the
step-by-step alignment and the first divergence with its field-level diff (``-`` B, ``+``
A); ``--json`` prints the same as one JSON object (:class:`spoolproxy.fix.compare.RunDiff`).
Exit status 0 (the runs were compared), 2 for bad input.
"""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError

STATUS_STYLE = {"same": "dim", "request": "yellow", "response": "magenta", "only_a": "green", "only_b": "red"}
STATUS_TEXT = {"same": "same", "request": "request differs", "response": "response differs", "only_a": "only in A",
               "only_b": "only in B"}


@click.command("diff")
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", required=False, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as one JSON object.")
@click.option("--all", "show_all", is_flag=True, help="List every aligned step (default: runs of identical steps are folded).")
@click.option("--config", type=click.Path(dir_okay=False), default=None,
              help="spoolproxy.toml with the [detect] settings and [prices] (default: the usual lookup).")
def command(a, b, as_json, show_all, config) -> None:
    """Compare run A with run B (default: A's parent): relation, totals, alignment, first divergence."""
    from ..cassettes import load
    from ..detectors import load_detect_config
    from ..fix.compare import diff_runs, parent_of, to_json

    ca = load(a)
    if b is None:
        parent = parent_of(ca)
        if parent is None:
            raise UsageError(f"{a} names no parent (it is not a fork: no forked_from); give the run to compare "
                             f"with: spoolproxy diff {a} OTHER.yaml")
        if not parent.exists():
            raise UsageError(f"{a} is a fork of {parent}, which does not exist any more; give B explicitly")
        b = str(parent)
    cb = load(b)
    d = diff_runs(ca, cb, load_detect_config(Path(config) if config else None))
    if as_json:
        click.echo(to_json(d))
        return
    render(d, show_all)


def _shown(path: str) -> str:
    import os

    rel = os.path.relpath(path)
    return rel if not rel.startswith("../..") else path


def _cost(t) -> str:
    """A run's cost for the table: ``$0.000034``, ``$0`` (local models), or ``unknown (no
    price for MODEL)``: never a guess."""
    from .show import usd

    if t.cost_usd is not None:
        return usd(t.cost_usd)
    if t.unpriced_models:
        return f"unknown (no price for {', '.join(t.unpriced_models)})"
    return "none (no call reported tokens)"


def _cost_change(ta, tb) -> str:
    if ta.cost_usd is None or tb.cost_usd is None:
        return ""
    delta = ta.cost_usd - tb.cost_usd
    if abs(delta) < 5e-9:
        return ""
    from .show import usd

    return ("+" if delta > 0 else "-") + usd(abs(delta))


def _short(text: str | None, n: int = 70) -> str:
    if text is None:
        return "-"
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def render(d, show_all: bool = False) -> None:
    """Print a RunDiff with rich (tables, colours when a terminal)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(soft_wrap=False, width=max(100, Console().width))
    console.print(f"[bold]A[/] {escape(_shown(d.a.path))}\n[bold]B[/] {escape(_shown(d.b.path))}\n"
                  f"{escape(d.relation_detail)}", highlight=False)
    ta, tb = d.a.totals, d.b.totals
    table = Table(title=None, show_lines=False)
    table.add_column("", no_wrap=True)
    table.add_column("B", max_width=48)
    table.add_column("A", max_width=48)
    table.add_column("change", no_wrap=True)
    verdict_change = "" if d.a.verdict == d.b.verdict else ("fixed" if d.a.verdict == "pass" else "broken")
    table.add_row("verdict", d.b.verdict, d.a.verdict, verdict_change)
    for label, attr in (("interactions", "interactions"), ("model calls", "model_calls"), ("tool calls", "tool_calls"),
                        ("tool requests", "tool_requests"), ("tokens in", "input_tokens"),
                        ("tokens out", "output_tokens"), ("HTTP errors", "http_errors"), ("blocked", "blocked")):
        vb, va = getattr(tb, attr), getattr(ta, attr)
        table.add_row(label, str(vb), str(va), "" if va == vb else f"{va - vb:+d}")
    table.add_row("cost", escape(_cost(tb)), escape(_cost(ta)), _cost_change(ta, tb))
    table.add_row("wall time", f"{tb.wall_s:.2f} s" if tb.wall_s is not None else "n/a",
                  f"{ta.wall_s:.2f} s" if ta.wall_s is not None else "n/a", "")
    table.add_row("final answer", escape(_short(tb.final_answer, 90)), escape(_short(ta.final_answer, 90)), "")
    console.print(table)
    sources = sorted({*ta.price_sources, *tb.price_sources})
    if sources:
        console.print(f"prices: {escape(', '.join(sources))} (USD per 1M tokens; " + escape("[prices]")
                      + " in spoolproxy.toml overrides)", highlight=False)
    for label, items in (("new in A", d.new_findings), ("gone from B", d.gone_findings)):
        if items:
            console.print(f"findings {label}: {escape(', '.join(items))}", highlight=False)
    steps = Table(title=None)
    for col in ("A", "B", "step", "what", "A's source"):
        steps.add_column(col, no_wrap=True)
    rows = d.steps if show_all else _fold(d.steps)
    for s in rows:
        if s is None:
            steps.add_row("…", "…", "[dim]identical steps folded (--all shows them)[/]", "")
            continue
        steps.add_row("-" if s.a is None else str(s.a), "-" if s.b is None else str(s.b),
                      f"[{STATUS_STYLE[s.status]}]{STATUS_TEXT[s.status]}[/]", escape(s.what), escape(s.source or ""))
    console.print(steps)
    div = d.first_divergence
    if div is None:
        console.print("[green]no divergence: every step has the same request and response[/]")
        return
    console.print(f"[bold]first divergence:[/] {escape(div.summary)}", highlight=False)
    for line in div.fields:
        console.print("  " + escape(line), highlight=False)


def _fold(steps):
    """Keep the first and last of a run of more than 4 identical steps (None marks a fold)."""
    out, run = [], []
    for s in [*steps, None]:
        if s is not None and s.status == "same":
            run.append(s)
            continue
        out += run if len(run) <= 4 else [run[0], None, run[-1]]
        run = []
        if s is not None:
            out.append(s)
    return out
