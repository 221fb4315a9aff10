"""``spoolproxy recover CASSETTE|DIR``: turn a crashed recording's journal into its cassette.

While ``spoolproxy record`` runs, every completed interaction is appended to
``.<cassette name>.spooljournal`` beside the cassette.  When the recorder was killed
(SIGKILL, power loss) the journal is all that is left; this command writes the cassette
from it with :func:`spoolproxy.cassettes.journal.recover` (atomically, in request-start
order, the torn last line of the in-flight interaction ignored) and removes the journal.
An existing cassette of the same name (from an earlier run) is kept as ``<name>.orig``.

CASSETTE may be the cassette path or the journal itself; a directory recovers every
journal under it.  Exits 1 with one line when there is no journal to recover.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import click

from ..cassettes.journal import journal_path, recover
from ..cassettes.redact import Redactor
from ..cassettes.storage import save
from ..config import section
from ..errors import CassetteError, SpoolError

JOURNAL_SUFFIX = ".spooljournal"


def cassette_for_journal(journal: Path) -> Path:
    """``dir/.run.yaml.spooljournal`` -> ``dir/run.yaml``."""
    return journal.with_name(journal.name[1 : -len(JOURNAL_SUFFIX)])


def targets(path: Path) -> list[Path]:
    """Cassette paths to recover for *path* (a cassette, a journal or a directory).

    Raises SpoolError: exit 1 when there is no journal to recover (a cassette whose
    recording finished cleanly, a directory without journals), exit 2 when ``path`` names
    nothing at all (a typo).
    """
    if path.is_dir():
        found = [cassette_for_journal(j) for j in sorted(path.rglob(f".*{JOURNAL_SUFFIX}"))]
        if not found:
            raise SpoolError(f"{path}: no recording journals (.*{JOURNAL_SUFFIX}) here; nothing to recover", exit_code=1)
        return found
    if path.name.startswith(".") and path.name.endswith(JOURNAL_SUFFIX):
        if not path.exists():
            raise SpoolError(f"{path}: no such journal; check the path (journals sit beside their cassette as "
                             f".NAME{JOURNAL_SUFFIX}; 'ls -a' shows them)", exit_code=2)
        return [cassette_for_journal(path)]
    if not journal_path(path).exists():
        if not path.exists():
            raise SpoolError(f"{path}: no such cassette or directory, and no journal {journal_path(path).name} beside "
                             "it; check the path (give the --cassette path of the interrupted recording, its journal "
                             "or a directory)", exit_code=2)
        raise SpoolError(f"{path}: no journal {journal_path(path).name} beside it (the recording finished cleanly); "
                         "nothing to recover", exit_code=1)
    return [path]


def recover_one(cassette: Path, red: Redactor) -> int:
    """Recover one cassette from its journal; returns the number of interactions.

    Raises CassetteError when the journal is unreadable or the cassette cannot be written.
    """
    if cassette.exists():
        backup = cassette.with_name(cassette.name + ".orig")
        try:
            shutil.copy2(cassette, backup)
        except OSError as exc:
            raise CassetteError(cassette, f"cannot keep the existing cassette as {backup.name}: {exc.strerror}") from None
    try:
        cas = recover(cassette)
    except ValueError as exc:  # FormatError: a journal entry that is not an interaction
        raise CassetteError(journal_path(cassette), f"journal is corrupt ({exc}); it was left in place") from None
    assert cas is not None  # targets() checked the journal exists
    redacted = red.cassette(cas)  # the journal is redacted on write; apply current [redact] rules too
    if redacted.interactions != cas.interactions:
        save(redacted, cassette)
    damaged = cas.meta.extra.get("damaged_journal_lines")
    if damaged:
        click.echo(
            f"spoolproxy recover: warning: {cassette}: journal line(s) {', '.join(map(str, damaged[:10]))} could not be "
            f"read and are missing from the cassette; the journal is kept as {journal_path(cassette).name}.damaged",
            err=True,
        )
    return len(cas.interactions)


@click.command("recover")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def command(paths: tuple[Path, ...]) -> None:
    """Write the cassette of a crashed recording from its journal.

    PATHS: cassette paths (as given to --cassette), journal files, or directories
    (every journal under them).
    """
    red = Redactor.from_config(section("redact"))
    red.learn_env(os.environ)
    todo = [c for p in paths for c in targets(p)]
    for cassette in todo:
        n = recover_one(cassette, red)
        kept = cassette.with_name(cassette.name + ".orig")
        note = f" (previous file kept as {kept.name})" if kept.exists() else ""
        click.echo(f"spoolproxy recover: {cassette}: recovered {n} interaction{'s' if n != 1 else ''} from the journal{note}")
