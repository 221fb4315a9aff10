"""Pass rates, Wilson score intervals and the verdict of a verification.  Pure.

A verification runs K **patched** trials (forks with the patch), K **control** trials
(the same forks without it: the noise floor of a live model) and the patch on **past good
runs** (regression trials).  A trial passed, failed, errored (a provider error: 429, 5xx,
a transport failure, a timeout, or a rerun that left its parent's prefix; never counted as
a failure) or was not run (budget).  Only passed and failed trials are *usable*.

Verdicts (:func:`verdict`), decided in this order:

1. **REJECTED** when a past good run fails with the patch;
2. **INCONCLUSIVE** when an arm has fewer than ``max(2, ceil(K/2))`` usable trials;
3. **REJECTED** when the patched pass rate is no better than the control's (without a
   control arm: when at most half the patched trials pass);
4. **VERIFIED** when the difference is significant and every past good run that was
   checked passed: the patched arm's Wilson 95% lower bound is above the control's upper
   bound, or every control trial failed and every patched trial passed (without a control
   arm: the patched lower bound is at least 0.5) and no regression trial errored;
5. **LIKELY** otherwise: better than control, but not significantly so, or a past good run
   could not be checked.
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

from pydantic import BaseModel

Verdict = Literal["VERIFIED", "LIKELY", "INCONCLUSIVE", "REJECTED"]
TrialOutcome = Literal["passed", "failed", "errored", "skipped", "not_run"]
#: z for a two-sided 95% interval
Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval ``(low, high)`` of a binomial proportion: ``successes`` out
    of ``n`` trials at confidence ``z`` (default 95%).  ``n == 0`` gives ``(0.0, 1.0)``.
    Raises ValueError when ``successes`` is outside ``0..n``."""
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} outside 0..{n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, center - half), min(1.0, center + half)


class Arm(BaseModel):
    """One arm's counts; ``rate`` and ``interval`` are over the usable (passed + failed) trials."""

    name: str
    passed: int = 0
    failed: int = 0
    errored: int = 0
    not_run: int = 0

    @property
    def usable(self) -> int:
        return self.passed + self.failed

    @property
    def rate(self) -> float | None:
        return self.passed / self.usable if self.usable else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.passed, self.usable)

    def add(self, outcome: str) -> None:
        """Count one trial outcome (``skipped`` counts as nothing)."""
        if outcome == "passed":
            self.passed += 1
        elif outcome == "failed":
            self.failed += 1
        elif outcome == "errored":
            self.errored += 1
        elif outcome == "not_run":
            self.not_run += 1

    def line(self) -> str:
        """``3/5 passed (60%, 95% CI 23-88%), 1 errored``."""
        if not self.usable:
            head = "no usable trial"
        else:
            lo, hi = self.interval
            head = f"{self.passed}/{self.usable} passed ({self.rate:.0%}, 95% CI {lo:.0%}-{hi:.0%})"
        extra = [f"{self.errored} errored" for _ in [0] if self.errored] + \
                [f"{self.not_run} not run" for _ in [0] if self.not_run]
        return ", ".join([head, *extra])

    def summary(self) -> dict:
        lo, hi = self.interval
        return {"passed": self.passed, "failed": self.failed, "errored": self.errored, "not_run": self.not_run,
                "rate": self.rate, "wilson95": [round(lo, 4), round(hi, 4)]}


def min_usable(k: int) -> int:
    """The fewest usable trials an arm of ``k`` needs for a verdict other than INCONCLUSIVE."""
    return max(2, math.ceil(k / 2))


def verdict(patched: Arm, control: Arm | None, regressions: Sequence[str], k: int) -> tuple[Verdict, str]:
    """The verdict and a one-line reason (see the module docstring).  ``regressions``: the
    outcome of each regression trial (passed / failed / errored / skipped / not_run)."""
    failed = sum(1 for r in regressions if r == "failed")
    if failed:
        return "REJECTED", f"{failed} past good run{'s' if failed > 1 else ''} now fail{'s' if failed == 1 else ''} with the patch"
    need = min_usable(k)
    for arm in (patched, control):
        if arm is not None and arm.usable < need:
            return "INCONCLUSIVE", (f"only {arm.usable} usable {arm.name} trial{'s' if arm.usable != 1 else ''} "
                                    f"(need {need}; {arm.errored} errored, {arm.not_run} not run)")
    unchecked = sum(1 for r in regressions if r in ("errored", "not_run"))
    p_lo, _ = patched.interval
    if control is None:
        if (patched.rate or 0) <= 0.5:
            return "REJECTED", f"without a control arm, {patched.passed}/{patched.usable} patched trials passing is not enough"
        significant = p_lo >= 0.5
        why = f"patched 95% lower bound {p_lo:.0%} (no control arm)"
    else:
        if (patched.rate or 0) <= (control.rate or 0):
            return "REJECTED", f"no better than control: patched {patched.rate:.0%} vs control {control.rate:.0%}"
        _, c_hi = control.interval
        sweep = control.passed == 0 and patched.failed == 0
        significant = p_lo > c_hi or sweep
        why = ("every patched trial passed and every control failed" if sweep and p_lo <= c_hi else
               f"patched 95% lower bound {p_lo:.0%} {'>' if p_lo > c_hi else '<='} control upper bound {c_hi:.0%}")
    if significant and not unchecked:
        n = len(regressions)
        return "VERIFIED", why + (f"; {n} past good run{'s still pass' if n != 1 else ' still passes'}" if n else "")
    if significant:
        return "LIKELY", why + f"; but {unchecked} past good run{'s' if unchecked != 1 else ''} could not be checked"
    return "LIKELY", "better than control but not significant: " + why
