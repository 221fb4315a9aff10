"""Helpers for the recording-proxy tests (plus a self-check of them).

* ``spool_home``: a session-wide ``SPOOLPROXY_HOME`` in a temporary directory, so the CA
  and its key never land in the user's home during tests.
* :func:`recording`: the real :class:`ProxyRunner` + :class:`Recorder`, in-process, with
  ``--connect-to`` to a :class:`~tests.fakes.FakeProvider` reached as ``api.openai.com``.
* :func:`run_cli` / :func:`spawn_cli`: ``python -m spoolproxy ...`` as a subprocess.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from spoolproxy.cassettes.model import Cassette, CassetteMeta
from spoolproxy.cassettes.redact import Redactor
from spoolproxy.cli.record import RECORD_OPTIONS
from spoolproxy.proxy.recorder import Recorder
from spoolproxy.proxy.runner import ProxyRunner

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def spool_home(_private_spoolproxy_home) -> Path:
    """The session's SPOOLPROXY_HOME (made private by conftest's autouse fixture).

    One home for the whole session: in-process proxies and cached client SSL contexts
    (``test_playback.tls()``) must trust the same CA whichever test file runs first, also
    when pytest-xdist hands a worker the files in another order."""
    return Path(os.environ["SPOOLPROXY_HOME"])


@dataclass
class Session:
    """A running in-process recording: ``runner``, ``recorder``; ``cassette`` after exit."""

    runner: ProxyRunner
    recorder: Recorder
    path: Path
    cassette: Cassette | None = None
    _ssl: ssl.SSLContext | None = None

    def client_ssl(self) -> ssl.SSLContext:
        """A client SSL context trusting the spoolproxy CA bundle (what SSL_CERT_FILE gets)."""
        if self._ssl is None:
            self._ssl = ssl.create_default_context(cafile=str(self.runner.ca.bundle))
        return self._ssl


def openai_via(fake) -> list[str]:
    """--connect-to rules sending api.openai.com / api.anthropic.com to ``fake``."""
    return [f"api.openai.com:443:127.0.0.1:{fake.port}", f"api.anthropic.com:443:127.0.0.1:{fake.port}"]


@contextmanager
def recording(
    path: Path,
    *,
    fake=None,
    connect_to: list[str] | None = None,
    reverse: tuple[str, ...] = (),
    max_body_size: int = 10 * 1024 * 1024,
    large_bodies: str = "spill",
    redactor: Redactor | None = None,
    upstream_ca: Path | None = None,
    options: dict | None = None,
    upstream_proxy: str | None = None,
) -> Iterator[Session]:
    """Record through a real in-process proxy into ``path``; finish on exit."""
    rules = list(connect_to or []) + (openai_via(fake) if fake is not None else [])
    rec = Recorder(
        path,
        meta=CassetteMeta(recorder="spoolproxy test", record_mode="all"),
        redactor=redactor or Redactor(),
        max_body_size=max_body_size,
        large_bodies=large_bodies,
    )
    runner = ProxyRunner(
        [rec],
        options={**RECORD_OPTIONS, **(options or {})},
        connect_to=rules,
        reverse=reverse,
        upstream_ca=upstream_ca if upstream_ca is not None else (fake.ca_pem_path if fake is not None else None),
        upstream_proxy=upstream_proxy,
    )
    rec.open()
    runner.start()
    sess = Session(runner, rec, path)
    try:
        yield sess
    finally:
        runner.stop()
        sess.cassette = rec.finish(exit_code=0)


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["SPOOLPROXY_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    for name in ("SPOOLPROXY_CONFIG", "NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY",
                 "http_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(name, None)
    env.update(extra)
    return env


def run_cli(args: list[str], home: Path, *, cwd: Path | None = None, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    """Run ``python -m spoolproxy ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "spoolproxy", *args],
        cwd=cwd, env=cli_env(home, **env), capture_output=True, text=True, timeout=timeout,
    )


def spawn_cli(args: list[str], home: Path, *, cwd: Path | None = None, **kw) -> subprocess.Popen:
    """Start ``python -m spoolproxy ARGS`` in its own session (so it can be signalled)."""
    return subprocess.Popen(
        [sys.executable, "-m", "spoolproxy", *args],
        cwd=cwd, env=cli_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, **kw,
    )


def wait_for(predicate, timeout: float = 20.0, what: str = "condition") -> None:
    """Poll ``predicate`` until true; fail the test after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}")


def test_recording_helper_records_one_plain_http_request(spool_home, tmp_path, fake_provider):
    import httpx

    path = tmp_path / "c.yaml"
    with recording(path, fake=fake_provider) as s:
        with httpx.Client(proxy=s.runner.proxy_url) as c:
            r = c.get(f"{fake_provider.http_url}/echo/ping")
    assert r.status_code == 200
    assert [i.request.uri for i in s.cassette.interactions] == [f"{fake_provider.http_url}/echo/ping"]
    assert (spool_home / "mitmproxy" / "mitmproxy-ca.pem").exists()


def test_runner_listens_on_loopback_and_runs_calls_on_its_loop(spool_home, tmp_path):
    import asyncio
    import threading

    with recording(tmp_path / "x.yaml", reverse=("https://api.openai.com",)) as s:
        addrs = s.runner.listen_addrs  # the sockets mitmproxy serves (bound before it started)
        assert {a[0] for a in addrs} == {"127.0.0.1"}
        assert sorted(a[1] for a in addrs) == sorted([s.runner.port, *s.runner.reverse_ports.values()])
        for port in (s.runner.port, *s.runner.reverse_ports.values()):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()  # each one accepts
        assert s.runner.call(lambda: threading.current_thread().name) == "spoolproxy-mitmproxy"

        async def coro(x):
            await asyncio.sleep(0)
            return x * 2

        assert s.runner.call(coro, 21) == 42
        with pytest.raises(ZeroDivisionError):
            s.runner.call(lambda: 1 / 0)
    assert s.cassette.interactions == []


def test_addon_exceptions_are_collected_not_printed(spool_home, fake_provider, capfd):
    import httpx

    class Broken:
        def request(self, flow):
            raise RuntimeError("boom in addon")

    with ProxyRunner([Broken()]) as runner:
        with httpx.Client(proxy=runner.proxy_url) as c:
            assert c.get(f"{fake_provider.http_url}/echo/x").status_code == 200
        errors = runner.addon_errors
    assert errors == ["Addon error: boom in addon"]
    out, err = capfd.readouterr()
    assert "boom in addon" not in out + err  # no mitmproxy noise on the terminal


def test_clients_may_connect_before_mitmproxy_is_up_and_are_served(spool_home, fake_provider):
    """bind() takes the port without mitmproxy: a request sent before start() waits in the
    accept queue and is answered once the proxy runs (how record/playback start CMD first)."""
    import threading

    import httpx

    runner = ProxyRunner([])
    runner.bind()
    got: dict = {}

    def client() -> None:
        with httpx.Client(proxy=runner.proxy_url, timeout=30) as c:
            got["status"] = c.get(f"{fake_provider.http_url}/echo/early").status_code

    t = threading.Thread(target=client)
    t.start()
    try:
        time.sleep(0.2)  # the request is sent and waiting: nothing serves the port yet
        assert "status" not in got
        runner.start(wait=False)
        t.join(30)
    finally:
        runner.stop()
    assert got == {"status": 200}


def test_stop_before_the_proxy_is_up_gives_it_up_when_nobody_connected(spool_home):
    runner = ProxyRunner([])
    runner.start(wait=False)
    port = runner.port
    runner.stop()  # mitmproxy may still be importing: nothing to serve, nothing to wait for
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with ProxyRunner([]) as again:  # the process's proxy slot is free again
        assert again.port


def test_a_request_for_the_proxy_itself_is_refused_not_looped(spool_home):
    import httpx

    with ProxyRunner([]) as runner:
        with httpx.Client(proxy=runner.proxy_url, timeout=30) as c:
            r = c.get(f"http://127.0.0.1:{runner.port}/loop")
    assert r.status_code == 502
    assert "this proxy itself" in r.text
