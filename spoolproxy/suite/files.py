"""Reading and writing suite directories: case files, the project root, artifact paths.

A suite is a directory (default ``spool/``) of case files ``<name>.yaml`` (see
:mod:`.model`).  Files and directories starting with ``.`` (``spool/.runs/`` holds artifact
runs) and ``baseline.json`` are not cases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import yaml
from pydantic import ValidationError

from ..cassettes.redact import Redactor
from ..cassettes.storage import atomic_write
from .model import Case, CaseError, validation_message

DEFAULT_SUITE = "spool"


PROJECT_MARKERS = ("spoolproxy.toml", "pyproject.toml", ".git")


def project_root(suite_dir: str | Path) -> Path:
    """The directory case paths are relative to: the nearest directory above the suite
    holding ``spoolproxy.toml``, ``pyproject.toml`` or ``.git`` (the same project root
    ``spoolproxy record`` stores the working directory against), else the suite's parent."""
    parent = Path(suite_dir).resolve().parent
    for d in (parent, *parent.parents):
        if any((d / n).exists() for n in PROJECT_MARKERS):
            return d
    return parent


def case_paths(suite_dir: str | Path) -> list[Path]:
    """The case files of a suite, sorted by name.  Raises CaseError when the directory is missing."""
    d = Path(suite_dir)
    if not d.is_dir():
        raise CaseError(f"suite directory {d} does not exist; create cases with `spoolproxy export-test CASSETTE`")
    return sorted(p for p in d.iterdir()
                  if p.is_file() and p.suffix in (".yaml", ".yml") and not p.name.startswith("."))


def load_case(path: str | Path) -> Case:
    """Parse and validate one case file.  Raises CaseError (one line) on any problem."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CaseError(f"case file {p} does not exist") from None
    except UnicodeDecodeError:
        raise CaseError(f"{p}: not UTF-8 text; a case file is YAML") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark else str(p)
        raise CaseError(f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc}); fix the file") from None
    if not isinstance(data, dict):
        raise CaseError(f"{p}: a case file must be a YAML mapping (name, status, command, cassette, ...)")
    try:
        return Case.model_validate(data)
    except ValidationError as exc:
        raise CaseError(validation_message(p, exc)) from None


def case_document(case: Case) -> dict:
    """The case as the plain dict written to disk (empty optional assertions left out)."""
    doc = case.model_dump(exclude_none=True)
    doc["assertions"] = {k: v for k, v in doc["assertions"].items() if v not in ([], None)}
    options = {k: v for k, v in doc.pop("match_options", {}).items() if v}
    if options:  # written only when set, right after `match:`
        doc = _insert_after(doc, "match", "match_options", options)
    for f in doc["signature"]:
        if not f.get("interactions"):
            f.pop("interactions", None)
    checks = [{k: v for k, v in c.items() if v not in ({}, [], None)} for c in doc.pop("checks", [])]
    if checks:
        doc["checks"] = checks
    return doc


def _insert_after(doc: dict, after: str, key: str, value) -> dict:
    out: dict = {}
    for k, v in doc.items():
        out[k] = v
        if k == after:
            out[key] = value
    if key not in out:
        out[key] = value
    return out


def dump_case(case: Case) -> str:
    """The case as YAML text (keys in model order, short lists in flow style)."""
    return yaml.safe_dump(case_document(case), sort_keys=False, allow_unicode=True,
                          default_flow_style=None, width=100)


def save_case(case: Case, path: str | Path, redactor: Redactor | None = None) -> Path:
    """Write a case file atomically; key-shaped strings (e.g. in messages) are redacted.
    Raises OutputError when it cannot be written."""
    p = Path(path)
    atomic_write(p, (redactor or Redactor()).text(dump_case(case)))
    return p


def iter_cases(suite_dir: str | Path) -> Iterator[tuple[Path, Case | CaseError]]:
    """(path, case) for each case file; an invalid file yields its CaseError instead."""
    for p in case_paths(suite_dir):
        try:
            yield p, load_case(p)
        except CaseError as exc:
            yield p, exc
