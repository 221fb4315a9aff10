"""A small, dated table of list prices for cost estimates (USD per 1M tokens, standard
tier, no caching or batch discounts), from the providers' public pricing pages.

Unknown model -> no cost (None), never a guess.  Model names are matched exactly after
stripping a date or version suffix (``gpt-4o-mini-2024-07-18`` -> ``gpt-4o-mini``,
``claude-sonnet-4-20250514`` -> ``claude-sonnet-4``, ``gemini-2.0-flash-001`` ->
``gemini-2.0-flash``).
"""

from __future__ import annotations

import re
from functools import lru_cache

PRICES_AS_OF = "2025-06-01"

#: model -> (input USD / 1M tokens, output USD / 1M tokens)
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o1": (15.00, 60.00),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "gpt-3.5-turbo": (0.50, 1.50),
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-haiku": (0.25, 1.25),
    "gemini-2.5-pro": (1.25, 10.00),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.0-flash": (0.10, 0.40),
    "gemini-1.5-flash": (0.075, 0.30),
    "gemini-1.5-pro": (1.25, 5.00),
}

_SUFFIX = re.compile(r"(-\d{4}-\d{2}-\d{2}|-\d{8}|-\d{3}|-latest)$")


@lru_cache(maxsize=1024)
def price_of(model: str | None) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens for ``model``, or None when not in the table."""
    if not model:
        return None
    name = model.split("/")[-1].lower()
    if name in PRICES:
        return PRICES[name]
    stripped = _SUFFIX.sub("", name)
    return PRICES.get(stripped)


def cost_usd(model: str | None, input_tokens: int | None, output_tokens: int | None) -> float | None:
    """Estimated cost in USD of one call, or None for an unknown model."""
    p = price_of(model)
    if p is None:
        return None
    return ((input_tokens or 0) * p[0] + (output_tokens or 0) * p[1]) / 1_000_000
