"""Smoke test of the benchmark harness: ``python -m bench --quick`` on tiny sizes produces
results.md/results.json with every declared row.  Numbers are not checked (no timing
assertions): a row may be measured or say ``not available: <why>``, but it must be there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(300)
def test_quick_run_writes_every_row(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = (tmp_path / "results-quick.md").read_text()
    doc = json.loads((tmp_path / "results-quick.json").read_text())

    sys.path.insert(0, str(REPO))
    from bench.__main__ import row_ids

    expected = row_ids()
    got = [r["id"] for r in doc["rows"]]
    assert got == expected
    for row in doc["rows"]:
        assert f"`{row['id']}`" in md
        if row["value"] is None:
            assert row["status"].startswith("not available: "), row
        else:
            assert row["value"]["n"] >= 1 and row["value"]["median"] == row["value"]["median"], row
            assert row["status"] in ("", "met", "missed"), row
    header = doc["header"]
    for key in ("cpu", "cores", "ram_gib"):
        assert header["machine"][key]
    for key in ("Python", "mitmproxy", "vcrpy"):
        assert key in header["versions"]
    assert "python -m bench --quick" in header["command"]
    assert "Machine:" in md and "Versions:" in md and "Command:" in md
    # The harness itself works: the references need nothing from spoolproxy.
    by_id = {r["id"]: r for r in doc["rows"]}
    for rid in ("B1.json1k.direct.p50", "B1.json1k.mitmdump.p50", "B3.synth.raw", "B5.python",
                "B6.download.mitmdump_stream"):
        assert by_id[rid]["value"] is not None, by_id[rid]
