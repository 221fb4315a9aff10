"""The request-matching settings of one regression run (``MatchOptions`` for a case).

Three sources are added together, in this order: the project's ``[playback]`` table of
spoolproxy.toml (``normalize``, ``ignore_json_paths``, ``match_headers``, as for
``spoolproxy playback``; the ``[redact]`` table's ``headers``/``patterns`` too), the case
file's ``match_options``, and the ``spoolproxy test --normalize / --ignore-json-path`` flags
(:class:`~.runner.RunOptions`).  Nothing else of ``[playback]`` applies to a regression run:
its routing and matching mode come from the case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .. import config
from ..errors import SpoolError
from ..replayer.fingerprint import MatchOptions
from .model import Case

PLAYBACK_KEYS = ("normalize", "ignore_json_paths", "match_headers")


def _strings(table: dict, key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpoolError(f"config [{where}] {key} must be a list of strings; fix spoolproxy.toml")
    return tuple(value)


def project_match_options(config_path: Path | None) -> MatchOptions:
    """MatchOptions from the project's ``[playback]`` and ``[redact]`` tables (empty without a
    config file).  Raises SpoolError for a value of the wrong type."""
    if config_path is None:
        return MatchOptions()
    playback = config.section("playback", config_path)
    redact = config.section("redact", config_path)
    return MatchOptions(
        ignore_json_paths=_strings(playback, "ignore_json_paths", "playback"),
        normalize=_strings(playback, "normalize", "playback"),
        match_headers=_strings(playback, "match_headers", "playback"),
        redact_headers=_strings(redact, "headers", "redact"),
        redact_patterns=_strings(redact, "patterns", "redact"),
    )


def case_match_options(case: Case, project: MatchOptions, *, normalize: Sequence[str] = (),
                       ignore_json_paths: Sequence[str] = (), match_headers: Sequence[str] = ()) -> MatchOptions:
    """``project`` plus the case's ``match_options`` plus the command-line values (duplicates dropped)."""
    m = case.match_options

    def merged(*parts: Sequence[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v for part in parts for v in part))

    return MatchOptions(
        ignore_json_paths=merged(project.ignore_json_paths, m.ignore_json_paths, ignore_json_paths),
        normalize=merged(project.normalize, m.normalize, normalize),
        match_headers=merged(project.match_headers, m.match_headers, match_headers),
        redact_headers=project.redact_headers,
        redact_patterns=project.redact_patterns,
    )
