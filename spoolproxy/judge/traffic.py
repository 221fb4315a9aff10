"""The judge's own model traffic goes through spoolproxy: recorded, replayed, or direct.

:func:`judge_http` yields the :class:`httpx.Client` the judge's :class:`~.client.ChatClient`
uses:

* ``record``: an in-process :class:`~spoolproxy.proxy.runner.ProxyRunner` with the
  :class:`~spoolproxy.proxy.recorder.Recorder` (redaction, journal, atomic write) on a free
  127.0.0.1 port; the client's proxy is that runner and it trusts the spoolproxy CA
  bundle, so HTTPS endpoints are recorded too.  The cassette (``.<stem>.judge.yaml``) is
  written when the block ends without an error; its ``meta.extra["judge"]`` names the run,
  the call, the model, the endpoint and the prompt version.  A failed call writes nothing
  and leaves an earlier recording as it was;
* ``replay``: the same runner with the :class:`~spoolproxy.replayer.addon.Playback` addon
  over that cassette, exact matching, no upstream connection ever; a prompt the cassette
  does not hold gets playback's miss answer, which the client reports as such;
* ``direct``: a plain client (the environment's proxy settings apply), nothing recorded.

Only one proxy runs per process (mitmproxy's context is global), so calls are made one at
a time.
"""

from __future__ import annotations

import ssl
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Literal

import httpx

from ..cassettes.model import CassetteMeta
from ..cassettes.redact import Redactor
from ..errors import SpoolError

Mode = Literal["record", "replay", "direct"]


def _client(runner) -> httpx.Client:
    ctx = ssl.create_default_context(cafile=str(runner.ca.bundle))
    return httpx.Client(proxy=runner.proxy_url, verify=ctx, trust_env=False)


def recorded_judge(path: str | Path) -> dict[str, Any]:
    """``meta.extra["judge"]`` of a judge cassette (``{}`` when absent).  Raises
    CassetteError for an unreadable cassette."""
    from ..cassettes.storage import load

    info = load(path).meta.extra.get("judge")
    return dict(info) if isinstance(info, dict) else {}


@contextmanager
def judge_http(mode: Mode, cassette: str | Path | None = None, *, info: dict[str, Any] | None = None,
               redactor: Redactor | None = None) -> Iterator[httpx.Client]:
    """An HTTP client whose calls are recorded into, or replayed from, ``cassette``, or
    made directly (see the module docstring).  ``info`` goes into the recorded cassette's
    ``meta.extra["judge"]``.  Raises SpoolError when the proxy cannot start or the judge
    cassette cannot be read or written."""
    if mode == "direct":
        with httpx.Client() as http:
            yield http
        return
    if cassette is None:
        raise SpoolError("internal: a judge cassette path is needed to record or replay")
    from ..proxy.runner import ProxyRunner

    path = Path(cassette)
    if mode == "replay":
        from ..replayer.addon import Playback
        from ..replayer.session import PlaybackConfig, PlaybackSession

        if not path.is_file():
            raise SpoolError(f"judge cassette {path} does not exist; record the judge first (without --offline) "
                             "or name one with --replay-judge")
        session = PlaybackSession(PlaybackConfig(cassettes=[str(path)], match="exact"))
        runner = ProxyRunner([Playback(session)], options={"connection_strategy": "lazy", "upstream_cert": False})
        runner.start()
        try:
            with _client(runner) as http:
                yield http
        finally:
            runner.stop()
        return
    from ..proxy.recorder import Recorder

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpoolError(f"cannot create {path.parent}: {exc.strerror or exc}") from None
    meta = CassetteMeta(recorder="spoolproxy judge", record_mode="all", extra={"judge": dict(info or {})})
    recorder = Recorder(path, meta=meta, redactor=redactor or Redactor())
    recorder.open()
    runner = ProxyRunner([recorder])
    try:
        runner.start()
    except BaseException:
        recorder.abort()
        raise
    ok = False
    try:
        with _client(runner) as http:
            yield http
        ok = True
    finally:
        runner.stop()
        if ok:
            recorder.finish(exit_code=0)
        else:
            recorder.abort()
