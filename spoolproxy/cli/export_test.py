"""``spoolproxy export-test CASSETTE...``: turn failing runs into regression test cases.

Writes ``<suite>/<cassette stem>.yaml`` for every cassette whose detector verdict is
``fail`` (passing runs are skipped and said so).  The case holds the recorded command
(``--cmd`` overrides it), the cassette path, all-replay routing, exact matching, the
error-level findings as its signature, and assertions (the signature kinds must not come
back, plus any ``--final-answer-contains`` / ``--final-answer-matches`` / ``--tool`` /
``--max-llm-calls`` given).  ``--confirm`` marks the cases confirmed, so ``spoolproxy
test`` runs them; otherwise they are pending until ``spoolproxy annotate``.  ``--dedup``
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
from .suite_options import assertion_options


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
@assertion_options
def command(cassettes, suite_dir: Path, cmd, cwd, confirm, dedup, force, contains, matches, tools, max_llm_calls) -> None:
    """Turn failing runs (CASSETTE files or directories) into regression test cases."""
    from pydantic import ValidationError

    from ..suite.export import ExportResult, export

    try:
        assertions = Assertions(final_answer_contains=list(contains), final_answer_matches=matches,
                                tools_called=list(tools), max_llm_calls=max_llm_calls)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UsageError(f"--{str(err['loc'][0]).replace('_', '-')}: {err['msg'].removeprefix('Value error, ')}") from None
    paths = list(iter_paths(cassettes))
    if not paths:
        raise SpoolError(f"no cassette found in {', '.join(map(str, cassettes))}")
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
    results = export(paths, suite_dir, cmd=cmd, cwd=cwd, status="confirmed" if confirm else "pending",
                     force=force, assertions=assertions)
    if skipped:  # in the order given
        by_path = {r.cassette: r for r in results}
        results = [by_path.get(p) or ExportResult(p, "skipped", skipped[p]) for p in order]
    bad = 0
    for r in results:
        if r.action == "written":
            click.echo(f"{r.cassette}: wrote {r.case_path} ({r.message})")
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
