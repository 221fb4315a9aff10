"""``spoolproxy dashboard PATH... -o DIR/index.html``: many runs on one HTML page.

PATH is a cassette, a directory of cassettes or a suite (as for ``spoolproxy cluster``), or
a findings table (``*.parquet``, also ``--findings``) written by ``detect --parquet`` over
any number of runs: its runs are shown without reading a cassette (a report page only for
runs whose cassette is a local file).
The page shows the pass rate per agent version over time, runs per day, failure kinds,
the top failure clusters and the latest ``spoolproxy test`` outcome of every case (read
from ``SUITE/.runs/results.json`` of the suites found under PATH or given with
``--suite``), each linking to the run's own report, written under ``DIR/runs/``.  Charts
are inline SVG; the pages have no script and load nothing.  A file found in a directory
that is not a readable cassette or case gets a warning and is left out (spoolproxy's own
side files, such as ``<stem>.verify.json``, silently); a file named as PATH must be one.
Exit status 0; 2 for a missing path, a named file that is not a readable cassette or case,
a bad option or an output that cannot be written.
"""

from __future__ import annotations

from pathlib import Path

import click

from .triage_options import triage_options


@click.command("dashboard", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--findings", "findings", multiple=True, metavar="PARQUET",
              help="Also show the runs of this findings table (written by detect/cluster --parquet; a path or URL; "
                   "repeatable). A PATH ending in .parquet is read the same way.")
@click.option("--storage-option", "storage_options", multiple=True, metavar="KEY=VALUE",
              help="fsspec storage option for a --findings URL (repeatable).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("spoolproxy-dashboard/index.html"), show_default=True,
              help="HTML file to write; run reports go to runs/ beside it.")
@click.option("--suite", "suites", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="Also show the latest test outcomes of this suite (repeatable; suites under PATH are found).")
@click.option("--version-tag", default=None, metavar="KEY",
              help="Tag read as the agent version (default: [triage] version_tag, else 'version').")
@click.option("--title", default="spoolproxy dashboard", show_default=True, help="Page title.")
@click.option("--no-run-reports", is_flag=True, help="Do not write a report per run (the page then has no run links).")
@triage_options
def command(paths, findings, storage_options, output: Path, suites, version_tag, title: str, no_run_reports: bool,
            triage) -> None:
    """Write an HTML dashboard of the runs under PATH (cassettes, directories, suites,
    findings tables): pass rate per version, clusters, tests."""
    from ..scale.parquet import is_parquet
    from ..triage.dashboard import write_dashboard

    for s in suites:
        if not s.is_dir():
            raise click.UsageError(f"--suite {s}: no such directory")
    tables = [*findings, *(p for p in paths if is_parquet(p))]
    paths = [p for p in paths if not is_parquet(p)]
    if not paths and not tables:
        raise click.UsageError("give PATH... (cassettes, directories, suites) or --findings PARQUET")
    runs = _table_runs(tables, storage_options) if tables else []
    skipped: list[str] = []
    out, stats = write_dashboard(
        paths, output, tags=triage.tags, config=triage.detect_config(), runs=runs,
        version_tag=version_tag or triage.triage_config().version_tag, embedder=triage.embedder(),
        threshold=triage.cut(), suites=list(suites), redactor=triage.redactor(), title=title,
        run_reports=not no_run_reports, on_skip=lambda p, why: skipped.append(f"spoolproxy: warning: skipped {p}: {why}"),
        strict=True)
    for line in skipped[:20]:
        click.echo(line, err=True)
    if len(skipped) > 20:
        click.echo(f"spoolproxy: warning: ... {len(skipped) - 20} more files skipped", err=True)
    if stats.clustering and stats.clustering.note:
        click.echo(f"spoolproxy: note: {stats.clustering.note}", err=True)
    clusters = len(stats.clustering.clusters) if stats.clustering else 0
    click.echo(f"wrote {out}: {_n(len(stats.runs), 'run')} ({stats.failing} failing) in "
               f"{_n(len(stats.versions), 'version')}, {_n(clusters, 'cluster')}, "
               f"{_n(len(stats.tests), 'test outcome')}")


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _table_runs(tables, storage_options) -> list:
    """The runs of findings tables (rows that are not runs, such as corrupt cassettes, left out)."""
    from ..scale.parquet import read_rows
    from ..scale.rows import ERROR, SKIP, row_run
    from ..store.fs import parse_storage_options

    options = parse_storage_options(storage_options)
    return [row_run(r) for t in tables for r in read_rows(t, options) if r["verdict"] not in (ERROR, SKIP)]
