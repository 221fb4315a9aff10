"""``spoolproxy export-test CASSETTE...``: turn failing runs into regression test cases.

Writes ``<suite>/<cassette stem>.yaml`` for every cassette whose detector verdict is
``fail`` (passing runs are skipped and said so, unless ``--passing``: a fixed run, e.g. a
fork, saved as a test with its assertions; a fork's parent becomes ``failing_cassette``).  The case holds the recorded command
(``--cmd`` overrides it), the cassette path, all-replay routing, exact matching, the
error-level findings as its signature (the detectors and the project's ``[[checks]]``, as
configured in the spoolproxy.toml of the suite's project), and assertions (the signature kinds must not come
back, plus any ``--final-answer-contains`` / ``--final-answer-matches`` / ``--tool`` /
``--max-llm-calls`` / ``--max-tool-calls`` given).  ``--confirm`` marks the cases confirmed, so ``spoolproxy
test`` runs them; otherwise they are pending until ``spoolproxy annotate``.

``--learn-from PASSING`` diffs the failing run against a passing run of the same task (or,
with ``pinned``, each cassette's ``.pinned.yaml`` sibling) and proposes assertions: facts the
final answer must contain, tools that must be called, call budgets
(:mod:`spoolproxy.suite.learn`).  They are shown for review and added to the case only when
accepted: at the prompt on a terminal, or with ``--accept-learned recommended|all|1,3``.  ``--dedup``
keeps one case per failure cluster (see :mod:`spoolproxy.triage.dedup`).
Exit status 0, or 2 when any cassette could not be exported.
"""

from __future__ import annotations

from pathlib import Path

import click

from ..cassettes import iter_paths
from ..errors import SpoolError, UsageError
from ..suite.files import DEFAULT_SUITE
from ..suite.model import Assertions
from .learn_review import learn_options, pinned_sibling, review
from .suite_options import assertion_options


def project_analyze(suite_dir: Path):
    """``analyze`` with the project's ``[detect]``, ``[prices]`` and ``[[checks]]`` (the config
    that applies to the suite's project root), so a run failing only a user check is exported."""
    from ..config import find_config
    from ..detectors import analyze, load_detect_config
    from ..suite.files import project_root

    cfg = load_detect_config(find_config(project_root(suite_dir)))
    return lambda cas: analyze(cas, cfg)


@click.command("export-test")
@click.argument("cassettes", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--suite", "suite_dir", default=DEFAULT_SUITE, show_default=True, type=click.Path(path_type=Path),
              help="Suite directory the case files go to (its parent is the project root).")
@click.option("--cmd", default=None, metavar="'CMD ARGS'",
              help="Command that reproduces the run (shell-style), instead of the one the cassette recorded.")
@click.option("--cwd", default=None, help="Working directory of --cmd, relative to the project root (default '.').")
@click.option("--confirm", is_flag=True, help="Mark the new cases confirmed (default: pending).")
@click.option("--dedup", is_flag=True,
              help="One case per root cause: cluster the failing runs with the suite's cases (as `spoolproxy "
                   "cluster` does) and export only the smallest run of each cluster that has no case yet.")
@click.option("--force", is_flag=True, help="Overwrite a case already exported from the same cassette.")
@click.option("--passing", is_flag=True,
              help="Export runs the detectors pass too: a fixed run (e.g. a fork) saved as a regression test; "
                   "give it assertions such as --final-answer-contains.")
@assertion_options
@learn_options
def command(cassettes, suite_dir: Path, cmd, cwd, confirm, dedup, force, passing, contains, matches, tools,
            max_llm_calls, max_tool_calls, learn_from, accept_learned) -> None:
    """Turn failing runs (CASSETTE files or directories) into regression test cases."""
    from pydantic import ValidationError

    from ..suite.export import ExportResult, export

    try:
        assertions = Assertions(final_answer_contains=list(contains), final_answer_matches=matches,
                                tools_called=list(tools), max_llm_calls=max_llm_calls, max_tool_calls=max_tool_calls)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UsageError(f"--{str(err['loc'][0]).replace('_', '-')}: {err['msg'].removeprefix('Value error, ')}") from None
    paths = list(iter_paths(cassettes))
    if not paths:
        raise SpoolError(f"no cassette found in {', '.join(map(str, cassettes))}")
    if learn_from not in (None, "pinned"):
        if len(paths) != 1:
            raise UsageError("--learn-from PASSING_CASSETTE pairs with one failing cassette; give one, "
                             "or use --learn-from pinned for each cassette's .pinned.yaml run")
        if not Path(learn_from).is_file():
            raise UsageError(f"--learn-from {learn_from}: no such cassette")
    skipped: dict = {}
    if dedup:
        from ..detectors import load_detect_config
        from ..triage.config import load_triage_config
        from ..triage.dedup import plan_dedup
        from ..triage.embed import embedder_from

        triage = load_triage_config()
        plan = plan_dedup(paths, suite_dir, config=load_detect_config(),
                          embedder=embedder_from(table=triage.model_dump()), threshold=triage.threshold)
        order, paths, skipped = paths, plan.export, dict(plan.skipped)
        if plan.clustering is not None and plan.clustering.note:
            click.echo(f"spoolproxy: note: {plan.clustering.note}", err=True)
    if passing and not (contains or matches or tools or max_llm_calls is not None or max_tool_calls is not None
                        or learn_from):
        click.echo("spoolproxy: warning: --passing without assertions: such a case only checks that no error-level "
                   "finding appears; add --final-answer-contains TEXT (or --final-answer-matches, --tool)", err=True)
    results = export(paths, suite_dir, cmd=cmd, cwd=cwd, status="confirmed" if confirm else "pending",
                     force=force, assertions=assertions, passing=passing, analyze=project_analyze(suite_dir))
    if skipped:  # in the order given
        by_path = {r.cassette: r for r in results}
        results = [by_path.get(p) or ExportResult(p, "skipped", skipped[p]) for p in order]
    bad = 0
    for r in results:
        if r.action == "written":
            click.echo(f"{r.cassette}: wrote {r.case_path} ({r.message})")
            if learn_from is not None:
                _learn(r, learn_from, accept_learned, suite_dir)
        elif r.action == "skipped":
            click.echo(f"{r.cassette}: skipped: {r.message}")
        else:
            bad += 1
            click.echo(f"spoolproxy: error: {r.message}", err=True)
    written = sum(1 for r in results if r.action == "written")
    if written and not confirm:
        click.echo(f"{written} case(s) pending: review them, then `spoolproxy annotate {suite_dir}/NAME.yaml "
                   "--status confirmed`")
    if bad:
        raise click.exceptions.Exit(2)


def _learn(result, learn_from: str, accept: str | None, suite_dir: Path) -> None:
    """Propose learned assertions for one written case; save the accepted ones into it."""
    from ..config import find_config
    from ..detectors import load_detect_config
    from ..suite.files import project_root, save_case

    passing = pinned_sibling(result.cassette) if learn_from == "pinned" else Path(learn_from)
    if not passing.is_file():
        click.echo(f"  no passing run to learn from: {passing} does not exist")
        return
    cfg = load_detect_config(find_config(project_root(suite_dir)))
    assertions, added = review(result.cassette, passing, result.case.assertions, accept, config=cfg, label="  ")
    if added:
        save_case(result.case.model_copy(update={"assertions": assertions}), result.case_path)
