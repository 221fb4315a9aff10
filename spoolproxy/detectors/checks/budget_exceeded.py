"""budget_exceeded: a limit from ``[detect]`` was exceeded: ``max_tool_calls`` (tool calls
the model made), ``max_llm_calls``, ``max_tokens`` (total tokens reported by providers)
or ``max_cost_usd`` (estimate from the dated price table; unknown models add nothing).
Off by default: no limit, no finding.  The finding lists the interaction that crossed the
limit and every later one that added to it.  Severity: error.

Public failures: agno-agi/agno#6984 and superplanehq/superplane#4123 (BR-02, calls past
``tool_call_limit``).
"""

from __future__ import annotations

from ..pricing import cost_usd
from .base import Context

KIND = "budget_exceeded"


def check(ctx: Context) -> list:
    c = ctx.config
    limits = [("tool calls", c.max_tool_calls), ("LLM calls", c.max_llm_calls), ("tokens", c.max_tokens),
              ("cost (USD)", c.max_cost_usd)]
    if all(v is None for _, v in limits):
        return []
    totals = {k: 0.0 for k, _ in limits}
    over: dict[str, list[int]] = {}
    for s in ctx.steps:
        call = s.llm
        if call is None:
            continue
        add = {"tool calls": len(call.tool_calls), "LLM calls": 1, "tokens": call.usage.total,
               "cost (USD)": cost_usd(call.model, call.usage.input_tokens, call.usage.output_tokens) or 0.0}
        for name, limit in limits:
            if limit is None or not add[name]:
                continue
            totals[name] += add[name]
            if totals[name] > limit:
                over.setdefault(name, []).append(s.index)
    out = []
    for name, limit in limits:
        if name in over:
            idxs = over[name]
            total = totals[name]
            shown = f"{total:.4f}" if name.startswith("cost") else f"{total:.0f}"
            out.append(ctx.finding(KIND, "error", idxs, f"{name}: {shown} exceeds the configured limit {limit}",
                                   [ctx.ev.quote(idxs[0], "request.uri", ctx.steps[idxs[0]].url)]))
    return out
