"""Run one check as a child process: the run document on stdin, the verdict from its exit status.

A ``command`` runs with ``/bin/sh -c`` (a list runs without a shell); a ``function`` runs as
``python -m spoolproxy.checks.pyfunc module:function`` with the same interpreter, so a hanging
or crashing Python check cannot take spoolproxy down either.  Each check runs in its own
process group; on timeout the whole group is killed.

Exit status: 0 pass; any other status fails, the reason being what the check printed
(stdout, else the end of stderr); a stdout that is a JSON object ``{"reason": "...",
"interactions": [3, 4]}`` gives both.  A check killed by a signal, one whose command cannot
be found or run (126/127), or a Python check that raised something other than
AssertionError is ``crashed``; one still running after ``timeout`` seconds is ``timeout``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..detectors.models import CheckResult
from .spec import CheckSpec

#: characters of a check's reason kept in findings and reports
MAX_REASON = 600
#: exit statuses of ``python -m spoolproxy.checks.pyfunc`` that mean "the check broke", not "failed"
PYFUNC_CRASH = {2: "could not import", 3: "raised"}


def argv_of(spec: CheckSpec) -> list[str]:
    """The argv that runs ``spec``."""
    if spec.function is not None:
        return [sys.executable, "-m", "spoolproxy.checks.pyfunc", spec.function]
    if isinstance(spec.command, list):
        return list(spec.command)
    return ["/bin/sh", "-c", str(spec.command)]


def workdir(spec: CheckSpec) -> Path:
    """Where ``spec`` runs: ``cwd`` relative to ``base_dir`` (default: the current directory)."""
    base = Path(spec.base_dir) if spec.base_dir else Path.cwd()
    return (base / spec.cwd) if spec.cwd else base


def run_check(spec: CheckSpec, document: bytes, *, cassette: str | None = None) -> CheckResult:
    """Run ``spec`` with ``document`` (the run document as JSON bytes) on stdin.  Never raises
    for anything the check does; see the module docstring for the verdicts."""
    t0 = time.monotonic()
    result = CheckResult(name=spec.name, status="crashed", severity=spec.severity)
    cwd = workdir(spec)
    env = {**os.environ, "SPOOLPROXY_CHECK": spec.name, "SPOOLPROXY_CASSETTE": cassette or ""}
    if spec.function is not None:  # the project's modules import as in `python -m` from its root
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(cwd), env.get("PYTHONPATH", "")) if p)
    try:
        proc = subprocess.Popen(argv_of(spec), cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, start_new_session=True)
    except OSError as exc:
        result.message = f"cannot run {argv_of(spec)[0]} in {cwd}: {exc.strerror or exc}"
        result.duration_ms = (time.monotonic() - t0) * 1000
        return result
    try:
        out, err = proc.communicate(document, timeout=spec.timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = _drain(proc)
        result.status = "timeout"
        result.message = f"no verdict within {spec.timeout:g} s (killed)" + _tail(out, err, prefix="; it printed: ")
        result.duration_ms = (time.monotonic() - t0) * 1000
        return result
    result.duration_ms = (time.monotonic() - t0) * 1000
    rc = result.exit_code = proc.returncode
    reason, interactions = _reason(out, err)
    result.interactions = interactions
    if rc == 0:
        result.status, result.message = "pass", reason
    elif rc < 0:
        name = _signal_name(-rc)
        result.message = f"killed by {name}" + (f": {reason}" if reason else "")
    elif rc in (126, 127) and spec.function is None:
        result.message = f"could not run (exit {rc}): {reason or 'command not found or not executable'}"
    elif spec.function is not None and rc in PYFUNC_CRASH:
        result.message = f"{PYFUNC_CRASH[rc]}: {reason}" if reason else PYFUNC_CRASH[rc]
    else:
        result.status = "fail"
        result.message = reason or f"exited {rc} without a reason"
    return result


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the check's own process group (start_new_session)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _drain(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    try:
        return proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:  # a grandchild in another group still holds the pipes
        proc.kill()
        return b"", b""


def _reason(out: bytes, err: bytes) -> tuple[str, list[int]]:
    """(reason, interactions) from a check's output (see the module docstring)."""
    text = out.decode("utf-8", "replace").strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("reason"), str):
            idx = [i for i in doc.get("interactions") or [] if isinstance(i, int) and not isinstance(i, bool)]
            return _trim(doc["reason"]), sorted(set(idx))
    if text:
        return _trim(text), []
    return _trim(err.decode("utf-8", "replace").strip(), tail=True), []


def _trim(text: str, tail: bool = False) -> str:
    text = " ".join(text.split()) if len(text.splitlines()) <= 3 else " / ".join(
        line.strip() for line in (text.splitlines()[-6:] if tail else text.splitlines()[:6]) if line.strip())
    if len(text) <= MAX_REASON:
        return text
    return ("…" + text[-MAX_REASON:]) if tail else (text[:MAX_REASON] + "…")


def _tail(out: bytes, err: bytes, prefix: str) -> str:
    reason, _ = _reason(out, err)
    return f"{prefix}{reason}" if reason else ""


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"
