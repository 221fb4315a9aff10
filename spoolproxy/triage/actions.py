"""Triage actions as plain functions: the MCP tools that change files or run commands.

Like :mod:`.service`, each takes a :class:`~.workspace.Workspace`, returns a JSON-ready
dict, never prints and raises :class:`~spoolproxy.errors.SpoolError` (one line, what to
do next) for bad input:

* :func:`annotate`: a verdict and assertions for cases, or for a whole failure cluster;
* :func:`export_tests`: failing runs -> regression cases (one per cluster with ``dedup``);
* :func:`run_suite`: ``spoolproxy test`` on the suite, only for cases whose command is on
  the allow-list (``SPOOLPROXY_MCP_ALLOW``); the others are refused, never run;
* :func:`write_dashboard`: the HTML dashboard (and a report per run) under the root.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import SpoolError, UsageError
from ..suite.annotate import CaseChange
from .workspace import ALLOW_ENV, Workspace, clip, command_line

MAX_TIMEOUT_S = 3600.0
MAX_ROWS = 100


def annotate(ws: Workspace, change: CaseChange, cases: Sequence[str] = (), cluster: str | None = None) -> dict[str, Any]:
    """Apply ``change`` to the named ``cases`` and to every case of failure cluster
    ``cluster`` (its id or a unique prefix, as :func:`.service.list_cases` shows it).

    Returns ``{"changed": [{"name", "file", "status", "assertions", "match_options"}],
    "cluster"}``.  Raises UsageError when nothing would change, no case is named, a case
    or the cluster is unknown, or a value is invalid (e.g. a bad regex); no file is
    written unless every case can be changed.
    """
    from ..suite.annotate import apply_change
    from ..suite.files import case_document, save_case
    from .dedup import suite_clusters
    from .service import find_case

    if change.is_empty():
        raise UsageError("nothing to change: give status (confirmed, rejected, pending) or an assertion or "
                         "matching field")
    if not cases and not cluster:
        raise UsageError("name the cases to change (cases=[...]) or a failure cluster (cluster=ID); "
                         "list_cases shows both")
    targets = [find_case(ws, name) for name in dict.fromkeys(cases)]
    found_id = None
    if cluster:
        clustering = suite_clusters(ws.suite, config=ws.detect_config(), embedder=ws.embedder(),
                                    threshold=ws.triage_config().threshold)
        found = clustering.find(cluster)
        if found is None:
            known = ", ".join(c.id for c in clustering.clusters[:10]) or "none"
            raise UsageError(f"no cluster {cluster!r} among the cases of {ws.rel(ws.suite)} (clusters: {known}); "
                             "see list_cases")
        found_id = found.id
        have = {p.resolve() for p, _c in targets}
        targets += [find_case(ws, r.case.path.stem) for r in found.runs if r.case and r.case.path.resolve() not in have]
    new = [(p, apply_change(case, change, ws.rel(p))) for p, case in targets]  # all validated before any write
    for p, case in new:
        save_case(case, p, ws.redactor)
    return {"cluster": found_id, "changed": [
        {"name": c.name, "file": ws.rel(p), "status": c.status,
         "assertions": case_document(c)["assertions"], "match_options": c.match_options.model_dump()}
        for p, c in new]}


def export_tests(ws: Workspace, paths: Sequence[str], dedup: bool = True, confirm: bool = False,
                 command: str | None = None) -> dict[str, Any]:
    """Turn the failing runs under ``paths`` into regression cases in the workspace's suite
    (``spoolproxy export-test``).  ``dedup``: one case per failure cluster (runs whose
    cluster has a case already are skipped, naming it); ``confirm``: status confirmed
    instead of pending; ``command``: the shell-style command that reproduces the runs,
    for cassettes that recorded none.

    Returns ``{"suite", "written": [{"cassette", "case", "file", "status", "signature"}],
    "skipped": [{"cassette", "why"}], "errors": [{"cassette", "error"}], "counts"}``
    (each list at most 100 rows).  Raises UsageError when no cassette is found or
    ``command`` is not valid shell syntax.
    """
    from ..cassettes import iter_paths
    from ..suite.export import ExportResult, export

    targets = [ws.resolve(p) for p in paths]
    if not targets:
        raise UsageError("give paths: cassettes or directories of cassettes (list_runs shows them)")
    files = list(iter_paths([str(p) for p in targets]))
    if not files:
        raise UsageError(f"no cassette found in {', '.join(ws.rel(p) for p in targets)}")
    skipped: dict[Path, str] = {}
    note = None
    order = files
    if dedup:
        from .dedup import plan_dedup

        plan = plan_dedup(files, ws.suite, config=ws.detect_config(), embedder=ws.embedder(),
                          threshold=ws.triage_config().threshold)
        files, skipped, note = plan.export, dict(plan.skipped), plan.clustering.note if plan.clustering else None
    results = export(files, ws.suite, cmd=command, status="confirmed" if confirm else "pending")
    if skipped:
        by_path = {r.cassette: r for r in results}
        results = [by_path.get(p) or ExportResult(p, "skipped", skipped[p]) for p in order]
    written = [{"cassette": ws.rel(r.cassette), "case": r.case.name if r.case else None, "file": ws.rel(r.case_path),
                "status": r.case.status if r.case else None,
                "signature": r.case.signature_kinds if r.case else []} for r in results if r.action == "written"]
    skip = [{"cassette": ws.rel(r.cassette), "why": clip(r.message, 300)} for r in results if r.action == "skipped"]
    errors = [{"cassette": ws.rel(r.cassette), "error": clip(_for_tool(r.message), 300)}
              for r in results if r.action == "error"]
    return {"suite": ws.rel(ws.suite), "written": written[:MAX_ROWS], "skipped": skip[:MAX_ROWS],
            "errors": errors[:MAX_ROWS], "counts": {"written": len(written), "skipped": len(skip), "errors": len(errors)},
            "note": note,
            "next": "annotate the pending cases (status confirmed or rejected), then run_suite" if written and not confirm
            else None}


def _for_tool(message: str) -> str:
    """An exporter message with the CLI flag named as this tool's argument."""
    return message.replace("pass --cmd", "give command=").replace("--cmd", "command")


def plan_run(ws: Workspace, cases: Sequence[str] = ()) -> dict[str, list]:
    """Which cases :func:`run_suite` would run and which it refuses, without running any.

    ``cases``: names to run (any status but rejected); empty: every confirmed case.
    Returns ``{"run": [(name, argv)], "refused": [{"case", "command", "why"}],
    "skipped": [{"case", "status"}]}``.  Raises UsageError for an unknown case.
    """
    from ..suite.files import iter_cases
    from ..suite.model import Case
    from .service import find_case

    if not ws.suite.is_dir():
        raise UsageError(f"no suite directory {ws.rel(ws.suite)} under {ws.root}; create cases with export_tests")
    if cases:
        chosen = [find_case(ws, name) for name in dict.fromkeys(cases)]
    else:
        chosen = [(p, c) for p, c in iter_cases(ws.suite) if isinstance(c, Case)]
    plan: dict[str, list] = {"run": [], "refused": [], "skipped": []}
    for _p, case in chosen:
        if case.status == "rejected" or (not cases and case.status != "confirmed"):
            plan["skipped"].append({"case": case.name, "status": case.status})
            continue
        line = command_line(case.command.argv)
        if ws.allowed(case.command.argv) is None:
            why = (f"{ALLOW_ENV} is not set, so run_suite runs no command" if not ws.allow else
                   f"the command is not on the allow-list {ALLOW_ENV}={';'.join(ws.allow)!r}")
            plan["refused"].append({"case": case.name, "command": line, "why": why})
            continue
        plan["run"].append((case.name, list(case.command.argv)))
    return plan


def run_suite(ws: Workspace, cases: Sequence[str] = (), timeout_s: float = 300.0) -> dict[str, Any]:
    """Run the suite offline (``spoolproxy test --json`` in a child process, cwd the root):
    the named ``cases`` or every confirmed one, each replayed strictly from its cassette.

    Only cases whose command line matches a glob of ``SPOOLPROXY_MCP_ALLOW`` run; the
    others are listed under ``refused`` with the reason.  ``timeout_s``: per case.
    Returns ``{"suite", "summary": {outcome: n, "regressions"}, "results": [{"case",
    "outcome", "explanation", "details", "artifact", "regression", "baseline"}], "refused",
    "skipped", "exit_code"}``.  Raises SpoolError when every case asked for is refused
    (saying how to allow it), or when the runner itself fails.
    """
    plan = plan_run(ws, cases)
    if not plan["run"]:
        if plan["refused"]:
            first = plan["refused"][0]
            raise SpoolError(f"refused to run {len(plan['refused'])} case(s): {first['why']} "
                             f"(e.g. case {first['case']}: {first['command']}); to allow it, set {ALLOW_ENV} in the "
                             f"server's environment to a ';'-separated list of command globs, e.g. "
                             f"{ALLOW_ENV}={_suggest(first['command'])!r}, and restart the server")
        raise UsageError("no case to run: no case is confirmed (annotate with status confirmed first, or name "
                         "cases=[...])")
    timeout = max(1.0, min(float(timeout_s), MAX_TIMEOUT_S))
    argv = [sys.executable, "-m", "spoolproxy", "test", "--suite", str(ws.suite), "--json", "--timeout", f"{timeout:g}"]
    if plan["refused"] or cases:
        for name, _argv in plan["run"]:
            argv += ["--case", name]
    try:
        proc = subprocess.run(argv, cwd=ws.root, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=timeout * len(plan["run"]) + 120)
    except subprocess.TimeoutExpired:
        raise SpoolError(f"spoolproxy test did not finish within {timeout * len(plan['run']) + 120:g} s; "
                         "run fewer cases at once") from None
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SpoolError(f"spoolproxy test failed (exit {proc.returncode}): {last}") from None
    results = []
    for r in doc.get("results", []):
        if r.get("outcome") is None:
            continue
        details = [str(x) for x in r.get("details") or []]
        results.append({"case": r["name"], "outcome": r["outcome"], "explanation": clip(r.get("explanation"), 400),
                        "details": [clip(x, 300) for x in details[:20]], "details_omitted": max(0, len(details) - 20),
                        "artifact": ws.rel(r.get("artifact")), "regression": r.get("regression", False),
                        "baseline": r.get("baseline")})
    summary = {k: v for k, v in (doc.get("summary") or {}).items() if v}
    return {"suite": ws.rel(ws.suite), "summary": summary, "results": results, "refused": plan["refused"],
            "skipped": plan["skipped"], "exit_code": doc.get("exit_code", proc.returncode),
            "next": "show_run with run=<artifact> shows what a failing case did this time" if any(
                r["outcome"] != "passes" for r in results) else None}


def _suggest(line: str) -> str:
    """A glob admitting commands like ``line``: its first two words and anything after."""
    import shlex

    words = shlex.split(line)[:2]
    return shlex.join(words) + " *" if words else "*"


def write_dashboard(ws: Workspace, out: str = "site/index.html", paths: Sequence[str] | None = None,
                    tags: Mapping[str, str] | None = None, run_reports: bool = True) -> dict[str, Any]:
    """Write the HTML dashboard of the runs under ``paths`` to ``out`` (under the root),
    with one report per run under its ``runs/`` directory (``spoolproxy dashboard``).

    Returns ``{"dashboard", "reports", "runs", "failing", "clusters"}``.  Raises
    UsageError when ``out`` is outside the root or not an ``.html`` file name.
    """
    from .dashboard import write_dashboard as write

    target = ws.resolve(out, must_exist=False, what="out")
    if target.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"out {out!r}: give an .html file name, e.g. site/index.html")
    suites = [ws.suite] if ws.suite.is_dir() else []
    path, s = write(ws.targets(paths), target, tags=dict(tags or {}), config=ws.detect_config(),
                    version_tag=ws.triage_config().version_tag, embedder=ws.embedder(),
                    threshold=ws.triage_config().threshold, suites=suites, redactor=ws.redactor,
                    run_reports=run_reports)
    reports = path.parent / "runs"
    return {"dashboard": ws.rel(path), "reports": ws.rel(reports) if run_reports and reports.is_dir() else None,
            "runs": len(s.runs), "failing": s.failing,
            "clusters": len(s.clustering.clusters) if s.clustering else 0,
            "open": path.as_uri()}
