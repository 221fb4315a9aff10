"""Output paths that cannot be written: every command says so in one line
(``spoolproxy: error: cannot write PATH (reason); choose a writable path``, exit 2) before
it does any work, never a traceback; ``playback --diff-dir`` that cannot be written gets one
warning line naming the directory and playback goes on.

An unwritable path is built so that it fails even as root: a path below a regular file
(``blocker/x``), and ``/proc/x`` where /proc exists (a directory that accepts no new files).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spoolproxy.cassettes.storage import atomic_write
from spoolproxy.errors import OutputError

REPO = Path(__file__).resolve().parents[1]


def spool(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("outputs")
    (root / "spoolproxy.toml").write_text("")
    shutil.copytree(REPO / "cassettes", root / "cassettes")
    (root / "blocker").write_text("a regular file, so nothing can be created below it\n")
    r = spool("export", "cassettes/refund.yaml", "--format", "otel", "--capture-content", "-o", "refund.otlp.json",
              cwd=root)
    assert r.returncode == 0, r.stderr
    return root


def _one_error_line(r: subprocess.CompletedProcess, path: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    [line] = r.stderr.strip().splitlines()[-1:]
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("spoolproxy: error:")]
    assert errors == [line], r.stderr
    assert f"cannot write {path} (" in line and line.endswith("; choose a writable path"), line
    return line


#: (command line with {out} for the unwritable path, suffix of {out}); each fails before any work
COMMANDS = [
    (["report", "cassettes/refund.yaml", "-o", "{out}"], "r.html"),
    (["dashboard", "cassettes", "-o", "{out}"], "d.html"),
    (["export", "cassettes/refund.yaml", "-o", "{out}"], "x.yaml"),
    (["export", "cassettes/refund.yaml", "--format", "otel", "-o", "{out}"], "x.json"),
    (["import", "refund.otlp.json", "-o", "{out}"], "imported"),
    (["verify", "cassettes/refund.yaml", "--system-append", "x", "-k", "1", "--out", "{out}"], "vv"),
    (["fork", "cassettes/refund.yaml", "--system-append", "x", "-o", "{out}", "--", "true"], "f.yaml"),
    (["record", "-c", "{out}", "--", "true"], "c.yaml"),
    (["playback", "-c", "cassettes/refund.yaml", "--report", "{out}", "--", "true"], "r.json"),
    (["export-test", "cassettes/refund.yaml", "--suite", "{out}"], "suite"),
]


@pytest.mark.parametrize("base", ["blocker", "/proc"])
@pytest.mark.parametrize("args, name", COMMANDS, ids=[" ".join(c[0][:1] + [c[1]]) for c in COMMANDS])
def test_unwritable_output_is_one_line_and_nothing_runs(project: Path, base: str, args: list[str], name: str) -> None:
    if base == "/proc" and not Path("/proc/self").exists():
        pytest.skip("no /proc on this system")
    out = f"{base}/{name}"
    r = spool(*(a.replace("{out}", out) for a in args), cwd=project)
    line = _one_error_line(r, out)
    assert "--cassette" not in line  # import/export have no --cassette option
    assert "playback via" not in r.stderr and "fork of" not in r.stderr  # refused before the proxy started
    assert not (project / "cassettes" / ".runs").exists()  # verify/fork ran no trial


def test_suite_outputs_at_a_directory_that_takes_no_files(project: Path) -> None:
    if not Path("/proc/self").exists():
        pytest.skip("no /proc on this system")
    r = spool("export-test", "cassettes/refund.yaml", "--confirm", "--suite", "spool", cwd=project)
    assert r.returncode == 0, r.stderr
    for args in (["--junit", "/proc/x.xml"], ["--baseline", "/proc/b.json", "--update-baseline"],
                 ["--markdown", "/proc/s.md"]):
        r = spool("test", "--suite", "spool", *args, cwd=project)
        line = _one_error_line(r, args[1])
        assert line.startswith(f"spoolproxy: error: {args[-1] if args[-1].startswith('--') else args[0]}: "), line
        assert "/proc does not accept new files" in line


#: an agent whose one request (a refund for another order) diverges from the recorded one,
#: which was answered 504
AGENT = ("import json, urllib.error, urllib.request\n"
         "req = urllib.request.Request('http://shop.example/refunds', data=json.dumps({'order_id': 'ORD-9'}).encode(), "
         "headers={'content-type': 'application/json'})\n"
         "try:\n    print(urllib.request.urlopen(req).status)\n"
         "except urllib.error.HTTPError as exc:\n    print(exc.code)\n")


def test_playback_diff_dir_that_cannot_be_made_is_one_warning_and_playback_goes_on(project: Path) -> None:
    r = spool("playback", "-c", "cassettes/refund.yaml", "--diff-dir", "blocker/diffs", "--", sys.executable, "-c",
              AGENT, cwd=project)
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if "--diff-dir" in ln]
    assert warnings == [warnings[0]] and warnings[0].startswith("spoolproxy: warning: --diff-dir blocker/diffs: "), \
        r.stderr
    assert "cannot write there" in warnings[0] and "Traceback" not in r.stderr
    assert "served with divergence 1" in r.stderr  # the divergence is still served and explained in the report


def test_playback_diff_dir_files_that_fail_later_are_reported_after_the_run(project: Path, tmp_path: Path) -> None:
    diffs = tmp_path / "diffs"
    (diffs / "00001-recorded.json").mkdir(parents=True)  # a directory where the first body file goes
    r = spool("playback", "-c", "cassettes/refund.yaml", "--diff-dir", str(diffs), "--", sys.executable, "-c", AGENT,
              cwd=project)
    assert r.returncode == 0, r.stderr
    [warning] = [ln for ln in r.stderr.splitlines() if "--diff-dir" in ln]
    assert warning.startswith(f"spoolproxy: warning: --diff-dir {diffs}: some difference files could not be written")
    assert r.stderr.index("served with divergence 1") < r.stderr.index(warning)


def test_playback_diff_dir_that_works_writes_the_files(project: Path, tmp_path: Path) -> None:
    diffs = tmp_path / "new" / "diffs"
    r = spool("playback", "-c", "cassettes/refund.yaml", "--diff-dir", str(diffs), "--", sys.executable, "-c", AGENT,
              cwd=project)
    assert r.returncode == 0 and "--diff-dir" not in r.stderr, r.stderr
    assert sorted(p.name for p in diffs.iterdir()) == ["00001-actual.json", "00001-diff.json", "00001-recorded.json"]


def test_atomic_write_raises_output_error_and_leaves_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    with pytest.raises(OutputError) as err:
        atomic_write(blocker / "sub" / "x.json", "{}")
    assert err.value.exit_code == 2 and str(err.value).startswith(f"cannot write {blocker / 'sub' / 'x.json'} (")
    target = tmp_path / "made" / "below" / "x.json"  # missing parents are created
    atomic_write(target, "{}\n")
    assert target.read_text() == "{}\n" and [p.name for p in target.parent.iterdir()] == ["x.json"]
