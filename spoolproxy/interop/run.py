"""What every reader of a foreign format returns."""

from __future__ import annotations

from dataclasses import dataclass

from ..cassettes.model import Cassette


@dataclass
class ImportedRun:
    """One run read from another tool's file.

    ``cassette``: its interactions and metadata (not yet redacted; provenance under
    ``meta.extra["imported_from"]``).  ``name``: the file name stem suggested for it
    (the source file's stem, plus a run id or index when one file holds several runs).
    ``notes``: one-line remarks for the user (what was skipped and why).
    """

    cassette: Cassette
    name: str
    notes: tuple[str, ...] = ()
