"""Click options for live budgets and the circuit breaker, shared by ``record`` and ``playback``."""

from __future__ import annotations

import functools
from typing import Any, Callable

import click

_KEYS = ("max_llm_calls", "max_tool_calls", "max_tokens", "max_cost_usd", "max_seconds", "circuit_breaker")


def guard_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--max-llm-calls``, ``--max-tool-calls``, ``--max-tokens``, ``--max-cost USD``,
    ``--max-seconds``, ``--circuit-breaker/--no-circuit-breaker``; the command receives them
    as one ``guard_flags`` dict (None for options not given)."""

    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        flags = {k: kwargs.pop(k) for k in _KEYS}
        return fn(guard_flags=flags, **kwargs)

    options = [
        click.option("--circuit-breaker/--no-circuit-breaker", "circuit_breaker", default=None,
                     help="Once a budget is exceeded or a tool loop / retry storm appears, answer further model "
                          "requests with a non-retryable error in the provider's shape (default: [record] "
                          "circuit_breaker, else off: budgets only warn)."),
        click.option("--max-seconds", type=click.FloatRange(min=0, min_open=True), default=None, metavar="S",
                     help="Budget: wall seconds of the run (checked at each model request)."),
        click.option("--max-cost", "max_cost_usd", type=click.FloatRange(min=0), default=None, metavar="USD",
                     help="Budget: cost in USD of priced model calls (unknown models add nothing and are listed)."),
        click.option("--max-tokens", type=click.IntRange(min=0), default=None, metavar="N",
                     help="Budget: tokens the providers report."),
        click.option("--max-tool-calls", type=click.IntRange(min=0), default=None, metavar="N",
                     help="Budget: tool calls the model asks for."),
        click.option("--max-llm-calls", type=click.IntRange(min=0), default=None, metavar="N",
                     help="Budget: model calls (a warning at 80%; with --circuit-breaker call N+1 is refused)."),
    ]
    for option in options:
        wrapper = option(wrapper)
    return wrapper


def make_guard(flags: dict, config_path, detect_config=None, *, live_only: bool = False):
    """``(guard, addon)`` for these flags and the config (``(None, None)`` when no budget and
    no breaker is set).  Warnings and the breaker's messages go to stderr."""
    from ..guards.config import resolve

    settings = resolve(flags, config_path)
    if not settings.active:
        return None, None
    from ..guards.addon import GuardAddon
    from ..guards.breaker import Guard

    if detect_config is None:
        from ..detectors import load_detect_config

        detect_config = load_detect_config(config_path)
    guard = Guard(settings.limits, breaker=settings.breaker, breaker_kinds=settings.breaker_kinds,
                  say=lambda line: click.echo(line, err=True), prices=detect_config.price_book(),
                  detect_config=detect_config)
    return guard, GuardAddon(guard, live_only=live_only)
