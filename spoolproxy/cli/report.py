"""``spoolproxy report CASSETTE -o run.html``: one run as a self-contained HTML page.

The page (see :mod:`spoolproxy.triage.report`) holds the run's facts, the findings with
their evidence highlighted inside the cited field, the timeline, the final answer, and
the diff to the parent run and the verify results when the fix loop left them.  It has
no script and loads nothing.  ``-o`` defaults to ``<cassette stem>.html`` beside the
cassette.  Exit status 0; 2 for an unreadable cassette or an unwritable output.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("cassette", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="HTML file to write (default: <cassette stem>.html beside the cassette).")
@click.option("--title", default=None, help="Page title (default: the cassette's file name).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="spoolproxy.toml to read [detect] and [redact] from (default: the usual lookup).")
def command(cassette: Path, output: Path | None, title: str | None, config_path: str | None) -> None:
    """Write one run (CASSETTE) as a self-contained HTML report."""
    from .. import config
    from ..cassettes.redact import Redactor
    from ..detectors import load_detect_config
    from ..triage.report import write_report

    out = output or cassette.with_suffix(".html")
    red = Redactor.from_config(config.section("redact", config_path))
    write_report(cassette, out, config=load_detect_config(config_path), redactor=red, title=title)
    click.echo(f"wrote {out}")
