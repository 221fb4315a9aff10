"""Record or play back a block of code in the current process (the pytest fixture's engine).

::

    with record_block("cassettes/t.yaml", connect_to=["api.openai.com:443:127.0.0.1:8443"]) as s:
        client = openai.OpenAI()            # built inside the block: it reads HTTPS_PROXY etc.
        ...
    s.cassette                              # the recorded Cassette

    with playback_block("cassettes/t.yaml", match="exact") as s:
        client = openai.OpenAI(http_client=s.httpx_client())   # or rely on the environment
    s.report                                # the PlaybackReport (misses with diffs)

Inside the block the process environment points every common client at the proxy (the
variables of :func:`spoolproxy.proxy.child.child_env`); they are restored on exit, so only
clients *constructed* inside the block use the proxy.  Subprocesses started in the block
inherit it too.  One proxy per process at a time (mitmproxy's global context).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

from ..cassettes.model import Cassette, CassetteMeta
from ..proxy.child import child_env
from ..proxy.runner import ProxyRunner
from ..replayer.report import PlaybackReport


@dataclass
class BlockSession:
    """A running proxy for a code block: ``proxy_url``, ``ca_bundle`` (PEM trusting the
    spoolproxy CA and the usual roots), ``env`` (the variables set for the block), and after
    the block ``cassette`` (record) or ``report`` (playback)."""

    proxy_url: str
    ca_bundle: Path
    env: dict[str, str] = field(default_factory=dict)
    cassette: Cassette | None = None
    report: PlaybackReport | None = None

    def httpx_client(self, **kwargs):
        """An ``httpx.Client`` going through the proxy and trusting its CA (``kwargs`` passed on)."""
        import httpx

        return httpx.Client(proxy=self.proxy_url, verify=str(self.ca_bundle), **kwargs)

    def async_httpx_client(self, **kwargs):
        """An ``httpx.AsyncClient`` going through the proxy and trusting its CA."""
        import httpx

        return httpx.AsyncClient(proxy=self.proxy_url, verify=str(self.ca_bundle), **kwargs)


@contextmanager
def patched_environ(values: dict[str, str]) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` for the block, then restore what was there."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def proxy_environ(runner: ProxyRunner, *, proxy_localhost: bool = True) -> dict[str, str]:
    """The variables :func:`child_env` sets for ``runner`` (proxy, CA bundle, ``NO_PROXY``), to patch in."""
    return child_env(runner.proxy_url, runner.ca.bundle, base={}, proxy_localhost=proxy_localhost,
                     ca_cert=runner.ca.cert)


@contextmanager
def record_block(cassette: str | Path, *, connect_to: Sequence[str] = (), upstream_ca: Path | None = None,
                 proxy_localhost: bool = True) -> Iterator[BlockSession]:
    """Record every request made through the proxy during the block into ``cassette``.

    Raises SpoolError when the proxy cannot start or the cassette cannot be written.
    """
    from ..proxy.recorder import Recorder

    from ..cassettes.redact import Redactor

    redactor = Redactor()
    redactor.learn_env(os.environ)  # the test process's *_API_KEY/*_TOKEN/*_SECRET: never in the cassette
    recorder = Recorder(cassette, meta=CassetteMeta(recorder="spoolproxy pytest", record_mode="all"), redactor=redactor)
    def finish(session: BlockSession) -> None:
        session.cassette = recorder.finish()

    with _proxied_block([recorder], connect_to, upstream_ca, proxy_localhost, on_stop=finish) as session:
        yield session


@contextmanager
def playback_block(*cassettes: str | Path, match: str = "default", live: Sequence[str] = (),
                   connect_to: Sequence[str] = (), upstream_ca: Path | None = None,
                   proxy_localhost: bool = True) -> Iterator[BlockSession]:
    """Serve ``cassettes`` to the block (``live`` host globs go upstream, unrecorded).

    ``session.report`` holds the playback report after the block.  Raises CassetteError
    for a bad cassette, SpoolError when the proxy cannot start.
    """
    from ..replayer.addon import Playback
    from ..replayer.session import PlaybackConfig, PlaybackSession

    session_ = PlaybackSession(PlaybackConfig(cassettes=[str(c) for c in cassettes], match=match,  # type: ignore[arg-type]
                                              live=tuple(live)))
    def finish(session: BlockSession) -> None:
        session.report = session_.report()

    with _proxied_block([Playback(session_)], connect_to, upstream_ca, proxy_localhost, on_stop=finish) as session:
        yield session


@contextmanager
def _proxied_block(addons: list, connect_to: Sequence[str], upstream_ca: Path | None,
                   proxy_localhost: bool, on_stop: Callable[[BlockSession], None]) -> Iterator[BlockSession]:
    """Start a proxy with ``addons``, point this process's environment at it for the
    block, then stop it and call ``on_stop(session)``."""
    runner = ProxyRunner(addons, connect_to=connect_to, upstream_ca=upstream_ca)
    runner.start()
    env = proxy_environ(runner, proxy_localhost=proxy_localhost)
    session = BlockSession(runner.proxy_url, runner.ca.bundle, env)
    try:
        with patched_environ(env):
            yield session
    finally:
        runner.stop()
        on_stop(session)
