"""tool_loop: the agent repeats itself without progress.

* the same tool with the same normalised arguments (parsed JSON, key order and
  whitespace ignored) called ``loop_min_repeats`` (3) or more times in one conversation
  thread (a cassette holding several test runs has several threads), unless every
  call got a different result (a poll whose answer changes is progress);
* an A-B-A-B cycle: two different calls alternating for two full cycles with unchanged
  results.

Two identical calls are not a loop.  Severity: error.  The finding lists every LLM
interaction that asked for a repeated call and the tool interactions that served them.

Public failures: langchain-ai/langgraph#4231 (BR-01, ``save_memory`` until the recursion
limit), agno-agi/agno#6984 (BR-02, calls past ``tool_call_limit``), crewAI PR 6712 (BR-15).
"""

from __future__ import annotations

import json

from ..evidence import clip
from .base import Context

KIND = "tool_loop"


def norm_args(tc) -> str:
    if tc.parse_error is None:
        try:
            return json.dumps(tc.arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError):
            pass
    return tc.arguments_raw.strip()


def _calls(ctx: Context) -> dict[int | None, list[tuple[int, str, str, str | None]]]:
    """Per conversation thread: (interaction, name, normalised args, call id) for every
    call the model made, in order."""
    out: dict[int | None, list] = {}
    for s in ctx.steps:
        if s.llm is not None:
            for tc in s.llm.tool_calls:
                out.setdefault(s.conversation, []).append((s.index, tc.name, norm_args(tc), tc.id))
    return out


def check(ctx: Context) -> list:
    results = {r.call_id: r for r in ctx.transcript.tool_results if r.call_id}
    out = []
    for calls in _calls(ctx).values():
        if len(calls) >= 3:
            out.extend(_check_thread(ctx, calls, results))
    return out


def _check_thread(ctx: Context, calls, results) -> list:
    by_key: dict[tuple[str, str], list[tuple[int, str | None]]] = {}
    for i, name, args, cid in calls:
        by_key.setdefault((name, args), []).append((i, cid))
    out = []
    flagged: set[tuple[str, str]] = set()
    for (name, args), occ in by_key.items():
        if len(occ) < ctx.config.loop_min_repeats:
            continue
        contents = [results[c].content if c in results else None for _, c in occ]
        known = [c for c in contents if c is not None]
        if len(known) == len(contents) and len(set(known)) == len(known):
            continue  # every call saw a different result: progress (polling)
        flagged.add((name, args))
        idxs = _with_sources(ctx, [i for i, _ in occ], [c for _, c in occ], results)
        ev = [ctx.ev.quote(occ[0][0], f"message.tool_calls/{_pos(ctx, occ[0])}/arguments_raw", _first_args(ctx, occ[0])),
              ctx.ev.quote(occ[-1][0], f"message.tool_calls/{_pos(ctx, occ[-1])}/name", name)]
        same = "" if len(set(known)) > 1 or not known else f", each time getting {clip(known[0], 60)!r}"
        shown = clip(args, 80)
        out.append(ctx.finding(KIND, "error", idxs, f"{name} called {len(occ)} times with the same arguments {shown}{same}", ev))
    out.extend(_cycles(ctx, calls, results, flagged))
    return out


def _cycles(ctx: Context, calls, results, flagged) -> list:
    keys = [(n, a) for _, n, a, _ in calls]
    for k in range(len(keys) - 3):
        a, b = keys[k], keys[k + 1]
        if a == b or a in flagged or b in flagged:
            continue
        if keys[k + 2] == a and keys[k + 3] == b:
            seg = calls[k:k + 4]
            contents = [results[c].content if c in results else None for *_, c in seg]
            if contents[0] != contents[2] or contents[1] != contents[3]:
                continue
            idxs = _with_sources(ctx, [i for i, *_ in seg], [c for *_, c in seg], results)
            ev = [ctx.ev.quote(seg[0][0], f"message.tool_calls/{_pos(ctx, (seg[0][0], seg[0][3]))}/name", a[0]),
                  ctx.ev.quote(seg[1][0], f"message.tool_calls/{_pos(ctx, (seg[1][0], seg[1][3]))}/name", b[0])]
            return [ctx.finding(KIND, "error", idxs, f"{a[0]} and {b[0]} alternate (A-B-A-B) with unchanged results", ev)]
    return []


def _with_sources(ctx, idxs, cids, results) -> list[int]:
    out = list(idxs)
    for c in cids:
        r = results.get(c)
        if r is not None and r.source_interaction is not None:
            out.append(r.source_interaction)
    return out


def _pos(ctx: Context, occ) -> int:
    i, cid = occ
    for n, tc in enumerate(ctx.steps[i].llm.tool_calls):
        if tc.id == cid:
            return n
    return 0


def _first_args(ctx: Context, occ) -> str:
    return ctx.steps[occ[0]].llm.tool_calls[_pos(ctx, occ)].arguments_raw[:200]
