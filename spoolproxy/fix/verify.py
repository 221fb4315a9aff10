"""Verifying a patch: K patched forks against K unpatched controls, live, plus the patch on
past good runs, and a verdict (:mod:`.stats`).

:func:`subject_of` turns what the user named (a case file, a case name in the suite, or a
cassette) into a :class:`Subject`: the failing run to fork, the command, the assertions a
trial must meet, the default past good runs (a case's pinned passing cassette).
:func:`run_verification` then runs, through one :class:`~.runner.ForkEngine`:

* trials interleaved patched, control, patched, control ... (so a budget stop keeps the arms
  balanced), each a fork of the failing run at the same fork point (default: the first
  interaction the patch changes), the control without the patch;
* one regression trial per past good run, forked with the patch where it first applies
  (a run the patch does not apply to is ``skipped``: the patch cannot change it);

stopping further trials once the live model calls' cost reaches ``max_cost`` (USD), and
sleeping ``pace`` seconds between trials (free-tier rate limits).  ``guard_factory(label)``
gives each trial a fresh :class:`~spoolproxy.guards.Guard` (per-trial budgets and the
circuit breaker); a trial it stops is ``failed`` (:mod:`.trials`).  Each arm's summary
carries its cost (``cost_usd``, ``cost_unknown`` when a model had no price).  Every trial's cassette
is kept under ``out_dir`` with ``verification.json`` (the :class:`Verification`), and
``<failing cassette stem>.verify.json`` beside the verified run is the short form a run
report shows (:func:`hook_document`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Literal

import yaml
from pydantic import BaseModel, Field

from ..cassettes import iter_paths
from ..cassettes.model import Cassette
from ..cassettes.storage import atomic_write, ensure_dir
from ..errors import SpoolError, UsageError
from ..replayer.fingerprint import MatchOptions
from ..suite.model import Assertions, Case
from .apply import first_target
from .patches import PatchSet
from .runner import ForkEngine, ForkSpec, load_parent, recorded_command
from .stats import Arm, Verdict, verdict
from .trials import judge_trial


@dataclass
class PastRun:
    """A past good run to rerun with the patch: its ``cassette``, and when it came from a
    case, that case's command and assertions (else the cassette's recorded command and
    "no error-level finding" only)."""

    cassette: Path
    argv: list[str] | None = None
    cwd: Path | None = None
    assertions: Assertions | None = None
    name: str = ""


@dataclass
class Subject:
    """What is verified: ``cassette`` (the failing run), ``argv``/``cwd`` (its command),
    ``assertions`` (the case's; None for a bare cassette), ``regress`` (default past good
    runs), ``case``/``case_path`` (when a case was named), ``options`` (matching)."""

    name: str
    cassette: Path
    argv: list[str]
    cwd: Path
    assertions: Assertions | None = None
    regress: list[PastRun] = field(default_factory=list)
    case: Case | None = None
    case_path: Path | None = None
    root: Path | None = None
    options: MatchOptions = field(default_factory=MatchOptions)


def _is_case_file(path: Path) -> bool:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(doc, dict) and "command" in doc and "cassette" in doc and "interactions" not in doc


def subject_of(target: str, suite_dir: Path) -> Subject:
    """The :class:`Subject` for a case file, a case name in ``suite_dir``, or a cassette.
    Raises SpoolError (one line) when it is none of these or its files are missing."""
    from ..config import find_config
    from ..suite.files import load_case, project_root
    from ..suite.matching import case_match_options, project_match_options
    from ..suite.runner import resolve_argv

    p = Path(target)
    if not p.is_file() and (suite_dir / f"{target}.yaml").is_file():
        p = suite_dir / f"{target}.yaml"
    if not p.is_file():
        raise UsageError(f"{target}: no such cassette or case file, and no case named {target!r} in {suite_dir}")
    if _is_case_file(p):
        case = load_case(p)
        root = project_root(p.parent)
        failing = root / (case.failing_cassette or case.cassette)
        if not failing.is_file():
            raise SpoolError(f"case {case.name}: cassette {failing} does not exist; record the run again")
        cwd = (root / case.command.cwd).resolve()
        argv = resolve_argv(case.command.argv, cwd)
        regress = [PastRun(root / case.cassette, argv, cwd, case.assertions, case.name)] \
            if case.failing_cassette and (root / case.cassette).is_file() else []
        options = case_match_options(case, project_match_options(find_config(root)))
        return Subject(case.name, failing, argv, cwd, case.assertions, regress, case, p, root, options)
    cas = load_parent(p)
    argv, cwd = recorded_command(cas)
    return Subject(p.stem, p, argv, cwd, options=project_match_options(find_config()))


def regress_runs(spec: tuple[str, ...]) -> list[PastRun]:
    """``--regress`` values (comma-separated or repeated) -> past good runs.  Each is a
    cassette, a case file (its cassette, run with its command and judged by its assertions),
    or a directory of either (from a directory only runs the detectors pass are taken: a
    suite directory gives its pinned and passing cases, not its open failures).  ``none``
    -> [].  Raises UsageError for a path that does not exist."""
    from ..suite.files import load_case, project_root
    from ..suite.runner import resolve_argv

    items = [s.strip() for v in spec for s in v.split(",") if s.strip()]
    if items == ["none"]:
        return []
    out: list[PastRun] = []
    for item in items:
        q = Path(item)
        if not q.exists():
            raise UsageError(f"--regress {q}: no such cassette, case file or directory")
        files = sorted(f for f in q.iterdir() if f.is_file() and f.suffix in (".yaml", ".yml", ".json")
                       and not f.name.startswith(".")) if q.is_dir() else [q]
        for f in files:
            if _is_case_file(f):
                case = load_case(f)
                if case.status == "rejected":
                    continue
                root = project_root(f.parent)
                cwd = (root / case.command.cwd).resolve()
                run = PastRun(root / case.cassette, resolve_argv(case.command.argv, cwd), cwd, case.assertions, case.name)
            elif f.name != "baseline.json":
                run = PastRun(f, name=f.stem)
            else:
                continue
            if q.is_dir() and not _passes(run.cassette):
                continue
            out.append(run)
    return out


def _passes(path: Path) -> bool:
    """True when the detectors pass the cassette at ``path`` (False when it cannot be read)."""
    from ..cassettes import load
    from ..detectors import analyze

    try:
        return analyze(load(path)).verdict == "pass"
    except SpoolError:
        return False


class Trial(BaseModel):
    """One trial: its ``arm`` (patched / control / regression), number, cassette, outcome and why."""

    arm: Literal["patched", "control", "regression"]
    n: int
    cassette: str | None = None
    source: str | None = None
    outcome: str
    reason: str = ""
    at: int | None = None
    cost_usd: float | None = None
    tokens: int = 0
    model_calls: int = 0
    blocked: list[str] = Field(default_factory=list)
    exit_code: int | None = None
    duration_s: float = 0.0


class Verification(BaseModel):
    """The whole verification (written as ``verification.json``)."""

    subject: str
    cassette: str
    patches: list[str]
    patch_files: list[str] = Field(default_factory=list)
    k: int
    at: int
    control: bool
    started_at: str
    trials: list[Trial] = Field(default_factory=list)
    patched: dict = Field(default_factory=dict)
    controls: dict | None = None
    verdict: Verdict | None = None
    reason: str = ""
    cost_usd: float = 0.0
    cost_unknown: bool = False
    max_cost_usd: float | None = None
    stopped: str | None = None
    pinned: str | None = None
    out_dir: str = ""

    def arm(self, name: str) -> Arm:
        a = Arm(name=name)
        for t in self.trials:
            if t.arm == name:
                a.add(t.outcome)
        return a


ProgressFn = Callable[[Trial | None, str, "Verification"], None]


def plan(k: int, control: bool, regress: list[PastRun]) -> list[tuple[str, int, PastRun | None]]:
    """The trial order: patched and control interleaved, then one per past good run."""
    out: list[tuple[str, int, PastRun | None]] = []
    for n in range(1, k + 1):
        out.append(("patched", n, None))
        if control:
            out.append(("control", n, None))
    out += [("regression", n, p) for n, p in enumerate(regress, 1)]
    return out


def arm_cost(v: "Verification", name: str) -> tuple[float, bool]:
    """(USD of the arm's priced live model calls, True when some call had no price)."""
    trials = [t for t in v.trials if t.arm == name and t.outcome not in ("not_run", "skipped")]
    return (round(sum(t.cost_usd or 0.0 for t in trials), 8), any(t.cost_usd is None for t in trials))


def _with_cost(summary: dict, v: "Verification", name: str) -> dict:
    usd, unknown = arm_cost(v, name)
    return {**summary, "cost_usd": usd, "cost_unknown": unknown}


def run_verification(subject: Subject, patches: PatchSet, k: int, *, engine: ForkEngine, out_dir: Path,
                     control: bool = True, regress: list[PastRun] | None = None, at: int | None = None,
                     max_cost: float | None = None, pace: float = 0.0, timeout_s: float = 300.0,
                     progress: ProgressFn | None = None, config=None,
                     guard_factory: Callable[[str], object] | None = None) -> Verification:
    """Run a verification (see the module docstring).  Raises SpoolError when the patch
    applies nowhere in the failing run (give ``at``) or a cassette is unreadable, OutputError
    when ``out_dir`` cannot be written (before any trial runs)."""
    parent = load_parent(subject.cassette)
    if at is None:
        at = first_target(patches, parent)
        if at is None:
            raise SpoolError(f"the patch applies nowhere in {subject.cassette}; check it with "
                             f"`spoolproxy fork {subject.cassette} --patch FILE --dry-run` or give --at N")
    regress = [r for r in (subject.regress if regress is None else regress)
               if r.cassette.resolve() != Path(subject.cassette).resolve()]
    ensure_dir(out_dir)
    v = Verification(subject=subject.name, cassette=str(subject.cassette), patches=patches.describe(),
                     patch_files=patches.source, k=k, at=at, control=control, max_cost_usd=max_cost,
                     started_at=datetime.now(timezone.utc).replace(microsecond=0).isoformat(), out_dir=str(out_dir))
    steps = plan(k, control, regress)
    for idx, (arm, n, path) in enumerate(steps):
        if max_cost is not None and v.cost_usd >= max_cost:
            v.stopped = f"--max-cost ${max_cost:.4f} reached after ${v.cost_usd:.4f}"
            v.trials += [Trial(arm=a, n=m, outcome="not_run", reason="budget reached") for a, m, _ in steps[idx:]]
            break
        if progress:
            progress(None, f"{arm} {n}" + (f" ({path.name or path.cassette.name})" if path else ""), v)
        guard = guard_factory(f"{arm} {n}") if guard_factory is not None else None
        trial = _one(subject, patches, arm, n, path, parent, at, engine, out_dir, timeout_s, config, guard)
        v.trials.append(trial)
        if trial.cost_usd is None and trial.outcome != "skipped":
            v.cost_unknown = True
        v.cost_usd = round(v.cost_usd + (trial.cost_usd or 0.0), 6)
        if progress:
            progress(trial, f"{arm} {n}", v)
        if pace and idx < len(steps) - 1:
            time.sleep(pace)
    patched_arm, control_arm = v.arm("patched"), v.arm("control") if control else None
    v.patched = _with_cost(patched_arm.summary(), v, "patched")
    v.controls = _with_cost(control_arm.summary(), v, "control") if control_arm else None
    v.verdict, v.reason = verdict(patched_arm, control_arm, [t.outcome for t in v.trials if t.arm == "regression"], k)
    write(v, out_dir)
    write_hook(v, Path(subject.cassette))
    return v


def _one(subject: Subject, patches: PatchSet, arm: str, n: int, past: PastRun | None, parent: Cassette, at: int,
         engine: ForkEngine, out_dir: Path, timeout_s: float, config, guard=None) -> Trial:
    t0 = time.monotonic()
    if arm == "regression":
        assert past is not None
        source = str(past.cassette)
        try:
            cas = load_parent(past.cassette)
            where = first_target(patches, cas)
            if where is None:
                return Trial(arm="regression", n=n, source=source, outcome="skipped",
                             reason="the patch does not apply to this run, so it cannot change it")
            argv, cwd = (past.argv, past.cwd) if past.argv and past.cwd else recorded_command(cas)
        except SpoolError as exc:
            return Trial(arm="regression", n=n, source=source, outcome="errored", reason=str(exc))
        spec_parent, at_here, assertions, exit0 = cas, where, past.assertions, cas.meta.exit_code
    else:
        spec_parent, at_here, argv, cwd = parent, at, subject.argv, subject.cwd
        assertions, exit0, source = subject.assertions, 0, str(subject.cassette)
    out = out_dir / f"{arm}-{n}.yaml"
    spec = ForkSpec(parent=Path(source), at=at_here, patches=patches if arm != "control" else PatchSet(),
                    argv=argv, cwd=cwd, out=out, options=subject.options, timeout_s=timeout_s, capture=True,
                    extra={"verify": {"arm": arm, "trial": n}})
    result = engine.run(spec, parent=spec_parent, guard=guard)
    atomic_write(out_dir / f"{arm}-{n}.log", engine.redactor.text(result.output))
    j = judge_trial(result, assertions, parent_exit=exit0, config=config)
    if result.proxy_errors:
        j.outcome, j.reason = "errored", f"the proxy hit an internal error: {result.proxy_errors[0]}"
    return Trial(arm=arm, n=n, cassette=str(out), source=source, outcome=j.outcome, reason=j.reason, at=at_here,
                 cost_usd=j.cost_usd, tokens=j.tokens, model_calls=j.model_calls, blocked=j.blocked,
                 exit_code=result.exit_code, duration_s=round(time.monotonic() - t0, 3))


def to_json(v: Verification) -> str:
    """The verification as indented JSON, with key-shaped strings redacted."""
    from ..cassettes.redact import Redactor

    return Redactor().text(json.dumps(v.model_dump(mode="json"), indent=2, ensure_ascii=False))


def write(v: Verification, out_dir: Path) -> Path:
    """Write ``verification.json`` (redacted) into ``out_dir``."""
    p = out_dir / "verification.json"
    atomic_write(p, to_json(v) + "\n")
    return p


def hook_document(v: Verification) -> dict:
    """The short form a run report shows (``spoolproxy report``'s verify hook, docs/triage.md):
    ``verdict``, ``summary``, scalar facts and ``trials`` (one flat object each)."""
    p, c = v.arm("patched"), v.arm("control") if v.control else None
    pc, cc = arm_cost(v, "patched"), arm_cost(v, "control")
    doc = {"verdict": v.verdict, "summary": f"{v.verdict}: {v.reason}", "k": v.k, "fork_at": v.at,
           "patched": p.line(), "control": c.line() if c else "no control arm",
           "patches": "; ".join(v.patches), "cost_usd": v.cost_usd,
           "patched_cost_usd": pc[0] if not pc[1] else f"{pc[0]} + unpriced calls",
           "control_cost_usd": (cc[0] if not cc[1] else f"{cc[0]} + unpriced calls") if c else None,
           "stopped": v.stopped, "pinned": v.pinned,
           "details": str(Path(v.out_dir) / "verification.json"), "started_at": v.started_at}
    doc["trials"] = [{"arm": t.arm, "n": t.n, "outcome": t.outcome, "reason": t.reason,
                      "cost_usd": "unknown" if t.cost_usd is None else t.cost_usd, "cassette": t.cassette or ""}
                     for t in v.trials]
    return doc


def write_hook(v: Verification, cassette: Path) -> Path:
    """Write ``<cassette stem>.verify.json`` beside the verified run (redacted), where a run
    report (``spoolproxy report``) finds and shows it."""
    from ..cassettes.redact import Redactor

    p = cassette.with_name(cassette.stem + ".verify.json")
    atomic_write(p, Redactor().text(json.dumps(hook_document(v), indent=2, ensure_ascii=False)) + "\n")
    return p


def best_passing(v: Verification) -> Trial | None:
    """The passing patched trial to pin: fewest blocked side effects, then model calls, then tokens."""
    ok = [t for t in v.trials if t.arm == "patched" and t.outcome == "passed" and t.cassette]
    return min(ok, key=lambda t: (len(t.blocked), t.model_calls, t.tokens), default=None)
