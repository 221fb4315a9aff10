"""Builders for small in-memory cassettes in the real provider wire formats (OpenAI Chat
JSON and SSE, Anthropic Messages SSE, Gemini generateContent, MCP streamable HTTP), used by
the detector unit tests.  The tests here check that the builders speak the formats the
adapters read."""

from __future__ import annotations

import json
from typing import Any

from spoolproxy.cassettes import Cassette, Interaction, Request, Response
from spoolproxy.detectors import build_transcript

OPENAI = "https://api.openai.com/v1/chat/completions"
ANTHROPIC = "https://api.anthropic.com/v1/messages"
GEMINI = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent"
_DATE = "Tue, 01 Apr 2025 10:00:{:02d} GMT"


def headers(ctype: str = "application/json", second: int = 0, **extra: str) -> dict[str, list[str]]:
    h = {"Content-Type": [ctype], "Date": [_DATE.format(second % 60)]}
    h.update({k.replace("_", "-"): [v] for k, v in extra.items()})
    return h


def tool(name: str, schema: dict | None = None) -> dict:
    """An OpenAI Chat tool declaration."""
    return {"type": "function", "function": {"name": name, "description": name,
                                             "parameters": schema or {"type": "object", "properties": {}}}}


def tcall(call_id: str, name: str, args: Any) -> dict:
    """An assistant tool call (``args`` a dict, or a raw string sent as is)."""
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}


def chat_request(messages: list[dict], tools: list[dict] | None = None, *, stream: bool = False, **extra: Any) -> bytes:
    body: dict[str, Any] = {"model": "gpt-4o-mini", "messages": messages}
    if tools:
        body["tools"] = tools
    if stream:
        body["stream"] = True
    body.update(extra)
    return json.dumps(body).encode()


def chat_response(content: str | None = None, tool_calls: list[dict] | None = None, finish: str | None = None,
                  refusal: str | None = None, usage: tuple[int, int] = (50, 10)) -> bytes:
    """A non-streamed ``chat.completion`` (OpenAI Chat Completions object)."""
    msg: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    finish = finish or ("tool_calls" if tool_calls else "stop")
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1743500000, "model": "gpt-4o-mini-2024-07-18",
                       "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}],
                       "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                                 "total_tokens": usage[0] + usage[1]}}, indent=2).encode()


def chat_sse(text: str = "", tool_calls: list[dict] | None = None, finish: str | None = "stop", done: bool = True) -> bytes:
    """A streamed Chat Completions body: ``chat.completion.chunk`` SSE events, a usage chunk
    and ``data: [DONE]`` (``finish=None`` / ``done=False`` cut the stream)."""
    base = {"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": 1743500000, "model": "gpt-4o-mini-2024-07-18"}
    events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    for i in range(0, len(text), 7):
        events.append({**base, "choices": [{"index": 0, "delta": {"content": text[i:i + 7]}, "finish_reason": None}]})
    for n, tc in enumerate(tool_calls or []):
        args = tc["function"]["arguments"]
        events.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": n, "id": tc["id"], "type": "function", "function": {"name": tc["function"]["name"], "arguments": ""}}]},
            "finish_reason": None}]})
        for i in range(0, len(args), 5):
            events.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": n, "function": {"arguments": args[i:i + 5]}}]}, "finish_reason": None}]})
    if finish:
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        events.append({**base, "choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}})
    out = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    return (out + ("data: [DONE]\n\n" if done else "")).encode()


def anthropic_sse(text: str = "", tool: tuple[str, str, str] | None = None, stop: str | None = "end_turn",
                  message_stop: bool = True) -> bytes:
    """A streamed Anthropic Messages body (``message_start`` ... ``message_stop``, with a
    ``ping``); ``tool`` is (id, name, partial JSON input)."""
    ev = [("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                                   "model": "claude-sonnet-4-20250514", "content": [],
                                                                   "stop_reason": None, "usage": {"input_tokens": 30, "output_tokens": 1}}}),
          ("ping", {"type": "ping"})]
    idx = 0
    if text:
        ev.append(("content_block_start", {"type": "content_block_start", "index": idx, "content_block": {"type": "text", "text": ""}}))
        ev.append(("content_block_delta", {"type": "content_block_delta", "index": idx, "delta": {"type": "text_delta", "text": text}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": idx}))
        idx += 1
    if tool:
        ev.append(("content_block_start", {"type": "content_block_start", "index": idx,
                                           "content_block": {"type": "tool_use", "id": tool[0], "name": tool[1], "input": {}}}))
        ev.append(("content_block_delta", {"type": "content_block_delta", "index": idx,
                                           "delta": {"type": "input_json_delta", "partial_json": tool[2]}}))
        if stop:
            ev.append(("content_block_stop", {"type": "content_block_stop", "index": idx}))
    if stop:
        ev.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 12}}))
    if message_stop:
        ev.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in ev).encode()


def mcp_sse(rpc_id: int, result: dict) -> bytes:
    """One MCP JSON-RPC response as a single-event SSE body (streamable HTTP)."""
    return f"event: message\ndata: {json.dumps({'jsonrpc': '2.0', 'id': rpc_id, 'result': result})}\n\n".encode()


def ix(method: str, uri: str, body: bytes | str = b"", status: int = 200, resp: bytes | str = b"",
       ctype: str = "application/json", second: int = 0, req_headers: dict | None = None, **resp_headers: str) -> Interaction:
    """One interaction."""
    b = body.encode() if isinstance(body, str) else body
    r = resp.encode() if isinstance(resp, str) else resp
    return Interaction(request=Request(method=method, uri=uri, headers=req_headers or {"content-type": ["application/json"]}, body=b),
                       response=Response(status=status, reason="", headers=headers(ctype, second, **resp_headers), body=r))


def llm(messages: list[dict], resp: bytes, tools: list[dict] | None = None, status: int = 200, second: int = 0,
        stream: bool = False, **resp_headers: str) -> Interaction:
    """An OpenAI Chat interaction."""
    return ix("POST", OPENAI, chat_request(messages, tools, stream=stream), status, resp,
              "text/event-stream" if stream else "application/json", second, **resp_headers)


def cassette(*interactions: Interaction) -> Cassette:
    return Cassette(interactions=list(interactions), source_format="vcrpy")


def agent_loop(tool_name: str, args_list: list[Any], results: list[str], answer: str | None = "Done.",
               tools: list[dict] | None = None, http_host: str | None = None) -> Cassette:
    """A Chat tool loop: each turn calls ``tool_name`` with the next args, the result comes
    back in the next request (through an HTTP tool on ``http_host`` when given); the last
    turn answers ``answer`` (or still calls a tool when None)."""
    tools = tools or [tool(tool_name)]
    msgs: list[dict] = [{"role": "user", "content": "Please help."}]
    out: list[Interaction] = []
    for n, (args, result) in enumerate(zip(args_list, results)):
        call = tcall(f"call_{n}", tool_name, args)
        out.append(llm(list(msgs), chat_response(tool_calls=[call]), tools, second=2 * n))
        if http_host:
            out.append(ix("GET", f"https://{http_host}/v1/{tool_name}?n={n}", resp=result, second=2 * n + 1))
        msgs += [{"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": f"call_{n}", "content": result}]
    if answer is not None:
        out.append(llm(list(msgs), chat_response(answer), tools, second=2 * len(args_list)))
    return cassette(*out)


def test_builders_speak_the_wire_formats():
    cas = cassette(
        llm([{"role": "user", "content": "hi"}], chat_sse("Hello there, friend."), stream=True),
        ix("POST", ANTHROPIC, json.dumps({"model": "claude-sonnet-4-20250514", "max_tokens": 100, "stream": True,
                                          "messages": [{"role": "user", "content": "hi"}]}), resp=anthropic_sse("Hi!"),
           ctype="text/event-stream"),
        ix("POST", "https://mcp.example/mcp", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
           resp=mcp_sse(1, {"tools": [{"name": "a"}]}), ctype="text/event-stream"),
    )
    t = build_transcript(cas)
    assert [s.kind for s in t.steps] == ["llm", "llm", "mcp"]
    assert t.steps[0].llm.text == "Hello there, friend." and t.steps[0].llm.stream.complete
    assert t.steps[1].llm.text == "Hi!" and t.steps[1].llm.finish_reason == "stop"
    assert t.steps[2].mcp.tools == ["a"]


def test_agent_loop_links_results_to_calls():
    cas = agent_loop("lookup", [{"q": 1}, {"q": 2}], ['{"v": 1}', '{"v": 2}'], http_host="api.example")
    t = build_transcript(cas)
    assert [(r.call_id, r.call_interaction, r.source_interaction) for r in t.tool_results] == [("call_0", 0, 1), ("call_1", 2, 3)]
    assert t.final_answer is not None and t.final_answer.text == "Done."
