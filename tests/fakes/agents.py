"""Small tool-calling agents built on the real SDKs, for tests that need whole agent runs
recorded through the proxy: :func:`run_agent` drives one conversation in one wire format
(``openai-chat``, ``openai-responses``, ``anthropic``, ``gemini``, ``ollama``; streamed or
not) against a :class:`~tests.fakes.scripted.ScriptedModel`, executing every tool call it
gets as an HTTP request to the fake provider's tool routes and feeding the body back, as
simple agents do.

Tool routes are added with :func:`add_tool`: ``/tools/<name>`` answers with a fixed or
per-call :class:`~tests.fakes.routes.Reply`.  Cut tool arguments are "repaired" the way
partial-JSON parsers do (closed at the cut) before the tool runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx
import openai

from .routes import LoggedRequest, Reply
from .scripted import _loose

GEMINI = "https://generativelanguage.googleapis.com"


@dataclass
class Tool:
    """A tool the agent declares and runs: ``schema`` (JSON Schema of its arguments),
    ``method`` (POST/PUT/PATCH send the arguments as a JSON body; GET/DELETE as query
    parameters; ``ARGS``: a generic HTTP tool whose arguments are ``method``, ``path``, ``body``),
    ``headers`` the agent's HTTP client sends, ``path`` (default ``/tools/<name>``; ``{arg}``
    is filled from the arguments), ``transform``: what the agent does with the response body
    before giving it to the model (default: the text as is)."""

    name: str
    schema: dict = field(default_factory=lambda: {"type": "object", "properties": {}})
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    path: str | None = None
    transform: Callable[[httpx.Response], str] | None = None


def add_tool(fake, name: str, replies: list[Reply] | Reply | Callable[[LoggedRequest], Reply]) -> None:
    """Answer ``/tools/<name>`` with ``replies`` (one for every call, a list used in order, the
    last repeated, or a route function)."""
    if callable(replies):
        fake.add_route("POST", f"/tools/{name}", replies)
        fake.add_route("GET", f"/tools/{name}", replies)
        return
    queue = list(replies) if isinstance(replies, list) else [replies]

    def route(req: LoggedRequest) -> Reply:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    for method in ("POST", "GET", "DELETE", "PUT", "PATCH"):
        fake.add_route(method, f"/tools/{name}", route)


def _args(raw: str) -> Any:
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return _loose(raw)  # what partial-JSON parsers hand the tool


def _run_tool(http: httpx.Client, base: str, tool: Tool, raw: str) -> str:
    args = _args(raw)
    if tool.method == "ARGS":  # a generic HTTP tool: the model picks method, path and body
        r = http.request(args["method"], base + args["path"], json=args.get("body"), headers=tool.headers)
        return r.text
    path = tool.path or "/tools/" + tool.name
    if "{" in path and isinstance(args, dict):
        path = path.format(**args)  # e.g. /tools/tickets/{ticket_id}
    url = f"{base}{path}"
    if tool.method in ("GET", "DELETE"):
        query = {k: str(v) for k, v in (args or {}).items() if "{" + k + "}" not in (tool.path or "")}
        r = http.request(tool.method, url, params=query, headers=tool.headers)
    else:
        r = http.request(tool.method, url, json=args, headers=tool.headers)
    return tool.transform(r) if tool.transform else r.text


def run_agent(api: str, s, fake, prompt: str, tools: list[Tool], *, stream: bool = False, system: str | None = None,
              max_turns: int = 6, request_extra: dict | None = None) -> str:
    """Run one conversation through the recording session ``s`` and return the final text."""
    ssl = s.client_ssl()
    http = httpx.Client(proxy=s.runner.proxy_url, verify=ssl, timeout=20)
    base = fake.http_url
    by_name = {t.name: t for t in tools}
    extra = request_extra or {}
    try:
        if api == "openai-chat":
            return _openai_chat(s, prompt, tools, by_name, http, base, stream, system, max_turns, extra)
        if api == "openai-responses":
            return _openai_responses(s, prompt, tools, by_name, http, base, stream, system, max_turns, extra)
        if api == "anthropic":
            return _anthropic(s, prompt, tools, by_name, http, base, stream, system, max_turns, extra)
        if api == "gemini":
            return _gemini(http, prompt, tools, by_name, base, stream, system, max_turns, extra)
        if api == "ollama":
            return _ollama(http, fake, prompt, tools, by_name, base, stream, system, max_turns, extra)
        raise ValueError(api)
    finally:
        http.close()


def _openai_chat(s, prompt, tools, by_name, http, base, stream, system, max_turns, extra) -> str:
    c = openai.OpenAI(api_key="sk-test", max_retries=0,
                      http_client=openai.DefaultHttpxClient(proxy=s.runner.proxy_url, verify=s.client_ssl()))
    decl = [{"type": "function", "function": {"name": t.name, "description": t.name, "parameters": t.schema}} for t in tools]
    msgs: list[dict] = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    for _ in range(max_turns):
        kw = dict(model="gpt-4o-mini", messages=msgs, **({"tools": decl} if decl else {}), **extra)
        if stream:
            text, calls = "", {}
            for ch in c.chat.completions.create(stream=True, **kw):
                for choice in ch.choices:
                    text += choice.delta.content or ""
                    for tc in choice.delta.tool_calls or []:
                        slot = calls.setdefault(tc.index, {"id": None, "name": "", "args": ""})
                        slot["id"] = tc.id or slot["id"]
                        if tc.function and tc.function.name:
                            slot["name"] = tc.function.name
                        if tc.function and tc.function.arguments:
                            slot["args"] += tc.function.arguments
            calls = [calls[k] for k in sorted(calls)]
        else:
            m = c.chat.completions.create(**kw).choices[0].message
            text = m.content or ""
            calls = [{"id": tc.id, "name": tc.function.name, "args": tc.function.arguments} for tc in m.tool_calls or []]
        if not calls:
            return text
        msgs.append({"role": "assistant", "content": text or None, "tool_calls": [
            {"id": x["id"], "type": "function", "function": {"name": x["name"], "arguments": x["args"]}} for x in calls]})
        for x in calls:
            msgs.append({"role": "tool", "tool_call_id": x["id"], "content": _run_tool(http, base, by_name[x["name"]], x["args"])})
    return ""


def _openai_responses(s, prompt, tools, by_name, http, base, stream, system, max_turns, extra) -> str:
    c = openai.OpenAI(api_key="sk-test", max_retries=0,
                      http_client=openai.DefaultHttpxClient(proxy=s.runner.proxy_url, verify=s.client_ssl()))
    decl = [{"type": "function", "name": t.name, "parameters": t.schema} for t in tools]
    items: list[dict] = [{"role": "user", "content": prompt}]
    for _ in range(max_turns):
        kw = dict(model="gpt-4o-mini", input=items, **({"tools": decl} if decl else {}),
                  **({"instructions": system} if system else {}), **extra)
        if stream:
            final = None
            for ev in c.responses.create(stream=True, **kw):
                if ev.type in ("response.completed", "response.incomplete"):
                    final = ev.response
            output = final.output
        else:
            output = c.responses.create(**kw).output
        calls = [o for o in output if o.type == "function_call"]
        text = "".join(p.text for o in output if o.type == "message" for p in o.content if p.type == "output_text")
        if not calls:
            return text
        for o in calls:
            items.append({"type": "function_call", "call_id": o.call_id, "name": o.name, "arguments": o.arguments})
            items.append({"type": "function_call_output", "call_id": o.call_id,
                          "output": _run_tool(http, base, by_name[o.name], o.arguments)})
    return ""


def _anthropic(s, prompt, tools, by_name, http, base, stream, system, max_turns, extra) -> str:
    c = anthropic.Anthropic(api_key="sk-ant-test", max_retries=0,
                            http_client=anthropic.DefaultHttpxClient(proxy=s.runner.proxy_url, verify=s.client_ssl()))
    decl = [{"name": t.name, "description": t.name, "input_schema": t.schema} for t in tools]
    msgs: list[dict] = [{"role": "user", "content": prompt}]
    for _ in range(max_turns):
        kw = dict(model="claude-sonnet-4-20250514", max_tokens=256, messages=msgs, **({"tools": decl} if decl else {}),
                  **({"system": system} if system else {}), **extra)
        blocks: list[dict] = []
        if stream:
            raw: dict[int, str] = {}
            for ev in c.messages.create(stream=True, **kw):
                if ev.type == "content_block_start":
                    blocks.append(ev.content_block.model_dump(exclude_none=True))
                    raw[ev.index] = ""
                elif ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                    blocks[ev.index]["text"] += ev.delta.text
                elif ev.type == "content_block_delta" and ev.delta.type == "input_json_delta":
                    raw[ev.index] += ev.delta.partial_json
            for n, b in enumerate(blocks):
                if b["type"] == "tool_use":
                    b["input"] = _args(raw[n])
                    b["_raw"] = raw[n]
        else:
            blocks = [b.model_dump(exclude_none=True) for b in c.messages.create(**kw).content]
        text = "".join(b.get("text", "") for b in blocks if b["type"] == "text")
        uses = [b for b in blocks if b["type"] == "tool_use"]
        if not uses:
            return text
        msgs.append({"role": "assistant", "content": [{k: v for k, v in b.items() if k != "_raw"} for b in blocks]})
        msgs.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b["id"],
             "content": _run_tool(http, base, by_name[b["name"]], b.get("_raw") or json.dumps(b["input"]))} for b in uses]})
    return ""


def _gemini(http, prompt, tools, by_name, base, stream, system, max_turns, extra) -> str:
    decl = [{"functionDeclarations": [{"name": t.name, "description": t.name, "parameters": t.schema} for t in tools]}]
    contents: list[dict] = [{"role": "user", "parts": [{"text": prompt}]}]
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    for _ in range(max_turns):
        body = {"contents": contents, **({"tools": decl} if tools else {}),
                **({"systemInstruction": {"parts": [{"text": system}]}} if system else {}), **extra}
        r = http.post(f"{GEMINI}/v1beta/models/gemini-2.0-flash:{method}", json=body)
        docs = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")] if stream else [r.json()]
        parts = [p for d in docs for p in d["candidates"][0]["content"]["parts"]]
        calls = [p["functionCall"] for p in parts if "functionCall" in p]
        text = "".join(p.get("text", "") for p in parts)
        if not calls:
            return text
        contents.append({"role": "model", "parts": parts})
        contents.append({"role": "user", "parts": [
            {"functionResponse": {"name": fc["name"], "response": {"result": _run_tool(http, base, by_name[fc["name"]],
                                                                                        json.dumps(fc["args"]))}}}
            for fc in calls]})
    return ""


def _ollama(http, fake, prompt, tools, by_name, base, stream, system, max_turns, extra) -> str:
    decl = [{"type": "function", "function": {"name": t.name, "parameters": t.schema}} for t in tools]
    msgs: list[dict] = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    for _ in range(max_turns):
        r = http.post(f"{fake.http_url}/api/chat", json={"model": "llama3.2", "messages": msgs, "stream": stream,
                                                         **({"tools": decl} if decl else {}), **extra})
        lines = [json.loads(x) for x in r.text.splitlines() if x.strip()]
        text = "".join(x["message"].get("content", "") for x in lines)
        calls = [tc for x in lines for tc in x["message"].get("tool_calls") or []]
        if not calls:
            return text
        msgs.append({"role": "assistant", "content": text, "tool_calls": calls})
        for tc in calls:
            msgs.append({"role": "tool", "tool_name": tc["function"]["name"],
                         "content": _run_tool(http, base, by_name[tc["function"]["name"]],
                                              json.dumps(tc["function"]["arguments"]))})
    return ""
