"""The regression runner behind ``spoolproxy test``: each confirmed case, one artifact run.

For a case: check it can run (cassette and working directory exist, the program is found),
run its command under playback with the case's routing and matching while recording the
run to ``<suite>/.runs/<case>/<UTC stamp>.yaml`` (plus ``.report.json`` and ``.log``),
apply the detectors to that artifact and judge the outcome (:mod:`.outcome`).  Everything
written or reported goes through the case's redactor (:mod:`.secrets`), which knows the
child's secret environment variables and every secret redacted from the run's traffic.  Anything
that stops a case from running becomes an ``error`` outcome with one line, and the suite
goes on with the next case.  ``pin`` saves a passing artifact as the case's cassette.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from ..cassettes import load
from ..cassettes.model import CassetteMeta
from ..cassettes.redact import Redactor
from ..cassettes.storage import atomic_write, side_dir
from ..errors import SpoolError
from .export import relative_to
from .files import iter_cases, project_root, save_case
from .model import Case, CaseError
from .outcome import CaseResult, judge
from .secrets import case_redactor, redact_result

RUNS_DIR = ".runs"


@dataclass
class RunOptions:
    """How to run a suite.

    ``live``: host globs sent upstream, replacing each case's ``routing.live`` (None keeps
    the case's).  ``pin``: save passing runs as the cases' cassettes.  ``connect_to`` /
    ``upstream_ca``: upstream options for live hosts.  ``timeout_s``: per case, seconds.
    ``only``: case names to run (empty: all confirmed).  ``include_pending``: run pending
    cases too.  ``repeat``: run each case this many times (a live LLM is not deterministic);
    it passes only when every run passes, and only then is it pinned.  ``jobs``: cases run
    in parallel, each in its own ``spoolproxy test --case NAME`` process (own proxy).
    ``normalize`` / ``ignore_json_paths`` / ``match_headers``: matching settings added to every
    case's (see :mod:`.matching`).  ``isolate``: run each case where only the proxy is reachable
    (:mod:`spoolproxy.proxy.isolate`); None (the default) does so where the platform allows it,
    True asks for it (a note when it cannot), False never.
    """

    live: tuple[str, ...] | None = None
    pin: bool = False
    connect_to: tuple[str, ...] = ()
    upstream_ca: Path | None = None
    timeout_s: float = 300.0
    only: tuple[str, ...] = ()
    include_pending: bool = False
    env: dict[str, str] | None = None
    runs_dir: Path | None = None
    repeat: int = 1
    jobs: int = 1
    normalize: tuple[str, ...] = ()
    ignore_json_paths: tuple[str, ...] = ()
    match_headers: tuple[str, ...] = ()
    isolate: bool | None = None
    _stamps: set[str] = field(default_factory=set)
    _isolation_noted: bool = False


def resolve_argv(argv: Sequence[str], cwd: Path) -> list[str]:
    """argv with ``python``/``python3`` replaced by the running interpreter.

    Raises SpoolError (exit 127) when the program is neither on PATH nor a file under ``cwd``.
    """
    out = list(argv)
    if out[0] in ("python", "python3"):
        out[0] = sys.executable
        return out
    prog = out[0]
    if "/" in prog:
        if not (cwd / prog).exists():
            raise SpoolError(f"command not found: {prog} (relative to {cwd}); fix command.argv", exit_code=127)
    elif shutil.which(prog) is None:
        raise SpoolError(f"command not found: {prog} is not on PATH; install it or fix command.argv", exit_code=127)
    return out


def _stamp(opts: RunOptions, case_dir: Path) -> str:
    base = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    stamp, n = base, 1
    while stamp in opts._stamps or (case_dir / f"{stamp}.yaml").exists():
        n += 1
        stamp = f"{base}-{n}"
    opts._stamps.add(stamp)
    return stamp


def run_case(case: Case, case_path: Path, suite_dir: Path, opts: RunOptions, engine=None) -> CaseResult:
    """Run one case and judge it.  Never raises for problems of the case: they are ``error``.

    ``engine``: a shared :class:`~.engine.Engine` (else the case gets its own proxy).
    """
    t0 = time.monotonic()
    result = CaseResult(name=case.name, outcome="error", explanation="", status=case.status,
                        case_path=case_path, cassette=case.cassette)
    root = project_root(suite_dir)
    red: Redactor | None = None
    try:
        red = case_redactor(root, opts.env)
        cassette = (root / case.cassette).resolve()
        if not cassette.is_file():
            raise SpoolError(f"cassette {case.cassette} does not exist (relative to {root}); "
                             "fix `cassette:` or record the run again")
        recorded = load(cassette)
        recorded_exit, recorded_n = recorded.meta.exit_code, len(recorded)
        del recorded  # the playback session loads its own copy: never hold two of a large run
        cwd = (root / case.command.cwd).resolve()
        if not cwd.is_dir():
            raise SpoolError(f"working directory {case.command.cwd} does not exist (relative to {root}); fix command.cwd")
        argv = resolve_argv(case.command.argv, cwd)
        runs = (opts.runs_dir or suite_dir / RUNS_DIR) / case.name
        runs.mkdir(parents=True, exist_ok=True)
        stamp = _stamp(opts, runs)
        artifact = runs / f"{stamp}.yaml"
        live = opts.live if opts.live is not None else tuple(case.routing.live)
        meta = CassetteMeta(recorder="spoolproxy test", recorded_at=datetime.now(timezone.utc).replace(microsecond=0),
                            record_mode="none", command=list(case.command.argv),
                            cwd=os.path.relpath(cwd, root.resolve()),  # relative to the project, as `record` stores it
                            extra={"case": case.name, "live": list(live), "replayed_from": case.cassette})
        from ..triage.tags import env_tags, stamp as stamp_tags

        stamp_tags(meta, env_tags(opts.env), cwd=cwd)  # SPOOLPROXY_TAGS and the git commit, as `record` does
        from ..config import find_config
        from .engine import Engine
        from .matching import case_match_options, project_match_options

        options = case_match_options(case, project_match_options(find_config(root)), normalize=opts.normalize,
                                     ignore_json_paths=opts.ignore_json_paths, match_headers=opts.match_headers)
        own = engine is None
        engine = engine or Engine(connect_to=opts.connect_to, upstream_ca=opts.upstream_ca)
        try:
            played = engine.play(argv, cwd=cwd, cassette=cassette, artifact=artifact, match=case.match, live=live,
                                 timeout_s=opts.timeout_s, meta=meta, env=opts.env, options=options,
                                 isolate=isolating(opts), redactor=red)
        finally:
            if own:
                engine.close()
        result.artifact = artifact
        result.report = runs / f"{stamp}.report.json"
        atomic_write(result.report, red.text(played.report.model_dump_json(indent=2)) + "\n")
        atomic_write(runs / f"{stamp}.log", red.text(played.output))
        result.exit_code = played.exit_code
        if played.proxy_errors:
            raise SpoolError(f"the proxy hit an internal error during the run ({played.proxy_errors[0]}); "
                             f"the artifact {artifact} may be incomplete (please report it)")
        if played.timed_out:
            raise SpoolError(f"the command did not finish within {opts.timeout_s:g} s (output: {runs / (stamp + '.log')})")
        from ..detectors import analyze, build_transcript, load_detect_config

        config = load_detect_config(find_config(root))  # the project's [detect], [prices], [[checks]]
        if case.checks:  # the case's own checks run too, from the project root
            config = config.model_copy(update={"checks": [*config.checks, *(
                c.model_copy(update={"base_dir": str(root)}) for c in case.checks)]})
        try:
            report = analyze(played.cassette, config)
            transcript = build_transcript(played.cassette, config)
        except SpoolError:
            raise
        except Exception as exc:  # a detector bug must not stop the suite
            raise SpoolError(f"the detectors failed on the artifact run {artifact}: {type(exc).__name__}: {exc} "
                             "(please report it)") from None
        result.findings = list(report.findings)
        result.outcome, result.explanation, result.details = judge(
            case, played.report, report, transcript, exit_code=played.exit_code, recorded_exit=recorded_exit,
            recorded_interactions=recorded_n)
        if result.outcome != "passes" and played.output.strip():
            tail = played.output.strip().splitlines()[-5:]
            result.details += ["command output (last lines):", *("  " + ln for ln in tail)]
        if opts.pin and result.outcome == "passes":
            result.pinned = pin(case, case_path, root, artifact)
    except SpoolError as exc:
        result.outcome, result.explanation = "error", str(exc)
    except OSError as exc:
        result.outcome = "error"
        result.explanation = f"cannot write the artifact run under {suite_dir / RUNS_DIR}: {exc.strerror or exc}"
    result.duration_s = time.monotonic() - t0
    result.passed_runs = int(result.outcome == "passes")
    return redact_result(result, red or Redactor())


def pinned_path(case: Case, root: Path) -> Path:
    """Where ``--pin`` writes a case's passing run: ``<cassette stem>.pinned.yaml`` beside it."""
    current = root / case.cassette
    if current.name.endswith(".pinned.yaml"):
        return current
    return current.with_name(f"{current.stem}.pinned.yaml")


def pin(case: Case, case_path: Path, root: Path, artifact: Path, target: Path | None = None) -> Path:
    """Copy ``artifact`` to the case's pinned cassette (``target``, default
    :func:`pinned_path`) and point the case file at it.

    The original failing cassette is kept and named in ``failing_cassette``.
    """
    target = target or pinned_path(case, root)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(artifact, target)
    bodies = side_dir(artifact)
    if bodies.is_dir():
        shutil.copytree(bodies, side_dir(target), dirs_exist_ok=True)
    rel = relative_to(target, root)
    if rel != case.cassette:
        updated = case.model_copy(update={"cassette": rel, "failing_cassette": case.failing_cassette or case.cassette})
        save_case(updated, case_path)
    return target


def isolating(opts: RunOptions) -> bool:
    """Whether cases run isolated: ``opts.isolate`` unless the platform cannot (said once on
    stderr, by :func:`spoolproxy.proxy.isolate.unavailable`'s caller here)."""
    if opts.isolate is False:
        return False
    from ..proxy.isolate import unavailable

    why = unavailable()
    if why is None:
        return True
    if not opts._isolation_noted:
        opts._isolation_noted = True
        print(f"spoolproxy test: note: cases run without network isolation: {why}", file=sys.stderr)
    return False


def run_suite(suite_dir: str | Path, opts: RunOptions | None = None) -> list[CaseResult]:
    """Run every confirmed case of ``suite_dir`` (see :class:`RunOptions`), in file-name order.

    Cases with another status are returned with ``outcome`` None (skipped); an invalid case
    file gives an ``error`` result.  Raises SpoolError when the suite directory is missing
    or ``opts.only`` names a case that does not exist.
    """
    from .engine import Engine

    opts = opts or RunOptions()
    with Engine(connect_to=opts.connect_to, upstream_ca=opts.upstream_ca) as engine:
        return _run_all(Path(suite_dir), opts, engine)


def _run_all(suite: Path, opts: RunOptions, engine) -> list[CaseResult]:
    results: list[CaseResult] = []
    seen: set[str] = set()
    names: dict[str, Path] = {}
    parallel: list[tuple[int, Case]] = []
    for path, case in iter_cases(suite):
        if isinstance(case, CaseError):
            if not opts.only or path.stem in opts.only:
                results.append(CaseResult(name=path.stem, outcome="error", explanation=str(case), status="invalid",
                                          case_path=path))
            seen.add(path.stem)
            continue
        if case.name in names:
            if opts.only and case.name not in opts.only:
                continue
            results.append(CaseResult(name=case.name, outcome="error", status=case.status, case_path=path,
                                      explanation=f"{path}: case name {case.name!r} is already used by "
                                                  f"{names[case.name].name}; give each case its own name"))
            continue
        names[case.name] = path
        seen.add(case.name)
        if opts.only and case.name not in opts.only:
            continue
        runnable = case.status == "confirmed" or (opts.include_pending and case.status == "pending")
        if not runnable and not (opts.only and case.status != "rejected"):
            results.append(CaseResult(name=case.name, outcome=None, explanation=f"status: {case.status}",
                                      status=case.status, case_path=path, cassette=case.cassette))
            continue
        if opts.jobs > 1:
            results.append(CaseResult(name=case.name, outcome="error", explanation="(pending)", case_path=path))
            parallel.append((len(results) - 1, case))
            continue
        results.append(_repeated(case, path, suite, opts, engine) if opts.repeat > 1
                       else run_case(case, path, suite, opts, engine))
    unknown = [n for n in opts.only if n not in seen]
    if unknown:
        raise SpoolError(f"no case named {', '.join(unknown)} in {suite}; see `ls {suite}`")
    if parallel:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(opts.jobs) as pool:
            done = pool.map(lambda item: _in_worker(item[1], results[item[0]].case_path, suite, opts), parallel)
            for (i, _case), result in zip(parallel, done):
                results[i] = result
    return results


def _in_worker(case: Case, path: Path, suite: Path, opts: RunOptions) -> CaseResult:
    """Run one case in a ``spoolproxy test --case NAME --json`` subprocess and read its result."""
    import json
    import subprocess

    from .outcome import result_from_json

    argv = [sys.executable, "-m", "spoolproxy", "test", "--suite", str(suite), "--case", case.name, "--json",
            "--fail-on", "any", "--timeout", str(opts.timeout_s), "--repeat", str(opts.repeat)]
    for glob in opts.live or ():
        argv += ["--live", glob]
    if opts.live is not None and not opts.live:
        argv += ["--no-live"]
    for rule in opts.connect_to:
        argv += ["--connect-to", rule]
    if opts.upstream_ca:
        argv += ["--upstream-ca", str(opts.upstream_ca)]
    if opts.pin:
        argv.append("--pin")
    for rx in opts.normalize:
        argv += ["--normalize", rx]
    for path in opts.ignore_json_paths:
        argv += ["--ignore-json-path", path]
    for name in opts.match_headers:
        argv += ["--match-header", name]
    if opts.isolate is not None:
        argv.append("--isolate" if opts.isolate else "--no-isolate")
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=opts.env)
    try:
        data = json.loads(proc.stdout)
        return result_from_json(data["results"][0])
    except (ValueError, KeyError, IndexError):
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return CaseResult(name=case.name, outcome="error", status=case.status, case_path=path, cassette=case.cassette,
                          explanation=f"the worker process for this case failed (exit {proc.returncode}): {last}",
                          duration_s=time.monotonic() - t0)


def _repeated(case: Case, path: Path, suite: Path, opts: RunOptions, engine) -> CaseResult:
    """Run a case ``opts.repeat`` times; the result of the first run that did not pass (or the
    last run), its explanation prefixed with ``k/N runs passed``."""
    from dataclasses import replace

    once = replace(opts, pin=False)
    runs = [run_case(case, path, suite, once, engine) for _ in range(opts.repeat)]
    passed = sum(1 for r in runs if r.outcome == "passes")
    result = next((r for r in runs if r.outcome != "passes"), runs[-1])
    result.explanation = f"{passed}/{len(runs)} runs passed; {result.explanation}"
    result.duration_s = sum(r.duration_s for r in runs)
    result.runs, result.passed_runs = len(runs), passed
    if opts.pin and passed == len(runs) and result.artifact is not None:
        result.pinned = pin(case, path, project_root(suite), result.artifact)
    return result
