"""Build a :class:`~.models.Transcript` from a cassette.

Steps come in interaction order.  Tool results that a request feeds back are found by
call id (Gemini results, which have no id, by tool name and order) and only the first
request that carries a result counts it (later requests repeat the history).  An HTTP or
MCP interaction is linked to the tool call it served when its response body is what a
later request feeds back, byte for byte or embedded in a JSON wrapper; an MCP
``tools/call`` also links by tool name and equal arguments.
"""

from __future__ import annotations

import fnmatch
import functools
from typing import Any

from ..cassettes.model import Cassette, parse_json
from .adapters.common import client_closed, content_type, header, split_uri
from .adapters.registry import classify
from .models import FinalAnswer, ModelCall, Step, ToolCall, ToolResult, Transcript
from .pricing import PRICES_AS_OF, PriceBook, call_cost

DEFAULT_OUTPUT_TOOLS = ("final_result*", "structured_output", "json_tool_call")


def build_transcript(cassette: Cassette, output_tools: tuple[str, ...] | list[str] = DEFAULT_OUTPUT_TOOLS,
                     prices: PriceBook | None = None) -> Transcript:
    """The transcript of ``cassette`` (never raises on odd bodies).

    ``output_tools``: fnmatch patterns of tool names whose call *is* the final answer
    (structured output delivered through a tool, e.g. pydantic-ai's ``final_result``).
    ``prices``: where call costs come from (default: the built-in table, local hosts $0,
    LiteLLM's map when installed).
    """
    steps: list[Step] = []
    for i, it in enumerate(cassette.interactions):
        kind, parsed = classify(it)
        r = it.response
        closed = client_closed(it)
        step = Step(index=i, kind=kind, method=it.request.method, url=it.request.uri, host=split_uri(it.request.uri)[0],
                    status=r.status if r is not None else None, content_type=content_type(r),
                    transport_error=f"{it.error.kind}: {it.error.message}".strip(": ") if it.error and not closed else None,
                    client_closed=closed, duration_ms=it.duration_ms,
                    date=header(r.headers, "date") if r is not None else None)
        setattr(step, kind, parsed)
        steps.append(step)
    t = Transcript(cassette=str(cassette.path) if cassette.path else None, steps=steps, price_table_date=PRICES_AS_OF)
    _threads(cassette, t)
    _link_results(cassette, t)
    t.final_answer = _final_answer(t, tuple(output_tools))
    _totals(t, prices or PriceBook())
    return t


def _threads(cassette: Cassette, t: Transcript) -> None:
    """Number the conversations: an LLM request continues an earlier one when it re-sends
    the same body, or its history holds that call's tool calls (by id, or by name and
    arguments) or its answer text.  A cassette holding several test runs, or several
    agents, gets several threads."""
    lasts: list[Step] = []  # last step of each thread
    for s in t.steps:
        if s.llm is None:
            continue
        hist_ids: set[str] = set()
        hist_calls: set[tuple[str, str]] = set()
        hist_text: list[str] = []
        for m in s.llm.messages:
            if m.tool_call_id:
                hist_ids.add(m.tool_call_id)
            if m.role == "assistant":
                if m.text:
                    hist_text.append(m.text)
                for tc in m.tool_calls:
                    if tc.id:
                        hist_ids.add(tc.id)
                    hist_calls.add((tc.name, tc.arguments_raw.strip()))
        found = None
        for n in range(len(lasts) - 1, max(-1, len(lasts) - 9), -1):
            j = lasts[n].llm
            if cassette.interactions[lasts[n].index].request.body == cassette.interactions[s.index].request.body:
                found = n
            elif any(tc.id in hist_ids for tc in j.tool_calls if tc.id) or any(
                    (tc.name, tc.arguments_raw.strip()) in hist_calls for tc in j.tool_calls):
                found = n
            elif j.text.strip() and any(j.text.strip()[:200] in h for h in hist_text):
                found = n
            elif not lasts[n].ok and len(s.llm.messages) >= len(j.messages) and s.llm.messages[:1] == j.messages[:1]:
                found = n
            if found is not None:
                break
        if found is None:
            lasts.append(s)
            s.conversation = len(lasts) - 1
        else:
            s.conversation = lasts[found].conversation
            lasts[found] = s


def _link_results(cassette: Cassette, t: Transcript) -> None:
    calls_by_id: dict[str, tuple[int, ToolCall]] = {}
    calls_by_name: dict[str, list[tuple[int, ToolCall]]] = {}
    seen: set[str] = set()
    linked: set[int] = set()
    for step in t.steps:
        call = step.llm
        if call is None:
            continue
        ordinal: dict[str, int] = {}
        for m in call.messages:
            if m.role != "tool":
                continue
            key = m.tool_call_id
            if key and key in seen:
                continue  # the history repeats a result an earlier request carried
            name = m.tool_name
            ref = calls_by_id.get(key) if key else None
            if ref is None:
                nm = name or ""
                ordinal[nm] = ordinal.get(nm, 0) + 1
                key = key or f"{nm}#{ordinal[nm]}"
                cands = calls_by_name.get(nm) or []
                if not m.tool_call_id and len(cands) >= ordinal[nm]:
                    ref = cands[ordinal[nm] - 1]
            if key in seen:
                continue
            seen.add(key)
            res = ToolResult(call_id=m.tool_call_id or (ref[1].id if ref else None), name=name or (ref[1].name if ref else None),
                             content=m.text, content_json=m.content_json, is_error=m.is_error, interaction=step.index,
                             call_interaction=ref[0] if ref else None)
            lo = ref[0] if ref else max(-1, step.index - 50)  # no call found: look back a bounded window
            src = _find_source(cassette, t, res, lo, step.index, linked, ref[1] if ref else None)
            if src is not None:
                linked.add(src)
                res.source_interaction = src
                s = t.steps[src]
                s.tool_call_ref = (res.call_interaction, res.call_id) if res.call_interaction is not None and res.call_id else None
            step.new_tool_results.append(res)
            t.tool_results.append(res)
        for tc in call.tool_calls:
            if tc.id and tc.id not in calls_by_id:
                calls_by_id[tc.id] = (step.index, tc)
            calls_by_name.setdefault(tc.name, []).append((step.index, tc))


def _find_source(cassette: Cassette, t: Transcript, res: ToolResult, lo: int, hi: int, linked: set[int], tc: ToolCall | None) -> int | None:
    for j in range(lo + 1, hi):
        s = t.steps[j]
        if j in linked or s.kind == "llm":
            continue
        if s.kind == "mcp" and s.mcp is not None:
            if s.mcp.method != "tools/call":
                continue
            if s.mcp.result_text and _embedded(s.mcp.result_text, res):
                return j
            if tc is not None and s.mcp.tool_name == tc.name and s.mcp.arguments == tc.arguments:
                return j
            continue
        r = cassette.interactions[j].response
        if r is not None and r.body and _embedded(r.text, res):
            return j
    return None


def _embedded(body: str, res: ToolResult) -> bool:
    b = body.strip()
    if not b:
        return False
    content = res.content
    if b in content:
        return True
    doc = res.content_json if res.content_json is not None else parse_json(content.encode("utf-8", "replace"))
    if doc is None:
        return False
    bj = parse_json(b.encode("utf-8", "replace"))
    return _walk(doc, b, bj)


def _walk(v: Any, b: str, bj: Any, depth: int = 0) -> bool:
    if depth > 20:
        return False
    if bj is not None and v == bj:
        return True
    if isinstance(v, str):
        return b in v or (len(v) > 20 and v.strip() in b and len(v.strip()) * 2 > len(b))
    if isinstance(v, dict):
        return any(_walk(x, b, bj, depth + 1) for x in v.values())
    if isinstance(v, list):
        return any(_walk(x, b, bj, depth + 1) for x in v)
    return False


@functools.lru_cache(maxsize=4096)
def is_output_tool(name: str, patterns: tuple[str, ...]) -> bool:
    """True when tool ``name`` matches one of the ``output_tools`` fnmatch ``patterns``."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _final_answer(t: Transcript, output_tools: tuple[str, ...]) -> FinalAnswer | None:
    llm = [s for s in t.steps if s.kind == "llm"]
    if not llm:
        return None
    last = llm[-1]
    call = last.llm
    if call is None or not last.ok or call.error:
        return None
    if call.finish_reason in ("length", "error", "content_filter", "refusal") or (call.stream.is_stream and not call.stream.finish_seen):
        return None
    if call.tool_calls:
        outs = [tc for tc in call.tool_calls if is_output_tool(tc.name, output_tools) and tc.parse_error is None]
        if outs and len(outs) == len(call.tool_calls):
            return FinalAnswer(interaction=last.index, text=outs[0].arguments_raw)
        return None
    if call.text.strip():
        return FinalAnswer(interaction=last.index, text=call.text)
    return None


def _totals(t: Transcript, prices: PriceBook) -> None:
    """Token totals, each model call's cost and the run's (None once a call is unpriced)."""
    cost: float | None = 0.0
    unpriced: dict[str, None] = {}
    sources: dict[str, None] = {}
    for s in t.steps:
        c: ModelCall | None = s.llm
        if c is None:
            continue
        u = c.usage
        if not u.reported:
            if s.ok and not c.error:
                t.calls_without_usage += 1  # answered, tokens unknown: no cost either
                cost = None
            continue
        t.input_tokens += u.input_tokens or 0
        t.output_tokens += u.output_tokens or 0
        t.total_tokens += u.total
        if u.input_tokens is None and u.output_tokens is None:
            continue
        price = prices.price(c.model, host=s.host, provider=c.provider)
        one = call_cost(price, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens)
        if price is None or one is None:
            unpriced[c.model or "(no model name)"] = None
            cost = None
            continue
        c.cost_usd, c.price_source = round(one, 8), price.source
        sources[price.source] = None
        cost = None if cost is None else cost + one
    t.unpriced_models, t.price_sources = list(unpriced), list(sources)
    t.cost_usd = round(cost, 6) if cost is not None and t.total_tokens else None
