"""Literal square brackets (``[prices]``, a path such as ``runs/[a].yaml``) printed through
rich stay in the text: rich markup must not swallow them as style tags."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from spoolproxy.cassettes import save
from spoolproxy.cli.verify import render
from spoolproxy.fix.verify import Trial, Verification

from .test_detect_wire import cassette, chat_response, llm


def test_verify_names_the_prices_table_when_a_cost_is_unknown(capsys, tmp_path: Path) -> None:
    v = Verification(subject="refund", cassette="cassettes/refund.yaml", patches=["system prompt: append 'x'"], k=1,
                     at=0, control=False, started_at="2026-01-01T00:00:00+00:00", cost_unknown=True,
                     verdict="INCONCLUSIVE", reason="one trial is too few", out_dir=str(tmp_path / "[v]"),
                     trials=[Trial(arm="patched", n=1, outcome="passed", reason="ok", cassette="p.yaml")])
    render(v)
    out = " ".join(capsys.readouterr().out.split())
    assert "give them one in [prices])" in out
    assert f"trials: {tmp_path / '[v]'}/" in out  # a bracketed path is printed as it is


def test_diff_names_the_prices_table(tmp_path: Path) -> None:
    a, b = tmp_path / "[a].yaml", tmp_path / "b.yaml"
    save(cassette(llm([{"role": "user", "content": "hi"}], chat_response("Hello there."))), a)
    save(cassette(llm([{"role": "user", "content": "hi"}], chat_response("Hello again.", usage=(60, 12)))), b)
    r = subprocess.run([sys.executable, "-m", "spoolproxy", "diff", str(a), str(b)], capture_output=True, text=True,
                       timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert r.returncode in (0, 1), r.stderr
    out = " ".join(r.stdout.split())
    assert "(USD per 1M tokens; [prices] in spoolproxy.toml overrides)" in out, r.stdout
