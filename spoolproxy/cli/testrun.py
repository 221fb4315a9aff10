"""``spoolproxy test [--suite DIR]``: run the regression suite, offline and strict.

Each confirmed case runs its command under playback (exact matching unless the case says
``match: default``) while the run is recorded to ``<suite>/.runs/<case>/<UTC stamp>.yaml``;
the detectors judge that artifact: ``passes``, ``still_fails``, ``fails_differently``,
``unreplayable`` (with the near-miss diff) or ``error`` (the case could not run).

Exit status (``--fail-on``):

* ``regression`` (default): 1 when a case that ``passes`` in the baseline no longer passes,
  or when any case is an ``error`` (a broken suite never looks green); else 0.  The
  baseline is ``--baseline FILE``, by default ``<suite>/baseline.json`` when it exists.
* ``any``: 1 when any case that ran does not pass.

``--fail-under RATE`` (0-1, or a percentage such as ``95%``) also exits 1 when the suite's
pass rate (passed runs over runs, every ``--repeat`` run counted; a case that could not run
counts as failed) is below RATE.  ``--repeat K`` runs each case K times and reports its pass
rate.  Both show in the table, JUnit and Markdown.

2 for bad usage (missing suite directory, a suite directory holding no case file, unknown
``--case``, an output file (``--junit``, ``--markdown``, the baseline under
``--update-baseline``) whose directory does not exist or is not writable: checked before
any case runs).  A run where no case ran because every case is pending or rejected exits
0 and says so.

Each case's latest result is kept in ``<suite>/.runs/results.json`` (read by
``spoolproxy dashboard``).

Matching: ``--normalize`` / ``--ignore-json-path`` / ``--match-header`` apply to every case,
on top of the project's ``[playback]`` table and each case's ``match_options``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import SpoolError, UsageError
from ..suite.files import DEFAULT_SUITE

STYLE = {"passes": "green", "still_fails": "red", "fails_differently": "magenta", "unreplayable": "yellow",
         "error": "bold red", None: "dim"}


@click.command("test")
@click.option("--suite", "suite_dir", default=DEFAULT_SUITE, show_default=True, type=click.Path(path_type=Path),
              help="Suite directory of case files.")
@click.option("--case", "only", multiple=True, metavar="NAME", help="Run only this case (repeatable; also pending ones).")
@click.option("--live", multiple=True, metavar="GLOB",
              help="Send hosts matching GLOB upstream instead of replaying them, for every case (repeatable), "
                   "e.g. --live 'api.openai.com' to try a fix against the live LLM with tools replayed.")
@click.option("--no-live", is_flag=True, hidden=True, help="Replay every host, ignoring the cases' routing.live.")
@click.option("--connect-to", multiple=True, metavar="HOST1:PORT1:HOST2:PORT2",
              help="For live hosts: connect to HOST2:PORT2 instead (curl's meaning; repeatable).")
@click.option("--upstream-ca", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="For live hosts: also trust this CA (PEM).")
@click.option("--repeat", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Run each case N times (a live LLM varies) and report its pass rate; it passes, and is pinned, "
                   "only if every run passes.")
@click.option("--fail-under", "fail_under", default=None, metavar="RATE", callback=lambda c, p, v: parse_rate(v),
              help="Exit 1 when the suite's pass rate (passed runs / runs) is below RATE (0-1 or e.g. 95%%), "
                   "whatever --fail-on says.")
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Run up to N cases in parallel (each in its own process and proxy).")
@click.option("--pin", is_flag=True, help="Save each passing run as its case's cassette (<cassette>.pinned.yaml).")
@click.option("--baseline", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Baseline of earlier outcomes (default: <suite>/baseline.json when it exists).")
@click.option("--update-baseline", is_flag=True, help="Write this run's outcomes to the baseline file.")
@click.option("--fail-on", type=click.Choice(["regression", "any"]), default="regression", show_default=True,
              help="regression: exit 1 only when a case that passed in the baseline no longer passes; "
                   "any: exit 1 when any case does not pass.")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a JUnit XML report to FILE.")
@click.option("--markdown", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Append a Markdown summary to FILE (e.g. \"$GITHUB_STEP_SUMMARY\").")
@click.option("--json", "as_json", is_flag=True, help="Print the results as one JSON object instead of the table.")
@click.option("--normalize", multiple=True, metavar="REGEX",
              help="For every case: replace matches of REGEX on both sides before matching (e.g. a timestamp "
                   "in the prompt; repeatable).  Adds to [playback] normalize and the case's match_options.")
@click.option("--ignore-json-path", "ignore_json_path", multiple=True, metavar="PATH",
              help="For every case: ignore this JSON path in request bodies ($.a.b, $.a[*].c; repeatable).")
@click.option("--match-header", "match_header", multiple=True, metavar="NAME",
              help="For every case: also match this request header (repeatable).")
@click.option("--timeout", "timeout_s", type=float, default=300.0, show_default=True,
              help="Seconds a case's command may run.")
@click.option("--isolate/--no-isolate", default=None,
              help="Run each case where the proxy is the only reachable endpoint, so a client that ignores the "
                   "proxy variables fails and is named (Linux network namespaces).  [default: on where the "
                   "platform allows it]")
@click.option("-v", "--verbose", is_flag=True, help="Print the details (findings, diffs) of every case.")
def command(suite_dir: Path, only, live, no_live, connect_to, upstream_ca, repeat, fail_under, jobs, pin, baseline,
            update_baseline, fail_on, junit, markdown, as_json, normalize, ignore_json_path, match_header, timeout_s,
            isolate, verbose) -> None:
    """Run the regression suite: passes / still_fails / fails_differently / unreplayable."""
    from ..suite.baseline import exit_status, load_baseline, mark_regressions, save_baseline
    from ..suite.junit import write_junit
    from ..suite.outcome import pass_rate_line, suite_pass_rate
    from ..suite.runner import RunOptions, run_suite
    from ..suite.secrets import case_redactor, redact_result

    if not suite_dir.is_dir():
        raise UsageError(f"suite directory {suite_dir} does not exist; create cases with "
                         "`spoolproxy export-test CASSETTE --suite DIR`")
    from ..suite.files import case_paths

    if not case_paths(suite_dir):
        raise UsageError(f"suite directory {suite_dir} holds no case file (*.yaml); create cases with "
                         f"`spoolproxy export-test CASSETTE --suite {suite_dir}`")
    baseline_path = baseline or (suite_dir / "baseline.json")
    for flag, path in (("--junit", junit), ("--markdown", markdown),
                       ("--update-baseline", baseline_path if update_baseline else None)):
        if path is not None:
            check_output(path, flag)
    _check_matching(normalize, ignore_json_path)
    previous = load_baseline(baseline_path) if (baseline or baseline_path.exists()) else {}
    opts = RunOptions(live=tuple(live) if live else (() if no_live else None), pin=pin, jobs=jobs, connect_to=tuple(connect_to),
                      upstream_ca=upstream_ca, timeout_s=timeout_s, only=tuple(only), repeat=repeat,
                      normalize=tuple(normalize), ignore_json_paths=tuple(ignore_json_path),
                      match_headers=tuple(match_header), isolate=isolate)
    results = run_suite(suite_dir, opts)
    # each case's results were redacted with what its run learned; this pass adds what a parallel
    # worker's failure line or anything else might carry (the project's rules, this environment's secrets)
    red = case_redactor(suite_dir)
    results = [redact_result(r, red) for r in results]
    regressions = mark_regressions(results, previous)
    from ..suite.results import record_results

    record_results(suite_dir, results)  # the latest outcomes, for `spoolproxy dashboard`
    ran = [r for r in results if r.outcome is not None]
    code = exit_status(results, regressions, fail_on)
    passed_runs, runs = suite_pass_rate(results)
    below = fail_under is not None and runs > 0 and passed_runs / runs < fail_under
    if below:
        code = 1
    if junit:
        write_junit(junit, results, suite_dir.resolve().name, fail_under=fail_under)
    if markdown:
        from ..suite.markdown import append_markdown

        append_markdown(markdown, results, fail_under=fail_under)
    if update_baseline:
        save_baseline(baseline_path, results, previous)
    if as_json:
        counts = {o: sum(1 for r in ran if r.outcome == o) for o in
                  ("passes", "still_fails", "fails_differently", "unreplayable", "error")}
        click.echo(json.dumps({"suite": str(suite_dir), "results": [r.to_json() for r in results],
                               "summary": {**counts, "skipped": len(results) - len(ran),
                                           "regressions": [r.name for r in regressions],
                                           "runs": runs, "passed_runs": passed_runs,
                                           "pass_rate": passed_runs / runs if runs else None,
                                           "fail_under": fail_under, "below_fail_under": below},
                               "baseline": str(baseline_path) if previous else None,
                               "note": nothing_ran(results) if not ran else None,
                               "exit_code": code}, indent=2))
    else:
        _print_table(results, verbose, show_runs=repeat > 1 or fail_under is not None)
        _print_footer(results, regressions, baseline_path if previous else None, fail_on, code, junit,
                      baseline_path if update_baseline else None,
                      pass_rate_line(results, fail_under) if repeat > 1 or fail_under is not None else None)
    if code:
        raise click.exceptions.Exit(code)


def parse_rate(value: str | None) -> float | None:
    """``--fail-under`` as a fraction: ``0.95``, ``95%``.  Raises click.BadParameter."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        rate = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a rate; use a number from 0 to 1 or a percentage such as 95%") from None
    if not 0 <= rate <= 1:
        raise click.BadParameter(f"{value!r} is outside 0-1 (0%-100%)")
    return rate


def check_output(path: Path, flag: str) -> None:
    """Raise SpoolError (exit 2) unless a report file can be written at ``path`` (a file can
    really be created in its directory, or the nearest existing one: see
    :func:`~spoolproxy.cassettes.storage.check_output_file`).  Called before any case runs."""
    from ..cassettes.storage import check_output_file
    from ..errors import OutputError

    try:
        check_output_file(path)
    except OutputError as exc:
        raise SpoolError(f"{flag}: {exc}", exit_code=2) from None


def _check_matching(normalize, ignore_json_path) -> None:
    """UsageError for an invalid --normalize regex or --ignore-json-path, before any case runs."""
    from ..replayer.fingerprint import Fingerprinter, MatchOptions

    Fingerprinter(MatchOptions(ignore_json_paths=tuple(ignore_json_path), normalize=tuple(normalize)))


def _print_table(results, verbose: bool, show_runs: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=False, width=max(100, Console().width))
    table = Table(show_lines=False, title=None)
    table.add_column("case", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    if show_runs:
        table.add_column("runs passed", no_wrap=True)
    table.add_column("baseline", no_wrap=True)
    table.add_column("explanation")
    for r in results:
        outcome = r.outcome or "skipped"
        mark = " REGRESSION" if r.regression else ""
        runs = [_runs(r)] if show_runs else []
        table.add_row(_escape(r.name), f"[{STYLE[r.outcome]}]{outcome}[/]{mark}", *runs, r.baseline or "-", _escape(r.explanation))
    console.print(table)
    for r in results:
        show = verbose or r.outcome in ("unreplayable", "fails_differently", "error")
        if show and (r.details or r.artifact):
            console.print(f"[bold]{_escape(r.name)}[/] ({r.outcome or 'skipped'})", highlight=False)
            for line in r.details:
                console.print("  " + _escape(line), highlight=False)
            if r.artifact:
                console.print(f"  artifact run: {_escape(str(r.artifact))}", highlight=False)


def _runs(r) -> str:
    """``2/3 (67%)`` for a case that ran, ``-`` otherwise."""
    if r.pass_rate is None:
        return "-"
    passed = r.passed_runs if r.passed_runs is not None else int(r.outcome == "passes")
    return f"{passed}/{r.runs} ({r.pass_rate:.0%})"


def _print_footer(results, regressions, baseline, fail_on, code, junit, wrote_baseline, rate_line=None) -> None:
    ran = [r for r in results if r.outcome is not None]
    counts: dict[str, int] = {}
    for r in ran:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    parts = [f"{n} {o}" for o, n in counts.items()]
    skipped = len(results) - len(ran)
    if skipped:
        parts.append(f"{skipped} skipped (not confirmed)")
    click.echo(f"spoolproxy test: {len(ran)} case(s) ran: " + (", ".join(parts) or "none"))
    if rate_line:
        click.echo(rate_line)
    if not ran:
        click.echo(nothing_ran(results))
    pinned = [r for r in results if r.pinned]
    for r in pinned:
        click.echo(f"pinned {r.name}: {r.pinned}")
    if regressions:
        click.echo(f"REGRESSION: {', '.join(r.name for r in regressions)} passed in the baseline ({baseline}) "
                   "and no longer pass")
    if junit:
        click.echo(f"JUnit report: {junit}")
    if wrote_baseline:
        click.echo(f"baseline written: {wrote_baseline}")
    if code == 0 and fail_on == "regression" and any(r.outcome not in ("passes", None) for r in ran) \
            and (rate_line is None or "--fail-under" not in rate_line):
        click.echo("known failures do not fail the run (--fail-on regression); use --fail-on any to require all pass")
    errors = [r.name for r in ran if r.outcome == "error"]
    if code != 0 and errors and not regressions:
        click.echo(f"exit {code}: {', '.join(errors)} could not be run (outcome error, see the explanation above); "
                   "an error fails the run whatever --fail-on says")
    sys.stdout.flush()


def nothing_ran(results) -> str:
    """The line printed when no case ran: how many are pending / rejected and what to do."""
    pending = sum(1 for r in results if r.status == "pending")
    rejected = sum(1 for r in results if r.status == "rejected")
    why = ", ".join(p for p in (f"{pending} pending" if pending else "", f"{rejected} rejected" if rejected else "") if p)
    return (f"nothing ran: no case is confirmed ({why or 'no case'}); review the pending cases, then "
            "`spoolproxy annotate NAME --status confirmed` (or run one with `spoolproxy test --case NAME`)")


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
