"""``spoolproxy fix CASSETTE --model M``: patches that might fix a diagnosed run.

A second model call, separate from the diagnosis (made first when the run has none),
turns the diagnosis into 1-3 ranked typed patches (the patch kinds of ``fork``), each with
a rationale.  A proposal is kept only if it parses, its target exists in the run (checked
by a dry run against the recorded requests), it is small and it copies none of the run's
data (ids, amounts, names); see :mod:`spoolproxy.judge.proposals`.  Kept patches are
written as ``<stem>.fix-1.yaml`` ... beside the run, for ``spoolproxy fork --patch`` and
``spoolproxy verify --patch``; ``--verify -k K`` runs ``verify`` on the first one.  The
model's traffic is recorded into ``.<stem>.judge-fix.yaml`` (replayed by ``--offline``).

Exit status: 0 when a patch was kept (with ``--verify``: verify's status), 1 when none
was, 2 for bad input or a failed model call.
"""

from __future__ import annotations

import json
import sys

import click

from .judge_options import judge_options, judge_options_from


@click.command("fix", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("cassette", type=click.Path(dir_okay=False))
@judge_options
@click.option("--verify", "run_verify", is_flag=True, help="Run 'spoolproxy verify' with the first kept patch.")
@click.option("-k", "k", type=click.IntRange(1, 100), default=3, show_default=True,
              help="With --verify: patched trials (and as many controls).")
@click.option("--connect-to", multiple=True, metavar="HOST1:PORT1:HOST2:PORT2",
              help="With --verify: passed to verify (curl's meaning; repeatable).")
@click.option("--max-cost", type=float, default=None, metavar="USD", help="With --verify: passed to verify.")
@click.option("--json", "as_json", is_flag=True, help="Print the diagnosis and the proposals as one JSON object.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="spoolproxy.toml to read [judge], [detect] and [redact] from (default: the usual lookup).")
def command(cassette: str, judge_flags: dict, run_verify: bool, k: int, connect_to: tuple[str, ...],
            max_cost: float | None, as_json: bool, config_path: str | None) -> None:
    """Propose 1-3 checked patches for a diagnosed run, written as patch files for fork/verify."""
    from ..detectors import load_detect_config
    from ..judge.service import fixable, load_run, propose
    from .diagnose import print_diagnosis

    opts = judge_options_from(judge_flags, config_path)
    if opts.replay is not None:
        from ..errors import UsageError

        raise UsageError("fix makes its own model call: use --offline to replay the recorded .<stem>.judge.yaml "
                         "and .<stem>.judge-fix.yaml, not --replay-judge")
    detect_cfg = load_detect_config(config_path)
    run = load_run(cassette, detect_cfg)
    diagnosis = fixable(run, opts, detect_cfg)
    fixes = propose(cassette, opts, detect_cfg, run=run, diagnosis=diagnosis)
    if as_json:
        sys.stdout.write(json.dumps({"cassette": cassette, "diagnosis": diagnosis.model_dump(mode="json"),
                                     "fixes": fixes.model_dump(mode="json")}, ensure_ascii=False) + "\n")
    else:
        from rich.console import Console
        from rich.markup import escape

        from ..fix.patches import parse_patches

        console = Console(highlight=False, soft_wrap=True)
        print_diagnosis(console, cassette, diagnosis, cached=diagnosis.cached)
        console.print(f"[bold]fixes[/] [dim]- {escape(str(fixes.model))} ({fixes.prompt_version})"
                      f"{', cached' if fixes.cached else ''}[/]")
        for n, p in enumerate(fixes.proposals, 1):
            try:
                what = parse_patches(p.patch).patches[0].describe()
            except Exception:  # noqa: BLE001 - a dropped proposal may not parse
                what = json.dumps(p.patch, ensure_ascii=False)[:120]
            if p.kept:
                tag = " (test only: a counterfactual)" if p.test_only else ""
                console.print(f"  [green]fix-{p.rank}[/] {escape(what)}{tag} -> {escape(p.file or '')}")
                if p.rationale:
                    console.print(f"      [dim]why: {escape(p.rationale)}[/]")
            else:
                console.print(f"  [red]dropped[/] proposal {n}: {escape(what)}")
                for prob in p.problems:
                    console.print(f"      [dim]{escape(prob)}[/]")
        for note in fixes.notes:
            console.print(f"  [dim]note: {escape(note)}[/]")
        if fixes.kept and not run_verify:
            first = run.path.with_name(fixes.kept[0].file or "")
            console.print(f"next: spoolproxy fork {escape(cassette)} --patch {escape(str(first))} --dry-run")
    if not fixes.kept:
        raise SystemExit(1)
    if run_verify:
        from . import verify

        args = [cassette, "--patch", str(run.path.with_name(fixes.kept[0].file or "")), "-k", str(k)]
        for c in connect_to:
            args += ["--connect-to", c]
        if max_cost is not None:
            args += ["--max-cost", str(max_cost)]
        rv = verify.command.main(args=args, prog_name="spoolproxy verify", standalone_mode=False)
        raise SystemExit(rv if isinstance(rv, int) else 0)
