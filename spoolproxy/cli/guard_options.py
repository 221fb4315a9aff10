"""Click options for live budgets and the circuit breaker, shared by ``record``, ``playback``,
``fork`` and ``verify`` (where they apply to each trial)."""

from __future__ import annotations

import functools
from typing import Any, Callable

import click

_KEYS = ("max_llm_calls", "max_tool_calls", "max_tokens", "max_cost_usd", "max_seconds", "circuit_breaker")


def guard_options(fn: Callable[..., Any] | None = None, *, cost_option: str = "--max-cost",
                  scope: str = "the run") -> Any:
    """Add ``--max-llm-calls``, ``--max-tool-calls``, ``--max-tokens``, ``--max-cost USD``,
    ``--max-seconds``, ``--circuit-breaker/--no-circuit-breaker``; the command receives them
    as one ``guard_flags`` dict (None for options not given).  Use bare (``@guard_options``)
    or with ``cost_option`` (the cost budget's flag, for a command whose ``--max-cost`` means
    something else, as ``verify``'s) and ``scope`` (what a budget covers, for the help:
    ``each trial``)."""
    if fn is None:
        return lambda f: guard_options(f, cost_option=cost_option, scope=scope)

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
                     help=f"Budget: wall seconds of {scope} (checked at each model request)."),
        click.option(cost_option, "max_cost_usd", type=click.FloatRange(min=0), default=None, metavar="USD",
                     help=f"Budget: cost in USD of {scope}'s priced model calls (unknown models add nothing and "
                          "are listed)."),
        click.option("--max-tokens", type=click.IntRange(min=0), default=None, metavar="N",
                     help=f"Budget: tokens the providers report in {scope}."),
        click.option("--max-tool-calls", type=click.IntRange(min=0), default=None, metavar="N",
                     help=f"Budget: tool calls the model asks for in {scope}."),
        click.option("--max-llm-calls", type=click.IntRange(min=0), default=None, metavar="N",
                     help=f"Budget: model calls in {scope} (a warning at 80%; with --circuit-breaker call N+1 is "
                          "refused)."),
    ]
    for option in options:
        wrapper = option(wrapper)
    return wrapper


def _echo(line: str) -> None:
    click.echo(line, err=True)


def guard_settings(flags: dict, config_path):
    """The :class:`~spoolproxy.guards.config.GuardSettings` of these flags, ``[record]`` and
    ``[detect]`` (SpoolError for a bad config key)."""
    from ..guards.config import resolve

    return resolve(flags or {}, config_path)


def make_guard(flags: dict, config_path, detect_config=None, *, live_only: bool = False, say=None):
    """``(guard, addon)`` for these flags and the config (``(None, None)`` when no budget and
    no breaker is set).  Warnings and the breaker's messages go to ``say`` (default stderr)."""
    from ..guards.addon import GuardAddon
    from ..guards.config import build_guard

    settings = guard_settings(flags, config_path)
    if not settings.active:
        return None, None
    if detect_config is None:
        from ..detectors import load_detect_config

        detect_config = load_detect_config(config_path)
    guard = build_guard(settings, detect_config, say or _echo)
    return guard, GuardAddon(guard, live_only=live_only)
