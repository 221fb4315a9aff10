"""Small statistics helpers: percentiles and the median/p10/p90 summary of repeated runs."""

from __future__ import annotations

import math
from dataclasses import dataclass


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


@dataclass(frozen=True)
class Summary:
    """Median and the p10..p90 spread of repeated measurements, and how many there were."""

    median: float
    p10: float
    p90: float
    n: int

    def as_dict(self) -> dict:
        return {"median": self.median, "p10": self.p10, "p90": self.p90, "n": self.n}


def summarize(values: list[float]) -> Summary:
    """Summary of ``values`` (one per repeated run)."""
    return Summary(percentile(values, 50), percentile(values, 10), percentile(values, 90), len(values))
