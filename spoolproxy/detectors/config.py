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
error_patterns = ["quota exceeded"]   # extra regexes marking a tool result as failed
ack_patterns = ["no luck"]            # extra regexes by which an answer admits a failure
output_tools = ["final_result*"]      # tool names (fnmatch) that deliver the final answer
expected_status = [401]       # statuses the run provokes on purpose: http_error becomes info
disable = ["refusal"]         # detector kinds to skip
```
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..config import section
from ..errors import SpoolError


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
    error_patterns: list[str] = Field(default_factory=list)
    ack_patterns: list[str] = Field(default_factory=list)
    output_tools: list[str] = Field(default_factory=lambda: ["final_result*", "structured_output", "json_tool_call"])
    expected_status: list[int] = Field(default_factory=list)
    disable: list[str] = Field(default_factory=list)

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
    """Read ``[detect]`` from the config file (``path`` or the usual lookup).

    Raises SpoolError naming the bad key when the table does not validate.
    """
    raw = section("detect", path)
    try:
        return DetectConfig.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "detect"
        raise SpoolError(f"config [detect] {where}: {err['msg']}; fix spoolproxy.toml") from None
