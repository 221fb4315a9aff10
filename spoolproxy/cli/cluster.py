"""``spoolproxy cluster PATH...``: failing runs grouped by root cause, biggest first.

PATH is a cassette, a directory of cassettes (recursively; ``.``-directories such as a
suite's ``.runs/`` are skipped) or a suite (its cases' failing cassettes).  Each cluster
has a stable id (``c3f9a2b1``), its size, the recognised cause, the normalised failure
text, the root finding kinds, providers, versions and when it was last seen; ``-v`` lists
every member, else the first three.  ``--json`` prints one object::

    {"method": "tfidf"|"ollama:MODEL"|"exact", "threshold", "note", "runs", "failing",
     "clusters": [{"id", "size", "cause", "kind", "signature", "kinds", "providers",
                   "versions", "first_seen", "last_seen", "exemplar", "runs": [...]}]}

PATH may also be a store URL (``s3://bucket/prefix``) or a ``*.parquet`` findings table
written by ``detect --parquet`` (clustered without re-reading a cassette); ``--engine dask``
runs the per-cassette work on a Dask cluster and ``--parquet OUT`` keeps its rows (see
``spoolproxy detect``).  Suites are read by the local engine only.

A file found in a directory that is not a readable cassette or case gets a warning and is
left out (spoolproxy's own side files, such as ``<stem>.verify.json``, silently).  Exit
status 0; 2 for a missing path, a file named as PATH that is not a readable cassette or
case (empty, truncated, garbage), or a bad option.
"""

from __future__ import annotations

import json
import os
import sys

import click

from .scale_options import scale_options
from .triage_options import triage_options


@click.command("cluster", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@triage_options
@click.option("--json", "as_json", is_flag=True, help="Print the clusters as one JSON object.")
@click.option("--top", type=click.IntRange(min=1), default=None, help="Show only the N biggest clusters.")
@click.option("-v", "--verbose", is_flag=True, help="List every run of each cluster (default: the first three).")
@scale_options
def command(paths, triage, as_json: bool, top: int | None, verbose: bool, scale) -> None:
    """Group failing runs (cassettes, directories, suites, store URLs, findings tables) by
    root cause, biggest first."""
    red = triage.redactor()
    if scale.wanted(paths):
        from ..errors import SpoolError
        from .detect import named_files

        named = named_files(paths)

        def skip(p: str, why: str) -> None:
            if os.path.normpath(p) in named:  # named on the command line: it must be a cassette
                raise SpoolError(f"{p}: {why}; fix it or leave it out")
            click.echo(f"spoolproxy: warning: skipped {p}: {why}", err=True)

        runs = scale.runs(paths, triage.detect_config(), tags=triage.tags, on_skip=skip)
    else:
        runs = triage.collect(paths)
    result = triage.clustering(runs)
    clusters = result.clusters[:top] if top else result.clusters
    if result.note:
        click.echo(f"spoolproxy: note: {red.text(result.note)}", err=True)
    if as_json:
        doc = {"method": result.method, "threshold": result.threshold, "note": result.note, "runs": len(runs),
               "failing": len(runs) - result.passing, "clusters": [c.to_json() for c in clusters]}
        sys.stdout.write(red.text(json.dumps(doc, ensure_ascii=False, indent=2)) + "\n")
        return
    _print(clusters, result, len(runs), verbose, red)


def _print(clusters, result, n_runs: int, verbose: bool, red) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console(highlight=False, soft_wrap=True)
    failing = n_runs - result.passing
    if not clusters:
        console.print(f"{n_runs} runs, none failing: nothing to cluster")
        return
    for c in clusters:
        facts = [", ".join(c.providers) or "no provider", "versions " + ", ".join(c.versions())]
        if c.last_seen:
            facts.append(f"last seen {c.last_seen:%Y-%m-%d}")
        title = f"[bold]{escape(c.cause)}[/]" if c.cause else f"[bold]{escape(c.kind)}[/]"
        console.print(f"[bold cyan]{c.id}[/]  [bold]{c.size}[/] run{'s' if c.size != 1 else ''}  {title}  "
                      f"[dim]({escape('; '.join(facts))})[/]")
        console.print(f"  {escape(red.text(c.signature))}", style="dim")
        shown = c.runs if verbose else c.runs[:3]
        for r in shown:
            label = f"{r.case.name} (case, {r.case.status})" if r.case else r.name
            console.print(f"  · {escape(red.text(label))}")
        if len(c.runs) > len(shown):
            console.print(f"  · … {len(c.runs) - len(shown)} more (-v lists them)", style="dim")
    how = result.method + (f", cut at {result.threshold:g}" if result.threshold is not None else "")
    console.print(f"{failing} failing of {n_runs} runs in {len(result.clusters)} clusters ({how})")
