"""The ``[detect]`` table of ``spoolproxy.toml``: thresholds, budgets, extra patterns.

```toml
[detect]
loop_min_repeats = 3          # identical tool calls that make a loop
retry_storm_min_retries = 3   # retries of one failing request that make a storm
retry_window_s = 120          # attempts further apart (plus retry-after) are separate runs
max_tool_calls = 20           # budgets: unset means no limit
max_llm_calls = 50
max_tokens = 200000
max_cost_usd = 1.50
max_seconds = 300             # wall time from the first request to the last response
error_patterns = ["quota exceeded"]   # extra regexes marking a tool result as failed
ack_patterns = ["no luck"]            # extra regexes by which an answer admits a failure
output_tools = ["final_result*"]      # tool names (fnmatch) that deliver the final answer
expected_status = [401]       # statuses the run provokes on purpose: http_error becomes info
disable = ["refusal"]         # detector kinds to skip
```

Two more tables of spoolproxy.toml travel with a :class:`DetectConfig` loaded by
:func:`load_detect_config`, because every consumer of the detectors needs them too:
``[prices]`` (:class:`PricesTable`: user prices per model, local hosts) and ``[[checks]]``
(:class:`~spoolproxy.checks.spec.CheckSpec`: user checks run by :func:`~spoolproxy.detectors.analyze`).
"""

from __future__ import annotations

import re
from pathlib import Path

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from ..checks.spec import CheckSpec
from ..config import load_config, section
from ..errors import SpoolError


class ModelPrice(BaseModel):
    """A user price, USD per 1M tokens: ``input``, ``output``, optional ``cached_input`` and ``cache_write``."""

    model_config = ConfigDict(extra="forbid")
    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(None, ge=0)
    cache_write: float | None = Field(None, ge=0)


class PricesTable(BaseModel):
    """The ``[prices]`` table: every key but the reserved ones is a model name::

        [prices]
        "my-finetune" = { input = 0.5, output = 1.5 }    # USD per 1M tokens
        local_hosts = ["gpu-box.example"]                # also $0 (besides localhost, private IPs)
        model_cost_map = "prices/litellm.json"           # a map in LiteLLM's format instead of the installed litellm's
        litellm = false                                  # ignore LiteLLM's map
    """

    model_config = ConfigDict(extra="forbid")
    models: dict[str, ModelPrice] = Field(default_factory=dict)
    local_hosts: list[str] = Field(default_factory=list)
    model_cost_map: str | None = None
    litellm: bool = True

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, v: Any) -> Any:
        if isinstance(v, dict) and "models" not in v:
            reserved = {"local_hosts", "model_cost_map", "litellm"}
            return {**{k: x for k, x in v.items() if k in reserved},
                    "models": {k: x for k, x in v.items() if k not in reserved}}
        return v


class DetectConfig(BaseModel):
    """Validated ``[detect]`` settings (all optional; defaults are the shipped behaviour)."""

    model_config = ConfigDict(extra="forbid")
    loop_min_repeats: int = Field(3, ge=2)
    retry_storm_min_retries: int = Field(3, ge=1)
    retry_window_s: float = Field(120.0, gt=0)
    max_tool_calls: int | None = Field(None, ge=0)
    max_llm_calls: int | None = Field(None, ge=0)
    max_tokens: int | None = Field(None, ge=0)
    max_cost_usd: float | None = Field(None, ge=0)
    max_seconds: float | None = Field(None, gt=0)
    error_patterns: list[str] = Field(default_factory=list)
    ack_patterns: list[str] = Field(default_factory=list)
    output_tools: list[str] = Field(default_factory=lambda: ["final_result*", "structured_output", "json_tool_call"])
    expected_status: list[int] = Field(default_factory=list)
    disable: list[str] = Field(default_factory=list)
    prices: PricesTable = Field(default_factory=PricesTable)
    checks: list[CheckSpec] = Field(default_factory=list)

    _book: Any = PrivateAttr(default=None)

    def price_book(self):
        """The :class:`~.pricing.PriceBook` of this config's ``[prices]`` (built once per set of prices)."""
        prices = self.prices.model_dump()
        if self._book is None or self._book[0] != prices:
            from .pricing import book_from_config

            self._book = (prices, book_from_config(prices))
        return self._book[1]

    @field_validator("error_patterns", "ack_patterns")
    @classmethod
    def _regexes(cls, v: list[str]) -> list[str]:
        for p in v:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"bad regex {p!r}: {exc}") from None
        return v


def load_detect_config(path: str | Path | None = None) -> DetectConfig:
    """Read ``[detect]`` (with ``[prices]`` and ``[[checks]]``) from the config file
    (``path`` or the usual lookup).  A check's relative paths are relative to the config
    file's directory (recorded as its ``base_dir``).

    Raises SpoolError naming the bad key when a table does not validate.
    """
    raw = dict(section("detect", path))
    whole = load_config(path)
    for key in ("prices", "checks"):
        if key in raw:
            raise SpoolError(f"config [detect] {key}: put it in its own table ([{key}]"
                             f"{' or [[checks]]' if key == 'checks' else ''}); fix spoolproxy.toml")
    if "prices" in whole:
        raw["prices"] = whole["prices"]
    if "checks" in whole:
        checks = whole["checks"]
        if not isinstance(checks, list):
            raise SpoolError("config: checks must be an array of tables ([[checks]]); fix spoolproxy.toml")
        from ..config import find_config

        cfg_path = Path(path) if path else find_config()
        base = str(cfg_path.resolve().parent) if cfg_path else None
        raw["checks"] = [{**c, "base_dir": c.get("base_dir", base)} if isinstance(c, dict) else c for c in checks]
    try:
        return DetectConfig.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(x) for x in err["loc"]]
        table = "detect"
        if loc and loc[0] in ("prices", "checks"):
            table = "[checks]" if loc[0] == "checks" else "prices"
            loc = loc[1:]
            if table == "prices" and loc[:1] == ["models"]:
                loc = loc[1:]
            if table == "[checks]" and loc and loc[0].isdigit():
                loc[0] = f"#{int(loc[0]) + 1}"
        where = ".".join(loc) or table
        raise SpoolError(f"config [{table}] {where}: {err['msg'].removeprefix('Value error, ')}; fix spoolproxy.toml") from None
