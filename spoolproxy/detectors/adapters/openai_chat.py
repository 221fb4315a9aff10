"""OpenAI Chat Completions (``POST .../chat/completions``), including OpenAI-compatible
servers (Groq, OpenRouter, Together, DeepSeek, Mistral, vLLM, llama.cpp, Ollama ``/v1``) and
Azure OpenAI (``/openai/deployments/<d>/chat/completions``).

Non-streamed: a ``chat.completion`` object.  Streamed: SSE ``chat.completion.chunk``
events, reassembled (content, ``reasoning_content``/``reasoning`` deltas, tool-call deltas
merged by ``index``), terminated by a chunk with ``finish_reason`` and ``data: [DONE]``.
"""

from __future__ import annotations

from typing import Any

from ...cassettes.model import Interaction
from ..models import Message, ModelCall, StreamInfo, ToolSpec, Usage
from .common import content_text, error_of, make_tool_call, request_json, response_json, safe_int
from .sse import json_events, looks_like_sse, parse_sse

API = "openai-chat"
FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "function_call": "tool_calls",
          "content_filter": "content_filter", "eos": "stop", "end_turn": "stop", "error": "error"}


def matches(path: str, body: Any) -> bool:
    """Chat Completions by path; body shape (``messages``) as a fallback for odd prefixes."""
    return path.endswith("/chat/completions") or (path.endswith("/completions") and isinstance(body, dict) and "messages" in body)


def provider_of(host: str, path: str) -> str:
    if host.endswith("openai.azure.com") or "/openai/deployments/" in path:
        return "azure-openai"
    if host == "api.openai.com":
        return "openai"
    for name in ("groq", "openrouter", "together", "deepseek", "mistral", "fireworks", "perplexity", "x.ai"):
        if name in host:
            return name.replace("x.ai", "xai")
    if host.endswith(":11434"):
        return "ollama"
    return "openai-compatible"


#: Message objects by content, shared between the requests of a run that repeat the same
#: history (treat them as read-only); bounded, cleared when full
_MEMO: dict[tuple, Message] = {}
_MEMO_MAX = 50_000


def _memo_key(m: dict) -> tuple | None:
    content = m.get("content")
    if content is not None and content.__class__ is not str:
        return None
    tcs = m.get("tool_calls")
    calls: tuple = ()
    if tcs:
        try:
            calls = tuple((tc.get("id"), tc["function"].get("name"), tc["function"].get("arguments")) for tc in tcs)
        except (AttributeError, KeyError, TypeError):
            return None
        if any(a is not None and a.__class__ is not str for *_, a in calls):
            return None
    return (m.get("role"), content, m.get("tool_call_id"), m.get("name"), calls, m.get("function_call") is not None)


def parse_request_messages(req: dict) -> list[Message]:
    """The request's ``messages`` as Message objects (OpenAI Chat message shapes)."""
    out: list[Message] = []
    memo = _MEMO
    for m in req.get("messages") or []:
        if not isinstance(m, dict):
            continue
        key = _memo_key(m)
        if key is not None:
            hit = memo.get(key)
            if hit is not None:
                out.append(hit)
                continue
        msg = _message(m)
        if key is not None:
            if len(memo) >= _MEMO_MAX:
                memo.clear()
            memo[key] = msg
        out.append(msg)
    return out


def _message(m: dict) -> Message:
    role = str(m.get("role") or "")
    msg = Message(role="tool" if role == "function" else role, text=content_text(m.get("content")))
    for tc in m.get("tool_calls") or []:
        if isinstance(tc, dict):
            fn = tc.get("function") or {}
            msg.tool_calls.append(make_tool_call(tc.get("id"), fn.get("name") or "", fn.get("arguments"), parse=False))
    if isinstance(m.get("function_call"), dict):
        fc = m["function_call"]
        msg.tool_calls.append(make_tool_call(None, fc.get("name") or "", fc.get("arguments"), parse=False))
    if role in ("tool", "function"):
        msg.tool_call_id = m.get("tool_call_id")
        msg.tool_name = m.get("name")
    return msg


def parse_tools(req: dict) -> list[ToolSpec]:
    tools = []
    for t in req.get("tools") or []:
        if isinstance(t, dict):
            fn = t.get("function") if isinstance(t.get("function"), dict) else t
            if fn.get("name"):
                tools.append(ToolSpec(name=fn["name"], schema=fn.get("parameters") if isinstance(fn.get("parameters"), dict) else None))
    for fn in req.get("functions") or []:
        if isinstance(fn, dict) and fn.get("name"):
            tools.append(ToolSpec(name=fn["name"], schema=fn.get("parameters")))
    return tools


def _usage(u: Any) -> Usage:
    if not isinstance(u, dict):
        return Usage()
    return Usage(input_tokens=safe_int(u.get("prompt_tokens")), output_tokens=safe_int(u.get("completion_tokens")),
                 total_tokens=safe_int(u.get("total_tokens")))


def parse(it: Interaction, provider: str | None = None, req: Any = None) -> ModelCall:
    """Parse one Chat Completions interaction into a ModelCall (never raises on odd bodies)."""
    req = request_json(it) if req is None else req
    req = req if isinstance(req, dict) else {}
    url = it.request.url
    rf = req.get("response_format")
    call = ModelCall(
        provider=provider or provider_of(url.netloc, url.path), api=API, model=req.get("model"),
        messages=parse_request_messages(req), tools=parse_tools(req),
        max_tokens=safe_int(req.get("max_completion_tokens")) or safe_int(req.get("max_tokens")),
        structured_output=isinstance(rf, dict) and rf.get("type") in ("json_schema", "json_object"),
    )
    resp = it.response
    if resp is None:
        call.stream.is_stream = bool(req.get("stream"))
        return call
    if resp.status >= 400 or not resp.body:
        call.error, call.error_code = error_of(response_json(it))
        call.stream.is_stream = bool(req.get("stream"))
        return call
    if looks_like_sse(resp.body, resp.content_type):
        _parse_stream(call, resp.body, it.error is not None)
    else:
        _parse_message(call, response_json(it))
    return call


def _parse_message(call: ModelCall, doc: Any) -> None:
    if not isinstance(doc, dict):
        return
    if doc.get("error"):
        call.error, call.error_code = error_of(doc)
    call.model = doc.get("model") or call.model
    call.usage = _usage(doc.get("usage"))
    choices = doc.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return
    ch = choices[0]
    m = ch.get("message") or {}
    call.text = content_text(m.get("content"))
    call.reasoning = str(m.get("reasoning_content") or m.get("reasoning") or "")
    call.refusal = m.get("refusal") or None
    for tc in m.get("tool_calls") or []:
        if isinstance(tc, dict):
            fn = tc.get("function") or {}
            call.tool_calls.append(make_tool_call(tc.get("id"), fn.get("name") or "", fn.get("arguments")))
    if isinstance(m.get("function_call"), dict):
        fc = m["function_call"]
        call.tool_calls.append(make_tool_call(None, fc.get("name") or "", fc.get("arguments")))
    _finish(call, ch.get("finish_reason"))


def _finish(call: ModelCall, raw: Any) -> None:
    if raw is None:
        return
    call.finish_reason_raw = str(raw)
    call.finish_reason = FINISH.get(str(raw), "other")  # type: ignore[assignment]


def _parse_stream(call: ModelCall, body: bytes, cut: bool) -> None:
    text: list[str] = []
    reasoning: list[str] = []
    refusal: list[str] = []
    calls: dict[int, dict] = {}
    events = json_events(parse_sse(body))
    done = finish_seen = False
    model = usage = finish = err = None
    for _, data in events:
        if data == "[DONE]":
            done = True
            continue
        if not isinstance(data, dict):
            continue
        if "error" in data and data["error"]:
            err = data
        model = data.get("model") or model
        if data.get("usage"):
            usage = data["usage"]
        for ch in data.get("choices") or ():
            if not isinstance(ch, dict):
                continue
            d = ch.get("delta") or ch.get("message") or {}
            c = d.get("content")
            if c.__class__ is str:
                text.append(c)
            r = d.get("reasoning_content") or d.get("reasoning")
            if isinstance(r, str):
                reasoning.append(r)
            if isinstance(d.get("refusal"), str):
                refusal.append(d["refusal"])
            for tc in d.get("tool_calls") or ():
                if not isinstance(tc, dict):
                    continue
                slot = calls.setdefault(safe_int(tc.get("index")) or 0, {"id": None, "name": "", "args": []})
                if tc.get("id"):
                    slot["id"] = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name"):
                    slot["name"] = fn["name"]
                a = fn.get("arguments")
                if a.__class__ is str:
                    slot["args"].append(a)
            if ch.get("finish_reason"):
                finish_seen = True
                finish = ch["finish_reason"]
    if err is not None:
        call.error, call.error_code = error_of(err)
    if model:
        call.model = model
    if usage:
        call.usage = _usage(usage)
    _finish(call, finish)
    call.text = "".join(text)
    call.reasoning = "".join(reasoning)
    call.refusal = "".join(refusal) or None
    call.tool_calls = [make_tool_call(calls[k]["id"], calls[k]["name"], "".join(calls[k]["args"])) for k in sorted(calls)]
    call.stream = StreamInfo(is_stream=True, format="sse", events=len(events), terminal_seen=done, finish_seen=finish_seen,
                             complete=finish_seen and done and not cut)
