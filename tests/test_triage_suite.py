"""Cluster-first suite work through the real CLI: ``export-test --dedup`` keeps one case per
cluster, ``annotate`` lists pending cases by cluster and ``annotate --cluster`` confirms a
whole cluster."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .test_proxy_support import cli_env

pytest.importorskip("sklearn", reason="similarity clustering needs the triage extra (scikit-learn)")


@pytest.fixture
def project(tmp_path, corpus_dir) -> Path:
    """A project holding mirascope's 27 corpus cassettes: 11 failing runs, 4 root causes
    (6 invalid API keys from three providers, 3 unknown models, a token limit, a refusal)."""
    (tmp_path / "spoolproxy.toml").write_text("")
    shutil.copytree(corpus_dir / "mirascope", tmp_path / "cassettes")
    return tmp_path


def spoolproxy(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=project, env=cli_env(project),
                          capture_output=True, text=True, timeout=120)


def _statuses(project: Path) -> dict[str, str]:
    return {p.stem: yaml.safe_load(p.read_text())["status"] for p in (project / "spool").glob("*.yaml")}


def test_export_dedup_keeps_one_case_per_cluster(project):
    r = spoolproxy(project, "export-test", "cassettes", "--dedup", "--cmd", "python agent.py")
    assert r.returncode == 0, r.stderr
    cases = sorted((project / "spool").glob("*.yaml"))
    assert len(cases) == 4  # one per root cause
    assert len(re.findall(r"skipped: same root cause as cassettes/\S+ \(cluster c[0-9a-f]{7}, --dedup\)", r.stdout)) == 7
    # a second export finds every root cause covered by a case already
    more = project / "more"
    more.mkdir()
    shutil.copy(project / "cassettes" / "test_authentication_error__anthropic_claude_sonnet_4_0.yaml",
                more / "auth-again.yaml")
    r = spoolproxy(project, "export-test", "more", "--dedup", "--cmd", "python agent.py")
    assert r.returncode == 0, r.stderr
    assert re.search(r"auth-again.yaml: skipped: same root cause as case \S+ \(cluster c[0-9a-f]{7}, --dedup\)", r.stdout)
    assert len(list((project / "spool").glob("*.yaml"))) == 4


def test_annotate_lists_pending_by_cluster_and_confirms_a_whole_cluster(project):
    r = spoolproxy(project, "export-test", "cassettes", "--cmd", "python agent.py")
    assert r.returncode == 0, r.stderr
    assert len(_statuses(project)) == 11
    listing = spoolproxy(project, "annotate")
    assert listing.returncode == 0, listing.stderr
    heads = [line for line in listing.stdout.splitlines() if re.match(r"^c[0-9a-f]{7}  ", line)]
    assert [int(h.split()[1]) for h in heads] == [6, 3, 1, 1]  # biggest first
    assert "invalid api key  (anthropic, gemini, openai)" in heads[0]
    auth = heads[0].split()[0]
    assert f"spoolproxy annotate --suite spool --cluster {auth} --status confirmed" in listing.stdout
    r = spoolproxy(project, "annotate", "--cluster", auth[:5], "--status", "confirmed")
    assert r.returncode == 0, r.stderr
    confirmed = {n for n, s in _statuses(project).items() if s == "confirmed"}
    assert len(confirmed) == 6 and all("authentication_error" in n for n in confirmed)
    after = spoolproxy(project, "annotate").stdout
    assert auth not in after and re.match(r"^c[0-9a-f]{7}  3 pending  model not found", after)
    bad = spoolproxy(project, "annotate", "--cluster", "cffffff", "--status", "rejected")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("spoolproxy: error: no cluster 'cffffff' among the cases of spool (clusters: c")
    nothing = spoolproxy(project, "annotate", "--status", "confirmed")
    assert nothing.returncode == 2 and "CASE... or --cluster ID" in nothing.stderr
