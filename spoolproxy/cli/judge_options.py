"""Click options for the model judge, shared by ``diagnose``, ``fix`` and ``detect --judge``.

The command receives them as one ``judge_flags`` dict; :func:`judge_options_from` turns it
(with ``[judge]`` of spoolproxy.toml: ``model``, ``base_url``, ``api_key_env``, ``provider``,
``timeout``, ``max_tokens``, ``max_chars``, flags win) into
:class:`~spoolproxy.judge.service.JudgeOptions`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

import click
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import SpoolError, UsageError

_KEYS = ("model", "base_url", "api_key_env", "provider", "offline", "replay_judge", "record_judge", "refresh",
         "timeout", "max_chars", "system_role", "max_tokens")


class JudgeTable(BaseModel):
    """``[judge]`` in spoolproxy.toml (every key optional; command-line flags win)."""

    model_config = ConfigDict(extra="forbid")
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    provider: str | None = None
    timeout: float | None = None
    max_tokens: int | None = None
    max_chars: int | None = None
    system_role: bool | None = None


def judge_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the judge's options; the command receives them as ``judge_flags``."""

    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        flags = {k: kwargs.pop(k) for k in _KEYS}
        return fn(judge_flags=flags, **kwargs)

    options = [
        click.option("--no-system-role", "system_role", flag_value=False, default=None,
                     help="Put the instructions at the top of the user message, not in a system message (chat "
                          "templates that drop system messages, e.g. Gemma on llama-cpp-python)."),
        click.option("--max-tokens", type=click.IntRange(min=16), default=None, metavar="N",
                     help="The model's answer budget in tokens (default 1024)."),
        click.option("--max-chars", type=click.IntRange(min=2000), default=None, metavar="N",
                     help="Size bound of the compacted run the model reads (characters; default 16000).",),
        click.option("--timeout", type=click.FloatRange(min=1), default=None, metavar="S",
                     help="Seconds one model call may take (default 300).",),
        click.option("--refresh", is_flag=True, help="Ask again even when a cached result exists."),
        click.option("--record-judge/--no-record-judge", "record_judge", default=True, show_default=True,
                     help="Record the judge's own model traffic through spoolproxy into .<stem>.judge.yaml "
                          "beside the run (replayed later with --offline)."),
        click.option("--replay-judge", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     metavar="CASSETTE", help="Serve the judge's calls from this recorded judge cassette, offline "
                                              "(its recorded model and endpoint are used unless given)."),
        click.option("--offline", is_flag=True,
                     help="Never call the model: replay .<stem>.judge.yaml (an error when it is missing)."),
        click.option("--provider", type=click.Choice(["openai", "anthropic"]), default=None,
                     help="Wire format: openai (any Chat Completions endpoint) or anthropic (Messages); "
                          "default: anthropic for claude-* models and anthropic.com URLs."),
        click.option("--api-key-env", metavar="VAR", default=None,
                     help="Environment variable holding the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY "
                          "when set; local servers need none)."),
        click.option("--base-url", metavar="URL", default=None,
                     help="The model endpoint, e.g. http://127.0.0.1:11434/v1 (Ollama), http://127.0.0.1:8080/v1 "
                          "(llama.cpp) (default: OpenAI's, or Anthropic's)."),
        click.option("--model", metavar="M", default=None, help="The judge model (default: [judge] model)."),
    ]
    for option in options:
        wrapper = option(wrapper)
    return wrapper


def _table(config_path: str | None) -> JudgeTable:
    from .. import config

    try:
        return JudgeTable.model_validate(config.section("judge", config_path))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise SpoolError(f"config [judge] {'.'.join(str(x) for x in err['loc'])}: {err['msg']}; fix spoolproxy.toml") from None


def judge_options_from(flags: dict[str, Any], config_path: str | None = None, *, need_model: bool = True,
                       hint: str = ""):
    """:class:`JudgeOptions` from the flags and ``[judge]`` (see the module docstring).
    Without a model (and ``need_model``), raises UsageError saying how to name one (plus
    ``hint``)."""
    from ..cassettes.redact import Redactor
    from ..config import section
    from ..judge.client import JudgeSettings
    from ..judge.service import JudgeOptions
    from ..judge.traffic import recorded_judge

    t = _table(config_path)
    model, base_url, provider = flags["model"] or t.model, flags["base_url"] or t.base_url, flags["provider"] or t.provider
    replay = flags["replay_judge"]
    if replay is not None:
        info = recorded_judge(replay)
        model, base_url = model or info.get("model"), base_url or info.get("base_url")
        provider = provider or info.get("provider")
    if provider not in (None, "openai", "anthropic"):
        raise SpoolError(f"config [judge] provider = {provider!r}: use 'openai' or 'anthropic'")
    redactor = Redactor.from_config(section("redact", config_path))
    opts = JudgeOptions(record=flags["record_judge"], offline=flags["offline"], replay=replay, refresh=flags["refresh"],
                        max_chars=flags["max_chars"] or t.max_chars or 16_000, redactor=redactor)
    if not model and flags["offline"]:
        model = ""  # taken from the run's judge cassette
    if model is None or (not model and not flags["offline"]):
        if need_model:
            raise UsageError("name the judge model: --model M [--base-url URL] (or [judge] model in spoolproxy.toml)"
                             + hint)
        return opts
    opts.settings = JudgeSettings(model=model, base_url=base_url, api_key_env=flags["api_key_env"] or t.api_key_env,
                                  provider=provider, timeout=flags["timeout"] or t.timeout or 300.0,
                                  max_tokens=flags["max_tokens"] or t.max_tokens or 1024,
                                  system_role=False if flags["system_role"] is False or t.system_role is False else True)
    if flags["offline"] and replay is not None:
        raise UsageError("--offline replays the run's own judge cassette; --replay-judge names another: give one")
    return opts
