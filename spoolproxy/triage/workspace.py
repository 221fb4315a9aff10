"""The workspace a triage session works in: a project root, its suite and the runs it reads.

The MCP server (``spoolproxy mcp``) opens one :class:`Workspace` and hands it to the plain
functions of :mod:`.service` and :mod:`.actions`.  It fixes:

* ``root``: the project directory.  Every path a client names is relative to it and must
  stay inside it (:meth:`Workspace.resolve`); results name paths relative to it.
* ``suite``: the regression suite (default ``<root>/spool``).
* ``paths``: the runs the tools read when a call names none (default: ``<root>/cassettes``
  and the suite when they exist, else the root when it is a project (``spoolproxy.toml``,
  ``pyproject.toml`` or ``.git``), else none until ``ingest``); ``ingest`` adds to it.
* ``allow``: the command globs ``run_suite`` may run, from ``SPOOLPROXY_MCP_ALLOW``
  (:func:`parse_allow`); empty means running is refused.
* the project's ``spoolproxy.toml`` (found from the root): ``[detect]``, ``[triage]`` and
  ``[redact]``; every result leaves through the project's Redactor (:meth:`Workspace.redact`).
"""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..errors import SpoolError, UsageError

ALLOW_ENV = "SPOOLPROXY_MCP_ALLOW"
DEFAULT_SUITE = "spool"
#: files that make a directory a project whose whole tree may be searched for runs
PROJECT_MARKERS = ("spoolproxy.toml", "pyproject.toml", ".git")


def parse_allow(raw: str | None) -> tuple[str, ...]:
    """``SPOOLPROXY_MCP_ALLOW`` as a tuple of globs: entries separated by ``;`` or newlines,
    blanks dropped.  Each glob (fnmatch, case-sensitive) is matched against a case's command
    line written as a shell would quote it (``python agent.py 'refund order 1002'``);
    ``*`` allows every command."""
    if not raw:
        return ()
    return tuple(p.strip() for chunk in raw.splitlines() for p in chunk.split(";") if p.strip())


def command_line(argv: Sequence[str]) -> str:
    """argv as one shell-quoted line (what the allow-list globs are matched against)."""
    return shlex.join(list(argv))


def clip(text: str | None, limit: int) -> str | None:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def page(items: list, offset: int, limit: int) -> tuple[list, dict[str, Any]]:
    """``items[offset:offset + limit]`` and its paging facts ``{"total", "offset",
    "returned", "next_offset"}`` (``next_offset`` None on the last page)."""
    offset = max(0, offset)
    chunk = items[offset:offset + max(0, limit)]
    nxt = offset + len(chunk)
    return chunk, {"total": len(items), "offset": offset, "returned": len(chunk),
                   "next_offset": nxt if nxt < len(items) else None}


@dataclass
class Workspace:
    """See the module docstring.  Build with :meth:`open`."""

    root: Path
    suite: Path
    paths: list[Path] = field(default_factory=list)
    allow: tuple[str, ...] = ()
    config_path: Path | None = None
    #: real location -> the path inside the root that reaches it through a symlink
    links: dict[Path, Path] = field(default_factory=dict)

    @classmethod
    def open(cls, root: str | Path | None = None, *, suite: str | Path = DEFAULT_SUITE,
             paths: Iterable[str | Path] = (), env: Mapping[str, str] | None = None) -> "Workspace":
        """The workspace of project directory ``root`` (default: the current directory).

        ``suite`` and ``paths`` are relative to ``root``; ``env`` (default ``os.environ``)
        supplies ``SPOOLPROXY_MCP_ALLOW``.  Raises SpoolError when ``root`` is not a
        directory or a path lies outside it or does not exist.
        """
        from ..config import find_config

        base = Path(root or ".").expanduser()
        if not base.is_dir():
            raise SpoolError(f"--root {base}: not a directory; give the project directory holding your cassettes")
        base = base.resolve()
        ws = cls(root=base, suite=base, allow=parse_allow((env if env is not None else os.environ).get(ALLOW_ENV)),
                 config_path=find_config(base))
        ws.suite = ws.resolve(suite, must_exist=False)
        given = [ws.resolve(p) for p in paths]
        if not given:
            given = [ws.resolve(p) for p in (base / "cassettes", ws.suite) if p.is_dir()]
        if not given and any((base / m).exists() for m in PROJECT_MARKERS):
            given = [base]  # a project keeping its cassettes elsewhere: search it (dot-directories skipped)
        ws.paths = list(dict.fromkeys(given))
        return ws

    # -- paths -------------------------------------------------------------------------

    def resolve(self, raw: str | Path, *, must_exist: bool = True, what: str = "path") -> Path:
        """``raw`` (relative to the root, or absolute) as an absolute path inside the root.

        Raises UsageError when it points outside the root (``..``, another absolute path)
        or, with ``must_exist``, does not exist.
        """
        text = str(raw).strip()
        if not text:
            raise UsageError(f"empty {what}: give a path relative to the project root {self.root}")
        p = Path(os.path.normpath(self.root / Path(text).expanduser()))
        real = p.resolve()
        if self._inside(p):
            if real != p and not self._inside(real):  # a symlink inside the root: remember where it leads
                self.links[real] = p
        elif not self._inside(real) and self._via_link(p) is None:
            raise UsageError(f"{what} {text!r} is outside the project root {self.root}; name a path inside it "
                             "(or restart `spoolproxy mcp` with a --root that covers it)")
        if must_exist and not p.exists():
            raise UsageError(f"{what} {text!r} does not exist under {self.root}; list runs with list_runs "
                             "or cases with list_cases")
        return p

    def _inside(self, p: Path) -> bool:
        return p == self.root or self.root in p.parents

    def _via_link(self, p: Path) -> Path | None:
        """``p`` (outside the root) written through a symlink inside the root, or None."""
        for real, alias in self.links.items():
            if p == real or real in p.parents:
                return alias / p.relative_to(real)
        return None

    def rel(self, p: str | Path | None) -> str | None:
        """``p`` relative to the root (forward slashes) when inside it, else as given."""
        if p is None:
            return None
        path = Path(p)
        if not path.is_absolute():
            return path.as_posix()
        path = Path(os.path.normpath(path))
        if not self._inside(path):
            path = self._via_link(path) or path
        return Path(os.path.relpath(path, self.root)).as_posix() if self._inside(path) else path.as_posix()

    def targets(self, paths: Sequence[str] | None) -> list[Path]:
        """The paths a call names (resolved inside the root), or the workspace's own."""
        if paths:
            return [self.resolve(p) for p in paths]
        if not self.paths:
            raise UsageError(f"no runs yet: {self.root} has no cassettes/ directory or suite; ingest a directory of "
                             "cassettes first, or name paths")
        return list(self.paths)

    # -- project settings --------------------------------------------------------------

    @cached_property
    def redactor(self):
        """The project's :class:`~spoolproxy.cassettes.redact.Redactor` (``[redact]``)."""
        from .. import config
        from ..cassettes.redact import Redactor

        return Redactor.from_config(config.section("redact", self.config_path))

    def detect_config(self):
        from ..detectors import load_detect_config

        return load_detect_config(self.config_path)

    def triage_config(self):
        from .config import load_triage_config

        return load_triage_config(self.config_path)

    def embedder(self):
        from .embed import embedder_from

        return embedder_from(table=self.triage_config().model_dump())

    def redact(self, doc: Any) -> Any:
        """``doc`` (a JSON-able value) with every secret-shaped string replaced, as on
        every other write path.  The JSON text is redacted as a whole (so field-name
        rules apply); if that broke the JSON, each string is redacted on its own."""
        red = self.redactor
        text = json.dumps(doc, ensure_ascii=False, default=str)
        try:
            return json.loads(red.text(text))
        except ValueError:
            return _each_string(json.loads(text), red.text)

    # -- runs and clusters -------------------------------------------------------------

    def collect(self, paths: Sequence[str] | None = None, tags: Mapping[str, str] | None = None):
        """``(runs, skipped)``: the runs under ``paths`` (default: the workspace's) whose
        tags match ``tags`` (``{key: glob}``), and ``[(path, why)]`` for files left out."""
        from .runs import collect_runs

        skipped: list[tuple[Path, str]] = []
        runs = collect_runs(self.targets(paths), tags=dict(tags or {}), config=self.detect_config(),
                            on_skip=lambda p, why: skipped.append((p, why)))
        return runs, skipped

    def cluster(self, runs):
        """:func:`.clustering.cluster` with the project's embedding model and threshold."""
        from .clustering import cluster

        return cluster(runs, embedder=self.embedder(), threshold=self.triage_config().threshold)

    # -- the allow-list ----------------------------------------------------------------

    def allowed(self, argv: Sequence[str]) -> str | None:
        """The allow-list glob that admits command ``argv``, or None when none does."""
        line = command_line(argv)
        return next((g for g in self.allow if fnmatch.fnmatchcase(line, g)), None)


def _each_string(obj: Any, fn) -> Any:
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, list):
        return [_each_string(x, fn) for x in obj]
    if isinstance(obj, dict):
        return {fn(str(k)): _each_string(v, fn) for k, v in obj.items()}
    return obj
