"""``spoolproxy verify CASE_OR_CASSETTE --patch FILE -k K``: does the patch fix the run?

K patched forks and K unpatched controls of the failing run, live, interleaved, plus the
patch on past good runs (``--regress``; a case's pinned passing run by default), then a
verdict from Wilson 95% intervals: VERIFIED, LIKELY, INCONCLUSIVE or REJECTED (see
:mod:`spoolproxy.fix.stats`).  Provider errors count as errored, never as failed.  A
progress bar shows the trials and the cost of live model calls so far against
``--max-cost``, which stops further trials once reached.  ``--pin`` saves the best passing
patched run as the case's cassette.  Budgets per trial (``--max-llm-calls``,
``--max-tool-calls``, ``--max-tokens``, ``--trial-max-cost``, ``--max-seconds``,
``--circuit-breaker``; or ``[record]``/``[detect]``) guard each trial as ``record`` guards a
run: a trial the breaker stopped, or one over its budget, failed (the agent ran away).

Exit status: 0 for VERIFIED or LIKELY, 1 for REJECTED or INCONCLUSIVE, 2 for bad input.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import click

from ..errors import UsageError
from ..suite.files import DEFAULT_SUITE
from .fork import build_patches, patch_options
from .guard_options import guard_options

VERDICT_STYLE = {"VERIFIED": "bold green", "LIKELY": "green", "INCONCLUSIVE": "yellow", "REJECTED": "bold red"}
OUTCOME_STYLE = {"passed": "green", "failed": "red", "errored": "yellow", "skipped": "dim", "not_run": "dim"}


@click.command("verify", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("target", metavar="CASE_OR_CASSETTE")
@patch_options
@click.option("-k", "k", type=click.IntRange(1, 100), default=3, show_default=True,
              help="Patched trials (and as many controls).")
@click.option("--no-control", is_flag=True, help="Run no control trials (weaker evidence: see docs/fix.md).")
@click.option("--regress", multiple=True, metavar="PATHS",
              help="Past good runs to rerun with the patch: cassettes, case files (their cassette, command and "
                   "assertions) or directories of either, comma-separated or repeated; 'none' for none "
                   "(default: the case's pinned passing cassette).")
@click.option("--at", "at", type=int, default=None, metavar="N",
              help="Fork point of the trials (default: the first interaction the patch changes).")
@click.option("--max-cost", type=float, default=None, metavar="USD",
              help="Stop starting trials once the live model calls cost this much (USD, from the price table).")
@click.option("--pace", type=float, default=0.0, metavar="SECONDS", help="Pause between trials (rate limits).")
@click.option("--timeout", "timeout_s", type=float, default=300.0, show_default=True, help="Seconds a trial may run.")
@click.option("--pin", is_flag=True, help="Save the best passing patched run as the case's cassette (VERIFIED or LIKELY only).")
@click.option("--json", "as_json", is_flag=True, help="Print the verification as one JSON object.")
@click.option("--suite", "suite_dir", default=DEFAULT_SUITE, show_default=True, type=click.Path(path_type=Path),
              help="Suite directory a case name is looked up in.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory for the trial cassettes and verification.json "
                   "(default: <suite>/.runs/<case>/verify-<time>, or <cassette dir>/.runs/<stem>/verify-<time>).")
@click.option("--connect-to", multiple=True, metavar="HOST1:PORT1:HOST2:PORT2",
              help="For live hosts: connect to HOST2:PORT2 instead (curl's meaning; repeatable).")
@click.option("--upstream-ca", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="For live hosts: also trust this CA (PEM).")
@click.option("--insecure-upstream", is_flag=True, help="Do not verify upstream TLS certificates.")
@click.option("--upstream-proxy", metavar="URL", default=None, help="Chain live traffic to this proxy.")
@guard_options(cost_option="--trial-max-cost", scope="each trial")
def command(target, patch_files, system_append, tool_results, routes, k, no_control, regress, at, max_cost, pace,
            timeout_s, pin, as_json, suite_dir, out_dir, connect_to, upstream_ca, insecure_upstream,
            upstream_proxy, guard_flags) -> None:
    """Verify a patch: K patched vs K control trials, live, plus past good runs; a verdict.

    \b
      spoolproxy verify stock-check --patch fixes/html-rule.yaml -k 5 --pin
      spoolproxy verify run.yaml --system-append "Stop after two lookups." -k 3 --max-llm-calls 8 --circuit-breaker
    """
    from ..cassettes.redact import Redactor
    from ..cassettes.storage import ensure_dir
    from ..config import find_config, section
    from ..detectors import load_detect_config
    from ..fix.runner import ForkEngine
    from ..fix.verify import regress_runs, run_verification, subject_of
    from ..proxy.runner import ProxyRunner

    patches = build_patches(patch_files, system_append, tool_results, routes)
    if not patches:
        raise UsageError("give the patch to verify: --patch FILE (or --system-append / --tool-result / --route)")
    if max_cost is not None and max_cost <= 0:
        raise UsageError("--max-cost must be a positive amount in USD")
    if pace < 0:
        raise UsageError("--pace must not be negative")
    subject = subject_of(target, suite_dir)
    if pin and subject.case is None:
        raise UsageError(f"--pin saves into a test case, and {target} is a cassette: export a case first "
                         f"(spoolproxy export-test {target}) and verify that")
    regress_list = regress_runs(tuple(regress)) if regress else None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    if out_dir is None:
        out_dir = (subject.case_path.parent / ".runs" / subject.name if subject.case_path is not None
                   else subject.cassette.parent / ".runs" / subject.name) / f"verify-{stamp}"
    ensure_dir(out_dir)  # an unwritable --out fails now, not after the first trial
    config_path = find_config(subject.root) if subject.root else find_config()
    redactor = Redactor.from_config(section("redact", config_path))
    detect_config = load_detect_config(config_path)
    from .guard_options import guard_settings

    guards = guard_settings(guard_flags, config_path)  # bad [record] keys fail before any trial runs

    def runner(addons):
        return ProxyRunner(addons, connect_to=connect_to, upstream_ca=upstream_ca, insecure_upstream=insecure_upstream,
                           upstream_proxy=upstream_proxy, options={"connection_strategy": "lazy"})

    with _Progress(k * (1 if no_control else 2) + len(regress_list if regress_list is not None else subject.regress),
                   max_cost) as bar, ForkEngine(runner, redactor=redactor) as engine:
        def guard_for(label: str):
            from ..guards.config import build_guard

            return build_guard(guards, detect_config, lambda line: bar.say(redactor.text(f"  {label}: {line}")))

        v = run_verification(subject, patches, k, engine=engine, out_dir=out_dir, control=not no_control,
                             regress=regress_list, at=at, max_cost=max_cost, pace=pace, timeout_s=timeout_s,
                             progress=bar.update, config=detect_config,
                             guard_factory=guard_for if guards.active else None)
    if pin:
        _pin(v, subject)
    if as_json:
        from ..fix.verify import to_json

        click.echo(to_json(v))
    else:
        render(v)
    raise SystemExit(0 if v.verdict in ("VERIFIED", "LIKELY") else 1)


def _pin(v, subject) -> None:
    """Pin the best passing patched trial into the case (VERIFIED or LIKELY only)."""
    import os

    from ..cassettes import load, save
    from ..fix.verify import best_passing, write, write_hook
    from ..suite.runner import pin, pinned_path
    from .learn_review import pinned_sibling

    best = best_passing(v)
    if v.verdict not in ("VERIFIED", "LIKELY") or best is None:
        click.echo(f"spoolproxy: not pinned: the verdict is {v.verdict}" +
                   ("" if best else " and no patched trial passed"), err=True)
        return
    target = pinned_path(subject.case, subject.root)
    if target.resolve() == Path(subject.cassette).resolve():
        # the verified run itself is named *.pinned.yaml: never overwrite it; the winner goes
        # beside it where `--learn-from pinned` looks (<stem>.pinned.yaml)
        target = pinned_sibling(Path(subject.cassette))
    target = pin(subject.case, subject.case_path, subject.root, Path(best.cassette), target)
    cas = load(target)  # keep the link to the parent right from the new place
    parent = Path(best.source or subject.cassette).resolve()
    cas.meta.extra["forked_from"] = os.path.relpath(parent, target.resolve().parent)
    save(cas, target)
    v.pinned = str(target)
    write(v, Path(v.out_dir))
    write_hook(v, subject.cassette)


class _Progress:
    """A rich progress bar on stderr: trials done, the last outcome, cost so far vs --max-cost."""

    def __init__(self, total: int, max_cost: float | None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True)
        self.max_cost = max_cost
        self.progress = Progress(TextColumn("[bold]verify[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[cost]}"), TimeElapsedColumn(), console=self.console,
                                 transient=False)
        self.task = self.progress.add_task("starting", total=max(total, 1), cost=self._cost(0.0, False))

    def _cost(self, spent: float, unknown: bool) -> str:
        shown = f"cost ${spent:.4f}" + ("+?" if unknown else "")
        return shown + (f" of ${self.max_cost:.4f}" if self.max_cost is not None else "")

    def __enter__(self) -> "_Progress":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def say(self, line: str) -> None:
        """One line (a trial's budget warning) above the bar."""
        self.progress.console.print(line, markup=False, highlight=False)

    def update(self, trial, label: str, v) -> None:
        cost = self._cost(v.cost_usd, v.cost_unknown)
        if trial is None:
            self.progress.update(self.task, description=f"{label} running", cost=cost)
            return
        style = OUTCOME_STYLE.get(trial.outcome, "")
        self.progress.console.print(f"  {label}: [{style}]{trial.outcome}[/] - {_esc(trial.reason)}", highlight=False)
        self.progress.update(self.task, advance=1, description=f"{label} {trial.outcome}", cost=cost)


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def render(v) -> None:
    """Print a verification: arms table, past good runs, cost, verdict, where the trials are."""
    from rich.console import Console
    from rich.table import Table

    from ..fix.stats import Arm

    console = Console(soft_wrap=False, width=max(100, Console().width))
    n = len(v.patches)
    console.print(f"[bold]verify {_esc(v.subject)}[/]: {n} patch{'es' if n != 1 else ''}, k={v.k}, fork at interaction "
                  f"{v.at} of {_esc(_shown(v.cassette))}", highlight=False)
    for line in v.patches:
        console.print(f"  {_esc(line)}", highlight=False)
    table = Table()
    for col in ("arm", "passed", "failed", "errored", "not run", "pass rate", "Wilson 95%", "cost"):
        table.add_column(col, no_wrap=True)
    arms: list[Arm] = [v.arm("patched")] + ([v.arm("control")] if v.control else [])
    for a in arms:
        lo, hi = a.interval
        rate = f"{a.rate:.0%}" if a.rate is not None else "-"
        table.add_row(a.name, str(a.passed), str(a.failed), str(a.errored), str(a.not_run), rate,
                      f"{lo:.0%}-{hi:.0%}" if a.usable else "-", _arm_cost(v, a.name))
    console.print(table)
    regress = [t for t in v.trials if t.arm == "regression"]
    if regress:
        console.print("past good runs:")
        for t in regress:
            style = OUTCOME_STYLE.get(t.outcome, "")
            console.print(f"  {_esc(_shown(t.source or '?'))}: [{style}]{t.outcome}[/] - {_esc(t.reason)}", highlight=False)
    blocked = sorted({b for t in v.trials for b in t.blocked})
    if blocked:
        console.print(f"blocked side effects during trials: {_esc(', '.join(blocked))}", highlight=False)
    from .show import usd

    budget = f" of --max-cost {usd(v.max_cost_usd)}" if v.max_cost_usd is not None else ""
    if v.cost_unknown and not v.cost_usd:
        spent = "unknown (no price for the models used: give them one in [prices])"
    elif v.cost_unknown:
        spent = f"{usd(v.cost_usd)} + calls of models with no price (not counted; see [prices])"
    else:
        spent = usd(v.cost_usd)
    console.print(f"cost of live model calls: {_esc(spent + budget)}", highlight=False)  # '[prices]' is text
    if v.stopped:
        console.print(f"[yellow]stopped early: {_esc(v.stopped)}[/]")
    style = VERDICT_STYLE.get(v.verdict or "", "")
    console.print(f"[{style}]{v.verdict}[/]: {_esc(v.reason)}", highlight=False)
    console.print(f"trials: {_esc(_shown(v.out_dir))}/ (verification.json)", highlight=False)
    if v.pinned:
        console.print(f"pinned: {_esc(_shown(v.pinned))}", highlight=False)
        console.print(f"learn assertions from it: spoolproxy annotate {_esc(v.subject)} --learn-from pinned",
                      highlight=False)


def _arm_cost(v, name: str) -> str:
    """The arm's live model calls' cost: ``$0.000123``, ``$0.0012+?`` (some call unpriced), ``?``."""
    from ..fix.verify import arm_cost
    from .show import usd

    spent, unknown = arm_cost(v, name)
    if unknown and not spent:
        return "?"
    return usd(spent) + ("+?" if unknown else "")


def _shown(path: str) -> str:
    """``path`` relative to the cwd when below it."""
    import os

    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else path
