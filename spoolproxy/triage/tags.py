"""Run metadata: tags (``agent=refund-bot``, ``version=1.4.0``) and the git commit of a run.

``spoolproxy record --tag KEY=VALUE`` (repeatable) and the environment variable
``SPOOLPROXY_TAGS`` (``KEY=VALUE`` pairs separated by commas) put tags into the cassette's
``spoolproxy:`` metadata, with the git commit of the working directory when it is inside a
git work tree::

    spoolproxy:
      tags: {agent: refund-bot, version: 1.4.0}
      git: {commit: 3f2a9c0e..., dirty: true}

Both live in :attr:`CassetteMeta.extra <spoolproxy.cassettes.model.CassetteMeta>` under
the keys :data:`TAGS_KEY` and :data:`GIT_KEY` (``format.py`` round-trips them).  Filters
(``--tag KEY=GLOB`` on ``cluster``, ``dashboard``, ``annotate``) select runs whose tag
``KEY`` matches the fnmatch pattern ``GLOB``; several filters must all match.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from pathlib import Path
from typing import Iterable, Mapping

from ..cassettes.model import CassetteMeta
from ..errors import UsageError

TAGS_KEY = "tags"
GIT_KEY = "git"
ENV_VAR = "SPOOLPROXY_TAGS"
KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
MAX_VALUE = 200


def parse_tag(text: str, *, source: str = "--tag") -> tuple[str, str]:
    """``"version=1.4.0"`` -> ``("version", "1.4.0")``.

    Keys: a letter or ``_`` first, then letters, digits, ``_ . -`` (at most 64 characters);
    values: any text up to 200 characters, surrounding blanks stripped (may be empty).
    Raises UsageError naming ``source`` for anything else.
    """
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not KEY_RE.match(key):
        raise UsageError(f"{source} {text!r}: expected KEY=VALUE with a KEY of letters, digits, '_', '.', '-' "
                         "(e.g. --tag version=1.4.0)")
    if len(value) > MAX_VALUE or "\n" in value:
        raise UsageError(f"{source} {text!r}: the value must be one line of at most {MAX_VALUE} characters")
    return key, value


def parse_tags(items: Iterable[str], *, source: str = "--tag") -> dict[str, str]:
    """Several ``KEY=VALUE`` items as a dict (a later item wins).  Raises UsageError."""
    out: dict[str, str] = {}
    for item in items:
        key, value = parse_tag(item, source=source)
        out[key] = value
    return out


def env_tags(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Tags from ``SPOOLPROXY_TAGS`` (``"agent=refund-bot,version=1.4.0"``); ``{}`` when unset.
    Raises UsageError for a malformed pair."""
    raw = (env if env is not None else os.environ).get(ENV_VAR, "")
    return parse_tags((p for p in raw.split(",") if p.strip()), source=ENV_VAR)


def git_info(cwd: str | Path | None = None, *, timeout_s: float = 5.0) -> dict[str, object] | None:
    """``{"commit": <40 hex>, "dirty": bool}`` for the git work tree holding ``cwd``, or None
    (not a work tree, no commit yet, git not installed, or git too slow)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout_s)
        if head.returncode != 0:
            return None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                                capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = head.stdout.strip()
    if not re.fullmatch(r"[0-9a-f]{40,64}", commit):
        return None
    return {"commit": commit, "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def stamp(meta: CassetteMeta, tags: Mapping[str, str], *, cwd: str | Path | None = None,
          redact=None) -> CassetteMeta:
    """Put ``tags`` (values through ``redact``, a ``str -> str`` function, when given) and the
    git commit of ``cwd`` into ``meta.extra``; returns ``meta``."""
    if tags:
        meta.extra[TAGS_KEY] = {k: (redact(v) if redact else v) for k, v in tags.items()}
    git = git_info(cwd)
    if git is not None:
        meta.extra[GIT_KEY] = git
    return meta


def tags_of(meta: CassetteMeta) -> dict[str, str]:
    """The run's tags (``{}`` when none, or when the metadata is not a mapping of scalars)."""
    raw = meta.extra.get(TAGS_KEY)
    if not isinstance(raw, dict):
        return {}
    return {str(k): "" if v is None else str(v) for k, v in raw.items() if not isinstance(v, (dict, list))}


def commit_of(meta: CassetteMeta) -> str | None:
    """The recorded git commit (40 hex), or None."""
    raw = meta.extra.get(GIT_KEY)
    commit = raw.get("commit") if isinstance(raw, dict) else None
    return str(commit) if commit else None


def parse_filters(items: Iterable[str]) -> dict[str, str]:
    """``--tag KEY=GLOB`` filters as ``{key: glob}``.  Raises UsageError."""
    return parse_tags(items, source="--tag")


def matches(tags: Mapping[str, str], filters: Mapping[str, str]) -> bool:
    """True when every filter ``KEY=GLOB`` has a tag ``KEY`` whose value matches ``GLOB``
    (fnmatch, case-sensitive); ``{}`` matches every run."""
    return all(k in tags and fnmatch.fnmatchcase(tags[k], g) for k, g in filters.items())
