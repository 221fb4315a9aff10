"""The triage package's Python API works as docs/triage.md and DEVELOPERS.md show it: the
names import from ``spoolproxy.triage`` in a fresh interpreter and stay the documented
functions after every submodule has been imported (a submodule of the same name as a
function would shadow it)."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import REPO
from .test_proxy_support import cli_env

SCRIPT = """
import importlib, json, pkgutil, sys, types
from spoolproxy.triage import collect_runs, cluster, cluster_runs, stats, write_report, write_dashboard
from spoolproxy.triage import plan_dedup, suite_clusters
import spoolproxy.triage as triage
first = cluster
runs = collect_runs([sys.argv[1]])
result = cluster(runs)  # the function the docs show, called as they show it
# import every submodule, then import the documented names again: still the functions
for info in pkgutil.iter_modules(triage.__path__):
    if info.name != "mcp_server":  # needs the optional mcp extra
        importlib.import_module(f"spoolproxy.triage.{info.name}")
from spoolproxy.triage import cluster as again
shadowed = sorted(n for n in triage.__all__ if isinstance(getattr(triage, n), types.ModuleType))
print(json.dumps({"first_is_function": isinstance(first, types.FunctionType), "same": again is first,
                  "method": result.method, "failing": sum(c.size for c in result.clusters), "runs": len(runs),
                  "shadowed": shadowed, "cluster_runs": len(cluster_runs([sys.argv[1]]))}))
"""


def test_documented_imports_work_in_a_fresh_interpreter(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(REPO / "cassettes")], capture_output=True, text=True,
                          timeout=120, env=cli_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["first_is_function"] and doc["same"], doc
    assert doc["shadowed"] == [], f"public names shadowed by a submodule of the same name: {doc['shadowed']}"
    # the committed demo cassettes: 7 runs, the three v1 failures (HTML 502, double refund, lookup loop)
    assert doc["runs"] == 7 and doc["failing"] == 3 and doc["cluster_runs"] >= 1, doc
