"""A file named on the command line must be a readable cassette: empty, truncated or garbage
is one ``spoolproxy: error:`` line and exit 2 in every verb (a CI gate such as ``detect
empty.yaml --fail-on error`` must not pass on it).  Files found by walking a directory may
be skipped with a warning, and spoolproxy's own side files (``*.verify.json``...) are
skipped silently there."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def spool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("named")
    (root / "spoolproxy.toml").write_text("")
    shutil.copytree(REPO / "cassettes", root / "cassettes")
    good = (root / "cassettes" / "refund.yaml").read_bytes()
    (root / "empty.yaml").write_bytes(b"")
    (root / "trunc.yaml").write_bytes(good[:700])
    (root / "garbage.yaml").write_bytes(bytes(range(256)) * 2)
    runs = root / "runs"  # a directory with the same bad files, a good run and verify's side file
    runs.mkdir()
    for name in ("empty.yaml", "trunc.yaml"):
        shutil.copy(root / name, runs / name)
    (runs / "refund.yaml").write_bytes(good)
    (runs / "refund.verify.json").write_text('{"verdict": "VERIFIED", "summary": "VERIFIED: ok"}\n')
    (runs / "refund.diagnosis.json").write_text('{"spoolproxy_judge": 1, "entries": []}\n')
    return root


PROBLEM = {"empty": "not a cassette: the file is empty (0 bytes)",
           "trunc": "interaction 0: has neither a response nor an error",
           "garbage": "not a YAML cassette"}

VERBS = [
    ["detect", "{f}", "--fail-on", "error"],
    ["detect", "{f}", "--json"],
    ["check", "{f}", "--command", "true"],
    ["cluster", "{f}", "cassettes/refund.yaml"],
    ["cluster", "{f}", "--parquet", "rows.parquet"],  # the scale engine
    ["dashboard", "{f}", "cassettes/refund.yaml", "-o", "dash/index.html"],
    ["report", "{f}", "-o", "r.html"],
    ["show", "{f}"],
    ["export", "{f}", "-o", "x.yaml"],
    ["scan", "{f}"],
]


@pytest.mark.parametrize("bad", sorted(PROBLEM))
@pytest.mark.parametrize("verb", VERBS, ids=[" ".join(v[:1] + v[2:3]) for v in VERBS])
def test_a_named_file_that_is_not_a_readable_cassette_is_one_error_and_exit_2(project: Path, verb, bad) -> None:
    r = spool(*(a.replace("{f}", f"{bad}.yaml") for a in verb), cwd=project)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("spoolproxy: error:")]
    assert len(errors) == 1 and errors[0].startswith(f"spoolproxy: error: {bad}.yaml") and PROBLEM[bad] in errors[0], \
        r.stderr
    assert "warning" not in r.stderr


def test_detect_empty_file_does_not_pass_a_ci_gate_but_skip_bad_skips_it(project: Path) -> None:
    r = spool("detect", "empty.yaml", "cassettes/order-status.yaml", "--fail-on", "error", cwd=project)
    assert r.returncode == 2 and "1 corrupt" in r.stdout
    assert r.stderr.strip() == ("spoolproxy: error: empty.yaml: not a cassette: the file is empty (0 bytes); "
                                "fix or remove it, or pass --skip-bad")
    r = spool("detect", "empty.yaml", "cassettes/order-status.yaml", "--fail-on", "error", "--skip-bad", cwd=project)
    assert r.returncode == 0 and r.stderr.startswith("spoolproxy: warning: skipped empty.yaml: not a cassette"), r.stderr


def test_two_bad_named_files_get_one_line_each_and_a_count(project: Path) -> None:
    r = spool("detect", "trunc.yaml", "garbage.yaml", cwd=project)
    assert r.returncode == 2
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("spoolproxy: error:")]
    assert [e.split(":")[2].strip() for e in errors[:2]] == ["trunc.yaml", "garbage.yaml"]
    assert errors[2] == "spoolproxy: error: 2 corrupt cassettes (listed above); fix or remove them, or pass --skip-bad"


@pytest.mark.parametrize("verb", [["detect"], ["cluster"], ["dashboard", "-o", "dash2/index.html"]],
                         ids=["detect", "cluster", "dashboard"])
def test_in_a_directory_bad_files_warn_and_side_files_are_silent(project: Path, verb) -> None:
    r = spool(verb[0], "runs", *verb[1:], cwd=project)
    warned = sorted(ln.split()[3].rstrip(":") for ln in r.stderr.splitlines() if ln.startswith("spoolproxy: warning:"))
    assert warned == ["runs/empty.yaml"] + (["runs/trunc.yaml"] if verb[0] != "detect" else []), r.stderr
    assert "verify.json" not in r.stderr and "diagnosis.json" not in r.stderr
    # detect: a truncated cassette in a directory is still corrupt (exit 2); triage reads what it can
    assert r.returncode == (2 if verb[0] == "detect" else 0), r.stderr
