"""``spoolproxy check PATH...``: run the user checks (oracles) on stored cassettes.

The checks come from ``[[checks]]`` in spoolproxy.toml (``--check NAME`` picks some), or
from ``--command CMD`` / ``--function module:function`` given here.  Each cassette is read as
a run document (what ``spoolproxy show --json`` prints) and handed to every check that
applies to it (by tags and hosts).  Prints one line per check and cassette (``--json``: one
JSON object per cassette).  Exit status: 0 when every check passed, 1 when one failed,
crashed or timed out, 2 for bad input (no check to run, an unknown ``--check``, a corrupt
cassette or a file named as PATH that is not a cassette, unless ``--skip-bad``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from ..errors import UsageError

STATUS_STYLE = {"pass": "green", "fail": "bold red", "crashed": "bold red", "timeout": "bold red"}


@click.command("check")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--check", "names", multiple=True, metavar="NAME", help="Run only this [[checks]] entry (repeatable).")
@click.option("--command", "command_line", default=None, metavar="'CMD ARGS'",
              help="Run this command as a check (reads the run document on stdin; exit 0 passes).")
@click.option("--function", "function", default=None, metavar="MODULE:FUNCTION",
              help="Run this Python function as a check (gets the Transcript).")
@click.option("--timeout", type=click.FloatRange(min=0.1, max=3600), default=None,
              help="Seconds each check may run (default: each check's own, 30 for --command/--function).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per cassette (JSON Lines).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="spoolproxy.toml to read [[checks]], [detect] and [prices] from (default: the usual lookup).")
@click.option("--skip-bad", is_flag=True, help="Skip corrupt cassettes with a warning instead of exiting 2.")
def command(paths, names, command_line, function, timeout, as_json, config_path, skip_bad) -> None:
    """Run the user checks (oracles) on stored cassettes (files or directories)."""
    from ..cassettes.storage import iter_paths, load
    from ..checks import evaluate, run_hosts, run_tags
    from ..checks.spec import CheckSpec
    from ..detectors import analyze, build_transcript, load_detect_config
    from ..errors import CassetteError
    from .detect import named_files

    cfg = load_detect_config(config_path)
    specs = _select(cfg.checks, names, command_line, function, CheckSpec)
    if timeout is not None:
        specs = [s.model_copy(update={"timeout": timeout}) for s in specs]
    bare = cfg.model_copy(update={"checks": []})
    files = [str(f) for f in iter_paths(paths)]
    named = named_files(paths)
    worst, corrupt = 0, 0
    for path in files:
        try:
            cas = load(path)
        except CassetteError as exc:
            # a file found in a directory may be something else; one named here must be a cassette
            if skip_bad or (str(exc.problem).startswith("not a cassette") and os.path.normpath(path) not in named):
                click.echo(f"spoolproxy: warning: skipped {exc}", err=True)
                continue
            click.echo(f"spoolproxy: error: {exc}; fix or remove it, or pass --skip-bad", err=True)
            corrupt += 1
            continue
        t = build_transcript(cas, bare)
        report = analyze(cas, bare, transcript=t)
        results = evaluate(cas, t, specs=specs, report=report)
        tags, hosts = run_tags(cas), run_hosts(t)
        skipped = [{"name": s.name, "why": s.applies(tags, hosts)} for s in specs if s.applies(tags, hosts)]
        if any(r.status != "pass" for r in results):
            worst = 1
        if as_json:
            sys.stdout.write(json.dumps({"cassette": path, "checks": [r.model_dump(mode="json") for r in results],
                                         "skipped": skipped}, ensure_ascii=False) + "\n")
        else:
            _print(path, results, skipped)
    if corrupt:
        if corrupt > 1:  # one bad file already has its one error line
            click.echo(f"spoolproxy: error: {corrupt} corrupt cassettes (listed above); fix or remove them, "
                       "or pass --skip-bad", err=True)
        raise SystemExit(2)
    raise SystemExit(worst)


def _select(configured, names, command_line, function, CheckSpec) -> list:
    """The checks to run: --command/--function ones, else the named or all [[checks]]."""
    adhoc = []
    if command_line:
        adhoc.append(CheckSpec(name="command", command=command_line, base_dir=str(Path.cwd())))
    if function:
        try:
            adhoc.append(CheckSpec(name="function", function=function, base_dir=str(Path.cwd())))
        except ValueError as exc:
            raise UsageError(f"--function {function!r}: write it as module:function") from exc
    if names:
        known = {s.name: s for s in configured}
        missing = [n for n in names if n not in known]
        if missing:
            have = ", ".join(known) or "none"
            raise UsageError(f"no check named {', '.join(missing)} in [[checks]] (configured: {have})")
        return adhoc + [known[n] for n in names]
    specs = adhoc or list(configured)
    if not specs:
        raise UsageError("no check to run: declare [[checks]] in spoolproxy.toml (see docs/checks.md), "
                         "or pass --command 'CMD' or --function module:function")
    return specs


def _print(path: str, results, skipped) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console(highlight=False, soft_wrap=True)
    if not results and not skipped:
        console.print(f"{escape(path)}: no check applies")
    for r in results:
        msg = f": {escape(r.message)}" if r.message else ""
        where = f" (interactions {', '.join(map(str, r.interactions))})" if r.interactions else ""
        console.print(f"{escape(path)}: {escape(r.name)} [{STATUS_STYLE[r.status]}]{r.status}[/]"
                      f"{'' if r.status == 'pass' else ' (' + r.severity + ')'}{where}{msg} [dim]{r.duration_ms:.0f} ms[/]")
    for s in skipped:
        console.print(f"[dim]{escape(path)}: {escape(s['name'])} does not apply: {escape(s['why'])}[/]")
