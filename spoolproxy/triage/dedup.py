"""Cluster-first suite work: one regression case per root cause, and the cases of a cluster.

* :func:`plan_dedup` decides which failing cassettes ``export-test --dedup`` exports: per
  cluster, nothing when a case of the suite already has that root cause, else only the
  cluster's exemplar (the smallest run).
* :func:`suite_clusters` clusters a suite's cases (by their failing cassettes), so
  ``annotate`` can list pending cases by cluster and apply a verdict to a whole cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from .clustering import Clustering, cluster
from .runs import Run, collect_runs


@dataclass
class DedupPlan:
    """``export``: cassettes to export (passing, unreadable and first-of-cluster runs);
    ``skipped``: ``(cassette, reason)`` for the runs whose root cause is already covered."""

    export: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    clustering: Clustering | None = None


def plan_dedup(cassettes: Iterable[Path], suite_dir: Path, *, config=None, embedder=None,
               threshold: float | None = None) -> DedupPlan:
    """Which of ``cassettes`` to export so that each cluster has one case in ``suite_dir``
    (of a cluster's new runs, the one with the fewest interactions, then the first given).

    Cassettes that cannot be read are kept (the exporter reports them).  Never raises for
    a bad cassette; raises CassetteError when a path does not exist.
    """
    given = [Path(p) for p in cassettes]
    position = {p.resolve(): i for i, p in reversed(list(enumerate(given)))}
    wanted = set(position)
    # one walk, so a cassette a case already names is one run carrying that case
    runs: list[Run] = collect_runs([*given, suite_dir] if suite_dir.is_dir() else given, config=config)
    result = cluster(runs, embedder=embedder, threshold=threshold)
    plan = DedupPlan(clustering=result)
    drop: dict[Path, str] = {}
    for c in result.clusters:
        cases = [r for r in c.runs if r.case is not None]
        new = [r for r in c.runs if r.case is None and r.path in wanted]
        if cases:
            owner = min(cases, key=lambda r: r.case.name).case.name
            for r in new:
                drop[r.path] = f"same root cause as case {owner} (cluster {c.id}, --dedup)"
            continue
        if len(new) > 1:
            keep = min(new, key=lambda r: (r.interactions, position[r.path]))
            for r in new:
                if r is not keep:
                    drop[r.path] = f"same root cause as {keep.name} (cluster {c.id}, --dedup): exported that one"
    for p in given:
        why = drop.get(p.resolve())
        if why:
            plan.skipped.append((p, why))
        else:
            plan.export.append(p)
    return plan


def suite_clusters(suite_dir: Path, *, tags: dict[str, str] | None = None, config=None, embedder=None,
                   threshold: float | None = None) -> Clustering:
    """The clusters of a suite's cases (each member has ``case`` set), biggest first."""
    runs = [r for r in collect_runs([suite_dir], tags=tags, config=config) if r.case is not None]
    return cluster(runs, embedder=embedder, threshold=threshold)
