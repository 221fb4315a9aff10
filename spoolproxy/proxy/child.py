"""The environment and launcher for the program spoolproxy records or plays back.

:func:`child_env` points every common HTTP client at the proxy and at a CA bundle that
trusts it; :func:`run_child` runs the program, forwards SIGINT/SIGTERM and returns its
exit status; :func:`run_child_watched` also returns how it ended (signal, timeout, the end of
its stderr, which is still copied live to the terminal) as a :class:`ChildEnd`.  Shared by
``spoolproxy record`` and ``spoolproxy playback``.

Proxy variables: ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY`` in both cases (curl reads
only the lower-case ``http_proxy``; Python, Node, Go and Rust clients read one or the other),
and ``WSS_PROXY``/``WS_PROXY`` in both cases, which WebSocket clients prefer for ``wss://``
and ``ws://`` URLs (Python's ``websockets``, used by the openai SDK's Realtime client, reads
them through ``urllib.request.getproxies``; it falls back to ``HTTPS_PROXY``).
CA variables: ``SSL_CERT_FILE`` (OpenSSL, httpx, aiohttp, Go), ``REQUESTS_CA_BUNDLE``
(requests), ``CURL_CA_BUNDLE`` (curl), ``NODE_EXTRA_CA_CERTS`` (Node, added to its roots),
``AWS_CA_BUNDLE`` (botocore), ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` (gRPC), ``PIP_CERT``,
``HTTPLIB2_CA_CERTS``; ``NODE_USE_ENV_PROXY=1`` makes Node >= 24's fetch honour the proxy.

``NO_PROXY``: an inherited ``NO_PROXY`` would silently exempt hosts from recording, so it
is replaced by exactly what the caller asks to exempt (``no_proxy``).  By default
(``proxy_localhost=True``) local tool servers on ``localhost``/``127.0.0.1`` are recorded
too; ``proxy_localhost=False`` exempts ``localhost,127.0.0.1,::1``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import SpoolError

PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy",
              "WSS_PROXY", "WS_PROXY", "wss_proxy", "ws_proxy")
NO_PROXY_VARS = ("NO_PROXY", "no_proxy")
BUNDLE_VARS = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "AWS_CA_BUNDLE",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
    "PIP_CERT",
    "HTTPLIB2_CA_CERTS",
)
LOCALHOST_NAMES = ("localhost", "127.0.0.1", "::1")


def child_env(
    proxy_url: str,
    bundle: Path,
    *,
    base: Mapping[str, str] | None = None,
    proxy_localhost: bool = True,
    no_proxy: Sequence[str] = (),
    ca_cert: Path | None = None,
) -> dict[str, str]:
    """The environment for a child that must go through the proxy at ``proxy_url``.

    ``base`` (default ``os.environ``) is copied, then the proxy, CA and ``NO_PROXY``
    variables are set (see the module docstring).  ``no_proxy`` lists hosts the caller
    explicitly exempts; ``proxy_localhost=False`` adds the localhost names.  ``ca_cert``
    (the bare spoolproxy CA certificate) is used for ``NODE_EXTRA_CA_CERTS`` when given,
    else ``bundle``.  ``SSL_CERT_DIR`` is removed so OpenSSL clients use ``SSL_CERT_FILE``.
    """
    env = dict(os.environ if base is None else base)
    for name in PROXY_VARS:
        env[name] = proxy_url
    for name in BUNDLE_VARS:
        env[name] = str(bundle)
    env.pop("SSL_CERT_DIR", None)
    env["NODE_EXTRA_CA_CERTS"] = str(ca_cert or bundle)
    env["NODE_USE_ENV_PROXY"] = "1"
    exempt = list(dict.fromkeys([*no_proxy, *(() if proxy_localhost else LOCALHOST_NAMES)]))
    for name in NO_PROXY_VARS:
        env[name] = ",".join(exempt)
    return env


#: base-URL variables SDKs read, per upstream host, set for ``--reverse`` upstreams
BASE_URL_VARS = {
    "api.openai.com": ("OPENAI_BASE_URL", "/v1"),
    "api.anthropic.com": ("ANTHROPIC_BASE_URL", ""),
}


def reverse_env(reverse_ports: Mapping[str, int], host: str = "127.0.0.1", base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Variables telling a child where the reverse proxies listen.

    ``SPOOLPROXY_REVERSE_<HOST>`` (host upper-cased, non-alphanumerics as ``_``) =
    ``http://HOST:PORT`` for every upstream; plus ``OPENAI_BASE_URL``
    (``http://HOST:PORT/v1``) / ``ANTHROPIC_BASE_URL`` when those upstreams are reversed and
    the variable is unset in ``base`` or points at the real upstream.
    """
    import re
    from urllib.parse import urlsplit

    base = os.environ if base is None else base
    out: dict[str, str] = {}
    if ":" in host:
        host = f"[{host}]"
    for url, port in reverse_ports.items():
        upstream = urlsplit(url).hostname or ""
        local = f"http://{host}:{port}"
        out["SPOOLPROXY_REVERSE_" + re.sub(r"[^A-Z0-9]", "_", upstream.upper())] = local
        if upstream in BASE_URL_VARS:
            var, suffix = BASE_URL_VARS[upstream]
            current = base.get(var, "")
            if not current or upstream in current:
                out[var] = local + suffix
    return out


def export_lines(env: Mapping[str, str], base: Mapping[str, str] | None = None) -> list[str]:
    """``export NAME='value'`` lines for the variables ``env`` sets or changes relative
    to ``base`` (default ``os.environ``), for a user to paste into another shell."""
    import shlex

    base = os.environ if base is None else base
    names = [*PROXY_VARS, *NO_PROXY_VARS, *BUNDLE_VARS, "NODE_EXTRA_CA_CERTS", "NODE_USE_ENV_PROXY"]
    names += sorted(n for n in env if n.startswith("SPOOLPROXY_REVERSE_"))
    names += [var for var, _ in BASE_URL_VARS.values() if env.get(var) != base.get(var)]
    lines = [f"export {n}={shlex.quote(env[n])}" for n in names if n in env]
    if "SSL_CERT_DIR" in base and "SSL_CERT_DIR" not in env:
        lines.append("unset SSL_CERT_DIR")
    return lines


def check_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """Resolve ``argv[0]`` like the shell would (``PATH`` from ``env``) and return its path.

    Raises SpoolError with exit code 127 when it is not found (126 when not executable),
    so callers can refuse before starting anything.
    """
    import shutil

    if not argv:
        raise SpoolError("no command given; put it after '--', e.g. spoolproxy record -- python agent.py")
    prog = argv[0]
    if os.sep in prog:
        if not os.path.exists(prog):
            raise SpoolError(f"command not found: {prog}; check the path", exit_code=127)
        if os.path.isdir(prog) or not os.access(prog, os.X_OK):
            raise SpoolError(f"command is not executable: {prog}", exit_code=126)
        return prog
    found = shutil.which(prog, path=(env or os.environ).get("PATH"))
    if found is None:
        raise SpoolError(f"command not found: {prog}; check the name and PATH", exit_code=127)
    return found


def _terminal_delivers_sigint(child: subprocess.Popen) -> bool:
    """True when a Ctrl-C on the terminal reaches the child by itself (we are the
    foreground process group of a tty and the child shares our group)."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp() == os.getpgid(child.pid)
    except OSError:
        return False


#: seconds between SIGTERM and SIGKILL when a child overruns its timeout
KILL_GRACE_S = 5.0


@dataclass
class ChildEnd:
    """How a child ended.

    ``code``: its exit status (``128 + N`` when killed by signal N); ``signal``: the signal's
    name when one killed it (``"SIGSEGV"``); ``timed_out``: it overran its timeout and was
    stopped; ``interrupted``: the name of the first SIGINT/SIGTERM this process received and
    passed on while the child ran (a user or CI stopping the run); ``stderr_tail``: the last
    bytes of its stderr when they were kept (``stderr_tail`` > 0 in :func:`run_child_watched`),
    ``stderr_bytes``: everything it wrote there.
    """

    code: int
    signal: str | None = None
    timed_out: bool = False
    interrupted: str | None = None
    stderr_tail: bytes = b""
    stderr_bytes: int = 0

    @property
    def failed(self) -> bool:
        """True when the child did not exit 0 by itself (non-zero status, signal, timeout)."""
        return self.code != 0 or self.timed_out

    def meta(self, redactor=None, keep: int = 4096) -> dict:
        """The ``agent_end`` mapping a cassette's metadata keeps: ``signal``, ``timed_out``,
        ``interrupted`` (when set), ``stderr_tail`` (the last ``keep`` characters, redacted
        with ``redactor`` before being cut, from a line start when one is near) and
        ``stderr_bytes``."""
        out: dict = {}
        if self.signal:
            out["signal"] = self.signal
        if self.timed_out:
            out["timed_out"] = True
        if self.interrupted:
            out["interrupted"] = self.interrupted
        if self.stderr_tail:
            text = self.stderr_tail.decode("utf-8", "replace")
            if redactor is not None:
                text = redactor.text(text)  # before cutting: a secret is never cut in half
            if len(text) > keep:
                text = text[-keep:]
                nl = text.find("\n")
                if 0 <= nl < keep // 4:
                    text = text[nl + 1:]
            out["stderr_tail"] = text
        out["stderr_bytes"] = self.stderr_bytes
        return out


def run_child(argv: Sequence[str], env: Mapping[str, str], *, preexec=None) -> int:
    """Run ``argv`` with ``env`` and return its exit status (see :func:`run_child_watched`)."""
    return run_child_watched(argv, env, preexec=preexec).code


def run_child_watched(argv: Sequence[str], env: Mapping[str, str], *, stderr_tail: int = 0,
                      timeout_s: float | None = None, preexec=None) -> ChildEnd:
    """Run ``argv`` with ``env`` and return how it ended (:class:`ChildEnd`).  ``preexec``:
    also run in the child before ``exec`` (e.g. :attr:`~.isolate.Isolation.preexec`); when it
    raises, the program does not start and SpoolError (exit code 126) says so.

    SIGTERM and SIGINT received meanwhile are forwarded to the child (SIGINT only when
    the terminal did not already deliver it to the child's process group); the third
    signal kills the child.  A child killed by signal N gives ``128 + N``.  On Linux the
    child gets SIGTERM should this process die first (even by SIGKILL), so it never runs on
    as an orphan pointed at a dead proxy (:func:`parent_death_signal`).

    ``stderr_tail`` > 0: the child's stderr is copied to ours as it comes and its last
    ``stderr_tail`` bytes are kept (:class:`~.tee.StderrTee`).  ``timeout_s``: after that
    many seconds the child gets SIGTERM, and SIGKILL ``KILL_GRACE_S`` later.  Raises
    SpoolError with exit code 127 when the program is not found and 126 when it is not
    executable.
    """
    if not argv:
        raise SpoolError("no command given; put it after '--', e.g. spoolproxy record -- python agent.py")
    tee = None
    if stderr_tail > 0:
        from .tee import StderrTee

        tee = StderrTee(stderr_tail)
    try:
        child = subprocess.Popen(list(argv), env=dict(env), preexec_fn=chain_preexec(preexec, parent_death_signal()),
                                 stderr=tee.child_fd if tee is not None else None)
    except (OSError, subprocess.SubprocessError) as exc:
        if tee is not None:
            tee.close()
        if isinstance(exc, subprocess.SubprocessError):
            raise SpoolError(f"cannot start {argv[0]}: setting up its process failed ({exc})", exit_code=126) from None
        if isinstance(exc, FileNotFoundError):
            raise SpoolError(f"command not found: {argv[0]}; check the name and PATH", exit_code=127) from None
        if isinstance(exc, PermissionError):
            raise SpoolError(f"command is not executable: {argv[0]}", exit_code=126) from None
        raise SpoolError(f"cannot run {argv[0]}: {exc.strerror}", exit_code=126) from None
    if tee is not None:
        tee.started()

    received: list[int] = []

    def forward(signum, _frame):
        received.append(signum)
        if child.poll() is not None:
            return
        try:
            if len(received) >= 3:
                child.kill()
            elif not (signum == signal.SIGINT and _terminal_delivers_sigint(child)):
                child.send_signal(signum)
        except ProcessLookupError:
            pass

    old = {}
    in_main = _in_main_thread()
    if in_main:
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.signal(s, forward)
    timed_out = False
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while True:
            try:
                if deadline is None or timed_out:
                    code = child.wait(None if deadline is None else KILL_GRACE_S)
                else:
                    code = child.wait(max(0.0, deadline - time.monotonic()))
                break
            except subprocess.TimeoutExpired:
                if timed_out:
                    child.kill()  # ignored SIGTERM for the whole grace period
                    code = child.wait()
                    break
                timed_out = True
                child.terminate()
            except KeyboardInterrupt:  # pragma: no cover - handler replaced above
                continue
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    end = ChildEnd(code=128 - code if code < 0 else code, timed_out=timed_out,
                   interrupted=signal.Signals(received[0]).name if received else None)
    if code < 0:
        try:
            end.signal = signal.Signals(-code).name
        except ValueError:
            end.signal = f"signal {-code}"
    if tee is not None:
        end.stderr_tail = tee.finish()
        end.stderr_bytes = tee.total
    return end


def chain_preexec(*fns):
    """One ``preexec_fn`` running each non-None function in turn (None when there is none)."""
    todo = [f for f in fns if f is not None]
    if not todo:
        return None
    if len(todo) == 1:
        return todo[0]

    def preexec() -> None:
        for f in todo:
            f()

    return preexec


#: prctl(2) option: the signal the calling process gets when its parent thread dies
PR_SET_PDEATHSIG = 1


def parent_death_signal(signum: int = signal.SIGTERM):
    """A ``preexec_fn`` that asks the kernel to send ``signum`` to the child when the thread
    that started it dies (Linux ``prctl(PR_SET_PDEATHSIG)``), or None elsewhere or when
    libc cannot be loaded.  Everything is looked up before the fork; the child only makes
    the call, then checks that its parent did not die before it (no signal would come)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.restype = ctypes.c_int
    parent = os.getpid()
    args = (ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(int(signum)), ctypes.c_ulong(0), ctypes.c_ulong(0),
            ctypes.c_ulong(0))
    kill, getppid = os.kill, os.getppid

    def preexec() -> None:
        prctl(*args)
        if getppid() != parent:  # the parent died between fork and prctl
            kill(os.getpid(), signum)

    return preexec


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def python_executable() -> str:
    """The interpreter running spoolproxy (handy in tests and examples)."""
    return sys.executable
