"""The regression-from-trace example (``examples/trace_fix.py``, ``make demo-trace``) as a
test: a silent tool bug recorded, proven with a tool-result override, fixed and rerun live
through a route to the fixed service, saved as a test and gated on a pass rate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(400)
def test_trace_fix_example_runs_green(tmp_path: Path) -> None:
    work = tmp_path / "trace"
    r = subprocess.run([sys.executable, str(REPO / "examples" / "trace_fix.py"), "--workdir", str(work)],
                       capture_output=True, text=True, timeout=380)
    out = r.stdout
    assert r.returncode == 0, out[-3000:] + r.stderr[-3000:]
    assert "Traceback" not in out + r.stderr
    for cmd in ("$ spoolproxy record --cassette cassettes/ord-1999.yaml", "$ spoolproxy detect cassettes/ord-1999.yaml",
                "$ spoolproxy fork cassettes/ord-1999.yaml --tool-result 'GET shop.example/orders*=404:fixes/not-found.json'",
                "$ spoolproxy diff cassettes/ord-1999.what-if.yaml", "--route shop.example=http://127.0.0.1:",
                "$ spoolproxy export-test cassettes/ord-1999.fixed.yaml --passing --confirm",
                "$ spoolproxy test --repeat 3 --fail-under 1.0", "--repeat 5 --fail-under 0.8"):
        assert cmd in out, cmd
    assert "Your order ORD-1999 (Blue kettle (KET-BLU)) is shipped" in out  # the silent bug
    assert "pass cassettes/ord-1999.yaml (3 interactions, 0 findings" in out  # no detector sees it
    assert "$.status: B 200, A 404" in out  # the first divergence is the tool's answer
    assert "pass rate: 3/3 runs (100%" in out and "pass rate: 4/5 runs (80%" in out
    case = yaml.safe_load((work / "spool" / "ord-1999.fixed.yaml").read_text())
    assert case["failing_cassette"] == "cassettes/ord-1999.yaml"
    assert case["assertions"]["final_answer_contains"] == ["couldn't find order ORD-1999"]
