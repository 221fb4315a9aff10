"""Synthetic cassettes for the benchmarks, built with spoolproxy's own model.

* :func:`playback_cassette` - N distinct OpenAI Chat Completions calls (same endpoint,
  distinct JSON request bodies, ~1 KB JSON responses), for B2 and B6.
* :func:`mixed_cassette` - N interactions of a realistic mix (chat JSON, SSE streams, tool
  API GETs), for B3's synthetic load.
* :func:`agent_run` - an N-interaction agent run in the OpenAI Chat Completions wire format
  (model turns with tool calls, tool HTTP calls, streamed turns, a few HTTP errors), for B4.
* :func:`write_flows` - the same interactions as a mitmproxy flows file (``io.FlowWriter``),
  for ``mitmdump --server-replay``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from spoolproxy.cassettes import Cassette, Chunk, Interaction, Request, Response

OPENAI_CHAT = "https://api.openai.com/v1/chat/completions"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _dumps(doc) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def chat_request_body(i: int, messages: list | None = None, stream: bool = False) -> bytes:
    """An OpenAI Chat Completions request body (distinct for each ``i``)."""
    doc = {"model": "gpt-4o-mini",
           "messages": messages or [{"role": "system", "content": "You are a helpful agent."},
                                    {"role": "user", "content": f"Question number {i}: what is {i} squared?"}],
           "temperature": 0}
    if stream:
        doc["stream"] = True
    return _dumps(doc)


def chat_response_body(i: int, size: int = 1024, tool_call: dict | None = None) -> bytes:
    """An OpenAI Chat Completions response (``chat.completion``) of about ``size`` bytes."""
    msg: dict = {"role": "assistant", "content": None if tool_call else ""}
    if tool_call:
        msg["tool_calls"] = [tool_call]
    doc = {"id": f"chatcmpl-{i:08d}", "object": "chat.completion", "created": 1767225600 + i,
           "model": "gpt-4o-mini-2024-07-18",
           "choices": [{"index": 0, "message": msg, "logprobs": None,
                        "finish_reason": "tool_calls" if tool_call else "stop"}],
           "usage": {"prompt_tokens": 50 + i % 100, "completion_tokens": 20, "total_tokens": 70 + i % 100},
           "system_fingerprint": "fp_bench"}
    if not tool_call:
        base = len(_dumps(doc))
        filler = f"The answer to question {i} is {i * i}. "
        msg["content"] = (filler * (max(0, size - base) // len(filler) + 1))[: max(0, size - base)]
    return _dumps(doc)


def sse_body(i: int, events: int = 20) -> tuple[bytes, list[Chunk]]:
    """An OpenAI Chat Completions streaming body (SSE) and its chunk list."""
    parts = []
    for k in range(events):
        delta = {"role": "assistant", "content": ""} if k == 0 else {"content": f"word{k} "}
        ev = {"id": f"chatcmpl-{i:08d}", "object": "chat.completion.chunk", "created": 1767225600 + i,
              "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        parts.append(b"data: " + _dumps(ev) + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    chunks = [Chunk(offset_ms=round(5.0 * k, 3), size=len(p)) for k, p in enumerate(parts)]
    return b"".join(parts), chunks


def sse_tool_call_body(i: int, call: dict) -> tuple[bytes, list[Chunk]]:
    """An OpenAI Chat Completions stream whose assistant turn is one tool call (streamed
    ``delta.tool_calls``: id/name first, then the arguments in pieces), and its chunk list."""
    base = {"id": f"chatcmpl-{i:08d}", "object": "chat.completion.chunk", "created": 1767225600 + i,
            "model": "gpt-4o-mini"}
    args = call["function"]["arguments"]
    deltas = [{"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}]}]
    deltas += [{"tool_calls": [{"index": 0, "function": {"arguments": args[k:k + 8]}}]} for k in range(0, len(args), 8)]
    parts = [b"data: " + _dumps({**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}) + b"\n\n"
             for d in deltas]
    parts.append(b"data: " + _dumps({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}) + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    chunks = [Chunk(offset_ms=round(5.0 * k, 3), size=len(p)) for k, p in enumerate(parts)]
    return b"".join(parts), chunks


def _req_headers(body: bytes) -> dict:
    return {"Content-Type": ["application/json"], "Accept": ["application/json"],
            "Content-Length": [str(len(body))], "User-Agent": ["OpenAI/Python 1.99.0"],
            "Authorization": ["Bearer <REDACTED:openai-key>"]}


def _json_resp(body: bytes, status: int = 200, reason: str = "OK") -> Response:
    return Response(status=status, reason=reason, body=body,
                    headers={"Content-Type": ["application/json"], "Content-Length": [str(len(body))],
                             "openai-processing-ms": ["321"]})


def _inter(i: int, req: Request, resp: Response) -> Interaction:
    return Interaction(request=req, response=resp, started_at=T0 + timedelta(milliseconds=250 * i),
                       duration_ms=200.0)


def playback_cassette(n: int) -> Cassette:
    """``n`` distinct chat-completion interactions (request bodies differ by question number)."""
    items = []
    for i in range(n):
        body = chat_request_body(i)
        items.append(_inter(i, Request(method="POST", uri=OPENAI_CHAT, headers=_req_headers(body), body=body),
                            _json_resp(chat_response_body(i))))
    return Cassette(interactions=items)


def mixed_cassette(n: int) -> Cassette:
    """``n`` interactions: 60% chat JSON, 20% SSE streams (20 events), 20% tool API GETs."""
    items = []
    for i in range(n):
        kind = i % 5
        if kind == 3:
            body, chunks = sse_body(i)
            rb = chat_request_body(i, stream=True)
            req = Request(method="POST", uri=OPENAI_CHAT, headers=_req_headers(rb), body=rb)
            resp = Response(status=200, reason="OK", body=body, chunks=chunks,
                            headers={"Content-Type": ["text/event-stream; charset=utf-8"]})
        elif kind == 4:
            req = Request(method="GET", uri=f"https://tools.bench.test/search?q=item+{i}&limit=5",
                          headers={"Accept": ["application/json"]})
            resp = _json_resp(_dumps({"query": f"item {i}", "results": [
                {"title": f"Result {k} for item {i}", "url": f"https://example.org/{i}/{k}"} for k in range(5)]}))
        else:
            rb = chat_request_body(i)
            req = Request(method="POST", uri=OPENAI_CHAT, headers=_req_headers(rb), body=rb)
            resp = _json_resp(chat_response_body(i, size=900))
        items.append(_inter(i, req, resp))
    return Cassette(interactions=items)


def agent_run(n: int) -> Cassette:
    """An ``n``-interaction agent run, OpenAI Chat Completions wire format.

    Episodes of 8 interactions: model turn -> tool call (``search``) -> tool GET -> model turn
    with the tool result -> ... -> final answer; every 4th model turn is streamed (SSE,
    tool-call deltas);
    one episode in 50 hits an HTTP 500 on the tool and one in 40 repeats the same tool call.
    The message history sent to the model is the episode's own (bounded).
    """
    items: list[Interaction] = []
    ep = 0
    while len(items) < n:
        messages = [{"role": "system", "content": "You are a research agent. Use the search tool."},
                    {"role": "user", "content": f"Task {ep}: find three facts about topic {ep}."}]
        for step in range(3):
            if len(items) >= n:
                break
            i = len(items)
            q = f"topic {ep} fact" if ep % 40 == 0 else f"topic {ep} fact {step}"
            call = {"id": f"call_{ep}_{step}", "type": "function",
                    "function": {"name": "search", "arguments": json.dumps({"q": q})}}
            rb = chat_request_body(i, messages=list(messages), stream=(i % 4 == 0))
            req = Request(method="POST", uri=OPENAI_CHAT, headers=_req_headers(rb), body=rb)
            if i % 4 == 0:
                body, chunks = sse_tool_call_body(i, call)
                resp = Response(status=200, reason="OK", body=body, chunks=chunks,
                                headers={"Content-Type": ["text/event-stream; charset=utf-8"]})
            else:
                resp = _json_resp(chat_response_body(i, tool_call=call))
            items.append(_inter(i, req, resp))
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            if len(items) >= n:
                break
            i = len(items)
            treq = Request(method="GET", uri=f"https://tools.bench.test/search?q={q.replace(' ', '+')}",
                           headers={"Accept": ["application/json"]})
            if ep % 50 == 7 and step == 1:
                tresp = _json_resp(b'{"error":"internal error"}', status=500, reason="Internal Server Error")
                result = "error: internal error"
            else:
                tresp = _json_resp(_dumps({"results": [f"{q}: value {k}" for k in range(3)]}))
                result = f"{q}: value 0; value 1; value 2"
            items.append(_inter(i, treq, tresp))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        if len(items) < n:
            i = len(items)
            rb = chat_request_body(i, messages=list(messages))
            items.append(_inter(i, Request(method="POST", uri=OPENAI_CHAT, headers=_req_headers(rb), body=rb),
                                _json_resp(chat_response_body(i, size=600))))
        ep += 1
    return Cassette(interactions=items)


def write_flows(cas: Cassette, path: Path) -> Path:
    """Write ``cas`` as a mitmproxy flows file (``mitmdump --server-replay PATH`` reads it)."""
    from mitmproxy import http, io
    from mitmproxy.test import tflow

    with open(path, "wb") as fh:
        w = io.FlowWriter(fh)
        for it in cas.interactions:
            req = http.Request.make(it.request.method, it.request.uri, it.request.body,
                                    _mitm_headers(it.request.headers))
            r = it.response
            resp = http.Response.make(r.status, r.body, _mitm_headers(r.headers))
            w.add(tflow.tflow(req=req, resp=resp))
    return path


def _mitm_headers(headers: dict[str, list[str]]) -> list[tuple[bytes, bytes]]:
    return [(k.encode(), v.encode()) for k, vs in headers.items() for v in vs]


def long_agent_run(steps: int, result_bytes: int = 2048) -> Cassette:
    """One long agent run whose model requests re-send the whole conversation (as every
    chat API client does): ``steps`` rounds of model turn -> tool call -> tool GET (a JSON
    result of about ``result_bytes``) -> the result fed back.  The file grows with the
    square of ``steps`` and is dominated by request bodies, like a real long run
    (150 steps of 2 KB results: about 50 MB in format v1)."""
    items: list[Interaction] = []
    messages: list[dict] = [{"role": "system", "content": "You are a research agent. Use the search tool."},
                            {"role": "user", "content": "Research every topic in the list and report."}]
    for step in range(steps):
        i = len(items)
        call = {"id": f"call_{step}", "type": "function",
                "function": {"name": "search", "arguments": json.dumps({"q": f"topic {step}"})}}
        rb = chat_request_body(i, messages=list(messages))
        items.append(_inter(i, Request(method="POST", uri=OPENAI_CHAT, headers=_req_headers(rb), body=rb),
                            _json_resp(chat_response_body(i, tool_call=call))))
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        words = " ".join(f"fact-{step}-{k}" for k in range(result_bytes // 12))
        result = _dumps({"query": f"topic {step}", "results": [words[:result_bytes]]})
        i = len(items)
        items.append(_inter(i, Request(method="GET", uri=f"https://tools.bench.test/search?q=topic+{step}",
                                       headers={"Accept": ["application/json"]}), _json_resp(result)))
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": result.decode()})
    i = len(items)
    rb = chat_request_body(i, messages=list(messages))
    items.append(_inter(i, Request(method="POST", uri=OPENAI_CHAT, headers=_req_headers(rb), body=rb),
                        _json_resp(chat_response_body(i, size=800))))
    return Cassette(interactions=items)
