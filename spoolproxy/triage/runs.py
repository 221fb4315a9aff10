"""Runs: what triage knows about each recorded run, read from cassettes, directories and suites.

:func:`collect_runs` expands each path:

* a cassette file -> one run;
* a directory -> every cassette below it (``*.yaml``, ``*.yml``, ``*.json``), skipping
  anything under a directory whose name starts with ``.`` (a suite's ``.runs/`` artifacts);
* a suite case file (or a directory of them) -> the run of the case's failing cassette
  (``failing_cassette`` when the case was pinned, else ``cassette``), with the case's name
  and status attached; a case whose cassette is missing becomes a run built from its
  signature.

A file that is neither a cassette nor a case, or a corrupt cassette, is reported through
``on_skip(path, reason)`` and left out.  The same cassette reached twice (a directory and a
suite pointing into it) is one run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..cassettes.model import Cassette
from ..cassettes.storage import CASSETTE_SUFFIXES, is_side_file, load
from ..detectors.models import Finding, Report, Transcript
from ..errors import CassetteError, SpoolError
from .normalize import FailureText, failure_text
from .tags import commit_of, matches, tags_of


@dataclass
class CaseRef:
    """The suite case a run belongs to: ``name``, ``status`` (pending | confirmed | rejected)
    and the case file ``path``."""

    name: str
    status: str
    path: Path


@dataclass
class Run:
    """One recorded run as triage sees it.

    ``path``: the cassette (None for a case whose cassette is missing); ``name``: a display
    name (the case name, else the path); ``when``: when it ran (the recording time, else the
    first interaction's start, else the first response's ``Date`` header; None if unknown),
    timezone-aware UTC; ``verdict``: pass | fail; ``failure``: the normalised root cause of a
    failing run; ``tokens``: total tokens; ``cost_usd``: estimate or None.
    """

    path: Path | None
    name: str
    when: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)
    commit: str | None = None
    verdict: str = "pass"
    findings: list[Finding] = field(default_factory=list)
    failure: FailureText | None = None
    interactions: int = 0
    llm_calls: int = 0
    tokens: int = 0
    cost_usd: float | None = None
    providers: list[str] = field(default_factory=list)
    case: CaseRef | None = None

    @property
    def failed(self) -> bool:
        return self.verdict == "fail"

    def version(self, key: str = "version") -> str:
        """The run's version label: tag ``key``, else the short git commit, else ``untagged``."""
        if self.tags.get(key):
            return self.tags[key]
        return self.commit[:10] if self.commit else "untagged"

    def to_json(self) -> dict:
        """A JSON-ready dict."""
        f = self.failure
        return {
            "name": self.name, "cassette": str(self.path) if self.path else None,
            "when": self.when.isoformat() if self.when else None, "tags": self.tags, "commit": self.commit,
            "verdict": self.verdict, "interactions": self.interactions, "llm_calls": self.llm_calls,
            "tokens": self.tokens, "cost_usd": self.cost_usd, "providers": self.providers,
            "findings": [x.model_dump(mode="json") for x in self.findings],
            "failure": None if f is None else {"kind": f.kind, "cause": f.cause, "document": f.document,
                                               "message": f.message, "kinds": f.kinds},
            "case": None if self.case is None else {"name": self.case.name, "status": self.case.status,
                                                    "path": str(self.case.path)},
        }


def run_time(cas: Cassette, transcript: Transcript | None = None) -> datetime | None:
    """When the run happened (UTC): the recording time, else the first interaction's start,
    else the first response ``Date`` header; None when the cassette says nothing."""
    when = cas.meta.recorded_at or next((it.started_at for it in cas.interactions if it.started_at), None)
    if when is None:
        for it in cas.interactions:
            date = it.response.header("date") if it.response is not None else None
            if date:
                try:
                    when = parsedate_to_datetime(date)
                    break
                except (TypeError, ValueError):
                    continue
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc) if when is not None else None


def run_of(cas: Cassette, path: Path | None, name: str, *, config=None, report: Report | None = None,
           transcript: Transcript | None = None) -> Run:
    """The :class:`Run` of a loaded cassette (runs the detectors unless ``report`` is given)."""
    from ..detectors import analyze, build_transcript

    t = transcript or build_transcript(cas, config)
    r = report or analyze(cas, config, transcript=t)
    llm = [s for s in t.steps if s.llm is not None]
    return Run(path=path, name=name, when=run_time(cas, t), tags=tags_of(cas.meta), commit=commit_of(cas.meta),
               verdict=r.verdict, findings=list(r.findings), failure=failure_text(r, t),
               interactions=len(cas.interactions), llm_calls=len(llm), tokens=t.total_tokens, cost_usd=t.cost_usd,
               providers=sorted({s.llm.provider for s in llm}))


def _files(raw: Path) -> Iterator[Path]:
    if raw.is_dir():
        for f in sorted(raw.rglob("*")):
            rel = f.relative_to(raw).parts
            if f.suffix in CASSETTE_SUFFIXES and f.is_file() and not any(p.startswith(".") for p in rel):
                if not is_side_file(f):
                    yield f
    elif raw.exists():
        yield raw
    else:
        raise CassetteError(raw, "no such file or directory; check the path")


def _case_run(path: Path, config) -> Run | None:
    """The run of a suite case file, or None when ``path`` is not a valid case."""
    from ..suite.files import load_case, project_root
    from ..suite.model import CaseError

    try:
        case = load_case(path)
    except CaseError:
        return None
    ref = CaseRef(name=case.name, status=case.status, path=path)
    cassette = (project_root(path.parent) / (case.failing_cassette or case.cassette)).resolve()
    try:
        cas = load(cassette)
    except SpoolError:
        findings = [Finding(kind=f.kind, severity=f.severity if f.severity in ("info", "warn", "error", "critical")
                            else "error", interactions=f.interactions, message=f.message) for f in case.signature]
        report = Report(verdict="fail" if findings else "pass", findings=findings)
        return Run(path=None, name=case.name, verdict=report.verdict, findings=findings,
                   failure=failure_text(report, Transcript()), case=ref)
    run = run_of(cas, cassette, case.name, config=config)
    run.case = ref
    return run


def collect_runs(paths: Iterable[str | Path], *, tags: dict[str, str] | None = None, config=None,
                 on_skip: Callable[[Path, str], None] | None = None, strict: bool = False) -> list[Run]:
    """Every run under ``paths`` (see the module docstring), in path order, keeping those
    whose tags match ``tags`` (``{key: glob}``, see :func:`.tags.matches`).

    ``config``: a :class:`~spoolproxy.detectors.DetectConfig` (None: the defaults).
    ``strict``: a file named in ``paths`` itself (not found in a directory) that is neither
    a readable cassette nor a suite case raises CassetteError instead of going to
    ``on_skip`` (the command line's files; a directory's may be skipped).
    Raises CassetteError for a path that does not exist; nothing else stops the walk.
    """
    skip = on_skip or (lambda p, why: None)
    by_path: dict[Path, Run] = {}
    order: list[Run] = []
    for raw in paths:
        base = Path(raw)
        named = strict and not base.is_dir()
        for f in _files(base):
            try:
                cas = load(f)
            except CassetteError as exc:
                if str(exc.problem).startswith("not a cassette"):
                    run = _case_run(f, config)
                    if run is None:
                        if named:
                            raise CassetteError(f, f"{exc.problem}, nor a suite case; pass a cassette, a case file "
                                                   "or a directory") from None
                        skip(f, "neither a cassette nor a suite case")
                        continue
                    key = run.path or f.resolve()
                    if key in by_path:  # the directory listed the cassette already: attach the case
                        by_path[key].case, by_path[key].name = run.case, run.name
                        continue
                    by_path[key] = run
                    order.append(run)
                elif named:
                    raise CassetteError(f, f"{exc.problem}; fix it or leave it out", line=exc.line) from None
                else:
                    skip(f, f"{exc.problem}" if exc.line is None else f"line {exc.line}: {exc.problem}")
                continue
            key = f.resolve()
            if key in by_path:
                continue
            name = f.relative_to(base).as_posix() if base.is_dir() else f.as_posix()
            by_path[key] = run = run_of(cas, key, name, config=config)
            order.append(run)
    return [r for r in order if matches(r.tags, tags or {})]
