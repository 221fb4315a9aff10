"""Cost of model calls in USD: a dated table of list prices, the user's ``[prices]``, LiteLLM's
model cost map when it is installed, and $0 for local servers.  Never a guess: a model no
source knows costs ``None`` ("unknown"), and one unknown call makes a run's total unknown.

Where a call's price comes from, first match wins (:meth:`PriceBook.price`):

1. ``user``: ``[prices]`` in spoolproxy.toml (``"my-finetune" = {input = 0.5, output = 1.5}``);
2. ``local``: the server is on this machine or the LAN (``localhost``, ``127.0.0.0/8``,
   ``::1``, ``*.local``, ``*.localhost``, ``host.docker.internal``, ``[prices] local_hosts``)
   or speaks Ollama's own API: $0;
3. ``table <date>``: :data:`PRICES`, list prices per 1M tokens (standard tier, no batch
   discount) as of :data:`PRICES_AS_OF`, checked against LiteLLM 1.110.2's bundled map;
4. ``litellm``: LiteLLM's ``model_prices_and_context_window_backup.json``, read from the
   installed ``litellm`` package without importing it (so nothing is fetched), or the file
   named by ``[prices] model_cost_map`` (same format).

Model names match exactly after lower-casing, dropping a ``vendor/`` prefix and then a date
or version suffix (``gpt-4o-mini-2024-07-18`` -> ``gpt-4o-mini``, ``claude-sonnet-4-20250514``
-> ``claude-sonnet-4``, ``gemini-2.0-flash-001`` -> ``gemini-2.0-flash``).

Token accounting (:func:`call_cost`): ``input_tokens`` include cached reads and cache writes
(both providers' conventions are normalised so by the adapters); cached reads are billed at
``cached_input`` and cache writes at ``cache_write`` when the price has them, else at
``input``; output tokens (reasoning/thinking included) at ``output``.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from ..replayer.hostglob import glob_matches, label_names

PRICES_AS_OF = "2026-12-01"


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens: ``input``, ``output``, and when known ``cached_input`` (cache
    reads) and ``cache_write``.  ``source`` says where it came from (``user``, ``local``,
    ``table 2026-12-01``, ``litellm``)."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    source: str = "table"


def _p(i: float, o: float, cr: float | None = None, cw: float | None = None) -> tuple:
    return (i, o, cr, cw)


#: model -> (input, output, cached input, cache write), USD per 1M tokens
PRICES: dict[str, tuple[float, float, float | None, float | None]] = {
    # OpenAI
    "gpt-4o": _p(2.50, 10.00, 1.25), "gpt-4o-mini": _p(0.15, 0.60, 0.075),
    "gpt-4.1": _p(2.00, 8.00, 0.50), "gpt-4.1-mini": _p(0.40, 1.60, 0.10), "gpt-4.1-nano": _p(0.10, 0.40, 0.025),
    "gpt-5": _p(1.25, 10.00, 0.125), "gpt-5-mini": _p(0.25, 2.00, 0.025), "gpt-5-nano": _p(0.05, 0.40, 0.005),
    "gpt-5.1": _p(1.25, 10.00, 0.125), "gpt-5.2": _p(1.75, 14.00, 0.175), "gpt-5-pro": _p(15.00, 120.00),
    "o1": _p(15.00, 60.00, 7.50), "o3": _p(2.00, 8.00, 0.50), "o3-mini": _p(1.10, 4.40, 0.55),
    "o3-pro": _p(20.00, 80.00), "o4-mini": _p(1.10, 4.40, 0.275),
    "gpt-4-turbo": _p(10.00, 30.00), "gpt-4": _p(30.00, 60.00), "gpt-3.5-turbo": _p(0.50, 1.50),
    # Anthropic (cache reads 0.1x input, 5-minute cache writes 1.25x input)
    "claude-opus-4": _p(15.00, 75.00, 1.50, 18.75), "claude-opus-4-1": _p(15.00, 75.00, 1.50, 18.75),
    "claude-opus-4-5": _p(5.00, 25.00, 0.50, 6.25), "claude-opus-4-6": _p(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-7": _p(5.00, 25.00, 0.50, 6.25),
    "claude-sonnet-4": _p(3.00, 15.00, 0.30, 3.75), "claude-sonnet-4-5": _p(3.00, 15.00, 0.30, 3.75),
    "claude-sonnet-4-6": _p(3.00, 15.00, 0.30, 3.75),
    "claude-3-7-sonnet": _p(3.00, 15.00, 0.30, 3.75), "claude-3-5-sonnet": _p(3.00, 15.00, 0.30, 3.75),
    "claude-haiku-4-5": _p(1.00, 5.00, 0.10, 1.25), "claude-3-5-haiku": _p(0.80, 4.00, 0.08, 1.00),
    "claude-3-haiku": _p(0.25, 1.25, 0.03, 0.30),
    # Google Gemini API (prompts up to 200k tokens)
    "gemini-2.5-pro": _p(1.25, 10.00, 0.125), "gemini-2.5-flash": _p(0.30, 2.50, 0.03),
    "gemini-2.5-flash-lite": _p(0.10, 0.40, 0.01), "gemini-2.0-flash": _p(0.10, 0.40, 0.025),
    "gemini-1.5-flash": _p(0.075, 0.30), "gemini-1.5-pro": _p(1.25, 5.00),
    # others reached through their own OpenAI-compatible APIs
    "deepseek-chat": _p(0.28, 0.42, 0.028), "mistral-large-latest": _p(0.50, 1.50, 0.05),
}

_SUFFIX = re.compile(r"(-\d{4}-\d{2}-\d{2}|-\d{8}|-\d{3}|-latest|-v\d+(:\d+)?)$")
_LOCAL_SUFFIXES = (".local", ".localhost")
#: model families whose weights are not published: a call to one on a local host goes through a
#: gateway (a LiteLLM proxy on localhost:4000, say) and is billed by the provider
_HOSTED_ONLY = ("gpt-", "o1", "o3", "o4-", "chatgpt-", "claude-", "gemini-")
_LOCAL_NAMES = ("localhost", "host.docker.internal", "ip6-localhost")
#: hosts of OpenAI-compatible APIs -> the provider prefix LiteLLM's map uses for them
_LITELLM_PREFIX = {"api.groq.com": "groq", "openrouter.ai": "openrouter", "api.together.xyz": "together_ai",
                   "api.deepseek.com": "deepseek", "api.mistral.ai": "mistral", "api.x.ai": "xai",
                   "api.fireworks.ai": "fireworks_ai", "generativelanguage.googleapis.com": "gemini",
                   "api.anthropic.com": "anthropic", "api.cohere.com": "cohere", "api.cohere.ai": "cohere"}


def model_key(model: str) -> str:
    """``model`` lower-cased without a ``vendor/`` prefix (``openai/gpt-4o`` -> ``gpt-4o``)."""
    return model.split("/")[-1].strip().lower()


@lru_cache(maxsize=1024)
def is_local_host(host: str, extra: tuple[str, ...] = ()) -> bool:
    """True for a server on this machine or a private network: ``localhost``, loopback and
    private IP ranges, ``*.local``/``*.localhost``, ``host.docker.internal``, and any of the
    ``extra`` globs (``[prices] local_hosts``).  ``host`` may carry a ``:port``."""
    names = label_names(host)  # a glob may name the port too (127.0.0.1:8080), as displays show it
    h = names[0]
    if any(glob_matches(g, names) for g in extra):
        return True
    if h in _LOCAL_NAMES or h.endswith(_LOCAL_SUFFIXES):
        return True
    try:
        ip = ipaddress.ip_address(h)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


@lru_cache(maxsize=4)
def _litellm_map(path: str | None) -> dict[str, Any]:
    """LiteLLM's model cost map: ``path`` when given, else the JSON file bundled with an
    installed ``litellm`` (found without importing it); {} when neither exists or it is unreadable."""
    if path is None:
        import importlib.util

        try:
            spec = importlib.util.find_spec("litellm")
        except (ImportError, ValueError):
            return {}
        if spec is None or not spec.submodule_search_locations:
            return {}
        path = str(Path(next(iter(spec.submodule_search_locations))) / "model_prices_and_context_window_backup.json")
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def litellm_version() -> str | None:
    """The installed litellm's version (from its metadata), or None."""
    from importlib import metadata

    try:
        return metadata.version("litellm")
    except metadata.PackageNotFoundError:
        return None


def _from_litellm(entry: Any, source: str) -> Price | None:
    if not isinstance(entry, dict):
        return None
    i, o = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if not isinstance(i, (int, float)) or not isinstance(o, (int, float)):
        return None
    cr, cw = entry.get("cache_read_input_token_cost"), entry.get("cache_creation_input_token_cost")
    m = 1_000_000
    return Price(i * m, o * m, cr * m if isinstance(cr, (int, float)) else None,
                 cw * m if isinstance(cw, (int, float)) else None, source)


class PriceBook:
    """Prices for model calls (see the module docstring for the order of sources).

    ``user``: ``{model: {"input", "output", "cached_input"?, "cache_write"?}}`` in USD per 1M
    tokens (the ``[prices]`` table); ``local_hosts``: extra host globs that cost $0;
    ``model_cost_map``: a JSON file in LiteLLM's format used instead of the installed
    litellm's; ``litellm``: False to ignore LiteLLM entirely.
    """

    def __init__(self, user: Mapping[str, Mapping[str, float]] | None = None, *, local_hosts: tuple[str, ...] = (),
                 model_cost_map: str | None = None, litellm: bool = True) -> None:
        self.user = {model_key(k): Price(float(v["input"]), float(v["output"]), _opt(v.get("cached_input")),
                                         _opt(v.get("cache_write")), "user") for k, v in (user or {}).items()}
        self.local_hosts = tuple(local_hosts)
        self.model_cost_map = model_cost_map
        self.litellm = litellm

    def price(self, model: str | None, *, host: str = "", provider: str | None = None) -> Price | None:
        """The price of ``model`` served by ``host`` (``provider``: the adapter's provider
        name, e.g. ``ollama``), or None when no source knows it."""
        if model:
            key = model_key(model)
            p = self.user.get(key) or self.user.get(_SUFFIX.sub("", key))
            if p is not None:
                return p
        if provider == "ollama" or (host and is_local_host(host, self.local_hosts)):
            if not (model and hosted_only(model)):
                return Price(0.0, 0.0, 0.0, 0.0, "local")
        if not model:
            return None
        p = table_price(model)
        if p is not None:
            return p
        if not self.litellm:
            return None
        cmap = _litellm_map(self.model_cost_map)
        if not cmap:
            return None
        source = "litellm" if self.model_cost_map is None else f"map {Path(self.model_cost_map).name}"
        key = model_key(model)
        prefix = _LITELLM_PREFIX.get(host.split(":")[0].lower()) if host else None
        names = [f"{prefix}/{key}"] if prefix else []
        names += [model.strip(), key, _SUFFIX.sub("", key)]
        for name in names:
            p = _from_litellm(cmap.get(name), source)
            if p is not None:
                return p
        return None


def hosted_only(model: str) -> bool:
    """True for a model family whose weights are not published (so no local server runs it)."""
    key = model_key(model)
    return key.startswith(_HOSTED_ONLY) and not key.startswith("gpt-oss")


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)


@lru_cache(maxsize=1024)
def table_price(model: str | None) -> Price | None:
    """The built-in table's price of ``model`` (exact name, then without its date/version suffix)."""
    if not model:
        return None
    name = model_key(model)
    row = PRICES.get(name) or PRICES.get(_SUFFIX.sub("", name))
    return Price(*row, source=f"table {PRICES_AS_OF}") if row else None


def price_of(model: str | None) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens from the built-in table, or None (kept for callers
    that only need the list price)."""
    p = table_price(model)
    return (p.input, p.output) if p else None


def call_cost(price: Price | None, input_tokens: int | None, output_tokens: int | None,
              cache_read_tokens: int | None = None, cache_write_tokens: int | None = None) -> float | None:
    """USD for one call at ``price`` (None when the price is unknown).  ``input_tokens``
    include the cached ones (see the module docstring)."""
    if price is None:
        return None
    cr, cw = cache_read_tokens or 0, cache_write_tokens or 0
    fresh = max(0, (input_tokens or 0) - cr - cw)
    usd = (fresh * price.input + cr * (price.cached_input if price.cached_input is not None else price.input)
           + cw * (price.cache_write if price.cache_write is not None else price.input)
           + (output_tokens or 0) * price.output)
    return usd / 1_000_000


def cost_usd(model: str | None, input_tokens: int | None, output_tokens: int | None) -> float | None:
    """Cost in USD of one call from the built-in table alone, or None for an unknown model."""
    return call_cost(table_price(model), input_tokens, output_tokens)


def book_from_config(prices: Mapping[str, Any] | None) -> PriceBook:
    """A :class:`PriceBook` from a validated ``[prices]`` table (``{"models": {...},
    "local_hosts": [...], "model_cost_map": PATH | None, "litellm": bool}``)."""
    prices = prices or {}
    return PriceBook(prices.get("models") or {}, local_hosts=tuple(prices.get("local_hosts") or ()),
                     model_cost_map=prices.get("model_cost_map"), litellm=prices.get("litellm", True))
