"""Where live budgets come from: command-line flags, then ``[record]``, then ``[detect]``.

```toml
[record]
max_llm_calls = 40        # budgets for live runs (record, playback --live, fork, each verify trial)
max_tool_calls = 60
max_tokens = 400000
max_cost_usd = 2.00
max_seconds = 600
warn_at = 0.8             # warn on stderr at this fraction of a budget
circuit_breaker = true    # refuse model requests once a budget is exceeded or a loop appears
breaker_kinds = ["tool_loop", "retry_storm"]
```

A budget not set in ``[record]`` falls back to the same key of ``[detect]`` (where it also
makes a ``budget_exceeded`` finding after the fact), so one limit serves both.  Other keys of
``[record]`` belong to other settings and are left alone; a key close to a budget key
(``max_llm_call``) is an error naming the intended one.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..config import section
from ..errors import SpoolError, UsageError
from .breaker import BREAKER_KINDS
from .budget import DIMENSIONS, Limits

BUDGET_KEYS = tuple(f for _, f, _ in DIMENSIONS)
GUARD_KEYS = (*BUDGET_KEYS, "warn_at", "circuit_breaker", "breaker_kinds")


class GuardTable(BaseModel):
    """The guard keys of ``[record]``."""

    model_config = ConfigDict(extra="forbid")
    max_llm_calls: int | None = Field(None, ge=0)
    max_tool_calls: int | None = Field(None, ge=0)
    max_tokens: int | None = Field(None, ge=0)
    max_cost_usd: float | None = Field(None, ge=0)
    max_seconds: float | None = Field(None, gt=0)
    warn_at: float = Field(0.8, gt=0, le=1)
    circuit_breaker: bool = False
    breaker_kinds: list[str] = Field(default_factory=lambda: list(BREAKER_KINDS))


@dataclass
class GuardSettings:
    """Resolved guard settings: ``limits``, ``breaker`` on or off, ``breaker_kinds``."""

    limits: Limits = field(default_factory=Limits)
    breaker: bool = False
    breaker_kinds: tuple[str, ...] = BREAKER_KINDS

    @property
    def active(self) -> bool:
        return self.limits.active() or self.breaker


def record_table(path=None) -> GuardTable:
    """The guard keys of ``[record]`` (validated; SpoolError naming a bad or mistyped key)."""
    raw = section("record", path)
    mine = {k: v for k, v in raw.items() if k in GUARD_KEYS}
    for k in raw:
        if k not in GUARD_KEYS:
            close = difflib.get_close_matches(k, GUARD_KEYS, n=1, cutoff=0.85)
            if close:
                raise SpoolError(f"config [record] {k}: unknown key; did you mean '{close[0]}'? fix spoolproxy.toml")
    try:
        table = GuardTable.model_validate(mine)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise SpoolError(f"config [record] {where}: {err['msg']}; fix spoolproxy.toml") from None
    from ..detectors.checks import KINDS

    bad = [k for k in table.breaker_kinds if k not in KINDS]
    if bad:
        raise SpoolError(f"config [record] breaker_kinds: unknown finding kind {bad[0]!r} (kinds: {', '.join(KINDS)})")
    return table


def resolve(flags: dict, config_path=None) -> GuardSettings:
    """Guard settings from command-line ``flags`` (``max_llm_calls`` ... ``max_seconds``,
    ``circuit_breaker``: None when not given), ``[record]`` and ``[detect]``."""
    table = record_table(config_path)
    detect = section("detect", config_path)
    values = {}
    for key in BUDGET_KEYS:
        for source in (flags.get(key), getattr(table, key), detect.get(key)):
            if source is not None:
                values[key] = source
                break
    try:
        limits = Limits(**values, warn_at=table.warn_at)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UsageError(f"--{str(err['loc'][0]).replace('_usd', '').replace('_', '-')}: {err['msg']}") from None
    breaker = flags.get("circuit_breaker")
    return GuardSettings(limits=limits, breaker=table.circuit_breaker if breaker is None else bool(breaker),
                         breaker_kinds=tuple(table.breaker_kinds))


def build_guard(settings: GuardSettings, detect_config=None, say=None):
    """A fresh :class:`~.breaker.Guard` for one run under ``settings`` (None when nothing is
    set): prices and mid-run detector thresholds from ``detect_config`` (a DetectConfig;
    default the shipped one), warnings and breaker messages through ``say`` (one line each)."""
    if not settings.active:
        return None
    from .breaker import Guard

    if detect_config is None:
        from ..detectors.config import DetectConfig

        detect_config = DetectConfig()
    return Guard(settings.limits, breaker=settings.breaker, breaker_kinds=settings.breaker_kinds,
                 say=say or (lambda line: None), prices=detect_config.price_book(), detect_config=detect_config)
