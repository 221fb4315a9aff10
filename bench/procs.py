"""Subprocesses under measurement: start, wait until listening, stop, peak RSS.

Peak RSS comes from ``ru_maxrss`` (KiB) reported by :mod:`bench.rsswrap` for the measured
command itself, with ``/proc/<pid>/status`` ``VmHWM`` sampled while it runs as a fallback.  Processes are
only ever stopped by their own pid (SIGINT, then SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PYTHON = sys.executable


def tool(name: str) -> str:
    """Path of a console script installed next to this Python (``spoolproxy``, ``mitmdump``)."""
    p = BIN / name
    return str(p) if p.exists() else name


def free_port() -> int:
    """An ephemeral 127.0.0.1 port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    """Block until 127.0.0.1:``port`` accepts TCP connections; RuntimeError on timeout or exit."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"exited with status {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"not listening on port {port} after {timeout:.0f} s")


def vm_hwm_kib(pid: int) -> int | None:
    """``VmHWM`` (peak resident set, KiB) of a live process, or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


RSSWRAP = Path(__file__).resolve().parent / "rsswrap.py"


class Proc:
    """A measured subprocess: ``Proc(cmd, ...)`` starts it; ``stop()`` ends it and returns
    its peak RSS in KiB.  stdout/stderr go to files under ``logdir`` (for post-mortems).

    With ``wrap`` (the default) the command runs under :mod:`bench.rsswrap`, which reports
    the command's own ``ru_maxrss`` (see there why); ``pid`` is then the command's pid once
    it has started, and signals sent to the wrapper are forwarded."""

    def __init__(self, cmd: list[str], logdir: Path, name: str, env: dict | None = None,
                 cwd: Path | None = None, stdout_pipe: bool = False, wrap: bool = True) -> None:
        self.cmd, self.name = cmd, name
        logdir.mkdir(parents=True, exist_ok=True)
        self.err_path = logdir / f"{name}.stderr"
        self.out_path = logdir / f"{name}.stdout"
        self.rss_path = logdir / f"{name}.maxrss" if wrap else None
        self._err = open(self.err_path, "wb")
        self._out = None if stdout_pipe else open(self.out_path, "wb")
        full = [PYTHON, "-I", "-S", str(RSSWRAP), str(self.rss_path), *cmd] if wrap else cmd
        self.p = subprocess.Popen(
            full, env=env, cwd=cwd or REPO, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout_pipe else self._out, stderr=self._err,
        )
        self.peak_kib: int | None = None
        self.returncode: int | None = None
        self._child: int | None = None

    @property
    def pid(self) -> int:
        """The measured command's pid (the wrapper's until the command has been forked)."""
        if self.rss_path is None:
            return self.p.pid
        if self._child is None:
            try:
                kids = Path(f"/proc/{self.p.pid}/task/{self.p.pid}/children").read_text().split()
                self._child = int(kids[0]) if kids else None
            except (OSError, ValueError):
                pass
        return self._child or self.p.pid

    def alive(self) -> bool:
        return self.returncode is None and self.p.poll() is None

    def readline(self, timeout: float = 30.0) -> str:
        """One stdout line (only with ``stdout_pipe=True``); RuntimeError when it exits first."""
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.p.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise RuntimeError(f"{self.name}: no output after {timeout:.0f} s; see {self.err_path}")
        line = self.p.stdout.readline().decode()
        if not line:
            raise RuntimeError(f"{self.name} exited: {self.tail()}")
        return line

    def tail(self, n: int = 400) -> str:
        """The last ``n`` characters of its stderr, on one line."""
        self._err.flush()
        try:
            text = self.err_path.read_text(errors="replace")
        except OSError:
            return ""
        return " ".join(text[-n:].split())

    def sample_hwm(self) -> int | None:
        """Sample VmHWM now (KiB); the maximum seen is kept."""
        v = vm_hwm_kib(self.pid)
        if v is not None:
            self.peak_kib = max(self.peak_kib or 0, v)
        return v

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGINT, then SIGTERM, then SIGKILL (this pid only); returns peak RSS in KiB."""
        if self.returncode is None:
            self.sample_hwm()
            child = self.pid
            for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                for target in {self.p.pid, child} if sig == signal.SIGKILL else {self.p.pid}:
                    try:
                        os.kill(target, sig)
                    except ProcessLookupError:
                        pass
                if self._reap(wait):
                    break
            if self.rss_path is not None:
                try:
                    self.peak_kib = int(self.rss_path.read_text().split()[0])
                except (OSError, ValueError, IndexError):
                    pass  # killed: keep the VmHWM samples
        for fh in (self._err, self._out):
            if fh:
                fh.close()
        return self.peak_kib

    def _reap(self, wait: float) -> bool:
        deadline = time.monotonic() + wait
        while True:
            try:
                pid, status, _ = os.wait4(self.p.pid, os.WNOHANG)  # our direct child (the wrapper)
            except ChildProcessError:  # already reaped by Popen.poll()
                self.returncode = self.p.returncode
                return True
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                self.p.returncode = self.returncode
                return True
            if time.monotonic() >= deadline:
                return False
            self.sample_hwm()
            time.sleep(0.02)

    def __enter__(self) -> "Proc":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
