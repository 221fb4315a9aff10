"""``spoolproxy detect PATH...``: flag failing agent runs in cassettes, with evidence.

PATH is a cassette file or a directory (searched recursively for ``*.yaml``/``*.yml``/
``*.json``).  A file that is not a cassette (``expected.yaml`` beside a case, a config
file) gets a one-line warning on stderr and is skipped.

Output: a table of findings per cassette, or with ``--json`` one JSON object per cassette
per line (JSON Lines)::

    {"cassette": "...", "verdict": "pass"|"fail", "findings": [{"kind", "severity",
     "interactions": [0-based], "message", "evidence": [{"interaction", "path", "quote"}]}]}

``--jobs N`` loads and analyzes cassettes in N worker processes (output order unchanged).
Exit status: 0, or 1 with ``--fail-on LEVEL`` when any finding is at LEVEL or above;
2 for bad usage or a missing path.  Thresholds and budgets come from ``[detect]`` in
spoolproxy.toml (``--config`` to name the file).
"""

from __future__ import annotations

import json
import sys

import click

from ..cassettes.storage import iter_paths, load
from ..errors import CassetteError

LEVELS = ("info", "warn", "error", "critical")
STYLE = {"info": "dim", "warn": "yellow", "error": "bold red", "critical": "bold white on red"}


def _one(path: str, cfg) -> tuple[str, str | None, dict | None, int]:
    """Load and analyze one file: (path, warning or None, report as a dict, interactions).
    Top-level so that ``--jobs`` worker processes can run it."""
    from ..detectors import analyze

    try:
        cas = load(path)
    except CassetteError as exc:
        return path, f"spoolproxy: warning: skipped {exc}", None, 0
    report = analyze(cas, cfg)
    report.cassette = str(path)
    return path, None, report.model_dump(mode="json"), len(cas.interactions)


def _results(files: list[str], cfg, jobs: int):
    if jobs <= 1 or len(files) < 2:
        for f in files:
            yield _one(f, cfg)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(_one, files, [cfg] * len(files), chunksize=max(1, len(files) // (jobs * 8)))


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print JSON Lines, one object per cassette.")
@click.option("--fail-on", type=click.Choice(LEVELS[1:]), default=None,
              help="Exit 1 when any finding has this severity or higher.")
@click.option("--min-severity", type=click.Choice(LEVELS), default="info", show_default=True,
              help="Hide findings below this severity in the table (JSON always has all).")
@click.option("--jobs", "-j", type=click.IntRange(min=0), default=1, show_default=True,
              help="Worker processes for many cassettes (0: one per CPU). Output order is unchanged.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="spoolproxy.toml to read [detect] from (default: the usual lookup).")
def command(paths: tuple[str, ...], as_json: bool, fail_on: str | None, min_severity: str, jobs: int,
            config_path: str | None) -> None:
    """Flag failing agent runs in cassettes (files or directories), with evidence."""
    import os

    from ..detectors import SEVERITY_RANK, Report, load_detect_config

    cfg = load_detect_config(config_path)
    files = [str(f) for f in iter_paths(paths)]
    jobs = jobs or (os.cpu_count() or 1)
    console = None
    if not as_json:
        from rich.console import Console

        console = Console(highlight=False, soft_wrap=True)
    worst = -1
    counts = {"pass": 0, "fail": 0, "skipped": 0}
    for _, warning, doc, n in _results(files, cfg, jobs):
        if warning is not None:
            click.echo(warning, err=True)
            counts["skipped"] += 1
            continue
        counts[doc["verdict"]] += 1
        for finding in doc["findings"]:
            worst = max(worst, SEVERITY_RANK[finding["severity"]])
        if as_json:
            sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
        else:
            _print_report(console, Report.model_validate(doc), SEVERITY_RANK[min_severity], n)
    if console is not None:
        console.print(f"{counts['pass'] + counts['fail']} cassettes: [bold red]{counts['fail']} fail[/], "
                      f"[green]{counts['pass']} pass[/]" + (f", {counts['skipped']} skipped" if counts["skipped"] else ""))
    if fail_on is not None and worst >= SEVERITY_RANK[fail_on]:
        raise SystemExit(1)


def ranges(idxs: list[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2,5,7-8"``."""
    out: list[str] = []
    for i in idxs:
        if out and _last(out[-1]) == i - 1:
            first = out[-1].split("-")[0]
            out[-1] = f"{first}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def _last(part: str) -> int:
    return int(part.split("-")[-1])


def _print_report(console, report, min_rank: int, n: int) -> None:
    from rich.markup import escape
    from rich.table import Table

    from ..detectors import SEVERITY_RANK

    verdict = "[bold red]FAIL[/]" if report.verdict == "fail" else "[green]pass[/]"
    shown = [f for f in report.findings if SEVERITY_RANK[f.severity] >= min_rank]
    console.print(f"{verdict} {escape(report.cassette or '')} [dim]({n} interactions, {len(report.findings)} findings)[/]")
    if not shown:
        return
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=True)
    table.add_column("severity", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("at", max_width=12, overflow="fold")
    table.add_column("message / evidence", overflow="fold", ratio=1)
    for f in shown:
        lines = [escape(f.message)]
        for e in f.evidence:
            lines.append(f"[dim]#{e.interaction} {escape(e.path)}:[/] [cyan]{escape(repr(e.quote)[1:-1][:160])}[/]")
        table.add_row(f"[{STYLE[f.severity]}]{f.severity}[/]", f.kind, ranges(f.interactions), "\n".join(lines))
    console.print(table)
    console.print()
