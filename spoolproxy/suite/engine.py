"""Run a command under playback while recording everything it was served (an *artifact run*).

The real playback machinery (:class:`~spoolproxy.replayer.addon.Playback` with a
:class:`~spoolproxy.replayer.session.PlaybackSession`) answers the requests; the real
:class:`~spoolproxy.proxy.recorder.Recorder` writes what the command sent and received
(replayed and live alike) to a new cassette.  Both run in one in-process mitmproxy
(:class:`~spoolproxy.proxy.runner.ProxyRunner`); :class:`PlayAndRecord` calls their hooks
in the order that keeps both right: the recorder sees each request before playback may
reroute it to its loopback stream server, and sets its body sink after playback marked a
replayed stream as streamed, so chunk boundaries are recorded too.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..cassettes.model import Cassette, CassetteMeta
from ..cassettes.redact import Redactor
from ..errors import SpoolError
from ..proxy.child import child_env
from ..proxy.recorder import Recorder
from ..proxy.runner import ProxyRunner
from ..replayer.addon import Playback
from ..replayer.fingerprint import MatchOptions
from ..replayer.pair import ServeAndRecord, call_hook
from ..replayer.report import PlaybackReport
from ..replayer.session import PlaybackConfig, PlaybackSession


class PlayAndRecord(ServeAndRecord):
    """mitmproxy addon: ``playback`` serves, ``recorder`` records the whole exchange (the
    hooks other than ``request`` are :class:`~spoolproxy.replayer.pair.ServeAndRecord`'s).

    ``recorder`` may be None (between runs of an :class:`Engine`): nothing is recorded then.
    """

    def __init__(self, playback: Playback, recorder: Recorder | None) -> None:
        self.playback = playback
        self.recorder = recorder

    async def request(self, flow) -> None:
        if self.recorder is not None:
            self.recorder.request(flow)
        await call_hook(self.playback.request, flow)


@dataclass
class PlayResult:
    """What one artifact run produced: the command's ``exit_code`` (None when it timed out),
    the ``cassette`` recorded, the playback ``report``, the command's combined output and
    ``proxy_errors``: exceptions raised inside the proxy's addons during the run (the
    artifact may then be incomplete)."""

    exit_code: int | None
    cassette: Cassette
    report: PlaybackReport
    output: str
    timed_out: bool = False
    proxy_errors: list[str] | None = None


class Engine:
    """One in-process proxy shared by many artifact runs (started on first use).

    ``connect_to`` / ``upstream_ca``: upstream options for live hosts.  Use as a context
    manager or call :meth:`close`.  Only one Engine (one mitmproxy) per process at a time.
    """

    def __init__(self, *, connect_to: Sequence[str] = (), upstream_ca: Path | None = None) -> None:
        self.connect_to = tuple(connect_to)
        self.upstream_ca = upstream_ca
        self.addon: PlayAndRecord | None = None
        self.runner: ProxyRunner | None = None

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the proxy (idempotent)."""
        if self.runner is not None:
            self.runner.stop()
            self.runner = None

    def _ensure(self) -> ProxyRunner:
        if self.runner is None:
            empty = PlaybackSession(PlaybackConfig(cassettes=[]))
            self.addon = PlayAndRecord(Playback(empty), None)
            runner = ProxyRunner([self.addon], connect_to=self.connect_to, upstream_ca=self.upstream_ca)
            runner.start()
            self.runner = runner
        return self.runner

    def play(self, argv: Sequence[str], *, cwd: Path, cassette: Path, artifact: Path, match: str = "exact",
             live: Sequence[str] = (), timeout_s: float = 300.0, meta: CassetteMeta | None = None,
             env: dict[str, str] | None = None, options: MatchOptions | None = None,
             isolate: bool = False, redactor: Redactor | None = None) -> PlayResult:
        """Run ``argv`` in ``cwd`` with every request served from ``cassette`` (hosts matching
        ``live`` globs go upstream) and record the run to ``artifact``.  ``options``: what
        matching ignores or normalises (see :class:`~spoolproxy.replayer.fingerprint.MatchOptions`).
        ``isolate``: run it in a network namespace where only the proxy is reachable
        (:mod:`spoolproxy.proxy.isolate`; the caller checks that the platform allows it); what it
        tried to reach around the proxy is added to the report as misses.
        ``redactor``: redacts the artifact (and learns the run's secrets, for the caller's
        reports); a fresh default one when None.  Either way it first learns the secret
        variables (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``) of the child's environment.

        Raises SpoolError when the cassette is bad, the proxy cannot start, or the command
        cannot be started (not found / not executable).
        """
        shown = os.path.relpath(cassette)  # reports and miss messages name it as the user would
        session = PlaybackSession(PlaybackConfig(cassettes=[shown], match=match, live=tuple(live),
                                                 options=options or MatchOptions()))  # type: ignore[arg-type]
        runner = self._ensure()
        redactor = redactor or Redactor()
        redactor.learn_env(env if env is not None else os.environ)  # the child's *_API_KEY etc.: known from the start
        recorder = Recorder(artifact, meta=meta or CassetteMeta(recorder="spoolproxy test", record_mode="none"),
                            redactor=redactor)
        recorder.open()
        errors_before = len(runner.addon_errors)
        runner.call(self._attach, session, recorder)
        timed_out = False
        isolation = None
        try:
            child = child_env(runner.proxy_url, runner.ca.bundle, base=env if env is not None else os.environ,
                              ca_cert=runner.ca.cert)
            if isolate:
                from ..proxy.isolate import Isolation

                isolation = Isolation([(runner.connect_host, runner.port)])
                with isolation:
                    code, output, timed_out = _run(argv, cwd, child, timeout_s, isolation)
            else:
                code, output, timed_out = _run(argv, cwd, child, timeout_s)
        except BaseException:
            runner.call(self._detach)
            _discard(recorder, artifact)
            raise
        runner.call(self._detach)
        recorded = recorder.finish(code)
        redactor.absorb(session.fingerprinter.learner)  # for the caller's reports
        report = session.report()
        if isolation is not None:
            from ..replayer.blocked import add_blocked

            add_blocked(report, isolation.attempts)
        return PlayResult(code, recorded, report, output, timed_out, runner.addon_errors[errors_before:])

    def _attach(self, session: PlaybackSession, recorder: Recorder) -> None:
        assert self.addon is not None
        self.addon.playback.session = session
        self.addon.recorder = recorder

    async def _detach(self) -> None:
        assert self.addon is not None
        await self.addon.playback.websockets.drain()  # WebSocket sessions amend the report when they end
        recorder, self.addon.recorder = self.addon.recorder, None
        if recorder is not None:
            await call_hook(recorder.done)


def _run(argv: Sequence[str], cwd: Path, env: dict[str, str], timeout_s: float,
         isolation=None) -> tuple[int | None, str, bool]:
    """(exit status, combined output, timed out) of the child, run in ``isolation`` when given;
    SpoolError when it cannot start."""
    try:
        proc = subprocess.run(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout_s,
                              preexec_fn=isolation.preexec if isolation is not None else None)
    except subprocess.TimeoutExpired as exc:
        return None, (exc.stdout or b"").decode("utf-8", "replace"), True
    except subprocess.SubprocessError as exc:
        why = isolation.failure() if isolation is not None else None
        raise SpoolError(f"cannot start {argv[0]} (cwd {cwd}): {why or exc}", exit_code=126) from None
    except FileNotFoundError:
        raise SpoolError(f"command not found: {argv[0]} (cwd {cwd}); fix command.argv or install it",
                         exit_code=127) from None
    except PermissionError:
        raise SpoolError(f"command is not executable: {argv[0]} (cwd {cwd})", exit_code=126) from None
    except OSError as exc:
        raise SpoolError(f"cannot start {argv[0]}: {exc.strerror} (cwd {cwd})", exit_code=126) from None
    code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    return code, proc.stdout.decode("utf-8", "replace"), False


def play_and_record(argv: Sequence[str], *, cwd: Path, cassette: Path, artifact: Path, match: str = "exact",
                    live: Sequence[str] = (), connect_to: Sequence[str] = (), upstream_ca: Path | None = None,
                    timeout_s: float = 300.0, meta: CassetteMeta | None = None,
                    env: dict[str, str] | None = None, options: MatchOptions | None = None,
                    isolate: bool = False) -> PlayResult:
    """One artifact run with its own proxy (see :meth:`Engine.play`)."""
    with Engine(connect_to=connect_to, upstream_ca=upstream_ca) as engine:
        return engine.play(argv, cwd=cwd, cassette=cassette, artifact=artifact, match=match, live=live,
                           timeout_s=timeout_s, meta=meta, env=env, options=options, isolate=isolate)


def _discard(recorder: Recorder, artifact: Path) -> None:
    """Close the recorder's journal and remove the (empty) artifact of a run that never started."""
    try:
        recorder.finish(None)
        Path(artifact).unlink(missing_ok=True)
    except SpoolError:
        pass
