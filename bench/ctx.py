"""What the sections share: a scratch directory, the test PKI, the local origin server, and
helpers to start bare ``mitmdump`` and ``spoolproxy`` as measured subprocesses."""

from __future__ import annotations

import importlib.util
import os
import shutil
import ssl
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

from .config import Config
from .procs import PYTHON, REPO, Proc, free_port, tool, wait_port
from .tls import Pki, make_pki


class Unavailable(RuntimeError):
    """A subject cannot be measured (feature missing, failed to start); the message says why."""


def spoolproxy_command(name: str) -> None:
    """Raise Unavailable unless ``spoolproxy <name>`` is implemented in this tree."""
    from spoolproxy.cli import COMMANDS

    mod = COMMANDS.get(name, (name,))[0]
    if importlib.util.find_spec(f"spoolproxy.cli.{mod}") is None:
        raise Unavailable(f"`spoolproxy {name}` is not implemented yet (no spoolproxy/cli/{mod}.py)")


class RunContext:
    """Scratch space and shared servers of one benchmark run (use as a context manager)."""

    def __init__(self, cfg: Config, keep: bool = False) -> None:
        self.cfg = cfg
        self.keep = keep
        self.work = Path(tempfile.mkdtemp(prefix="spoolproxy-bench-"))
        self.logs = self.work / "logs"
        self.home = self.work / "spoolproxy-home"  # SPOOLPROXY_HOME: a private CA per run
        # a private, initially empty parsed-cassette cache (this process and its children)
        os.environ["SPOOLPROXY_CACHE"] = str(self.work / "doc-cache")
        self.pki: Pki = make_pki(self.work / "pki")
        self._origin: Proc | None = None
        self.origin_port: int | None = None
        self._procs: list[Proc] = []

    # -- environment ---------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        """Environment for measured subprocesses: private SPOOLPROXY_HOME, no proxy variables,
        and bytecode caching on (``PYTHONDONTWRITEBYTECODE`` dropped), so start-up is measured
        as a normal install behaves: imports compiled once, by the untimed warm-up run."""
        env = {k: v for k, v in os.environ.items()
               if "proxy" not in k.lower() and k != "PYTHONDONTWRITEBYTECODE"}
        env["SPOOLPROXY_HOME"] = str(self.home)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def spoolproxy_ca(self) -> Path:
        """The spoolproxy CA certificate (created by the first spoolproxy process)."""
        return self.home / "mitmproxy" / "mitmproxy-ca-cert.pem"

    # -- origin ----------------------------------------------------------------------------
    def origin(self) -> int:
        """Port of the local HTTPS origin server (started on first use)."""
        if self._origin is None:
            p = Proc([PYTHON, "-m", "bench.server", "--cert", str(self.pki.server_cert),
                      "--key", str(self.pki.server_key)], self.logs, "origin", stdout_pipe=True, wrap=False)
            self._origin = p
            line = p.readline()
            if not line.startswith("PORT "):
                raise RuntimeError(f"origin server said {line!r}")
            self.origin_port = int(line.split()[1])
        return self.origin_port  # type: ignore[return-value]

    def origin_url(self, path: str) -> str:
        return f"https://localhost:{self.origin()}{path}"

    # -- proxies ---------------------------------------------------------------------------
    def start(self, cmd: list[str], name: str, port: int, wait: bool = True) -> Proc:
        """Start ``cmd`` (which listens on ``port``); with ``wait``, until it accepts connections.
        Without, call :meth:`ready` later (lets several proxies start in parallel)."""
        p = Proc(cmd, self.logs, name, env=self.env())
        p.port = port  # type: ignore[attr-defined]
        self._procs.append(p)
        if wait:
            self.ready(p)
        return p

    def ready(self, p: Proc, timeout: float = 90.0) -> Proc:
        """Wait until ``p`` listens; Unavailable (and ``p`` stopped) when it does not."""
        try:
            wait_port(p.port, timeout, p.p)  # type: ignore[attr-defined]
        except RuntimeError as exc:
            p.stop()
            raise Unavailable(f"{p.name} did not start ({exc}): {p.tail(250)}") from None
        return p

    def mitmdump(self, name: str, *extra: str, wait: bool = True) -> tuple[Proc, int, Path]:
        """Bare ``mitmdump`` (no addon, ``-q``) trusting the test CA; -> (proc, port, its CA cert)."""
        port = free_port()
        confdir = self.work / f"mitm-{name}"
        cmd = [tool("mitmdump"), "-q", "--listen-host", "127.0.0.1", "-p", str(port),
               "--set", f"confdir={confdir}", "--set", f"ssl_verify_upstream_trusted_ca={self.pki.ca_cert}",
               *extra]
        p = self.start(cmd, name, port, wait)
        return p, port, confdir / "mitmproxy-ca-cert.pem"

    def spoolproxy(self, name: str, subcommand: str, *args: str, wait: bool = True) -> tuple[Proc, int, Path]:
        """Standalone ``spoolproxy <subcommand> --port P ARGS`` -> (proc, port, CA cert)."""
        spoolproxy_command(subcommand)
        port = free_port()
        cmd = [tool("spoolproxy"), subcommand, "--port", str(port), *args]
        p = self.start(cmd, name, port, wait)
        return p, port, self.spoolproxy_ca()

    # -- clients ---------------------------------------------------------------------------
    def client(self, proxy_port: int | None = None, ca: Path | None = None) -> httpx.Client:
        """The one client every B1/B2/B6 measurement uses: a persistent httpx.Client (HTTP/1.1,
        keep-alive), direct (trusting the test CA) or through ``proxy_port`` (trusting ``ca``)."""
        ctx = ssl.create_default_context(cafile=str(ca or self.pki.ca_cert))
        proxy = f"http://127.0.0.1:{proxy_port}" if proxy_port else None
        return httpx.Client(verify=ctx, proxy=proxy, trust_env=False, timeout=120.0)

    # -- teardown --------------------------------------------------------------------------
    def close(self) -> None:
        for p in self._procs:
            p.stop()
        if self._origin is not None:
            self._origin.stop(timeout=3)
        if not self.keep:
            shutil.rmtree(self.work, ignore_errors=True)

    def __enter__(self) -> "RunContext":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextmanager
def proc_scope(p: Proc) -> Iterator[Proc]:
    """Stop ``p`` when the block ends."""
    try:
        yield p
    finally:
        p.stop()
