"""budget_exceeded: a limit from ``[detect]`` was exceeded: ``max_tool_calls`` (tool calls
the model made), ``max_llm_calls``, ``max_tokens`` (total tokens reported by providers),
``max_cost_usd`` (priced calls, see :mod:`..pricing`; unknown models add nothing) or
``max_seconds`` (from the first request's start to each response's end; spoolproxy
recordings only).  Off by default: no limit, no finding.  The finding lists the interaction
that crossed the limit and every later one that added to it.  Severity: error.

The counting is :func:`spoolproxy.guards.budget.meter_transcript`, the same meter that
enforces live budgets in ``spoolproxy record --max-...``, so a run stopped live and the
same run judged later agree.

Public failures: agno-agi/agno#6984 and superplanehq/superplane#4123 (BR-02, calls past
``tool_call_limit``).
"""

from __future__ import annotations

from ...guards.budget import LABEL, Limits, meter_transcript
from .base import Context

KIND = "budget_exceeded"


def check(ctx: Context) -> list:
    c = ctx.config
    limits = Limits(max_llm_calls=c.max_llm_calls, max_tool_calls=c.max_tool_calls, max_tokens=c.max_tokens,
                    max_cost_usd=c.max_cost_usd, max_seconds=c.max_seconds)
    if not limits.active():
        return []
    started: dict[int, float] = {}
    ended: dict[int, float] = {}
    for i, it in enumerate(ctx.cassette.interactions):
        if it.started_at is not None:
            started[i] = it.started_at.timestamp()
            ended[i] = started[i] + (it.duration_ms or 0.0) / 1000.0
    out = []
    for o in meter_transcript(ctx.transcript, limits, started or None, ended or None):
        shown = f"{o.total:.4f}" if o.dimension == "cost_usd" else f"{o.total:.1f}" if o.dimension == "seconds" \
            else f"{o.total:.0f}"
        limit = int(o.limit) if o.dimension not in ("cost_usd", "seconds") else o.limit
        first = o.interactions[0]
        out.append(ctx.finding(KIND, "error", o.interactions,
                               f"{LABEL[o.dimension]}: {shown} exceeds the configured limit {limit}",
                               [ctx.ev.quote(first, "request.uri", ctx.steps[first].url)]))
    return out
