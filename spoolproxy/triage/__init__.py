"""Triage: which failures matter, grouped by root cause, seen on one page.

Plain functions (the CLI commands ``cluster``, ``report``, ``dashboard`` and an MCP server
call the same ones; none of them prints)::

    from spoolproxy.triage import collect_runs, cluster, cluster_runs, stats, write_report, write_dashboard

    runs = collect_runs(["cassettes/", "spool/"], tags={"agent": "refund-bot"})  # -> list[Run]
    result = cluster(runs)                   # -> Clustering: clusters biggest first, method, note
    clusters = cluster_runs(["cassettes/"])  # -> list[Cluster] (id, size, cause, signature, runs)
    s = stats(["cassettes/", "spool/"])      # -> Stats: versions, days, kinds, clustering, tests
    write_report("cassettes/run.yaml", "run.html")
    write_dashboard(["cassettes/", "spool/"], "site/index.html")

Modules: :mod:`.tags` (run tags and git commit), :mod:`.runs` (runs from cassettes,
directories and suites), :mod:`.normalize` (failure text), :mod:`.embed` (Ollama and the
built-in vectoriser), :mod:`.clustering` (the ``cluster`` function), :mod:`.dedup` (one case per cluster, suite
clusters), :mod:`.report` and :mod:`.parent` (one run as HTML, fork/verify hooks),
:mod:`.dashboard` and :mod:`.charts`.  See docs/triage.md.
"""

from importlib import import_module

#: public name -> module; imported on first use, so ``record`` (which needs only
#: :mod:`.tags`) does not pay for the detectors, jinja2 or pygal.  No module may share a
#: public function's name: importing ``spoolproxy.triage.<name>`` binds the submodule as
#: the package attribute, which would then shadow the function (hence ``clustering.py``
#: holding ``cluster``)
_LAZY = {"Cluster": "clustering", "Clustering": "clustering", "cluster": "clustering", "cluster_runs": "clustering",
         "Stats": "dashboard", "stats": "dashboard", "write_dashboard": "dashboard",
         "plan_dedup": "dedup", "suite_clusters": "dedup", "render_report": "report", "write_report": "report",
         "Run": "runs", "collect_runs": "runs"}
__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
