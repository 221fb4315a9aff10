"""Facts about the machine and the software under test, for the results header."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or platform.processor())."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def ram_gib() -> float:
    """Total RAM in GiB from /proc/meminfo (0 when unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return 0.0


def load() -> str:
    """The 1/5/15-minute load averages as text."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def machine() -> dict:
    """CPU, cores, RAM, OS and the load average now."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "ram_gib": ram_gib(),
            "os": f"{platform.system()} {platform.release()}", "load_start": load(), "load_end": None}


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def git_commit() -> str:
    """HEAD of the work tree, with ``+dirty`` when bench-relevant files differ."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "spoolproxy", "bench"], cwd=REPO,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions() -> dict:
    """Python and the packages whose speed the benchmarks compare."""
    import yaml

    return {
        "Python": platform.python_version(),
        "spoolproxy": f"{_version('spoolproxy')} ({git_commit()})",
        "mitmproxy": _version("mitmproxy"),
        "vcrpy": _version("vcrpy"),
        "httpx": _version("httpx"),
        "PyYAML": f"{_version('PyYAML')} (libyaml {'yes' if yaml.__with_libyaml__ else 'no'})",
        "pydantic": _version("pydantic"),
    }
