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
from .common import split_uri, tool_spec, content_text, error_of, make_tool_call, request_json, response_json, safe_int
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
    calls: Any = ()
    if tcs:
        if tcs.__class__ is not list:
            return None
        calls = []
        for tc in tcs:
            fn = tc.get("function") if tc.__class__ is dict else None
            if fn.__class__ is not dict:
                return None
            a = fn.get("arguments")
            if a is not None and a.__class__ is not str:
                return None
            calls.append((tc.get("id"), fn.get("name"), a))
        calls = tuple(calls)
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
    legacy = _legacy_call(m.get("function_call"), msg.tool_calls, parse=False)
    if legacy is not None:
        msg.tool_calls.append(legacy)
    if role in ("tool", "function"):
        msg.tool_call_id = m.get("tool_call_id")
        msg.tool_name = m.get("name")
    return msg


def forced_function(choice: Any) -> str | None:
    """The function an OpenAI ``tool_choice`` forces (Chat ``{"type": "function", "function":
    {"name"}}``, Responses ``{"type": "function", "name"}``), else None."""
    if not isinstance(choice, dict) or choice.get("type") != "function":
        return None
    fn = choice.get("function") if isinstance(choice.get("function"), dict) else choice
    return fn.get("name") if isinstance(fn.get("name"), str) else None


def parse_tools(req: dict) -> list[ToolSpec]:
    tools = []
    for t in req.get("tools") or []:
        if isinstance(t, dict):
            fn = t.get("function") if isinstance(t.get("function"), dict) else t
            if fn.get("name"):
                tools.append(tool_spec(fn["name"], fn.get("parameters") if isinstance(fn.get("parameters"), dict) else None))
    for fn in req.get("functions") or []:
        if isinstance(fn, dict) and fn.get("name"):
            tools.append(tool_spec(fn["name"], fn.get("parameters")))
    return tools


def _usage(u: Any) -> Usage:
    if not isinstance(u, dict):
        return Usage()
    details = u.get("prompt_tokens_details")
    return Usage(input_tokens=safe_int(u.get("prompt_tokens")), output_tokens=safe_int(u.get("completion_tokens")),
                 total_tokens=safe_int(u.get("total_tokens")),
                 cache_read_tokens=safe_int(details.get("cached_tokens")) if isinstance(details, dict) else None)


def parse(it: Interaction, provider: str | None = None, req: Any = None) -> ModelCall:
    """Parse one Chat Completions interaction into a ModelCall (never raises on odd bodies)."""
    req = request_json(it) if req is None else req
    req = req if isinstance(req, dict) else {}
    netloc, path = split_uri(it.request.uri)
    rf = req.get("response_format")
    js = rf.get("json_schema") if isinstance(rf, dict) and isinstance(rf.get("json_schema"), dict) else {}
    guided = req.get("guided_json")  # vLLM's own structured-output field
    f: dict[str, Any] = {
        "provider": provider or provider_of(netloc, path), "api": API, "model": req.get("model"),
        "messages": parse_request_messages(req), "tools": parse_tools(req),
        "max_tokens": safe_int(req.get("max_completion_tokens")) or safe_int(req.get("max_tokens")),
        "structured_output": (isinstance(rf, dict) and rf.get("type") in ("json_schema", "json_object")) or bool(guided),
        "response_schema": js.get("schema") if isinstance(js.get("schema"), dict) else guided if isinstance(guided, dict) else None,
        "response_tool": forced_function(req.get("tool_choice")),
    }
    resp = it.response
    if resp is None or resp.status >= 400 or not resp.body:
        if resp is not None:
            f["error"], f["error_code"] = error_of(response_json(it))
        f["stream"] = StreamInfo(is_stream=bool(req.get("stream")))
    elif looks_like_sse(resp.body, resp):
        _parse_stream(f, resp.body)
    else:
        _parse_message(f, response_json(it))
    return ModelCall(**f)


def _parse_message(f: dict, doc: Any) -> None:
    if not isinstance(doc, dict):
        return
    if doc.get("error"):
        f["error"], f["error_code"] = error_of(doc)
    f["model"] = doc.get("model") or f["model"]
    if doc.get("usage"):
        f["usage"] = _usage(doc["usage"])
    choices = doc.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return
    ch = choices[0]
    m = ch.get("message") or {}
    f["text"] = content_text(m.get("content"))
    f["reasoning"] = str(m.get("reasoning_content") or m.get("reasoning") or "")
    f["refusal"] = m.get("refusal") or None
    calls = []
    for tc in m.get("tool_calls") or ():
        if isinstance(tc, dict):
            fn = tc.get("function") or {}
            calls.append(make_tool_call(tc.get("id"), fn.get("name") or "", fn.get("arguments")))
    legacy = _legacy_call(m.get("function_call"), calls)
    if legacy is not None:
        calls.append(legacy)
    f["tool_calls"] = calls
    _finish(f, ch.get("finish_reason"))


def _legacy_call(fc: Any, calls: list, parse: bool = True):
    """The call in the legacy ``function_call`` field (the ``functions`` API), or None when
    absent or when it repeats one of ``calls`` (llama.cpp's server sends the same call both
    as ``tool_calls[0]`` and as ``function_call``: one call, not two)."""
    if not isinstance(fc, dict) or not (fc.get("name") or fc.get("arguments")):
        return None
    name = fc.get("name") or ""
    if calls and (not name or any(tc.name == name for tc in calls)):
        return None  # the legacy mirror of a tool call already listed
    return make_tool_call(None, name, fc.get("arguments"), parse=parse)


def _finish(f: dict, raw: Any) -> None:
    if raw is None:
        return
    f["finish_reason_raw"] = str(raw)
    f["finish_reason"] = FINISH.get(str(raw), "other")


def _parse_stream(f: dict, body: bytes) -> None:
    text: list[str] = []
    reasoning: list[str] = []
    refusal: list[str] = []
    calls: dict[int, dict] = {}
    legacy: dict = {"name": "", "args": []}
    events = json_events(parse_sse(body))
    done = finish_seen = False
    model = usage = finish = err = None
    for _, data in events:
        if data == "[DONE]":
            done = True
            continue
        if data.__class__ is not dict:
            continue
        if "error" in data and data["error"]:
            err = data
        model = data.get("model") or model
        u = data.get("usage")
        if u:
            usage = u
        for ch in data.get("choices") or ():
            if ch.__class__ is not dict:
                continue
            d = ch.get("delta") or ch.get("message") or {}
            c = d.get("content")
            if c.__class__ is str:
                text.append(c)
            r = d.get("reasoning_content") or d.get("reasoning")
            if r.__class__ is str:
                reasoning.append(r)
            r = d.get("refusal")
            if r.__class__ is str:
                refusal.append(r)
            fc = d.get("function_call")
            if fc.__class__ is dict:  # legacy functions API deltas (or a copy of tool_calls[0])
                if fc.get("name"):
                    legacy["name"] = fc["name"]
                a = fc.get("arguments")
                if a.__class__ is str:
                    legacy["args"].append(a)
            for tc in d.get("tool_calls") or ():
                if tc.__class__ is not dict:
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
            fr = ch.get("finish_reason")
            if fr:
                finish_seen = True
                finish = fr
    if err is not None:
        f["error"], f["error_code"] = error_of(err)
    if model:
        f["model"] = model
    if usage:
        f["usage"] = _usage(usage)
    _finish(f, finish)
    f["text"] = "".join(text)
    f["reasoning"] = "".join(reasoning)
    f["refusal"] = "".join(refusal) or None
    f["tool_calls"] = [make_tool_call(calls[k]["id"], calls[k]["name"], "".join(calls[k]["args"])) for k in sorted(calls)]
    if legacy["name"] or legacy["args"]:
        one = _legacy_call({"name": legacy["name"], "arguments": "".join(legacy["args"])}, f["tool_calls"])
        if one is not None:
            f["tool_calls"].append(one)
    f["stream"] = StreamInfo(is_stream=True, format="sse", events=len(events), terminal_seen=done, finish_seen=finish_seen,
                             complete=finish_seen and done)
