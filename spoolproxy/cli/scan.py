"""``spoolproxy scan PATH...``: find unredacted secrets in cassettes (a pre-commit hook).

Scans cassette files (``*.yaml``, ``*.yml``, ``*.json``), recording journals
(``.<name>.spooljournal``) and side body files (``<name>.bodies/*``); directories are
searched recursively.  Each hit is one line on stdout::

    cassettes/run.yaml: interaction 3: request.headers.authorization: openai-key sk-pro…(48 chars)

The secret itself is never printed.  Exit status: 0 clean, 1 when anything secret-shaped
was found, 2 when an input cannot be read or is not a readable cassette (one line per bad
file on stderr, the loader's own message, as every command gives it).  ``--text`` scans
such files as plain text instead (any file: a log, a config, a suite case).  While walking
a directory, YAML/JSON files that are not cassettes at all (suite cases, baselines,
configs) are scanned as plain text; damaged cassettes are still errors.  The rules are
the redactor's own (:mod:`spoolproxy.cassettes.secret_rules`: key shapes as whole tokens,
credentials in URLs, secret JSON and form fields, also inside JSON held in a string),
plus ``[redact]`` in spoolproxy.toml and ``--pattern``, and the values of this shell's
``*_API_KEY``/``*_TOKEN``/``*_SECRET`` variables (``known-secret``), which ``record`` redacts too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click

from ..cassettes.journal import read_journal
from ..cassettes.redact import Redactor
from ..cassettes.secret_scan import learn_from, scan_data, scan_interaction
from ..cassettes.storage import iter_paths, load
from ..config import section
from ..errors import CassetteError, SpoolError

JOURNAL_SUFFIX = ".spooljournal"


@dataclass(frozen=True)
class Hit:
    """One secret-shaped string: ``file``, ``interaction`` index (None for side files),
    ``field`` (``request.headers.authorization``, ``response.body``, ``body`` ...), ``kind``
    (``openai-key``, ``credential-header`` ...) and a non-revealing ``excerpt``."""

    file: Path
    interaction: int | None
    field: str
    kind: str
    excerpt: str

    def line(self) -> str:
        """The hit as one output line."""
        where = f"interaction {self.interaction}: " if self.interaction is not None else ""
        return f"{self.file}: {where}{self.field}: {self.kind} {self.excerpt}"


def _in_side_dir(p: Path) -> bool:
    return any(part.endswith(".bodies") for part in p.parent.parts)


def classify(paths: Iterable[str | Path]) -> Iterator[tuple[str, Path]]:
    """Expand *paths* into ``(kind, file)`` with kind ``cassette`` (named explicitly),
    ``found`` (a ``*.yaml``/``*.yml``/``*.json`` found in a directory), ``journal`` or
    ``side`` (inside a ``<cassette>.bodies/`` directory).  Raises CassetteError for a path
    that does not exist."""
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in iter_paths([p]):
                if not _in_side_dir(f):
                    yield "found", f
            for f in sorted(p.rglob(f".*{JOURNAL_SUFFIX}")):
                yield "journal", f
            for d in sorted(p.rglob("*.bodies")):
                if d.is_dir():
                    for f in sorted(d.rglob("*")):
                        if f.is_file():
                            yield "side", f
        elif not p.exists():
            raise CassetteError(p, "no such file or directory; check the path")
        elif p.name.endswith(JOURNAL_SUFFIX):
            yield "journal", p
        elif _in_side_dir(p):
            yield "side", p
        else:
            yield "cassette", p


def scan_bytes(path: Path, data: bytes, red: Redactor, field: str = "body") -> Iterator[Hit]:
    """Secret-shaped strings in raw bytes (side body files, ``--text``)."""
    for kind, excerpt in scan_data(data, red):
        yield Hit(path, None, field, kind, excerpt)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CassetteError(path, f"cannot read: {exc.strerror}") from None


def scan_file(kind: str, path: Path, red: Redactor, seen: set[Path], *, as_text: bool = False) -> list[Hit]:
    """All hits in one file.  A cassette's side body files are scanned with it unless
    already in *seen* (resolved paths; those scanned on their own), and added to it.  A
    YAML/JSON file met in a directory (``kind`` "found") that is not a cassette at all is
    scanned as plain text; ``as_text`` scans any file that does not load as plain text.

    Raises CassetteError when the file cannot be read or is not a cassette/journal.
    """
    if kind == "side":
        return list(scan_bytes(path, _read(path), red))
    if kind == "journal":
        try:
            cas = read_journal(path)
        except ValueError as exc:  # FormatError from a malformed entry
            raise CassetteError(path, f"not a readable journal ({exc})") from None
    else:
        try:
            cas = load(path)
        except CassetteError as exc:
            if as_text or (kind == "found" and exc.problem.startswith("not a cassette")):
                # some other file (a suite case, a baseline, a log): scan its text as it is
                return list(scan_bytes(path, _read(path), red, "text"))
            if kind == "cassette":
                raise CassetteError(exc.path, f"{exc.problem}; pass --text to scan it as plain text") from None
            raise
    hits: list[Hit] = []
    run = learn_from(cas, red)  # what redacting this cassette would remember (an echoed password)
    for i, it in enumerate(cas.interactions):
        hits += [Hit(path, h.interaction, h.field, h.kind, h.excerpt) for h in scan_interaction(i, it, run)]
        ref = it.response.body_ref if it.response is not None else None
        if ref is not None and ref.file:
            side = (path.parent / ref.file).resolve()
            if side.is_file() and side not in seen:
                seen.add(side)
                hits += [Hit(path, i, f"response.body ({ref.file})", h.kind, h.excerpt)
                         for h in scan_bytes(side, _read(side), run)]
    return hits


def _dedupe(hits: list[Hit]) -> list[Hit]:
    """Drop repeats, and the generic ``credential-*`` hit of a field that also has a
    key-shaped hit (one secret, one line)."""
    shaped = {(h.file, h.interaction, h.field) for h in hits if not h.kind.startswith("credential-")}
    out, keys = [], set()
    for h in hits:
        key = (h.file, h.interaction, h.field, h.excerpt)  # one string matched by two shapes: first wins
        if key in keys or (h.kind.startswith("credential-") and (h.file, h.interaction, h.field) in shaped):
            continue
        keys.add(key)
        out.append(h)
    return out


@click.command("scan")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--pattern", "patterns", multiple=True, metavar="REGEX",
              help="Extra secret regex (group 1, when present, is the secret). Repeatable.")
@click.option("--header", "headers", multiple=True, metavar="NAME",
              help="Extra credential header name. Repeatable.")
@click.option("--text", "as_text", is_flag=True,
              help="Scan files that are not readable cassettes as plain text instead of refusing them.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when clean.")
def command(paths: tuple[Path, ...], patterns: tuple[str, ...], headers: tuple[str, ...], as_text: bool,
            quiet: bool) -> None:
    """Find unredacted secrets in cassettes, journals and side body files.

    PATHS are files or directories (searched recursively).  Exits 1 when anything
    secret-shaped is found, 2 when an input is unreadable or not a cassette (unless
    --text), 0 when clean, so it works as a pre-commit hook (pre-commit passes the staged
    file names).  The rules are the redactor's: what scan reports, record would redact.
    """
    red = Redactor.from_config(section("redact"), headers=headers, patterns=patterns)
    red.learn_env(os.environ)  # a value of this shell's *_API_KEY/*_TOKEN/*_SECRET found anywhere is reported
    files = list(classify(paths))
    seen = {f.resolve() for kind, f in files if kind == "side"}
    hits: list[Hit] = []
    bad = 0
    for kind, path in files:
        try:
            hits += scan_file(kind, path, red, seen, as_text=as_text)
        except SpoolError as exc:
            bad += 1
            click.echo(f"spoolproxy: error: {exc}", err=True)
    hits = _dedupe(hits)
    for h in hits:
        click.echo(h.line())
    n_files = len(files)
    if hits:
        affected = len({h.file for h in hits})
        plain = any(h.field == "text" for h in hits)  # files read as plain text, not as cassettes
        click.echo(
            f"spoolproxy scan: {len(hits)} secret-shaped string(s) in {affected} of {n_files} file(s); "
            "rotate those keys, then rewrite each cassette redacted with "
            "'spoolproxy export FILE --format spoolproxy -o FILE'"
            + ("; remove them from the other files by hand" if plain else "")
            + " (add custom shapes to [redact] in spoolproxy.toml)",
            err=True,
        )
    elif not quiet and not bad:
        click.echo(f"spoolproxy scan: no secrets in {n_files} file(s)", err=True)
    if bad:
        raise click.exceptions.Exit(2)
    if hits:
        raise click.exceptions.Exit(1)
