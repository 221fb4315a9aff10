"""Click options shared by ``export-test`` and ``annotate``: a case's assertions."""

from __future__ import annotations

from typing import Any, Callable

import click


def assertion_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--final-answer-contains`` (``contains``), ``--final-answer-matches``
    (``matches``), ``--tool`` (``tools``), ``--max-llm-calls`` and ``--max-tool-calls`` to a command."""
    options = [
        click.option("--final-answer-contains", "contains", multiple=True, metavar="TEXT",
                     help="Assert the final answer contains TEXT (repeatable)."),
        click.option("--final-answer-matches", "matches", default=None, metavar="REGEX",
                     help="Assert the final answer matches REGEX."),
        click.option("--tool", "tools", multiple=True, metavar="NAME", help="Assert tool NAME is called (repeatable)."),
        click.option("--max-llm-calls", type=int, default=None, help="Assert at most N LLM calls."),
        click.option("--max-tool-calls", type=int, default=None, help="Assert at most N tool calls asked for by the model."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn
