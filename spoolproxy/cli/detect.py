"""``spoolproxy detect PATH...``: flag failing agent runs in cassettes, with evidence.

PATH is a cassette file or a directory (searched recursively for ``*.yaml``/``*.yml``/
``*.json``).  A file found in a directory that is not a cassette (a YAML/JSON mapping
without ``interactions``: ``expected.yaml`` beside a case, a config file, an empty file)
gets a one-line warning on stderr and is skipped; spoolproxy's own side files there
(``<stem>.verify.json``, ``<stem>.diagnosis.json``, ``<stem>.fix-N.yaml``, ``baseline.json``)
are skipped silently.  A corrupt cassette (invalid YAML, truncated, wrong version, binary
garbage, a malformed interaction), and any file named on the command line that is not a
readable cassette, gets one ``spoolproxy: error: PATH[:LINE]: ...`` line on stderr (and
with ``--json`` a ``{"cassette", "verdict": "error", "error"}`` line); the other files are
still analysed and the exit status is 2 at the end, unless ``--skip-bad``.

Output: a table of findings per cassette, or with ``--json`` one JSON object per cassette
per line (JSON Lines)::

    {"cassette": "...", "verdict": "pass"|"fail", "findings": [{"kind", "severity",
     "interactions": [0-based], "message", "evidence": [{"interaction", "path", "quote"}]}],
     "cost": {"usd", "calls", "unpriced_models", "sources", "prices_as_of"},
     "checks": [{"name", "status", "severity", "message", "interactions", "duration_ms", "exit_code"}]}

The project's ``[[checks]]`` (user checks, :mod:`spoolproxy.checks`) run on every cassette;
one that fails, crashes or times out is a ``check_failed`` finding at its severity.

``--judge`` adds the model judge's opinion (:mod:`spoolproxy.judge`, the same call and
cache as ``spoolproxy diagnose``): an ``off_track`` finding, ``error`` only when the judge
names a failure whose verbatim evidence checks out, ``warn`` when it claims one whose
evidence does not, none when it finds no failure.  The judge's own files beside a run
(``<stem>.diagnosis.json``, ``<stem>.fix-N.yaml``) are skipped without a warning.

``--jobs N`` loads and analyzes cassettes in N worker processes (output order unchanged).
PATH may also be a store URL (``s3://bucket/prefix``, every cassette under it) or a
``*.parquet`` findings table; ``--engine dask`` fans the work out per batch of cassettes on
a Dask cluster (``--scheduler ADDRESS``, else a local cluster of ``--workers`` processes),
and ``--parquet OUT`` also writes one row per run (see :mod:`spoolproxy.scale`).  Output
and exit status are the same whatever the engine.
Exit status: 0, or 1 with ``--fail-on LEVEL`` when any finding is at LEVEL or above;
2 for bad usage, a missing path or a corrupt cassette (2 wins over 1).  Thresholds and budgets come from ``[detect]`` in
spoolproxy.toml (``--config`` to name the file).
"""

from __future__ import annotations

import json
import os
import sys

import click

from ..cassettes.storage import iter_paths, load
from ..errors import CassetteError
from .judge_options import judge_options, judge_options_from
from .scale_options import scale_options

LEVELS = ("info", "warn", "error", "critical")
STYLE = {"info": "dim", "warn": "yellow", "error": "bold red", "critical": "bold white on red"}


#: the loader's problem text for a mapping without ``interactions``: "not a cassette", not corrupt
NOT_A_CASSETTE = "not a cassette:"

def is_not_a_cassette(exc: CassetteError) -> bool:
    """True when ``exc`` says the file is a YAML/JSON mapping without ``interactions`` (an
    ``expected.yaml``, a config file): skipped with a warning, never an error."""
    return str(exc.problem).startswith(NOT_A_CASSETTE)


def _one(path: str, cfg) -> tuple[str, str | None, dict | None, int]:
    """Load and analyze one file: (path, problem or None, report as a dict, interactions).

    ``problem`` is ``"skip:" + PATH: why`` for a file that is not a cassette, or
    ``"error:" + PATH[:LINE]: why`` for a corrupt cassette.  Top-level so that ``--jobs``
    worker processes can run it."""
    from ..detectors import analyze

    try:
        cas = load(path)
    except CassetteError as exc:
        return path, f"{'skip' if is_not_a_cassette(exc) else 'error'}:{exc}", None, 0
    report = analyze(cas, cfg)
    report.cassette = str(path)
    return path, None, report.model_dump(mode="json"), len(cas.interactions)


def named_files(paths) -> set[str]:
    """The files (not directories) named on the command line, normalised: each must be a
    readable cassette, unlike files found by walking a directory, which may be skipped."""
    return {os.path.normpath(p) for p in paths if ("://" in p and p.endswith((".yaml", ".yml", ".json")))
            or ("://" not in p and os.path.isfile(p))}


def _results(files: list[str], cfg, jobs: int):
    if jobs <= 1 or len(files) < 2:
        for f in files:
            yield _one(f, cfg)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(_one, files, [cfg] * len(files), chunksize=max(1, len(files) // (jobs * 8)))


def _scale_results(paths, cfg, jobs: int, scale):
    """``_results`` through :mod:`spoolproxy.scale` (store URLs, ``--engine dask``,
    ``--parquet``): the same ``(path, problem, doc, interactions)`` tuples, in path order."""
    from ..scale.rows import ERROR, SKIP, detect_doc

    for row in scale.rows(paths, cfg, jobs=jobs):
        if row["verdict"] == SKIP:
            yield row["cassette"], f"skip:{row['error']}", None, 0
        elif row["verdict"] == ERROR:
            yield row["cassette"], f"error:{row['error']}", None, 0
        else:
            yield row["cassette"], None, detect_doc(row), row["interactions"]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print JSON Lines, one object per cassette.")
@click.option("--fail-on", type=click.Choice(LEVELS[1:]), default=None,
              help="Exit 1 when any finding has this severity or higher.")
@click.option("--min-severity", type=click.Choice(LEVELS), default="info", show_default=True,
              help="Hide findings below this severity in the table (JSON always has all).")
@click.option("--jobs", "-j", type=click.IntRange(min=0), default=1, show_default=True,
              help="Worker processes for many cassettes (0: one per CPU). Output order is unchanged.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="spoolproxy.toml to read [detect] from (default: the usual lookup).")
@click.option("--skip-bad", is_flag=True,
              help="Skip corrupt cassettes with a warning instead of exiting 2 at the end.")
@scale_options
@click.option("--judge", is_flag=True,
              help="Also ask the model judge (--model ...): an off_track finding, error-level only when its "
                   "evidence checks out.")
@judge_options
def command(paths: tuple[str, ...], as_json: bool, fail_on: str | None, min_severity: str, jobs: int,
            config_path: str | None, skip_bad: bool, scale, judge: bool, judge_flags: dict) -> None:
    """Flag failing agent runs in cassettes (files, directories, store URLs), with evidence."""
    from ..detectors import SEVERITY_RANK, Report, load_detect_config

    cfg = load_detect_config(config_path)
    judge_opts = None
    if judge:
        judge_opts = judge_options_from(judge_flags, config_path)
    elif judge_flags["model"] or judge_flags["offline"] or judge_flags["replay_judge"]:
        from ..errors import UsageError

        raise UsageError("--model / --offline / --replay-judge configure the judge: add --judge")
    jobs = jobs or (os.cpu_count() or 1)
    if judge_opts is not None and scale.wanted(paths):
        raise click.UsageError("--judge reads local cassettes (its results are stored beside each run); "
                               "drop --judge for a store or a Dask engine")
    if scale.wanted(paths):
        if scale.engine != "local" and jobs > 1:
            raise click.UsageError("--jobs is for the local engine; size a Dask cluster with --workers")
        results = _scale_results(paths, cfg, jobs, scale)
    else:
        results = _results([str(f) for f in iter_paths(paths)], cfg, jobs)
    console = None
    if not as_json:
        from rich.console import Console

        console = Console(highlight=False, soft_wrap=True)
    worst = -1
    counts = {"pass": 0, "fail": 0, "skipped": 0, "corrupt": 0}
    named = named_files(paths)
    for path, problem, doc, n in results:
        if problem is not None:
            kind, _, text = problem.partition(":")
            not_a_cassette = kind == "skip"
            if not_a_cassette and os.path.normpath(path) in named:
                kind = "error"  # named on the command line: it must be a cassette (a CI gate must not pass on it)
            if kind == "skip" or skip_bad:
                click.echo(f"spoolproxy: warning: skipped {'' if not_a_cassette else 'corrupt cassette '}{text}",
                           err=True)
                counts["skipped"] += 1
                continue
            counts["corrupt"] += 1
            click.echo(f"spoolproxy: error: {text}; fix or remove it, or pass --skip-bad", err=True)
            if as_json:
                sys.stdout.write(json.dumps({"cassette": path, "verdict": "error", "error": text}, ensure_ascii=False) + "\n")
            continue
        if judge_opts is not None:
            doc = _judged(path, doc, judge_opts, cfg)
        counts[doc["verdict"]] += 1
        for finding in doc["findings"]:
            worst = max(worst, SEVERITY_RANK[finding["severity"]])
        if as_json:
            sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
        else:
            _print_report(console, Report.model_validate(doc), SEVERITY_RANK[min_severity], n)
    if console is not None:
        console.print(f"{counts['pass'] + counts['fail']} cassettes: [bold red]{counts['fail']} fail[/], "
                      f"[green]{counts['pass']} pass[/]"
                      + (f", [bold red]{counts['corrupt']} corrupt[/]" if counts["corrupt"] else "")
                      + (f", {counts['skipped']} skipped" if counts["skipped"] else ""))
    for hint in _journal_hints([p for p in paths if "://" not in p]):
        click.echo(hint, err=True)
    if counts["corrupt"]:
        if counts["corrupt"] > 1:  # one bad file already has its one error line
            click.echo(f"spoolproxy: error: {counts['corrupt']} corrupt cassettes (listed above); "
                       "fix or remove them, or pass --skip-bad", err=True)
        raise SystemExit(2)
    if fail_on is not None and worst >= SEVERITY_RANK[fail_on]:
        raise SystemExit(1)


def _judged(path: str, doc: dict, opts, cfg) -> dict:
    """``doc`` with the judge's ``off_track`` finding added (and the verdict redone)."""
    from ..detectors import SEVERITY_RANK
    from ..judge.service import diagnose, off_track

    finding = off_track(diagnose(path, opts, cfg))
    if finding is not None:
        doc["findings"].append(finding.model_dump(mode="json"))
        if SEVERITY_RANK[finding.severity] >= SEVERITY_RANK["error"]:
            doc["verdict"] = "fail"
    return doc


def _journal_hints(paths) -> list[str]:
    """One warning per ``.<name>.spooljournal`` under ``paths`` (an interrupted recording
    whose interactions are not in a cassette yet), saying to run ``spoolproxy recover``."""
    from pathlib import Path

    from ..cassettes.journal import journal_path

    out: list[str] = []
    for raw in paths:
        p = Path(raw)
        journals = sorted(p.rglob("*.spooljournal")) if p.is_dir() else [j for j in [journal_path(p)] if j.is_file()]
        for j in journals:
            out.append(f"spoolproxy: warning: {j} is the journal of an interrupted recording (not analysed); "
                       f"run 'spoolproxy recover {j.parent}' to turn it into a cassette")
    return out


def ranges(idxs: list[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2,5,7-8"``."""
    out: list[str] = []
    for i in idxs:
        if out and _last(out[-1]) == i - 1:
            first = out[-1].split("-")[0]
            out[-1] = f"{first}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def _last(part: str) -> int:
    return int(part.split("-")[-1])


def _print_report(console, report, min_rank: int, n: int) -> None:
    from rich.markup import escape
    from rich.table import Table

    from ..detectors import SEVERITY_RANK
    from ..detectors.evidence import evidence_text

    verdict = "[bold red]FAIL[/]" if report.verdict == "fail" else "[green]pass[/]"
    shown = [f for f in report.findings if SEVERITY_RANK[f.severity] >= min_rank]
    cost = ""
    if report.cost is not None and report.cost.calls:
        from .show import usd

        cost = f", cost {usd(report.cost.usd)}"
    console.print(f"{verdict} {escape(report.cassette or '')} [dim]({n} interactions, {len(report.findings)} findings{cost})[/]")
    if not shown:
        return
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=True)
    table.add_column("severity", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("at", max_width=12, overflow="fold")
    table.add_column("message / evidence", overflow="fold", ratio=1)
    for f in shown:
        lines = [escape(f.message)]
        for e in f.evidence:
            where, quote = evidence_text(e, 160)
            lines.append(f"[dim]{where} {escape(e.path)}:[/] [cyan]{escape(quote)}[/]")
        table.add_row(f"[{STYLE[f.severity]}]{f.severity}[/]", f.kind, ranges(f.interactions), "\n".join(lines))
    console.print(table)
    console.print()
