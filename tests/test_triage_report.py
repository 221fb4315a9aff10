"""``spoolproxy report``: one run as a self-contained HTML page, checked as text and in
headless Chromium (no console error, no network request, not blank, readable without
scripts), with the fork / verify hooks rendered when present."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spoolproxy.cassettes import load, save
from spoolproxy.cassettes.model import Interaction, Request, Response
from spoolproxy.triage.report import render_report, write_report

from .browser import assert_not_blank, chromium_path, open_page, save_screenshot
from .test_proxy_support import cli_env

REPO = Path(__file__).resolve().parents[1]
CASSETTES = REPO / "cassettes"

needs_chromium = pytest.mark.skipif(chromium_path() is None,
                                    reason="Debian's chromium is not installed (apt-get install -y chromium)")


def test_report_shows_run_findings_with_evidence_and_timeline():
    html = render_report(load(CASSETTES / "refund.yaml"))
    assert "<script" not in html and "Content-Security-Policy" in html and "default-src 'none'" in html
    assert 'class="badge b-fail">FAIL' in html
    # the finding, and its evidence marked inside the cited field
    assert "duplicate_side_effect" in html and "field <code>response.body</code>" in html
    assert "<mark>504</mark>" in html
    # the timeline: model turns with tool calls, tool results, plain HTTP calls
    assert html.count('class="card step ') == len(load(CASSETTES / "refund.yaml").interactions)
    assert "tool call · <strong>create_refund</strong>" in html and "tool result · lookup_order" in html
    assert "shop.example" in html and "openai-compatible / shop-scripted-1" in html
    assert "248 / 41" in html  # tokens in / out
    assert "I&#39;ve refunded $12.99" in html  # the final answer, escaped
    assert 'id="parent"' not in html and 'id="verify"' not in html  # no fork, no verify results


def test_report_is_redacted_and_escapes_recorded_text(tmp_path):
    key = "sk-proj-" + "k" * 40
    cas = load(CASSETTES / "order-status.yaml")
    cas.interactions.append(Interaction(
        request=Request(method="GET", uri="http://tools.example/echo", headers={}),
        response=Response(status=200, headers={"content-type": ["text/html"]},
                          body=f'<img src="http://evil.example/x.png"><script>alert(1)</script> {key}'.encode())))
    path = tmp_path / "run.yaml"
    save(cas, path, )
    out = write_report(path, tmp_path / "run.html")
    html = out.read_text()
    assert key not in html and "REDACTED-" in html
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '<img src="http://evil' not in html


def _fork(tmp_path: Path) -> Path:
    """A run forked from refund.yaml (the fix loop's metadata) with verify results beside it."""
    shutil.copy(CASSETTES / "refund.yaml", tmp_path / "refund.yaml")
    fork = load(CASSETTES / "refund.pinned.yaml")
    fork.meta.extra.update(forked_from="refund.yaml", fork_at=3, patches=["system-append: never retry a refund"])
    save(fork, tmp_path / "refund.fork.yaml")
    (tmp_path / "refund.fork.verify.json").write_text(json.dumps({
        "verdict": "VERIFIED", "summary": "5/5 patched trials pass, 0/5 controls", "k": 5,
        "trials": [{"arm": "patched", "n": i, "outcome": "pass"} for i in range(3)]}))
    return tmp_path / "refund.fork.yaml"


def test_report_renders_parent_diff_and_verify_results(tmp_path):
    html = write_report(_fork(tmp_path), tmp_path / "fork.html").read_text()
    assert 'id="parent"' in html and "forked from <code>" in html and "live from interaction 3" in html
    assert "system-append: never retry a refund" in html
    assert 'b-fail">fail</span> → <span class="badge b-pass">pass' in html
    assert 'fixed: <span class="badge b-pass">duplicate_side_effect' in html
    assert "only in parent" in html or "changed" in html
    assert 'id="verify"' in html and "VERIFIED" in html and "5/5 patched trials pass" in html
    assert html.count("<td>patched</td>") == 3
    # a parent that is gone is said, not a crash
    (tmp_path / "refund.yaml").unlink()
    html = write_report(tmp_path / "refund.fork.yaml", tmp_path / "fork2.html").read_text()
    assert "parent run unreadable" in html


def test_cli_report_default_output_and_bad_input(tmp_path):
    shutil.copy(CASSETTES / "refund.yaml", tmp_path / "refund.yaml")
    env = cli_env(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "spoolproxy", "report", "refund.yaml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "wrote refund.html" and (tmp_path / "refund.html").stat().st_size > 10_000
    (tmp_path / "bad.yaml").write_text("interactions: [oops\n")
    bad = subprocess.run([sys.executable, "-m", "spoolproxy", "report", "bad.yaml", "-o", "x.html"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("spoolproxy: error: bad.yaml") and "Traceback" not in bad.stderr
    assert not (tmp_path / "x.html").exists()


@needs_chromium
def test_report_in_chromium(tmp_path):
    page = write_report(_fork(tmp_path), tmp_path / "fork.html")
    seen = open_page(page.as_uri())
    save_screenshot("report.png", seen.full_png)
    assert seen.errors == [] and seen.requests == []
    assert_not_blank(seen.png)
    assert seen.title == "refund.fork.yaml · spoolproxy report"
    for text in ("Findings", "Timeline", "Diff to the parent run", "Verify", "create_refund"):
        assert text in seen.text
    # scripts disabled: the same page, the same text
    plain = open_page(page.as_uri(), scripts=False)
    assert plain.errors == [] and plain.requests == [] and plain.text == seen.text
    assert_not_blank(plain.png)
