"""Known clients that ignore the proxy variables, spotted from the command line before a run.

Their requests go around the proxy: ``record`` does not record them (a cassette that looks
complete is not), and playback without ``--isolate`` lets them reach the real network.
:func:`bypass_warnings` looks at the command and the files it names, without running
anything but ``node --version``:

* **Node.js** before 22.21 / 24.0 (``fetch``) and 22.21 / 24.5 (``node:http``, ``https``):
  these ignore ``HTTPS_PROXY`` even with ``NODE_USE_ENV_PROXY=1`` (which spoolproxy sets),
  and so do the npm ``openai`` and ``@anthropic-ai/sdk`` packages built on ``fetch``;
* **aiohttp** ``ClientSession(...)`` without ``trust_env=True`` in the Python files the
  command names (a script, or the test paths given to pytest).

Each warning is one line naming the client, where it was seen and what to do.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

NODE_PROGRAMS = {"node", "nodejs", "npx", "npm", "pnpm", "yarn", "tsx", "ts-node"}
JS_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts")
PY_RUNNERS = ("python", "pytest", "py.test")
#: files and bytes scanned at most for aiohttp sessions
MAX_FILES, MAX_BYTES = 400, 8 * 1024 * 1024

_SESSION = re.compile(rb"\b(?:aiohttp\.)?ClientSession\s*\(")
_TRUST = re.compile(rb"trust_env\s*=\s*True")


def node_version(env: Mapping[str, str] | None = None) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` of the ``node`` on ``env``'s PATH, or None."""
    node = shutil.which("node", path=(env or os.environ).get("PATH"))
    if node is None:
        return None
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(r"v?(\d+)\.(\d+)\.(\d+)", out)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def node_warning(version: tuple[int, int, int]) -> str | None:
    """The warning for a Node.js ``version`` whose ``fetch`` or ``http`` ignore the proxy."""
    v = version[:2]
    fetch_ok = (22, 21) <= v < (23, 0) or v >= (24, 0)
    http_ok = (22, 21) <= v < (23, 0) or v >= (24, 5)
    if fetch_ok and http_ok:
        return None
    what = "fetch() (and the npm openai and @anthropic-ai/sdk packages)" if not fetch_ok else "node:http/https"
    if not fetch_ok and not http_ok:
        what += " and node:http/https"
    shown = ".".join(map(str, version))
    return (f"Node.js {shown}: {what} ignore HTTPS_PROXY before Node 22.21 / 24.5, so their requests bypass the "
            "proxy; use a newer Node (spoolproxy sets NODE_USE_ENV_PROXY=1) or --reverse https://HOST and the "
            "client's base URL")


def _is_node(argv: Sequence[str]) -> bool:
    prog = Path(argv[0]).name
    return prog in NODE_PROGRAMS or any(a.endswith(JS_SUFFIXES) for a in argv[:3])


def _is_python(argv: Sequence[str]) -> bool:
    prog = Path(argv[0]).name
    return prog.startswith(PY_RUNNERS) or (prog in ("uv", "poetry", "pipenv", "hatch") and "run" in argv[1:3])


def python_files(argv: Sequence[str], cwd: Path) -> list[Path]:
    """The ``.py`` files the command names (scripts, and files under directories it names),
    at most :data:`MAX_FILES`."""
    out: list[Path] = []
    for arg in argv[1:]:
        if arg.startswith("-"):
            continue
        p = Path(arg.split("::", 1)[0])
        p = p if p.is_absolute() else cwd / p
        if p.is_file() and p.suffix == ".py":
            out.append(p)
        elif p.is_dir():
            out += sorted(q for q in p.rglob("*.py") if ".venv" not in q.parts and "site-packages" not in q.parts)
        if len(out) >= MAX_FILES:
            break
    return out[:MAX_FILES]


def aiohttp_warnings(files: Sequence[Path], cwd: Path, limit: int = 3) -> list[str]:
    """One warning per file (up to ``limit``) creating an aiohttp ``ClientSession`` without
    ``trust_env=True`` anywhere in the file."""
    out: list[str] = []
    budget = MAX_BYTES
    for f in files:
        try:
            data = f.read_bytes()[:budget]
        except OSError:
            continue
        budget -= len(data)
        if b"aiohttp" not in data or _TRUST.search(data):
            m = None
        else:
            m = _SESSION.search(data)
        if m is not None:
            line = data.count(b"\n", 0, m.start()) + 1
            try:
                shown = f.relative_to(cwd)
            except ValueError:
                shown = f
            out.append(f"{shown}:{line}: aiohttp ClientSession without trust_env=True ignores HTTPS_PROXY, so its "
                       "requests bypass the proxy; pass trust_env=True")
            if len(out) >= limit:
                break
        if budget <= 0:
            break
    return out


def bypass_warnings(argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None, *,
                    reverse: bool = False) -> list[str]:
    """Warnings about proxy-ignoring clients the command ``argv`` is known to use (see the
    module docstring); empty when none is spotted.  ``reverse``: ``--reverse`` upstreams are
    set up (the usual answer for Node clients, so Node is not warned about).  Never raises."""
    if not argv:
        return []
    cwd = cwd or Path.cwd()
    out: list[str] = []
    try:
        if _is_node(argv) and not reverse:
            v = node_version(env)
            w = node_warning(v) if v else None
            if w:
                out.append(w)
        if _is_python(argv):
            out += aiohttp_warnings(python_files(argv, cwd), cwd)
    except Exception:  # noqa: BLE001 - a hint must never stop a run
        return out
    return out
