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
"""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import SpoolError, UsageError
from ..suite.files import DEFAULT_SUITE
from ..suite.model import STATUSES
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
def command(cases, cluster_id, suite_dir, status, contains, matches, tools, max_llm_calls, live, match, normalize,
            ignore_json_path, match_header, clear_match_options, clear_assertions, triage) -> None:
    """Set the status (pending/confirmed/rejected) and assertions of test cases, one by one or a
    whole failure cluster at once; with no CASE, list the pending cases by cluster."""
    from pydantic import ValidationError

    from ..suite.files import load_case, save_case
    from ..suite.model import Assertions

    change = (status or contains or matches or tools or max_llm_calls is not None or live or match or clear_assertions
              or normalize or ignore_json_path or match_header or clear_match_options)
    if not cases and not cluster_id and not change:
        _list_pending(suite_dir, triage)
        return
    if not change:
        raise UsageError("nothing to change: give --status confirmed|rejected|pending, an assertion flag "
                         "or a matching flag (--normalize, --ignore-json-path)")
    paths = [_case_path(arg, suite_dir) for arg in cases]
    if cluster_id:
        paths += [p for p in _cluster_cases(suite_dir, cluster_id, triage) if p not in paths]
    elif not cases:
        raise UsageError("name the cases to change (CASE... or --cluster ID); `spoolproxy annotate` alone lists "
                         "the pending ones by cluster")
    for path in paths:
        case = load_case(path)
        a = Assertions() if clear_assertions else case.assertions.model_copy(deep=True)
        a.final_answer_contains = [*a.final_answer_contains, *(t for t in contains if t not in a.final_answer_contains)]
        a.tools_called = [*a.tools_called, *(t for t in tools if t not in a.tools_called)]
        if matches is not None:
            a.final_answer_matches = matches
        if max_llm_calls is not None:
            a.max_llm_calls = max_llm_calls
        update: dict = {"assertions": a}
        if status:
            update["status"] = status
        if match:
            update["match"] = match
        if normalize or ignore_json_path or match_header or clear_match_options:
            m = {"normalize": [], "ignore_json_paths": [], "match_headers": []} if clear_match_options \
                else case.match_options.model_dump()
            for key, values in (("normalize", normalize), ("ignore_json_paths", ignore_json_path),
                                ("match_headers", match_header)):
                m[key] = [*m[key], *(v for v in values if v not in m[key])]
            update["match_options"] = m
        if live:
            update["routing"] = case.routing.model_copy(update={"live": list(live)})
        try:
            new = type(case).model_validate({**case.model_dump(), **{k: (v.model_dump() if hasattr(v, "model_dump") else v)
                                                                       for k, v in update.items()}})
        except ValidationError as exc:
            from ..suite.model import validation_message

            raise UsageError(validation_message(path, exc)) from None
        save_case(new, path)
        m = new.match_options
        opts = [*(f"normalize /{r}/" for r in m.normalize), *(f"ignore {p}" for p in m.ignore_json_paths),
                *(f"match header {h}" for h in m.match_headers)]
        click.echo(f"{path}: status {new.status}" + (f"; assertions: {_describe(new.assertions)}" if _describe(new.assertions) else "")
                   + (f"; matching: {', '.join(opts)}" if opts else ""))


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


def _describe(a) -> str:
    parts = [f"contains {t!r}" for t in a.final_answer_contains]
    if a.final_answer_matches:
        parts.append(f"matches /{a.final_answer_matches}/")
    parts += [f"calls {t}" for t in a.tools_called]
    if a.max_llm_calls is not None:
        parts.append(f"<= {a.max_llm_calls} LLM calls")
    return ", ".join(parts)
