"""Turn failing cassettes into regression test cases (``spoolproxy export-test``).

For each cassette: run the detectors; a run whose verdict is ``pass`` is skipped; a failing
one becomes ``<suite>/<name>.yaml`` with the recorded command (argv and cwd from the
cassette's meta, cwd made relative to the project root), the cassette path relative to the
project root, all-replay routing, exact matching, the error-level findings as signature and
the default assertions (the signature kinds must not come back).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from ..cassettes import Cassette, load
from ..cassettes.storage import atomic_write, ensure_dir
from ..detectors.models import SEVERITY_RANK, Report
from ..errors import SpoolError, UsageError
from .files import project_root, save_case
from .model import Assertions, Case, Command, SignatureFinding, Status

PYTHON_RE = re.compile(r"^python(\d+(\.\d+)?)?$")


@dataclass
class ExportResult:
    """What happened to one cassette: ``action`` is written | skipped | error."""

    cassette: Path
    action: str
    message: str
    case_path: Path | None = None
    case: Case | None = None


def relative_to(path: str | Path, root: Path) -> str:
    """``path`` relative to ``root`` with forward slashes (``..`` allowed), or absolute if on another drive."""
    p = Path(path).resolve()
    try:
        return Path(os.path.relpath(p, root)).as_posix()
    except ValueError:
        return p.as_posix()


def portable_argv(argv: list[str]) -> list[str]:
    """The recorded argv with an absolute Python interpreter path turned into ``python``."""
    if argv and PYTHON_RE.match(Path(argv[0]).name):
        return ["python", *argv[1:]]
    return list(argv)


def case_name(cassette: Path, taken: set[str]) -> str:
    """A case name from the cassette's file name, unique among ``taken``."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", cassette.stem).strip("-.") or "case"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def signature_of(report: Report) -> list[SignatureFinding]:
    """The error-level (error, critical) findings of a report, as signature entries."""
    return [SignatureFinding(kind=f.kind, severity=f.severity, message=f.message, interactions=f.interactions)
            for f in report.findings if SEVERITY_RANK.get(f.severity, 0) >= SEVERITY_RANK["error"]]


def build_case(cas: Cassette, cassette_path: Path, root: Path, report: Report, *, name: str,
               cmd: list[str] | None = None, cwd: str | None = None, status: Status = "pending",
               assertions: Assertions | None = None) -> Case:
    """The case for one failing cassette.  Raises SpoolError when no command is known."""
    argv = cmd or cas.meta.command
    if not argv:
        raise SpoolError(f"{cassette_path}: the cassette records no command; pass --cmd 'python agent.py ...'")
    if cwd is None:
        recorded = cas.meta.cwd
        if cmd or not recorded:
            cwd = "."
        elif Path(recorded).is_absolute():
            cwd = relative_to(recorded, root)
        else:  # spoolproxy record stores it relative to the project root already
            cwd = Path(recorded).as_posix()
    return Case(name=name, status=status, command=Command(argv=portable_argv(list(argv)), cwd=cwd),
                cassette=relative_to(cassette_path, root), signature=signature_of(report),
                assertions=assertions or Assertions())


def signature_key(signature: list[SignatureFinding]) -> tuple:
    """A failure's identity for de-duplication: its kinds and messages with ids, numbers,
    quoted literals and URLs' paths stripped (``ORD-1002`` and ``ORD-7`` look alike)."""
    def norm(msg: str) -> str:
        msg = re.sub(r"'[^']*'|\"[^\"]*\"|\{[^}]*\}", "<v>", msg)
        msg = re.sub(r"\b[0-9a-f]{8,}\b|\d+", "<n>", msg)
        return re.sub(r"(https?://[^/\s]+)/\S*", r"\1/<path>", msg)
    return tuple(sorted((f.kind, norm(f.message)) for f in signature))


def export(cassettes: list[Path], suite_dir: Path, *, cmd: str | None = None, cwd: str | None = None,
           status: Status = "pending", force: bool = False, assertions: Assertions | None = None,
           analyze=None, dedup: bool = False, passing: bool = False) -> list[ExportResult]:
    """Write one case per failing cassette into ``suite_dir``; returns one result per cassette.

    ``passing``: export runs the detectors pass too (a fixed run saved as a regression test,
    e.g. a fork; its ``assertions`` say what it must keep doing).  A fork's parent (its
    ``forked_from``) becomes the case's ``failing_cassette``.

    ``cmd`` (a shell-style string) overrides the recorded command; ``force`` overwrites
    existing case files (else they are skipped); a cassette counts as exported when a case
    names it as ``cassette`` or as ``failing_cassette`` (a pinned case).  Errors on one
    cassette (unreadable, no command) are reported in its result; the others are still
    exported.  Raises UsageError when ``cmd`` is not valid shell syntax.  A suite directory
    created here gets a ``.gitignore`` holding ``.runs/`` (the artifact runs).
    """
    if analyze is None:
        from ..detectors import analyze
    root = project_root(suite_dir)
    try:
        argv = shlex.split(cmd) if cmd else None
    except ValueError as exc:
        raise UsageError(f"--cmd {cmd!r}: {exc} (check the quotes); e.g. --cmd 'python agent.py \"the task\"'") from None
    if cmd is not None and not argv:
        raise UsageError("--cmd is empty; give the command that reproduces the run, e.g. --cmd 'python agent.py'")
    taken = {p.stem for p in suite_dir.glob("*.yaml")} if suite_dir.is_dir() else set()
    existing = _existing_cases(suite_dir)
    known = _signatures(suite_dir) if dedup else {}
    results: list[ExportResult] = []
    for path in cassettes:
        try:
            cas = load(path)
            report = analyze(cas)
            if report.verdict != "fail" and not passing:
                results.append(ExportResult(path, "skipped", "run passes (no error-level finding): nothing to export "
                                                             "(--passing saves a passing run as a test)"))
                continue
            previous = existing.get(relative_to(path, root))
            if previous and not force:
                results.append(ExportResult(path, "skipped", f"already exported as {previous} (--force overwrites it)",
                                            previous))
                continue
            if dedup and not previous:
                key = signature_key(signature_of(report))
                if key in known:
                    results.append(ExportResult(path, "skipped", f"same failure signature as case {known[key]} (--dedup)"))
                    continue
            name = previous.stem if previous else case_name(path, taken)
            target = suite_dir / f"{name}.yaml"
            case = build_case(cas, path, root, report, name=name, cmd=argv, cwd=cwd, status=status,
                              assertions=assertions)
            parent = cas.meta.extra.get("forked_from")
            if report.verdict != "fail" and isinstance(parent, str) and (path.parent / parent).is_file():
                case = case.model_copy(update={"failing_cassette": relative_to(path.parent / parent, root)})
            _ensure_suite_dir(suite_dir)
            save_case(case, target)
            taken.add(name)
            if dedup:
                known[signature_key(case.signature)] = name
            kinds = ", ".join(case.signature_kinds)
            what = f"signature: {kinds}" if kinds else "a passing run"
            results.append(ExportResult(path, "written", f"{status}; {what}", target, case))
        except SpoolError as exc:
            results.append(ExportResult(path, "error", str(exc)))
    return results


GITIGNORE = ".runs/\n"


def _ensure_suite_dir(suite_dir: Path) -> None:
    """Create the suite directory with a ``.gitignore`` keeping ``.runs/`` (artifact runs) out
    of git.  Raises OutputError when it cannot be created."""
    if suite_dir.is_dir():
        return
    ensure_dir(suite_dir)
    atomic_write(suite_dir / ".gitignore", "# artifact runs of `spoolproxy test`\n" + GITIGNORE)


def _existing_cases(suite_dir: Path) -> dict[str, Path]:
    """cassette path (as written in the case, ``cassette`` or ``failing_cassette``) -> case
    file, for the readable cases of a suite."""
    from .files import iter_cases

    if not suite_dir.is_dir():
        return {}
    out: dict[str, Path] = {}
    for p, case in iter_cases(suite_dir):
        if isinstance(case, Case):
            for ref in (case.failing_cassette, case.cassette):
                if ref:
                    out.setdefault(ref, p)
    return out


def _signatures(suite_dir: Path) -> dict[tuple, str]:
    """signature key -> case name, for the readable cases of a suite."""
    from .files import iter_cases

    if not suite_dir.is_dir():
        return {}
    return {signature_key(case.signature): case.name for _p, case in iter_cases(suite_dir) if isinstance(case, Case)}
