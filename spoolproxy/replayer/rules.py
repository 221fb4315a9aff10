"""Built-in volatile-field rules for popular SDKs, so a clean replay is clean under ``--strict``.

Some SDKs put a fresh random value into every run's requests, or send telemetry whose number
and content depend on timing.  Without help, each such run replays with a divergence, a miss
or an unused interaction although nothing the test cares about changed.  A :class:`Rule`
names the endpoint (method, host glob, path glob) and says what varies there:

* ``normalize``: regexes replaced by ``<normalized>`` on both sides (like ``--normalize``,
  but only for this endpoint);
* ``ignore_json_paths``: JSON paths ignored on both sides (like ``--ignore-json-path``);
* ``ignore_body``: the body is not compared at all;
* ``optional``: the SDK may call the endpoint any number of times, including never: its
  recorded interactions are never reported unused, a repeat is served the last recorded
  answer again, and a request no cassette holds gets the usual explained miss response but
  is reported as ``optional`` instead of ``miss`` (it does not fail ``--strict``).

The rules are on by default; ``--no-sdk-rules`` turns them all off and
``--disable-rule NAME`` (repeatable) one of them.  docs/playback.md lists them.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Iterable

from ..errors import UsageError


@dataclass(frozen=True)
class Rule:
    """One SDK's volatile endpoint (see the module docstring).  Globs are ``fnmatch``
    patterns matched case-insensitively against the host and the URL path."""

    name: str
    sdk: str
    why: str
    hosts: tuple[str, ...]
    paths: tuple[str, ...] = ("*",)
    methods: tuple[str, ...] = ()
    normalize: tuple[str, ...] = ()
    ignore_json_paths: tuple[str, ...] = ()
    ignore_body: bool = False
    optional: bool = False

    def applies(self, method: str, host: str, path: str) -> bool:
        """True when a request to ``method host path`` falls under this rule."""
        if self.methods and method.upper() not in self.methods:
            return False
        h = host.lower()
        return any(fnmatch.fnmatchcase(h, g) for g in self.hosts) and any(fnmatch.fnmatchcase(path, g) for g in self.paths)


TELEMETRY = "telemetry: sent in the background, its number and content depend on timing"

#: the built-in rules, in the order docs/playback.md lists them
BUILTIN: tuple[Rule, ...] = (
    Rule(
        "openai-agents-prompt-cache-key", "openai-agents",
        "Runner adds prompt_cache_key 'agents-sdk:run:<random uuid hex>' to every model call of a run "
        "without a conversation, session or group id",
        hosts=("*",), paths=("*/responses", "*/chat/completions"), methods=("POST",),
        normalize=(r"agents-sdk:run:[0-9a-f]{32}",),
    ),
    Rule(
        "openai-agents-tracing", "openai-agents",
        "the tracing exporter POSTs batches of traces and spans (random trace_/span_ ids, timestamps) "
        "to the traces ingest endpoint; " + TELEMETRY,
        hosts=("api.openai.com",), paths=("/v1/traces/ingest",), methods=("POST",), ignore_body=True, optional=True,
    ),
    Rule(
        "litellm-model-prices", "litellm",
        "importing litellm downloads the model price map from GitHub (a background or import-time fetch "
        "that a vcrpy cassette never holds; litellm falls back to its bundled copy on an error)",
        hosts=("raw.githubusercontent.com",), paths=("/BerriAI/litellm/*/model_prices_and_context_window.json",),
        methods=("GET",), optional=True,
    ),
    Rule(
        "crewai-telemetry", "crewAI",
        "OpenTelemetry spans exported to telemetry.crewai.com; " + TELEMETRY,
        hosts=("telemetry.crewai.com",), ignore_body=True, optional=True,
    ),
    Rule(
        "langsmith-tracing", "LangChain / LangSmith",
        "run trees posted to LangSmith (random run ids, timestamps); " + TELEMETRY,
        hosts=("*.smith.langchain.com",), paths=("/runs*", "/api/v1/runs*", "/info", "/api/v1/info"),
        ignore_body=True, optional=True,
    ),
    Rule(
        "logfire-export", "Logfire / pydantic-ai",
        "OTLP traces, logs and metrics exported to Logfire; " + TELEMETRY,
        hosts=("logfire-*.pydantic.dev",), paths=("/v1/*",), ignore_body=True, optional=True,
    ),
    Rule(
        "posthog-telemetry", "chromadb, mem0 and other libraries using PostHog",
        "product analytics events (random distinct ids, timestamps); " + TELEMETRY,
        hosts=("*.posthog.com", "posthog.com"), ignore_body=True, optional=True,
    ),
)

BY_NAME = {r.name: r for r in BUILTIN}


def select(enabled: bool = True, disabled: Iterable[str] = ()) -> tuple[Rule, ...]:
    """The active rules: every built-in one unless ``enabled`` is False, minus ``disabled``
    names.  Raises UsageError for an unknown name."""
    disabled = tuple(disabled)
    unknown = [n for n in disabled if n not in BY_NAME]
    if unknown:
        raise UsageError(f"--disable-rule {unknown[0]!r}: no such rule; choose from {', '.join(BY_NAME)}")
    if not enabled:
        return ()
    return tuple(r for r in BUILTIN if r.name not in disabled)


class RuleSet:
    """The active rules with a per-host cache: :meth:`for_request` costs a dictionary
    look-up after the first request to a host."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = tuple(rules)
        self._by_host: dict[str, tuple[Rule, ...]] = {}

    def for_request(self, method: str, host: str, path: str) -> tuple[Rule, ...]:
        """Rules that apply to ``method host path`` (usually none)."""
        if not self.rules:
            return ()
        h = host.lower()
        cands = self._by_host.get(h)
        if cands is None:
            cands = tuple(r for r in self.rules if any(fnmatch.fnmatchcase(h, g) for g in r.hosts))
            if len(self._by_host) < 4096:
                self._by_host[h] = cands
        return tuple(r for r in cands if r.applies(method, h, path)) if cands else ()
