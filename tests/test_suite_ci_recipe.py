"""The CI recipe in examples/ci: the workflow runs `spoolproxy test` and uploads the artifact
runs; the pre-commit hook entry runs `spoolproxy scan`, which refuses a planted key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from spoolproxy.cassettes import load, save

CI = Path(__file__).resolve().parents[1] / "examples" / "ci"
REPO = CI.parents[1]


def test_workflow_runs_the_suite_and_uploads_artifacts() -> None:
    wf = yaml.safe_load((CI / "regression.yml").read_text())
    steps = wf["jobs"]["spoolproxy-test"]["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "spoolproxy test --suite spool" in runs and "--junit spool-report.xml" in runs
    assert '--markdown "$GITHUB_STEP_SUMMARY"' in runs
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and "spool/.runs/" in upload["with"]["path"]


def test_pre_commit_entry_runs_scan_and_catches_a_key(tmp_path: Path) -> None:
    hooks = yaml.safe_load((CI / "pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "spoolproxy-scan")
    assert hook["entry"] == "spoolproxy scan" and hook["pass_filenames"] is True
    config = yaml.safe_load((CI / "pre-commit-config.yaml").read_text())
    assert config["repos"][0]["hooks"][0]["entry"] == "spoolproxy scan"
    clean = tmp_path / "cassettes" / "refund.yaml"
    clean.parent.mkdir()
    clean.write_bytes((REPO / "cassettes" / "refund.yaml").read_bytes())
    argv = [sys.executable, "-m", "spoolproxy", *hook["entry"].split()[1:]]
    assert subprocess.run([*argv, str(clean)], capture_output=True, text=True).returncode == 0
    cas = load(clean)
    cas.interactions[0].request.headers["authorization"] = ["Bearer sk-proj-" + "x" * 40]
    dirty = tmp_path / "cassettes" / "leaky.yaml"
    save(cas, dirty)  # save() does not redact: the caller does (here we plant the key on purpose)
    r = subprocess.run([*argv, str(dirty)], capture_output=True, text=True)
    assert r.returncode == 1 and "leaky.yaml: interaction 0" in r.stdout and "x" * 40 not in r.stdout


def test_example_suite_is_consistent() -> None:
    """examples/spool: the demo's pinned suite, runnable from the repository root
    (`spoolproxy test --suite examples/spool`); every case loads and names real files."""
    from spoolproxy.suite.files import iter_cases, load_case, project_root
    from spoolproxy.suite.model import Case

    suite = REPO / "examples" / "spool"
    assert project_root(suite) == REPO
    cases = [c for _p, c in iter_cases(suite)]
    assert len(cases) == 3 and all(isinstance(c, Case) and c.status == "confirmed" for c in cases)
    for case in cases:
        assert (REPO / case.cassette).is_file() and (REPO / case.failing_cassette).is_file()
        assert case.command.argv[:2] == ["python", "examples/agent_v2.py"] and case.signature
    assert load_case(suite / "refund.yaml").signature_kinds == ["duplicate_side_effect"]


def test_pre_commit_filter_takes_cassettes_not_suite_files() -> None:
    """The hook's `files:` regex (pre-commit applies it with re.search) takes cassette folders
    only: suite case files and baseline.json are not cassettes and must not reach `scan`."""
    import re

    hooks = yaml.safe_load((CI / "pre-commit-hooks.yaml").read_text())
    config = yaml.safe_load((CI / "pre-commit-config.yaml").read_text())
    for rx in (next(h for h in hooks if h["id"] == "spoolproxy-scan")["files"],
               config["repos"][0]["hooks"][0]["files"]):
        for path in ("cassettes/refund.yaml", "cassettes/refund.pinned.yaml", "tests/cassettes/test_x/t.yaml",
                     "svc/cassettes/run.json"):
            assert re.search(rx, path), (rx, path)
        for path in ("spool/refund.yaml", "spool/baseline.json", "examples/spool/stock-check.yaml",
                     "spool/.runs/refund/20260101T000000Z.yaml", "spoolproxy.toml", "cassettes/README.md"):
            assert not re.search(rx, path), (rx, path)


def test_workflow_writes_and_uploads_the_dashboard(tmp_path: Path) -> None:
    """The dashboard step's command, run on the example suite, writes the page it uploads."""
    wf = yaml.safe_load((CI / "regression.yml").read_text())
    steps = wf["jobs"]["spoolproxy-test"]["steps"]
    dash = next(s for s in steps if s.get("name") == "spoolproxy dashboard")
    upload = next(s for s in steps if s.get("name") == "Upload the dashboard")
    assert dash["if"] == upload["if"] == "always()" and upload["with"]["path"] == "spoolproxy-dashboard/"
    argv = dash["run"].split()
    assert argv[:3] == ["spoolproxy", "dashboard", "spool"]
    argv[argv.index("-o") + 1] = str(tmp_path / "spoolproxy-dashboard" / "index.html")
    argv[2] = str(REPO / "examples" / "spool")
    r = subprocess.run([sys.executable, "-m", "spoolproxy", *argv[1:]], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "spoolproxy-dashboard" / "index.html").stat().st_size > 5000
