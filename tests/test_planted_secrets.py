"""Planted secrets: no shape, in no place a client can put it, reaches any write path.

One recording session and three replays cover every combination: N secret shapes (provider
keys, a JWT, passwords, webhook URLs, DSNs, a token known only from the environment; built
at run time) x every place a client puts them (credential and ordinary headers, named and
unnamed query parameters, the URL path, JSON at depth and JSON inside a JSON string, a URL's
userinfo in a body, named and unnamed form fields, Basic auth from a URL's userinfo, the
upstream's echo, the agent's stdout and stderr) x every write path (cassette, side body
files, the journal as it is mid-run, record's terminal lines, the artifact run, its playback
report and log, JUnit XML, Markdown, ``--json``, the terminal table, ``playback --report``
and playback's terminal report).  Zero raw, JSON-escaped or URL-encoded occurrences allowed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.planted import echo
from tests.planted.shapes import ENV_ONLY, build, forms

HERE = Path(__file__).resolve().parent
PLACEMENTS = ("credential header", "ordinary header", "credential query parameter", "ordinary query parameter",
              "URL path", "JSON at depth (token/secret/api_key)", "ordinary JSON field", "JSON inside a JSON string",
              "URL userinfo in a body", "credential form field", "ordinary form field", "Basic auth from URL userinfo",
              "echoed in the response", "printed to stdout", "printed to stderr")


def spoolproxy(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)


def own_lines(text: str) -> str:
    """spoolproxy's lines of a stream the recorded agent shares (its own lines start 'agent: ')."""
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith("agent: "))


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    shapes = build(seed=10)
    root = tmp_path_factory.mktemp("project")
    outside = tmp_path_factory.mktemp("outside")  # the agent's input and the journal copy: not a write path
    (root / "spoolproxy.toml").write_text("")
    shutil.copy(HERE / "planted" / "agent.py", root / "agent.py")
    secrets_file = outside / "secrets.json"
    secrets_file.write_text(json.dumps({n: v for n, (v, _) in shapes.items() if n != "env-only-token"}))
    server = echo.start()
    env = {**os.environ, "PLANTED_SECRETS_FILE": str(secrets_file), ENV_ONLY: shapes["env-only-token"][0],
           "PLANTED_UPSTREAM": f"http://127.0.0.1:{server.server_address[1]}", "PYTHONPATH": str(HERE.parent)}
    try:
        rec = spoolproxy("record", "--max-body-size", "4k", "-c", "cassettes/run.yaml", "--", sys.executable,
                         "agent.py", cwd=root, env={**env, "PLANTED_JOURNAL": str(root / "cassettes" / "run.yaml"),
                                                    "PLANTED_JOURNAL_COPY": str(outside / "journal-copy")})
        assert rec.returncode == 0, rec.stderr
        (root / "spool").mkdir()
        (root / "spool" / "planted.yaml").write_text(yaml.safe_dump({
            "name": "planted", "status": "confirmed", "cassette": "cassettes/run.yaml",
            "command": {"argv": ["python", "agent.py"]}}, sort_keys=False))
        replay = {**env, "PLANTED_MODE": "replay"}
        as_json = spoolproxy("test", "--json", "--junit", "junit.xml", "--markdown", "summary.md", cwd=root, env=replay)
        table = spoolproxy("test", "-v", cwd=root, env=replay)
        play = spoolproxy("playback", "-c", "cassettes/run.yaml", "--report", "playback-report.json", "--",
                          sys.executable, "agent.py", cwd=root, env=replay)
    finally:
        server.shutdown()
    streams = {
        "record: terminal (spoolproxy's lines)": own_lines(rec.stderr + rec.stdout),
        "test: --json output": as_json.stdout, "test: terminal table": table.stdout,
        "test: stderr": as_json.stderr + table.stderr,
        "playback: terminal report (spoolproxy's lines)": own_lines(play.stderr + play.stdout),
    }
    return {"shapes": shapes, "root": root, "journal": outside / "journal-copy", "streams": streams,
            "runs": (rec, as_json, table, play)}


def write_paths(planted) -> dict[str, str]:
    """Every write path's text: each file spoolproxy wrote under the project, the journal
    copied mid-run, and the terminal streams."""
    root: Path = planted["root"]
    out = {}
    for f in sorted(root.rglob("*")):
        if f.is_file() and f.name not in ("agent.py", "spoolproxy.toml", "planted.yaml"):
            out[str(f.relative_to(root))] = f.read_bytes().decode("utf-8", "replace")
    out["record: journal as on disk mid-run"] = planted["journal"].read_text()
    return out | planted["streams"]


def group(name: str) -> str:
    """The write path a file belongs to, for the combination count."""
    if name.startswith("cassettes/") and ".bodies/" in name:
        return "record: side body files"
    if name.startswith("cassettes/"):
        return "record: cassette"
    if "/.runs/" in f"/{name}":
        return {".yaml": "test: artifact run", ".json": "test: playback report", ".log": "test: command log"}.get(
            Path(name).suffix, "test: other artifact")
    return {"junit.xml": "test: JUnit XML", "summary.md": "test: Markdown summary",
            "playback-report.json": "playback: --report"}.get(name, name)


def test_every_write_path_was_exercised(planted):
    rec, as_json, table, play = planted["runs"]
    paths = write_paths(planted)
    groups = {group(n) for n in paths}
    assert {"record: cassette", "record: side body files", "record: journal as on disk mid-run",
            "test: artifact run", "test: playback report", "test: command log", "test: JUnit XML",
            "test: Markdown summary", "playback: --report"} <= groups, sorted(groups)
    n = len(planted["shapes"])
    assert f"wrote cassettes/run.yaml ({3 * n} interactions)" in rec.stderr
    result = json.loads(as_json.stdout)["results"][0]
    assert result["outcome"] == "unreplayable"  # the changed request: a miss with its diff in every report
    assert any("command output (last lines)" in d for d in result["details"])
    assert any(ln.strip().startswith("agent: all: REDACTED-") for ln in result["details"])
    log = next(v for k, v in paths.items() if k.endswith(".log"))
    assert "agent: using REDACTED-" in log and "agent: secrets: REDACTED-" in log
    assert "<failure" in paths["junit.xml"] and "<details>" in paths["summary.md"]
    assert "MISS #" in planted["streams"]["playback: terminal report (spoolproxy's lines)"]
    assert json.loads(paths["playback-report.json"])["requests"]


def test_zero_raw_occurrences_over_all_combinations(planted):
    paths = write_paths(planted)
    hits = []
    for name, (_value, secret) in planted["shapes"].items():
        for form in forms(secret):
            hits += [f"{name} ({form[:6]}…) in {where}" for where, text in paths.items() if form in text]
    groups = {group(n) for n in paths}
    combos = len(planted["shapes"]) * len(PLACEMENTS) * len(groups)
    print(f"planted secrets: {len(planted['shapes'])} shapes x {len(PLACEMENTS)} placements x {len(groups)} write "
          f"paths = {combos} combinations, {len(hits)} raw occurrences")
    assert hits == [], hits[:20]
