"""Running forks: a proxy with the fork addon, the agent's command, the new cassette.

:class:`ForkEngine` starts one in-process mitmproxy (on first use) and runs any number of
forks through it, one after another (``spoolproxy fork`` runs one, ``spoolproxy verify``
many): for each :class:`ForkSpec` it loads the parent, attaches a
:class:`~.session.ForkSession` and a :class:`~spoolproxy.proxy.recorder.Recorder` to the
addon, runs the command with the proxy environment, and writes the fork cassette, whose
``spoolproxy:`` metadata links it to its parent (``forked_from``, relative to the fork's
directory, ``fork_at``, ``patches``) and sums up the fork (``fork``: requests per source,
blocked side effects).  Each interaction carries where its answer came from
(``spoolproxy: {fork: cassette | live | patched | routed | override | blocked | miss | refused}``).

A run may be guarded (:class:`~spoolproxy.guards.Guard`: live budgets, the circuit
breaker): the guard sees every model request that would go live and every exchange from the
fork point on (the prefix replayed from the parent costs nothing and is not counted), and
its facts (``budget``, ``circuit_breaker``) go into the fork's ``meta.extra``, as
``record`` stores them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Sequence

from .. import __version__
from ..cassettes import save
from ..cassettes.model import Cassette, CassetteMeta
from ..cassettes.redact import Redactor
from ..errors import SpoolError
from ..replayer.fingerprint import MatchOptions
from .patches import PatchSet
from .session import ForkReport, ForkSession

#: CassetteMeta.extra keys of a fork cassette
FORKED_FROM, FORK_AT, PATCHES, FORK_SUMMARY = "forked_from", "fork_at", "patches", "fork"


@dataclass
class ForkSpec:
    """One fork to run.

    ``parent``: the parent cassette; ``at``: fork point (0-based interaction index);
    ``argv`` / ``cwd``: the command to rerun; ``out``: the fork cassette to write;
    ``live``: host globs whose differing requests may go live; ``options``: matching
    settings; ``env``: base environment (default ``os.environ``); ``extra``: more
    ``meta.extra`` facts (e.g. a verify trial's arm); ``timeout_s``: seconds the command
    may run (None: no limit); ``capture``: capture the command's output (else it goes to
    this process's stdout/stderr).
    """

    parent: Path
    at: int
    patches: PatchSet
    argv: Sequence[str]
    cwd: Path
    out: Path
    live: tuple[str, ...] = ()
    options: MatchOptions | None = None
    env: Mapping[str, str] | None = None
    extra: dict = field(default_factory=dict)
    timeout_s: float | None = None
    capture: bool = True


@dataclass
class ForkResult:
    """What one fork produced: the cassette written (redacted) at ``path``, the
    :class:`~.session.ForkReport`, the command's ``exit_code`` (None when it timed out),
    its ``output`` (when captured) and exceptions inside the proxy's addons."""

    path: Path
    cassette: Cassette
    report: ForkReport
    exit_code: int | None
    output: str = ""
    timed_out: bool = False
    proxy_errors: list[str] = field(default_factory=list)
    #: what the run's guard saw, for the summary (empty without a guard)
    guard_lines: list[str] = field(default_factory=list)


def load_parent(path: str | Path) -> Cassette:
    """Load a parent cassette with its side bodies checked (as playback does).  Raises CassetteError."""
    from ..replayer.session import load_cassettes

    cassettes, _ = load_cassettes([path])
    return cassettes[0]


def fork_meta(spec: ForkSpec, redactor: Redactor) -> CassetteMeta:
    """The metadata a fork cassette starts with (its parent link, the patches)."""
    parent = Path(os.path.relpath(spec.parent.resolve(), spec.out.resolve().parent))
    extra = {FORKED_FROM: str(parent), FORK_AT: spec.at,
             PATCHES: json.loads(redactor.text(json.dumps(spec.patches.dump()))), **spec.extra}
    if spec.live:
        extra["live"] = list(spec.live)
    argv = list(spec.argv)
    if argv and argv[0] == sys.executable:
        argv[0] = "python"  # as record writes it: the interpreter running spoolproxy at rerun time
    return CassetteMeta(recorder=f"spoolproxy {__version__} fork",
                        recorded_at=datetime.now(timezone.utc).replace(microsecond=0),
                        command=[redactor.text(a) for a in argv] or None,
                        cwd=project_relative(spec.cwd), record_mode="fork", extra=extra)


def project_root(start: Path) -> Path:
    """The nearest directory at or above ``start`` holding spoolproxy.toml, pyproject.toml
    or .git (where ``record`` stores working directories from), else ``start``."""
    from ..suite.files import PROJECT_MARKERS

    start = start.resolve()
    return next((d for d in (start, *start.parents) if any((d / m).exists() for m in PROJECT_MARKERS)), start)


def project_relative(cwd: Path) -> str:
    """``cwd`` relative to its project root (``.`` for the root itself)."""
    rel = Path(cwd).resolve().relative_to(project_root(Path(cwd)))
    return str(rel) if str(rel) != "" else "."


class ForkEngine:
    """One proxy for many forks (see the module docstring).  Use as a context manager or
    call :meth:`close`.  Only one engine (one mitmproxy) per process at a time.

    ``runner_factory(addons) -> ProxyRunner`` builds the proxy (upstream options such as
    ``--connect-to`` live there); ``env_factory(runner, base) -> dict`` the child's
    environment; ``redactor`` is applied on every write.
    """

    def __init__(self, runner_factory: Callable | None = None, env_factory: Callable | None = None,
                 redactor: Redactor | None = None) -> None:
        self.runner_factory = runner_factory or _default_runner
        self.env_factory = env_factory or _default_env
        self.redactor = redactor or Redactor()
        self.runner = None
        self.addon = None

    def __enter__(self) -> "ForkEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the proxy (idempotent)."""
        if self.runner is not None:
            self.runner.stop()
            self.runner = None

    def _ensure(self):
        if self.runner is None:
            from .addon import ForkAddon

            self.addon = ForkAddon()
            runner = self.runner_factory([self.addon])
            runner.start()
            self.runner = runner
        return self.runner

    def run(self, spec: ForkSpec, *, parent: Cassette | None = None, guard=None) -> ForkResult:
        """Run one fork, guarded by ``guard`` (a fresh :class:`~spoolproxy.guards.Guard`
        for this run, or None).  Raises SpoolError when the parent is unreadable, the proxy
        cannot start, the command cannot be started (127/126), or the cassette cannot be
        written."""
        from ..proxy.recorder import Recorder

        parent = parent if parent is not None else load_parent(spec.parent)
        try:
            session = ForkSession(parent, spec.at, spec.patches, live=spec.live, options=spec.options)
        except ValueError as exc:
            raise SpoolError(f"--at {spec.at}: {exc}; {spec.parent} has {len(parent)} interactions") from None
        recorder = Recorder(spec.out, meta=fork_meta(spec, self.redactor), redactor=self.redactor)
        guard_addon = None
        if guard is not None:
            from ..guards.addon import GuardAddon

            guard_addon = GuardAddon(guard)
            at = spec.at
            # the prefix is replayed from the parent: it costs nothing and is not counted
            recorder.observers.append(lambda seq, it: guard_addon.observe(seq, it) if seq >= at else None)
        recorder.open()
        runner = self._ensure()
        errors_before = len(runner.addon_errors)
        runner.call(self.addon.attach, session, recorder, guard_addon)
        try:
            env = self.env_factory(runner, spec.env if spec.env is not None else os.environ)
            code, output, timed_out = run_command(spec.argv, spec.cwd, env, spec.timeout_s, spec.capture)
        except BaseException:
            runner.call(self._detach)
            _discard(recorder, spec.out)
            raise
        runner.call(self._detach)
        cas = recorder.finish(code, extra=guard.meta() if guard is not None else None)
        report = session.report()
        cas.meta.extra[FORK_SUMMARY] = json.loads(self.redactor.text(json.dumps(report.summary())))
        save(cas, spec.out)
        cas.path = spec.out
        return ForkResult(spec.out, cas, report, code, output, timed_out, runner.addon_errors[errors_before:],
                          [self.redactor.text(line) for line in guard.summary_lines()] if guard is not None else [])

    async def _detach(self) -> None:
        recorder = self.addon.recorder
        self.addon.attach(None, None, None)
        if recorder is not None:
            await recorder.done()


def _default_runner(addons):
    from ..proxy.runner import ProxyRunner

    return ProxyRunner(addons, options={"connection_strategy": "lazy"})


def _default_env(runner, base: Mapping[str, str]) -> dict[str, str]:
    from ..proxy.child import child_env

    return child_env(runner.proxy_url, runner.ca.bundle, base=base, ca_cert=runner.ca.cert)


def run_command(argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout_s: float | None,
                capture: bool) -> tuple[int | None, str, bool]:
    """(exit status, output when captured, timed out) of ``argv`` run in ``cwd``.  The child
    dies with this process (PDEATHSIG).  Raises SpoolError when it cannot start."""
    from ..proxy.child import parent_death_signal

    try:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE if capture else None,
                                stderr=subprocess.STDOUT if capture else None, preexec_fn=parent_death_signal())
    except FileNotFoundError:
        raise SpoolError(f"command not found: {argv[0]} (cwd {cwd}); give the command after --", exit_code=127) from None
    except PermissionError:
        raise SpoolError(f"command is not executable: {argv[0]} (cwd {cwd})", exit_code=126) from None
    except OSError as exc:
        raise SpoolError(f"cannot start {argv[0]}: {exc.strerror} (cwd {cwd})", exit_code=126) from None
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return None, (out or b"").decode("utf-8", "replace"), True
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    code = proc.returncode
    return (128 - code if code < 0 else code), (out or b"").decode("utf-8", "replace"), False


def _discard(recorder, out: Path) -> None:
    try:
        recorder.finish(None)
        Path(out).unlink(missing_ok=True)
    except SpoolError:
        pass


def recorded_command(cassette: Cassette, override: Sequence[str] = ()) -> tuple[list[str], Path]:
    """The command to rerun and its working directory: ``override`` (CMD after ``--``, run
    in the current directory) or the command the cassette records (``meta.command``, run in
    ``meta.cwd`` under the current project root; ``python`` means this interpreter).
    Raises SpoolError when neither is there."""
    if override:
        return list(override), Path.cwd()
    argv = cassette.meta.command
    if not argv:
        raise SpoolError(f"{cassette.path} does not record the command that produced it; give it after --, "
                         "e.g. spoolproxy fork run.yaml --at 2 -- python agent.py")
    here = Path.cwd()
    cwd = (project_root(here) / (cassette.meta.cwd or ".")).resolve()
    if not cwd.is_dir():
        cwd = here
    argv = list(argv)
    if argv[0] in ("python", "python3") or Path(argv[0]).name.startswith("python"):
        argv[0] = sys.executable
    return argv, cwd
