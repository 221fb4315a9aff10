"""``make demo`` as a test: the whole loop runs offline and ends green, deterministically.

The demo's fresh recordings must equal the committed example cassettes in ``cassettes/``
(same requests, same responses), so the committed files are what the demo produces.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from spoolproxy.cassettes import load

REPO = Path(__file__).resolve().parents[1]


def _exchange(path: Path) -> list[tuple]:
    cas = load(path)
    return [(i.request.method, i.request.uri, i.request.body, i.response.status if i.response else None,
             i.response.body if i.response else None) for i in cas.interactions]


@pytest.mark.timeout(600)
def test_demo_runs_the_whole_loop_offline(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    r = subprocess.run([sys.executable, str(REPO / "examples" / "demo.py"), "--workdir", str(work)],
                       capture_output=True, text=True, timeout=580)
    out = r.stdout
    assert r.returncode == 0, out[-3000:] + r.stderr[-3000:]
    # every step prints the command a user types
    for cmd in ("$ spoolproxy record --cassette cassettes/refund.yaml", "$ spoolproxy detect cassettes/",
                "$ spoolproxy export-test cassettes/ --confirm", "$ spoolproxy test --junit v1.xml",
                "$ spoolproxy test --live model.example", "$ spoolproxy test --update-baseline",
                "$ spoolproxy fork cassettes/stock-check.yaml --patch fixes/html-rule.yaml --dry-run",
                "$ spoolproxy diff cassettes/stock-check.fork.yaml", "$ spoolproxy verify stock-check --patch",
                "$ spoolproxy test --case stock-check", "$ spoolproxy dashboard cassettes/ spool/"):
        assert cmd in out, cmd
    # the prompt fix: the fork passes, the diff shows why, verify gives a verdict and pins a run
    assert "first divergence: the requests differ" in out and "+A tool result that is an HTML page" in out
    assert "VERIFIED: patched 95% lower bound 57% > control upper bound 43%; 1 past good run still passes" in out
    assert "pinned: cassettes/stock-check.pinned.yaml" in out
    assert "still_fails" in out and "pinned refund:" in out and "demo complete" in out
    assert "HTTP errors: 504 x1" in out  # the record summary of the refund run
    assert "Traceback" not in out + r.stderr
    page = (work / "dashboard" / "index.html").read_text()  # v1 recorded, v2 tested: one pass-rate row each
    assert ">v1<" in page and ">v2<" in page, "the dashboard lists both versions"
    # deterministic: the recordings equal the committed cassettes
    for name in ("order-status", "stock-check", "refund", "lost-order"):
        assert _exchange(work / "cassettes" / f"{name}.yaml") == _exchange(REPO / "cassettes" / f"{name}.yaml"), name
    for name in ("stock-check", "refund", "lost-order"):
        pinned = f"{name}.pinned.yaml"
        assert _exchange(work / "cassettes" / pinned) == _exchange(REPO / "cassettes" / pinned), pinned
    assert (work / "spool" / "baseline.json").is_file()
