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

import inspect
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..cassettes.model import Cassette, CassetteMeta
from ..errors import SpoolError
from ..proxy.child import child_env
from ..proxy.recorder import Recorder
from ..proxy.runner import ProxyRunner
from ..replayer.addon import Playback
from ..replayer.control import CONTROL_HOST
from ..replayer.report import PlaybackReport
from ..replayer.session import PlaybackConfig, PlaybackSession


class PlayAndRecord:
    """mitmproxy addon: ``playback`` serves, ``recorder`` records the whole exchange."""

    def __init__(self, playback: Playback, recorder: Recorder) -> None:
        self.playback = playback
        self.recorder = recorder

    def load(self, loader) -> None:
        self.playback.load(loader)
        self.recorder.load(loader)

    def configure(self, updated) -> None:
        self.playback.configure(updated)
        self.recorder.configure(updated)

    async def running(self) -> None:
        await _call(self.playback.running)
        await _call(self.recorder.running)

    async def done(self) -> None:
        await _call(self.recorder.done)
        await _call(self.playback.done)

    def requestheaders(self, flow) -> None:
        if flow.request.pretty_host != CONTROL_HOST:
            self.recorder.requestheaders(flow)

    def request(self, flow) -> None:
        self.recorder.request(flow)
        self.playback.request(flow)

    def responseheaders(self, flow) -> None:
        self.playback.responseheaders(flow)
        self.recorder.responseheaders(flow)

    async def response(self, flow) -> None:
        await _call(self.recorder.response, flow)

    async def error(self, flow) -> None:
        await _call(self.recorder.error, flow)


async def _call(hook, *args) -> None:
    """Call a mitmproxy hook that may be sync or async."""
    res = hook(*args)
    if inspect.isawaitable(res):
        await res


@dataclass
class PlayResult:
    """What one artifact run produced: the command's ``exit_code`` (None when it timed out),
    the ``cassette`` recorded, the playback ``report`` and the command's combined output."""

    exit_code: int | None
    cassette: Cassette
    report: PlaybackReport
    output: str
    timed_out: bool = False


def play_and_record(argv: Sequence[str], *, cwd: Path, cassette: Path, artifact: Path, match: str = "exact",
                    live: Sequence[str] = (), connect_to: Sequence[str] = (), upstream_ca: Path | None = None,
                    timeout_s: float = 300.0, meta: CassetteMeta | None = None,
                    env: dict[str, str] | None = None) -> PlayResult:
    """Run ``argv`` in ``cwd`` with every request served from ``cassette`` (hosts matching
    ``live`` globs go upstream, through ``connect_to`` rules) and record the run to ``artifact``.

    Raises SpoolError when the cassette is bad, the proxy cannot start, or the command
    cannot be started (not found / not executable).
    """
    session = PlaybackSession(PlaybackConfig(cassettes=[str(cassette)], match=match, live=tuple(live)))  # type: ignore[arg-type]
    recorder = Recorder(artifact, meta=meta or CassetteMeta(recorder="spoolproxy test", record_mode="none"))
    runner = ProxyRunner([PlayAndRecord(Playback(session), recorder)], connect_to=connect_to, upstream_ca=upstream_ca)
    runner.start()
    timed_out = False
    try:
        child = child_env(runner.proxy_url, runner.ca.bundle, base=env if env is not None else os.environ,
                          ca_cert=runner.ca.cert)
        try:
            proc = subprocess.run(list(argv), cwd=cwd, env=child, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=timeout_s)
            code: int | None = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
            output = proc.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as exc:
            code, timed_out = None, True
            output = (exc.stdout or b"").decode("utf-8", "replace")
        except FileNotFoundError:
            raise SpoolError(f"command not found: {argv[0]} (cwd {cwd}); fix command.argv or install it",
                             exit_code=127) from None
        except PermissionError:
            raise SpoolError(f"command is not executable: {argv[0]} (cwd {cwd})", exit_code=126) from None
        except OSError as exc:
            raise SpoolError(f"cannot start {argv[0]}: {exc.strerror} (cwd {cwd})", exit_code=126) from None
    except BaseException:
        runner.stop()
        _discard(recorder, artifact)
        raise
    runner.stop()
    recorded = recorder.finish(code)
    return PlayResult(code, recorded, session.report(), output, timed_out)


def _discard(recorder: Recorder, artifact: Path) -> None:
    """Close the recorder's journal and remove the (empty) artifact of a run that never started."""
    try:
        recorder.finish(None)
        Path(artifact).unlink(missing_ok=True)
    except SpoolError:
        pass
