"""A long synthetic agent run (OpenAI Chat tool loop + HTTP tools, streamed and not) in the
real wire format: the detectors must handle it, link every tool result and stay quiet.
``make_agent_run`` is also what the throughput measurement uses (see docs/detect.md)."""

from __future__ import annotations

import json

from spoolproxy.cassettes import Cassette, Interaction, Request, Response
from spoolproxy.detectors import analyze, build_transcript

TOOLS = [{"type": "function", "function": {"name": "get_item", "description": "Fetch an item.",
          "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
                         "additionalProperties": False}}}]
JSON_HEADERS = {"Content-Type": ["application/json"], "Date": ["Tue, 01 Apr 2025 10:00:00 GMT"]}
SSE_HEADERS = {"Content-Type": ["text/event-stream; charset=utf-8"], "Date": ["Tue, 01 Apr 2025 10:00:00 GMT"]}


def _chat_json(call_id: str | None, n: int, text: str | None = None, args_n: int | None = None) -> bytes:
    msg: dict = {"role": "assistant", "content": text, "refusal": None}
    if call_id:
        msg["tool_calls"] = [{"id": call_id, "type": "function", "function": {"name": "get_item",
                                                                             "arguments": json.dumps({"id": n if args_n is None else args_n})}}]
    return json.dumps({"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1743500000 + n, "model": "gpt-4o-mini-2024-07-18",
                       "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": "tool_calls" if call_id else "stop"}],
                       "usage": {"prompt_tokens": 120, "completion_tokens": 18, "total_tokens": 138}}).encode()


def _chat_sse(call_id: str, n: int, args_n: int | None = None) -> bytes:
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 1743500000 + n, "model": "gpt-4o-mini-2024-07-18"}
    args = json.dumps({"id": n if args_n is None else args_n})
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": call_id, "type": "function", "function": {"name": "get_item", "arguments": ""}}]}, "finish_reason": None}]}]
    for piece in (args[: len(args) // 2], args[len(args) // 2:]):
        chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]},
                                            "finish_reason": None}]})
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    chunks.append({**base, "choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 18, "total_tokens": 138}})
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


def make_agent_run(n_interactions: int = 10_001, window: int = 6, fail_every: int = 0, same_args: bool = False) -> Cassette:
    """An agent run of ``n_interactions`` (odd) interactions: LLM turn, HTTP tool, LLM turn,
    ...; the request history keeps the last ``window`` messages; every 3rd LLM turn is
    streamed; the last turn answers.  ``fail_every=k`` makes every k-th tool answer
    ``{"ok": false}``; ``same_args`` makes every call identical (a loop)."""
    interactions: list[Interaction] = []
    history: list[dict] = [{"role": "user", "content": "Walk the catalogue and summarise it."}]
    for n in range(max(1, (n_interactions - 1) // 2)):
        call_id = f"call_{n:06d}"
        req = {"model": "gpt-4o-mini", "messages": history[:1] + history[1:][-window:], "tools": TOOLS}
        stream = n % 3 == 2
        if stream:
            req["stream"] = True
        a = 0 if same_args else n
        body = _chat_sse(call_id, n, a) if stream else _chat_json(call_id, n, args_n=a)
        interactions.append(Interaction(
            request=Request(method="POST", uri="https://api.openai.com/v1/chat/completions",
                            headers={"content-type": ["application/json"]}, body=json.dumps(req).encode()),
            response=Response(status=200, reason="OK", headers=SSE_HEADERS if stream else JSON_HEADERS, body=body)))
        tool_body = json.dumps({"id": n, "name": f"item {n}", "price_cents": 100 + n}).encode()
        if same_args:
            tool_body = b'{"id": 0, "name": "item 0", "price_cents": 100}'
        if fail_every and n % fail_every == fail_every - 1:
            tool_body = json.dumps({"ok": False, "error": "busy", "id": 0 if same_args else n}).encode()
        interactions.append(Interaction(
            request=Request(method="GET", uri=f"https://catalogue.example/v1/items/{n}"),
            response=Response(status=200, reason="OK", headers=JSON_HEADERS, body=tool_body)))
        history.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "get_item", "arguments": json.dumps({"id": a})}}]})
        history.append({"role": "tool", "tool_call_id": call_id, "content": tool_body.decode()})
    n += 1
    req = {"model": "gpt-4o-mini", "messages": history[:1] + history[1:][-window:], "tools": TOOLS}
    interactions.append(Interaction(
        request=Request(method="POST", uri="https://api.openai.com/v1/chat/completions", body=json.dumps(req).encode()),
        response=Response(status=200, reason="OK", headers=JSON_HEADERS, body=_chat_json(None, n, "The catalogue has items 0 to N."))))
    return Cassette(interactions=interactions, source_format="vcrpy")


def test_long_synthetic_run_is_clean_and_fully_linked():
    cas = make_agent_run(2_001)
    t = build_transcript(cas)
    assert len(t.steps) == 2_001
    assert t.final_answer is not None and t.final_answer.interaction == 2_000
    linked = [r for r in t.tool_results if r.source_interaction is not None]
    assert len(linked) == len(t.tool_results) == 1_000
    assert all(t.steps[r.source_interaction].kind == "http" for r in linked)
    rep = analyze(cas)
    assert rep.verdict == "pass", [f.message for f in rep.findings]
    assert rep.findings == []
    assert t.total_tokens == 138 * 1_001


def test_long_failing_looping_run_scales_and_groups_findings():
    cas = make_agent_run(2_001, fail_every=1, same_args=True)
    rep = analyze(cas)
    by_kind = {f.kind: f for f in rep.findings}
    assert by_kind["tool_error_ignored"].severity == "error" and len(by_kind["tool_error_ignored"].interactions) > 100
    assert by_kind["tool_loop"].severity == "error" and len(by_kind["tool_loop"].interactions) == 2_000
    assert rep.verdict == "fail"
