"""Triage as plain functions: what the MCP server's reading tools answer.

Each function takes a :class:`~.workspace.Workspace` and returns a JSON-ready dict (paths
relative to the project root, long texts clipped, long lists paged); none prints, none
needs the ``mcp`` package.  Bad input raises :class:`~spoolproxy.errors.SpoolError` with
one line that says what to do next.  Secrets are removed by the caller (the MCP adapter
passes every result through :meth:`Workspace.redact`).

* :func:`stats`: runs, pass rate per version, failure kinds, clusters, cases, latest tests;
* :func:`list_clusters`: failure clusters, biggest first, with their members;
* :func:`list_runs`: runs with verdict, root failure and cluster;
* :func:`list_cases` / :func:`show_case`: the suite's regression cases;
* :func:`ingest`: detect + cluster a path and say which failures are new.

One run as a transcript is :func:`.runview.show_run`; the tools that change files
(annotate, export, run the suite, write the dashboard) are in :mod:`.actions`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import UsageError
from .workspace import Workspace, clip, command_line, page

#: upper bounds of the ``limit``-style arguments (results stay a few tens of KB)
MAX_LIMIT = 200
MAX_MEMBERS = 100
MESSAGE_CHARS = 300


def _when(dt) -> str | None:
    return dt.isoformat() if dt else None


def run_brief(ws: Workspace, r, cluster_id: str | None = None) -> dict[str, Any]:
    """One run in a few lines: ``cassette`` (pass it to ``show_run``), ``verdict``,
    ``root_failure`` (kind, recognised cause, message), ``cluster``, finding counts by
    severity, size, tokens, cost, providers, tags and the suite case it belongs to."""
    f = r.failure
    return {
        "cassette": ws.rel(r.path), "name": r.name, "when": _when(r.when), "verdict": r.verdict,
        "root_failure": None if f is None else {"kind": f.kind, "cause": f.cause,
                                                "message": clip(f.message, MESSAGE_CHARS)},
        "cluster": cluster_id,
        "findings": dict(Counter(x.severity for x in r.findings)),
        "interactions": r.interactions, "llm_calls": r.llm_calls, "tokens": r.tokens, "cost_usd": r.cost_usd,
        "providers": r.providers, "tags": r.tags,
        "case": None if r.case is None else {"name": r.case.name, "status": r.case.status},
    }


def cluster_doc(ws: Workspace, c, members: int) -> dict[str, Any]:
    """A cluster: ``id`` (pass it to ``annotate`` or ``list_runs``), ``size``, ``cause``,
    root ``kind``, normalised ``signature``, providers, versions, first/last seen, the
    ``exemplar`` run and up to ``members`` member runs (``members_total`` says how many)."""
    shown = c.runs[:members]
    return {
        "id": c.id, "size": c.size, "cause": c.cause, "kind": c.kind, "signature": clip(c.signature, MESSAGE_CHARS),
        "kinds": c.kinds, "providers": c.providers, "versions": c.versions(),
        "first_seen": _when(c.first_seen), "last_seen": _when(c.last_seen),
        "exemplar": ws.rel(c.exemplar.path) or c.exemplar.name,
        "cases": sorted({r.case.name for r in c.runs if r.case}),
        "members_total": c.size,
        "members": [{"cassette": ws.rel(r.path), "name": r.name, "when": _when(r.when),
                     "case": None if r.case is None else {"name": r.case.name, "status": r.case.status},
                     "message": clip(r.failure.message if r.failure else None, MESSAGE_CHARS)} for r in shown],
    }


def _skipped(ws: Workspace, skipped: list[tuple[Path, str]], limit: int = 10) -> dict[str, Any] | None:
    if not skipped:
        return None
    return {"total": len(skipped), "files": [{"path": ws.rel(p), "why": clip(why, 200)} for p, why in skipped[:limit]]}


def stats(ws: Workspace, paths: Sequence[str] | None = None, tags: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The state of the runs under ``paths`` (default: the workspace's) and of the suite.

    Returns ``{"paths", "runs", "failing", "pass_rate" (0-100), "versions": [{"version",
    "runs", "failing", "pass_rate", "first", "last"}] (newest first, at most 20),
    "failure_kinds": {kind: runs}, "clusters": {"count", "method", "note", "top": [...5]},
    "cases": {"total", "pending", "confirmed", "rejected", "invalid"}, "latest_tests":
    {"ran_at", "outcomes": {outcome: n}, "regressions", "failing": [...]}, "skipped"}``.
    """
    from .dashboard import stats as dashboard_stats

    skipped: list[tuple[Path, str]] = []
    suites = [ws.suite] if ws.suite.is_dir() else []
    s = dashboard_stats(ws.targets(paths), tags=dict(tags or {}), config=ws.detect_config(),
                        version_tag=ws.triage_config().version_tag, embedder=ws.embedder(),
                        threshold=ws.triage_config().threshold, suites=suites,
                        on_skip=lambda p, why: skipped.append((p, why)))
    clusters = s.clustering.clusters if s.clustering else []
    tests = s.tests
    return {
        "root": str(ws.root), "paths": [ws.rel(p) for p in ws.targets(paths)], "tags": dict(tags or {}),
        "runs": len(s.runs), "failing": s.failing, "pass_rate": round(s.pass_rate, 1),
        "version_tag": s.version_tag,
        "versions": [{"version": v.version, "runs": v.runs, "failing": v.failing, "pass_rate": round(v.pass_rate, 1),
                      "first": _when(v.first), "last": _when(v.last)} for v in s.versions[:20]],
        "failure_kinds": dict(s.kinds.most_common()),
        "clusters": {"count": len(clusters), "method": s.clustering.method if s.clustering else None,
                     "note": s.clustering.note if s.clustering else None,
                     "top": [{"id": c.id, "size": c.size, "cause": c.cause, "kind": c.kind,
                              "signature": clip(c.signature, 160)} for c in clusters[:5]]},
        "cases": _case_counts(ws),
        "latest_tests": None if not tests else {
            "ran_at": max((t.ran_at for t in tests if t.ran_at), default=None),
            "outcomes": dict(Counter(t.outcome or "none" for t in tests)),
            "regressions": [t.name for t in tests if t.regression],
            "failing": [{"case": t.name, "outcome": t.outcome, "explanation": clip(t.explanation, 200)}
                        for t in tests if t.outcome != "passes"][:10]},
        "skipped": _skipped(ws, skipped),
    }


def _case_counts(ws: Workspace) -> dict[str, Any]:
    from ..suite.files import iter_cases
    from ..suite.model import Case

    out = {"suite": ws.rel(ws.suite), "total": 0, "pending": 0, "confirmed": 0, "rejected": 0, "invalid": 0}
    if not ws.suite.is_dir():
        out["note"] = f"no suite directory {ws.rel(ws.suite)} yet: export_tests creates it"
        return out
    for _p, case in iter_cases(ws.suite):
        out["total"] += 1
        out[case.status if isinstance(case, Case) else "invalid"] += 1
    return out


def list_clusters(ws: Workspace, paths: Sequence[str] | None = None, tags: Mapping[str, str] | None = None,
                  offset: int = 0, limit: int = 10, members: int = 5) -> dict[str, Any]:
    """Failure clusters of the runs under ``paths``, biggest first (size is the priority).

    Returns ``{"method", "threshold", "note", "runs", "failing", "clusters": [cluster_doc],
    "page": {...}, "skipped"}``; ``limit`` clusters from ``offset``, ``members`` runs each.
    """
    runs, skipped = ws.collect(paths, tags)
    result = ws.cluster(runs)
    chunk, info = page(result.clusters, offset, min(limit, MAX_LIMIT))
    members = max(0, min(members, MAX_MEMBERS))
    return {"method": result.method, "threshold": result.threshold, "note": result.note, "runs": len(runs),
            "failing": len(runs) - result.passing, "clusters": [cluster_doc(ws, c, members) for c in chunk],
            "page": info, "skipped": _skipped(ws, skipped)}


def list_runs(ws: Workspace, paths: Sequence[str] | None = None, tags: Mapping[str, str] | None = None,
              verdict: str = "all", cluster: str | None = None, offset: int = 0, limit: int = 25) -> dict[str, Any]:
    """The runs under ``paths`` in path order, each as :func:`run_brief`.

    ``verdict``: ``fail``, ``pass`` or ``all``; ``cluster``: only the members of this
    cluster (id or unique prefix).  Returns ``{"runs": [...], "page", "counts": {"runs",
    "failing"}, "skipped"}``.  Raises UsageError for an unknown verdict or cluster.
    """
    if verdict not in ("all", "fail", "pass"):
        raise UsageError(f"verdict {verdict!r}: use fail, pass or all")
    runs, skipped = ws.collect(paths, tags)
    result = ws.cluster(runs)
    cluster_of = {id(r): c.id for c in result.clusters for r in c.runs}
    chosen = runs
    if cluster:
        found = result.find(cluster)
        if found is None:
            known = ", ".join(c.id for c in result.clusters[:8]) or "none"
            raise UsageError(f"no cluster {cluster!r} among these runs (clusters: {known}); see list_clusters")
        chosen = found.runs
    if verdict != "all":
        chosen = [r for r in chosen if r.verdict == verdict]
    chunk, info = page(chosen, offset, min(limit, MAX_LIMIT))
    return {"runs": [run_brief(ws, r, cluster_of.get(id(r))) for r in chunk], "page": info,
            "counts": {"runs": len(runs), "failing": sum(1 for r in runs if r.failed)},
            "skipped": _skipped(ws, skipped)}


def _suite_index(ws: Workspace) -> tuple[list, dict[Path, str], dict[str, dict]]:
    """(``[(path, Case | CaseError)]``, case path -> cluster id, case name -> latest result)."""
    from ..suite.files import iter_cases
    from ..suite.results import load_results
    from .dedup import suite_clusters

    if not ws.suite.is_dir():
        raise UsageError(f"no suite directory {ws.rel(ws.suite)} under {ws.root}; create cases with export_tests")
    entries = list(iter_cases(ws.suite))
    clustering = suite_clusters(ws.suite, config=ws.detect_config(), embedder=ws.embedder(),
                                threshold=ws.triage_config().threshold)
    cluster_of = {r.case.path.resolve(): c.id for c in clustering.clusters for r in c.runs if r.case}
    latest = load_results(ws.suite).get("cases", {})
    return entries, cluster_of, latest if isinstance(latest, dict) else {}


def _latest(d: dict | None) -> dict[str, Any] | None:
    if not isinstance(d, dict):
        return None
    return {"outcome": d.get("outcome"), "explanation": clip(str(d.get("explanation") or ""), MESSAGE_CHARS),
            "ran_at": d.get("ran_at"), "regression": bool(d.get("regression")), "baseline": d.get("baseline")}


def list_cases(ws: Workspace, status: str | None = None, cluster: str | None = None, offset: int = 0,
               limit: int = 25) -> dict[str, Any]:
    """The suite's cases by file name: ``name``, ``status``, ``cluster``, signature kinds,
    first signature message, cassettes, command and whether ``run_suite`` may run it
    (``allowed``), and the latest test outcome.  ``status`` / ``cluster`` filter.

    Returns ``{"suite", "counts": {status: n}, "cases": [...], "page"}``.
    """
    from ..suite.model import STATUSES, Case

    if status is not None and status not in (*STATUSES, "invalid"):
        raise UsageError(f"status {status!r}: use pending, confirmed, rejected or invalid")
    entries, cluster_of, latest = _suite_index(ws)
    rows: list[dict[str, Any]] = []
    for path, case in entries:
        if not isinstance(case, Case):
            rows.append({"name": path.stem, "status": "invalid", "file": ws.rel(path), "error": clip(str(case), 300)})
            continue
        rows.append({
            "name": case.name, "status": case.status, "file": ws.rel(path), "cluster": cluster_of.get(path.resolve()),
            "signature": case.signature_kinds,
            "message": clip(case.signature[0].message, MESSAGE_CHARS) if case.signature else None,
            "cassette": case.cassette, "failing_cassette": case.failing_cassette,
            "command": command_line(case.command.argv), "allowed": ws.allowed(case.command.argv) is not None,
            "latest": _latest(latest.get(case.name)),
        })
    counts = dict(Counter(r["status"] for r in rows))
    if status:
        rows = [r for r in rows if r["status"] == status]
    if cluster:
        ids = {r.get("cluster") for r in rows if r.get("cluster")}
        hits = [i for i in ids if i == cluster] or [i for i in ids if i.startswith(cluster)]
        if len(hits) != 1:
            raise UsageError(f"no single cluster {cluster!r} among the suite's cases (clusters: "
                             f"{', '.join(sorted(ids)) or 'none'}); see list_clusters with paths=[{ws.rel(ws.suite)!r}]")
        rows = [r for r in rows if r.get("cluster") == hits[0]]
    chunk, info = page(rows, offset, min(limit, MAX_LIMIT))
    return {"suite": ws.rel(ws.suite), "counts": counts, "cases": chunk, "page": info}


def find_case(ws: Workspace, name: str):
    """``(path, case)`` of the suite case called ``name`` (or whose file is ``name``).
    Raises UsageError naming the cases there are."""
    from ..suite.files import case_paths, load_case

    if not ws.suite.is_dir():
        raise UsageError(f"no suite directory {ws.rel(ws.suite)} under {ws.root}; create cases with export_tests")
    key = Path(name).stem if name.endswith((".yaml", ".yml")) else name
    paths = case_paths(ws.suite)
    for p in paths:
        if p.stem == key:
            return p, load_case(p)
    for p in paths:  # a file whose name differs from the case's name
        try:
            case = load_case(p)
        except Exception:  # noqa: BLE001 - an invalid file is not the one asked for
            continue
        if case.name == key:
            return p, case
    names = ", ".join(p.stem for p in paths[:20]) or "none"
    raise UsageError(f"no case {name!r} in {ws.rel(ws.suite)} (cases: {names}); see list_cases")


def show_case(ws: Workspace, name: str, details: int = 40) -> dict[str, Any]:
    """One case in full: its file's fields, its cluster, whether ``run_suite`` may run it,
    and the latest test result with up to ``details`` detail lines (findings, near-miss
    diffs) and the artifact run to open with ``show_run``."""
    from ..suite.files import case_document

    path, case = find_case(ws, name)
    _entries, cluster_of, latest = _suite_index(ws)
    glob = ws.allowed(case.command.argv)
    last = latest.get(case.name) if isinstance(latest, dict) else None
    result = _latest(last)
    if result is not None:
        lines = [str(x) for x in (last.get("details") or [])]
        result["details"] = [clip(x, 400) for x in lines[:details]]
        if len(lines) > details:
            result["details_omitted"] = len(lines) - details
        art = last.get("artifact")
        result["artifact"] = ws.rel(ws.suite / art) if art else None
    return {"name": case.name, "file": ws.rel(path), "case": case_document(case),
            "cluster": cluster_of.get(path.resolve()), "command": command_line(case.command.argv),
            "allowed": glob is not None, "allowed_by": glob,
            "run": case.failing_cassette or case.cassette, "latest": result,
            "next": f"show_run with run={case.name!r} shows the failing run; annotate with cases=[{case.name!r}] "
                    "sets its status"}


def ingest(ws: Workspace, path: str, tags: Mapping[str, str] | None = None, add: bool = True,
           limit: int = 50) -> dict[str, Any]:
    """Detect and cluster the runs under ``path`` against the workspace's runs.

    Returns ``{"path", "runs", "failing", "failing_runs": [run_brief] (at most ``limit``),
    "clusters": [{"id", "cause", "kind", "signature", "new_runs", "known_runs", "cases",
    "new"}], "skipped", "working_set"}``: ``new`` marks a cluster none of the workspace's
    earlier runs or cases has (a failure not seen before).  ``add`` keeps ``path`` in the
    workspace's paths for later calls.
    """
    target = ws.resolve(path)
    new_runs, skipped = ws.collect([str(target)], tags)
    fresh = {r.path for r in new_runs if r.path is not None}
    known_paths = [p for p in ws.paths if p != target]
    known = []
    if known_paths:
        old, _ = ws.collect([str(p) for p in known_paths], tags)
        known = [r for r in old if r.path is None or r.path not in fresh]
    result = ws.cluster([*new_runs, *known])
    mine = {id(r) for r in new_runs}
    cluster_of = {id(r): c.id for c in result.clusters for r in c.runs}
    clusters = []
    for c in result.clusters:
        n_new = sum(1 for r in c.runs if id(r) in mine)
        if not n_new:
            continue
        clusters.append({"id": c.id, "cause": c.cause, "kind": c.kind, "signature": clip(c.signature, MESSAGE_CHARS),
                         "new_runs": n_new, "known_runs": c.size - n_new,
                         "cases": sorted({r.case.name for r in c.runs if r.case}), "new": n_new == c.size})
    if add and target not in ws.paths:
        ws.paths.append(target)
    failing = [r for r in new_runs if r.failed]
    return {"path": ws.rel(target), "runs": len(new_runs), "failing": len(failing),
            "failing_runs": [run_brief(ws, r, cluster_of.get(id(r))) for r in failing[:limit]],
            "failing_runs_omitted": max(0, len(failing) - limit), "clusters": clusters,
            "method": result.method, "note": result.note, "skipped": _skipped(ws, skipped),
            "working_set": [ws.rel(p) for p in ws.paths]}
