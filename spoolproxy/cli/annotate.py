"""``spoolproxy annotate CASE...``: set a case's status and assertions.

``--status confirmed`` makes ``spoolproxy test`` run the case, ``rejected`` keeps it out
(a false alarm), ``pending`` means not reviewed yet.  Assertion flags add to the case's
assertions; ``--clear-assertions`` first resets them to the default (the signature kinds
must not come back).  ``--normalize REGEX`` / ``--ignore-json-path PATH`` /
``--match-header NAME`` add to the case's ``match_options`` (``--clear-match-options`` first
empties them).  CASE is a case file or a case name in ``--suite``.

Cluster first: ``--cluster ID`` applies the same change to every case of that failure
cluster (the suite's cases clustered as ``spoolproxy cluster SUITE`` does; an id prefix
is enough); with no CASE and no change, ``annotate`` lists the pending cases by cluster,
biggest first, each cluster with the command that confirms it.

``--learn-from PASSING_CASSETTE`` (or ``pinned``: the case's pinned run, when ``spoolproxy
test --pin`` made one) diffs the case's failing run against a passing run of the same task
and proposes assertions; the accepted ones (prompt, or ``--accept-learned``) are added.
"""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import SpoolError, UsageError
from ..suite.files import DEFAULT_SUITE
from ..suite.model import STATUSES
from .learn_review import learn_options, pinned_sibling, review
from .suite_options import assertion_options
from .triage_options import triage_options


def _case_path(arg: str, suite_dir: Path) -> Path:
    p = Path(arg)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    return suite_dir / f"{arg}.yaml"


@click.command("annotate")
@click.argument("cases", nargs=-1, required=False)
@click.option("--cluster", "cluster_id", default=None, metavar="ID",
              help="Apply the change to every case of this failure cluster (ids from `spoolproxy cluster SUITE` "
                   "or the listing of `spoolproxy annotate`).")
@click.option("--suite", "suite_dir", default=DEFAULT_SUITE, show_default=True, type=click.Path(path_type=Path),
              help="Suite directory used to find cases given by name.")
@click.option("--status", type=click.Choice(STATUSES), default=None, help="New status.")
@assertion_options
@click.option("--live", multiple=True, metavar="GLOB", help="Set the case's live hosts (routing.live; repeatable).")
@click.option("--match", type=click.Choice(["exact", "default"]), default=None,
              help="Matching for this case: exact (strict, the default) or default (vcrpy-compatible).")
@click.option("--normalize", multiple=True, metavar="REGEX",
              help="Matching: replace matches of REGEX on both sides (e.g. a timestamp in the prompt; repeatable).")
@click.option("--ignore-json-path", "ignore_json_path", multiple=True, metavar="PATH",
              help="Matching: ignore this JSON path in request bodies ($.a.b, $.a[*].c; repeatable).")
@click.option("--match-header", "match_header", multiple=True, metavar="NAME",
              help="Matching: also match this request header (repeatable).")
@click.option("--clear-match-options", is_flag=True, help="Empty the case's match_options before adding.")
@click.option("--clear-assertions", is_flag=True, help="Reset assertions to the default before adding.")
@triage_options
@learn_options
def command(cases, cluster_id, suite_dir, status, contains, matches, tools, max_llm_calls, max_tool_calls, live, match,
            normalize, ignore_json_path, match_header, clear_match_options, clear_assertions, triage, learn_from,
            accept_learned) -> None:
    """Set the status (pending/confirmed/rejected) and assertions of test cases, one by one or a
    whole failure cluster at once; with no CASE, list the pending cases by cluster."""
    from ..suite.annotate import CaseChange, apply_change, describe_assertions
    from ..suite.files import load_case, save_case

    change = CaseChange(status=status, contains=tuple(contains), matches=matches, tools=tuple(tools),
                        max_llm_calls=max_llm_calls, max_tool_calls=max_tool_calls, live=tuple(live), match=match,
                        normalize=tuple(normalize), ignore_json_paths=tuple(ignore_json_path),
                        match_headers=tuple(match_header), clear_match_options=clear_match_options,
                        clear_assertions=clear_assertions)
    if not cases and not cluster_id and change.is_empty() and not learn_from:
        _list_pending(suite_dir, triage)
        return
    if change.is_empty() and not learn_from:
        raise UsageError("nothing to change: give --status confirmed|rejected|pending, an assertion flag "
                         "or a matching flag (--normalize, --ignore-json-path)")
    paths = [_case_path(arg, suite_dir) for arg in cases]
    if cluster_id:
        paths += [p for p in _cluster_cases(suite_dir, cluster_id, triage) if p not in paths]
    elif not cases:
        raise UsageError("name the cases to change (CASE... or --cluster ID); `spoolproxy annotate` alone lists "
                         "the pending ones by cluster")
    for path in paths:
        new = apply_change(load_case(path), change, path)
        if learn_from is not None:
            learned = _learned(new, path, suite_dir, learn_from, accept_learned, new.assertions)
            new = new.model_copy(update={"assertions": learned})
        save_case(new, path)
        m = new.match_options
        opts = [*(f"normalize /{r}/" for r in m.normalize), *(f"ignore {p}" for p in m.ignore_json_paths),
                *(f"match header {h}" for h in m.match_headers)]
        said = describe_assertions(new.assertions)
        click.echo(f"{path}: status {new.status}" + (f"; assertions: {said}" if said else "")
                   + (f"; matching: {', '.join(opts)}" if opts else ""))


def _learned(case, path: Path, suite_dir: Path, learn_from: str, accept, assertions):
    """The case's assertions plus the learned ones the reviewer accepts."""
    from ..config import find_config
    from ..detectors import load_detect_config
    from ..suite.files import project_root

    root = project_root(path.parent)
    failing = root / (case.failing_cassette or case.cassette)
    if learn_from == "pinned":
        if case.failing_cassette:
            passing = root / case.cassette
        else:
            passing = pinned_sibling(failing)
    else:
        passing = Path(learn_from)
    if not passing.is_file():
        raise UsageError(f"--learn-from: no passing run at {passing}; name a passing cassette of the same task")
    if passing.resolve() == failing.resolve():
        raise UsageError(f"--learn-from {passing}: that is the case's failing run; name a passing run")
    cfg = load_detect_config(find_config(root))
    new, _added = review(failing, passing, assertions, accept, config=cfg)
    return new


def _clustering(suite_dir: Path, triage):
    from ..triage.dedup import suite_clusters

    if not suite_dir.is_dir():
        raise SpoolError(f"suite directory {suite_dir} does not exist; create cases with `spoolproxy export-test "
                         "CASSETTE`")
    return suite_clusters(suite_dir, tags=triage.tags, config=triage.detect_config(), embedder=triage.embedder(),
                          threshold=triage.cut())


def _cluster_cases(suite_dir: Path, cluster_id: str, triage) -> list[Path]:
    """The case files of cluster ``cluster_id`` (an id or a unique prefix) of the suite."""
    result = _clustering(suite_dir, triage)
    found = result.find(cluster_id)
    if found is None:
        known = ", ".join(c.id for c in result.clusters[:8]) or "none"
        raise UsageError(f"no cluster {cluster_id!r} among the cases of {suite_dir} (clusters: {known}); "
                         f"list them with `spoolproxy annotate --suite {suite_dir}`")
    return [r.case.path for r in found.runs]


def _list_pending(suite_dir: Path, triage) -> None:
    """Print the pending cases by cluster, biggest first."""
    result = _clustering(suite_dir, triage)
    red = triage.redactor()
    shown = 0
    for c in result.clusters:
        pending = [r for r in c.runs if r.case.status == "pending"]
        if not pending:
            continue
        shown += len(pending)
        title = c.cause or c.kind
        others = f", {c.size - len(pending)} reviewed" if c.size > len(pending) else ""
        click.echo(f"{c.id}  {len(pending)} pending{others}  {title}  ({', '.join(c.providers) or 'no provider'})")
        click.echo(f"  {red.text(c.signature)}")
        for r in pending:
            click.echo(f"  · {r.case.name}  ({r.case.path})")
        click.echo(f"  -> spoolproxy annotate --suite {suite_dir} --cluster {c.id} --status confirmed   (or rejected)")
    from ..suite.files import iter_cases
    from ..suite.model import Case

    clustered = {r.case.path for c in result.clusters for r in c.runs}
    rest = [(p, case) for p, case in iter_cases(suite_dir)
            if isinstance(case, Case) and case.status == "pending" and p not in clustered]
    if rest and not triage.tags:  # tags live in cassettes: a filtered listing shows clusters only
        click.echo(f"not in a cluster (the recorded run has no error-level finding now): {len(rest)} pending")
        for p, case in rest:
            click.echo(f"  · {case.name}  ({p})")
        shown += len(rest)
    if not shown:
        click.echo(f"no pending case in {suite_dir}: every case is confirmed or rejected")

