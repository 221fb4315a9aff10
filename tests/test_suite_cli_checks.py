"""`spoolproxy test` / `export-test` usage checks that need no proxy run: unwritable report
paths fail before any case runs, bad --cmd quoting, re-exporting a pinned case, the suite's
.gitignore, and runs where nothing was confirmed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from spoolproxy.suite.files import load_case

REPO = Path(__file__).resolve().parents[1]


def spoolproxy(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "spoolproxy.toml").write_text("")
    shutil.copytree(REPO / "cassettes", tmp_path / "cassettes")
    return tmp_path


def _one_line_error(r: subprocess.CompletedProcess, text: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.startswith("spoolproxy: error: "), r.stderr
    assert text in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("args, flag", [
    (["--junit", "/proc/nope/x.xml"], "--junit: cannot write /proc/nope/x.xml ("),
    (["--junit", "/proc/x.xml"], "--junit: cannot write /proc/x.xml (/proc does not accept new files)"),
    (["--markdown", "/proc/nope/s.md"], "--markdown: cannot write /proc/nope/s.md ("),
    (["--baseline", "/proc/nope/b.json", "--update-baseline"], "--update-baseline: cannot write /proc/nope/b.json ("),
    (["--baseline", "/proc/b.json", "--update-baseline"], "--update-baseline: cannot write /proc/b.json ("),
    (["--markdown", "ro/s.md"], "--markdown: cannot write ro/s.md ("),
])
def test_unwritable_report_paths_fail_before_any_case_runs(project: Path, args: list[str], flag: str) -> None:
    r = spoolproxy("export-test", "cassettes/refund.yaml", "--confirm", cwd=project)
    assert r.returncode == 0, r.stderr
    (project / "ro").mkdir(mode=0o555)
    if "ro/" in flag and __import__("os").access(project / "ro", __import__("os").W_OK):
        pytest.skip("running as root: a read-only directory is still writable")
    r = spoolproxy("test", *args, cwd=project)
    _one_line_error(r, flag)
    assert r.stderr.rstrip().endswith("; choose a writable path"), r.stderr
    assert not (project / "spool" / ".runs").exists()  # no case ran


def test_export_test_bad_cmd_quoting_is_a_usage_error(project: Path) -> None:
    r = spoolproxy("export-test", "cassettes/refund.yaml", "--cmd", "python agent.py 'unterminated", cwd=project)
    _one_line_error(r, "--cmd")
    assert "check the quotes" in r.stderr


def test_export_after_pin_recognises_the_case_and_force_overwrites_it(project: Path) -> None:
    assert spoolproxy("export-test", "cassettes/refund.yaml", "--confirm", cwd=project).returncode == 0
    suite = project / "spool"
    case = load_case(suite / "refund.yaml")
    pinned = case.model_copy(update={"cassette": "cassettes/refund.pinned.yaml",
                                     "failing_cassette": "cassettes/refund.yaml"})  # what `test --pin` writes
    from spoolproxy.suite.files import save_case

    save_case(pinned, suite / "refund.yaml")
    r = spoolproxy("export-test", "cassettes/refund.yaml", cwd=project)
    assert r.returncode == 0 and "already exported as spool/refund.yaml" in r.stdout, r.stdout + r.stderr
    assert sorted(p.name for p in suite.glob("*.yaml")) == ["refund.yaml"]
    r = spoolproxy("export-test", "cassettes/refund.yaml", "--force", "--confirm", cwd=project)
    assert r.returncode == 0 and "wrote spool/refund.yaml" in r.stdout, r.stdout + r.stderr
    assert sorted(p.name for p in suite.glob("*.yaml")) == ["refund.yaml"]
    assert load_case(suite / "refund.yaml").cassette == "cassettes/refund.yaml"


def test_new_suite_directory_ignores_its_runs(project: Path) -> None:
    r = spoolproxy("export-test", "cassettes/refund.yaml", "--suite", "tests/spool", cwd=project)
    assert r.returncode == 0, r.stderr
    assert ".runs/" in (project / "tests" / "spool" / ".gitignore").read_text().splitlines()
    git = shutil.which("git")
    if git:  # the ignore rule as git reads it
        subprocess.run([git, "init", "-q"], cwd=project, check=True)
        (project / "tests" / "spool" / ".runs" / "refund").mkdir(parents=True)
        (project / "tests" / "spool" / ".runs" / "refund" / "x.yaml").write_text("x")
        r = subprocess.run([git, "check-ignore", "tests/spool/.runs/refund/x.yaml"], cwd=project,
                           capture_output=True, text=True)
        assert r.returncode == 0, r


def test_nothing_ran_says_why(project: Path) -> None:
    suite = project / "spool"
    suite.mkdir()
    r = spoolproxy("test", cwd=project)
    _one_line_error(r, "holds no case file")
    assert spoolproxy("export-test", "cassettes/refund.yaml", "cassettes/stock-check.yaml", cwd=project).returncode == 0
    assert spoolproxy("annotate", "stock-check", "--status", "rejected", cwd=project).returncode == 0
    r = spoolproxy("test", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "nothing ran: no case is confirmed (1 pending, 1 rejected)" in r.stdout
    assert "spoolproxy annotate NAME --status confirmed" in r.stdout
    data = json.loads(spoolproxy("test", "--json", cwd=project).stdout)
    assert data["note"].startswith("nothing ran") and data["exit_code"] == 0
