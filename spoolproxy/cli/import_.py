"""``spoolproxy import FILE... -o DIR``: other tools' recordings -> cassettes.

Formats (sniffed from the content, or forced with ``--format``): HAR 1.2, mitmproxy flow
files, OpenAI-style message logs (JSON Lines of ``messages``) and OpenTelemetry GenAI spans
(OTLP JSON); see :mod:`spoolproxy.interop`.  Each run becomes ``DIR/<name>.yaml`` (the
source file's stem, plus a run id when a file holds several runs), redacted
(defaults plus ``[redact]``), with ``imported_from`` in its ``spoolproxy:`` metadata.
Every input is read before anything is written; an existing cassette is never
overwritten without ``--force``.
"""

from __future__ import annotations

from pathlib import Path

import click

from ..cassettes.redact import Redactor
from ..cassettes.storage import ensure_dir, save
from ..config import section
from ..errors import CassetteError, UsageError
from ..interop import FORMATS, import_file

_ALIASES = {"mitm": "mitmproxy", "flows": "mitmproxy", "otlp": "otel", "jsonl": "messages"}


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", required=True, type=click.Path(path_type=Path), metavar="DIR",
              help="Directory the cassettes are written to (created when missing).")
@click.option("--format", "fmt", default="auto", show_default=True, metavar="FORMAT",
              help=f"Read every FILE as this format: auto, {', '.join(FORMATS)}.")
@click.option("--split", type=click.Choice(["auto", "trace", "file"]), default="auto", show_default=True,
              help="OTLP files: one cassette per trace, per file, or per trace when traces hold agent runs.")
@click.option("--force", is_flag=True, help="Overwrite cassettes that already exist in DIR.")
def command(files: tuple[Path, ...], out: Path, fmt: str, split: str, force: bool) -> None:
    """Turn HAR, mitmproxy flow, message-log or OTLP files into cassettes in DIR."""
    fmt = _ALIASES.get(fmt.lower(), fmt.lower())
    if fmt != "auto" and fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r} is not one of auto, {', '.join(FORMATS)}")
    if out.exists() and not out.is_dir():
        raise CassetteError(out, "is a file; -o takes a directory")
    red = Redactor.from_config(section("redact"))
    planned: list[tuple[Path, Path, object]] = []
    taken: set[Path] = set()
    for f in files:
        for run in import_file(f, None if fmt == "auto" else fmt, redactor=red, split=split):
            target = _free_name(out, run.name, taken)
            if target.exists() and not force:
                raise CassetteError(target, "exists; pass --force to overwrite it or choose another -o directory")
            taken.add(target)
            planned.append((f, target, run))
    if planned:
        ensure_dir(out)  # one error for an unwritable -o, before any file is written
    for f, target, run in planned:
        save(run.cassette, target)
        click.echo(f"spoolproxy import: {f} -> {target} ({len(run.cassette)} interactions)", err=True)
        for note in run.notes:
            click.echo(f"spoolproxy import: {f}: note: {note}", err=True)
    click.echo(f"spoolproxy import: wrote {len(planned)} cassette{'s' if len(planned) != 1 else ''} to {out}", err=True)


def _free_name(out: Path, stem: str, taken: set[Path]) -> Path:
    """``out/<stem>.yaml``, or ``<stem>-2.yaml`` ... when this import already used it."""
    target = out / f"{stem}.yaml"
    n = 2
    while target in taken:
        target = out / f"{stem}-{n}.yaml"
        n += 1
    return target
