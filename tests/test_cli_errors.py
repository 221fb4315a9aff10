"""Command-line usage errors are one ``spoolproxy: error:`` line with exit status 2."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "args, needle",
    [
        (["record", "--port", "abc"], "--port"),
        (["playback", "--match", "fuzzy", "-c", "x.yaml"], "fuzzy"),
        (["no-such-command"], "No such command"),
        (["annotate", "--status", "maybe"], "--status"),
        (["detect", "--fail-on", "sometimes", "."], "--fail-on"),
    ],
)
def test_usage_errors_are_one_line(args, needle):
    proc = subprocess.run([sys.executable, "-m", "spoolproxy", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spoolproxy: error:") and needle in lines[0], proc.stderr
    assert "--help" in lines[0] and "Traceback" not in proc.stderr
