"""Run metadata: ``record --tag`` / ``SPOOLPROXY_TAGS`` and the git commit, through the real CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spoolproxy.cassettes import load
from spoolproxy.errors import UsageError
from spoolproxy.triage.tags import GIT_KEY, TAGS_KEY, env_tags, matches, parse_tags

from .test_proxy_support import run_cli, spool_home  # noqa: F401

pytestmark = pytest.mark.usefixtures("spool_home")


def test_parse_tags_and_filters():
    assert parse_tags(["agent=refund-bot", "version=1.4.0", "version= 1.5.0 "]) == {"agent": "refund-bot",
                                                                                   "version": "1.5.0"}
    assert env_tags({"SPOOLPROXY_TAGS": "team=payments, version=2 ,"}) == {"team": "payments", "version": "2"}
    for bad in ("noequals", "=x", "9key=x", "k y=x"):
        with pytest.raises(UsageError, match="KEY=VALUE"):
            parse_tags([bad])
    tags = {"agent": "refund-bot", "version": "1.4.0"}
    assert matches(tags, {}) and matches(tags, {"version": "1.4.*", "agent": "refund-*"})
    assert not matches(tags, {"version": "1.5*"}) and not matches(tags, {"team": "*"})


def test_record_stores_tags_env_and_git_commit(tmp_path, spool_home):
    project = tmp_path / "proj"
    project.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / "agent.py").write_text("print('hi')\n")
    subprocess.run(["git", "add", "agent.py"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], cwd=project, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True).stdout.strip()
    key = "sk-proj-" + "t" * 40
    path = project / "cassettes" / "run.yaml"
    proc = run_cli(["record", "-c", str(path), "--tag", "agent=refund-bot", "--tag", "version=1.4.0",
                    "--tag", f"note=key {key}", "--", sys.executable, "agent.py"], spool_home, cwd=project,
                   SPOOLPROXY_TAGS="team=payments,version=0.9")
    assert proc.returncode == 0, proc.stderr
    meta = load(path).meta
    tags = meta.extra[TAGS_KEY]
    assert tags["agent"] == "refund-bot" and tags["team"] == "payments"
    assert tags["version"] == "1.4.0"  # --tag wins over SPOOLPROXY_TAGS
    assert key not in path.read_text() and tags["note"].startswith("key REDACTED-")
    assert meta.extra[GIT_KEY] == {"commit": head, "dirty": False}
    assert "tags:" in path.read_text() and f"commit: {head}" in path.read_text()


def test_record_outside_git_has_no_commit_and_bad_tag_is_one_line(tmp_path, spool_home):
    path = tmp_path / "run.yaml"
    proc = run_cli(["record", "-c", str(path), "--tag", "v=1", "--", sys.executable, "-c", "pass"], spool_home,
                   cwd=tmp_path, GIT_CEILING_DIRECTORIES=str(tmp_path.parent))
    assert proc.returncode == 0, proc.stderr
    assert GIT_KEY not in load(path).meta.extra and load(path).meta.extra[TAGS_KEY] == {"v": "1"}
    bad = run_cli(["record", "-c", str(tmp_path / "b.yaml"), "--tag", "version", "--", sys.executable, "-c", "pass"],
                  spool_home, cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [
        "spoolproxy: error: --tag 'version': expected KEY=VALUE with a KEY of letters, digits, '_', '.', '-' "
        "(e.g. --tag version=1.4.0)"]
    assert not (tmp_path / "b.yaml").exists()
    env = run_cli(["record", "-c", str(tmp_path / "c.yaml"), "--", sys.executable, "-c", "pass"], spool_home,
                  cwd=tmp_path, SPOOLPROXY_TAGS="oops")
    assert env.returncode == 2 and env.stderr.startswith("spoolproxy: error: SPOOLPROXY_TAGS 'oops'")
