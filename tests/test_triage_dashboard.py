"""``spoolproxy dashboard``: tagged runs of two agent versions over several days, a suite
whose latest outcomes come from a real ``spoolproxy test`` run, one command -> a page (and
one report per run) that a person reads in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from spoolproxy.cassettes import load, save
from spoolproxy.suite.results import load_results

from .browser import assert_not_blank, chromium_path, open_page, save_screenshot
from .test_proxy_support import cli_env

REPO = Path(__file__).resolve().parents[1]

#: cassette -> (version tag, days before today)
PLAN = {"refund": ("1.4.0", 6), "lost-order": ("1.4.0", 5), "stock-check": ("1.4.0", 5), "order-status": ("1.4.0", 4),
        "refund.pinned": ("1.5.0", 2), "lost-order.pinned": ("1.5.0", 1), "stock-check.pinned": ("1.5.0", 1)}


def spoolproxy(project: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=project, env=cli_env(project),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The example project, its cassettes tagged agent=support-bot and version 1.4.0 (the
    failing runs) or 1.5.0 (the fixed ones) on different days, plus the example suite
    with one more case that replays the v1 agent (still failing), run once for real."""
    root = tmp_path_factory.mktemp("dash")
    shutil.copytree(REPO / "examples", root / "examples")
    (root / "pyproject.toml").write_text("[project]\nname = 'shop-agent'\n")
    shutil.copytree(REPO / "cassettes", root / "cassettes")
    now = datetime.now(timezone.utc).replace(microsecond=0)
    for name, (version, ago) in PLAN.items():
        cas = load(REPO / "cassettes" / f"{name}.yaml")
        cas.meta.recorded_at = now - timedelta(days=ago, hours=len(name))
        cas.meta.extra["tags"] = {"agent": "support-bot", "version": version}
        save(cas, root / "cassettes" / f"{name}.yaml")
    case = yaml.safe_load((root / "examples" / "spool" / "refund.yaml").read_text())
    case.update(name="refund-v1", cassette="cassettes/refund.yaml")
    case.pop("failing_cassette")
    case["command"]["argv"] = ["python", "examples/agent_v1.py", *case["command"]["argv"][2:]]
    (root / "examples" / "spool" / "refund-v1.yaml").write_text(yaml.safe_dump(case, sort_keys=False))
    proc = spoolproxy(root, "test", "--suite", "examples/spool")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root


def test_spoolproxy_test_keeps_the_latest_outcomes(project):
    doc = load_results(project / "examples" / "spool")
    outcomes = {name: d["outcome"] for name, d in doc["cases"].items()}
    assert outcomes == {"lost-order": "passes", "refund": "passes", "stock-check": "passes",
                        "refund-v1": "still_fails"}
    art = project / "examples" / "spool" / doc["cases"]["refund"]["artifact"]
    assert art.is_file() and load(art).meta.recorder == "spoolproxy test" and load(art).meta.recorded_at


def test_dashboard_one_command_from_runs_and_suite(project):
    out = project / "site" / "index.html"
    proc = spoolproxy(project, "dashboard", "cassettes", "examples/spool", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout and "2 versions" in proc.stdout and "4 test outcomes" in proc.stdout
    html = out.read_text()
    assert "<script" not in html and "default-src 'none'" in html
    assert html.count("<svg") == 4  # pass rate over time, runs per day, failure kinds, top clusters
    rows = re.findall(r'b-info">(1\.[45]\.0)</span></td><td class="num">(\d+)</td><td class="num">(\d+)</td>\s*'
                      r'<td class="num">(\d+)%', html)
    assert sorted(rows) == [("1.4.0", "4", "3", "25"), ("1.5.0", "3", "0", "100")]
    # every run and every test artifact links to its own report, which exists
    links = set(re.findall(r'href="(runs/[^"]+\.html)"', html))
    assert len(links) >= len(PLAN) + 4 and all((out.parent / link).is_file() for link in links)
    assert 'b-still_fails">still_fails' in html and "artifact run</a>" in html
    report = (out.parent / sorted(links)[0]).read_text()
    assert 'href="../index.html">back to the dashboard' in report
    # the suite's cases join the clusters: their status is shown
    assert "case confirmed" in html


def test_dashboard_filters_by_tag(project):
    out = project / "v15" / "index.html"
    proc = spoolproxy(project, "dashboard", "cassettes", "--tag", "version=1.5.*", "-o", str(out), "--no-run-reports")
    assert proc.returncode == 0, proc.stderr
    assert "3 runs (0 failing) in 1 version," in proc.stdout
    assert not (out.parent / "runs").exists()
    assert "No failing run." in out.read_text()


@pytest.mark.skipif(chromium_path() is None, reason="Debian's chromium is not installed (apt-get install -y chromium)")
def test_dashboard_in_chromium(project):
    out = project / "site" / "index.html"
    if not out.exists():
        assert spoolproxy(project, "dashboard", "cassettes", "examples/spool", "-o", str(out)).returncode == 0
    seen = open_page(out.as_uri())
    save_screenshot("dashboard.png", seen.full_png)
    assert seen.errors == [] and seen.requests == []
    assert_not_blank(seen.png)
    for text in ("Pass rate per version", "Top failure clusters", "Latest spoolproxy test outcomes", "still_fails",
                 "1.5.0", "100%"):
        assert text in seen.text
    link = json.dumps(sorted(re.findall(r'href="(runs/[^"]+\.html)"', out.read_text()))[0])[1:-1]
    run = open_page((out.parent / link).as_uri())
    save_screenshot("dashboard-run.png", run.full_png)
    assert run.errors == [] and run.requests == []
    assert_not_blank(run.png)
