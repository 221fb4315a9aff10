"""``spoolproxy diagnose PATH...``: which interaction of a run failed, and why.

With ``--model`` (any OpenAI-compatible endpoint, or Anthropic's Messages API) one model
call reads the compacted run with the detectors' findings as hints and answers with the
failing interaction, a label (:mod:`spoolproxy.judge.taxonomy`), a one-sentence root cause
and verbatim quotes; every quote is checked against the field it cites and an answer
without valid evidence becomes ``unknown``.  ``--heuristic`` labels the run from the
findings alone, with no model.  ``--show-prompt`` prints what the model would read and
calls nothing.  Results are cached in ``<stem>.diagnosis.json`` beside the run; the
judge's own calls are recorded into ``.<stem>.judge.yaml`` and replayed by ``--offline``.

PATH is a cassette or a directory of cassettes.  Output: one block per run, or with
``--json`` one line per run ``{"cassette", "diagnosis": {...}}``.  Exit status 0; 2 for bad
input or a failed model call.
"""

from __future__ import annotations

import json
import sys

import click

from .judge_options import judge_options, judge_options_from

LABEL_STYLE = {"no_failure": "green", "unknown": "yellow"}


def print_diagnosis(console, name: str, d, *, cached: bool = False) -> None:
    """The diagnosis of one run, as ``diagnose`` and ``fix`` print it."""
    from rich.markup import escape

    who = "heuristic" if d.source == "heuristic" else f"{d.model} ({d.prompt_version})"
    style = LABEL_STYLE.get(d.label, "bold red")
    at = f" at interaction {d.interaction}" if d.interaction is not None else ""
    console.print(f"[bold]{escape(name)}[/]: [{style}]{d.label}[/]{at} [dim]- {escape(who)}"
                  f"{', cached' if cached else ''}[/]")
    if d.claimed_label:
        console.print(f"  [yellow]the model said {escape(d.claimed_label)}[/]")
    if d.root_cause:
        console.print(f"  root cause: {escape(d.root_cause)}")
    for e in d.evidence:
        console.print(f"  [dim]#{e.interaction} {escape(e.path)}:[/] [cyan]{escape(repr(e.quote)[1:-1][:160])}[/]")
    for r in d.rejected:
        console.print(f"  [dim]rejected quote {escape(repr(r.quote)[:80])}: {escape(r.reason)}[/]")
    for n in d.notes:
        console.print(f"  [dim]note: {escape(n)}[/]")
    if d.judge_cassette:
        console.print(f"  [dim]judge traffic: {escape(d.judge_cassette)}[/]")


@click.command("diagnose", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@judge_options
@click.option("--heuristic", is_flag=True, help="Label the run from the detectors' findings alone (no model).")
@click.option("--show-prompt", is_flag=True, help="Print what the model would read and call nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per run (JSON Lines).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="spoolproxy.toml to read [judge], [detect] and [redact] from (default: the usual lookup).")
def command(paths: tuple[str, ...], judge_flags: dict, heuristic: bool, show_prompt: bool, as_json: bool,
            config_path: str | None) -> None:
    """Name the failing interaction of a run, a label, a root cause and verified quotes."""
    from ..cassettes.storage import iter_paths
    from ..detectors import load_detect_config
    from ..errors import CassetteError, UsageError
    from ..judge.service import diagnose, load_run, prompt_messages

    if heuristic and (judge_flags["model"] or judge_flags["replay_judge"]):
        raise UsageError("--heuristic uses no model: drop --model / --replay-judge, or drop --heuristic")
    opts = judge_options_from(judge_flags, config_path, need_model=not (heuristic or show_prompt),
                              hint="; --heuristic needs none")
    if heuristic:
        opts.settings = None
    detect_cfg = load_detect_config(config_path)
    files = [str(f) for f in iter_paths(paths)]
    if judge_flags["replay_judge"] is not None and len(files) > 1:
        raise UsageError("--replay-judge serves one run's judge cassette: give one CASSETTE")
    console = None
    if not as_json:
        from rich.console import Console

        console = Console(highlight=False, soft_wrap=True)
    for f in files:
        try:
            run = load_run(f, detect_cfg)
        except CassetteError as exc:
            if len(files) > 1 and "no 'interactions'" in str(exc):
                continue  # expected.yaml, patch files ... in a directory
            raise
        if show_prompt:
            for m in prompt_messages(run, opts.max_chars):
                click.echo(f"--- {m['role']} ---\n{m['content']}")
            continue
        d = diagnose(f, opts, detect_cfg, run=run)
        if as_json:
            sys.stdout.write(json.dumps({"cassette": f, "diagnosis": d.model_dump(mode="json")}, ensure_ascii=False) + "\n")
        else:
            print_diagnosis(console, f, d, cached=d.cached)
