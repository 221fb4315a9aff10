"""Showing learned assertions for review and taking the reviewer's choice (``export-test`` and
``annotate`` with ``--learn-from``).  Nothing is written unless the reviewer accepts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import click

from ..errors import UsageError


def learn_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--learn-from PASSING_CASSETTE`` (or ``pinned``) and ``--accept-learned SPEC``."""
    fn = click.option("--accept-learned", "accept_learned", default=None, metavar="SPEC",
                      help="Which learned assertions to add without asking: recommended, all, none, or numbers "
                           "as listed (1,3). Without it they are asked for on a terminal, else only shown.")(fn)
    fn = click.option("--learn-from", "learn_from", default=None, metavar="PASSING_CASSETTE",
                      help="Propose assertions by diffing the failing run against this passing run of the same "
                           "task ('pinned': the case's or cassette's .pinned.yaml run).")(fn)
    return fn


def pinned_sibling(cassette: Path) -> Path:
    """``run.yaml`` -> ``run.pinned.yaml`` (where ``spoolproxy test --pin`` keeps a passing run)."""
    return cassette.with_name(f"{cassette.stem}.pinned{cassette.suffix or '.yaml'}")


def review(failing: Path, passing: Path, assertions, accept: str | None, *, config=None, label: str = ""):
    """Learn from the pair, show the proposals, and return ``(assertions, added)``: the case's
    assertions with the accepted proposals added (unchanged when none is accepted).  Raises
    SpoolError for an unreadable cassette and UsageError for a bad ``accept`` spec."""
    from ..cassettes import load
    from ..suite.learn import apply, learn, select

    learned = learn(load(failing), load(passing), config)
    click.echo(f"{label}learned from {passing} (passing) against {failing} (failing):")
    if not learned.same_task:
        click.echo(f"  warning: these may be different tasks: {learned.task_note}")
    if not learned.proposals:
        click.echo("  nothing to propose (no fact, tool or budget tells the runs apart)")
        return assertions, []
    for i, p in enumerate(learned.proposals, 1):
        mark = "*" if p.recommended else " "
        sep = "separates the runs" if p.separates else "does not separate the runs"
        click.echo(f"  {mark}[{i}] {p.describe()}  ({p.why}; {sep})")
    default = ",".join(str(i) for i, p in enumerate(learned.proposals, 1) if p.recommended) or "none"
    if accept is None:
        if not sys.stdin.isatty():
            click.echo(f"  not added: review them, then rerun with --accept-learned {default} "
                       "(or recommended, all, none)")
            return assertions, []
        accept = click.prompt("  add which? (numbers, recommended, all, none)", default=default)
    try:
        chosen = select(learned, accept)
    except ValueError as exc:
        raise UsageError(f"--accept-learned {accept!r}: {exc}") from None
    if chosen:
        click.echo("  added: " + "; ".join(p.describe() for p in chosen))
    else:
        click.echo("  none added")
    return apply(assertions, chosen), chosen
