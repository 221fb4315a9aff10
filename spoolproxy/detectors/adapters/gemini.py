"""Google Gemini ``models/<m>:generateContent`` and ``:streamGenerateContent`` (SSE with
``alt=sse``, else a streamed JSON array of ``GenerateContentResponse`` objects).
Parts: ``text`` (``thought: true`` marks reasoning), ``functionCall {name, args, id?}``;
requests carry ``functionResponse {name, response}``.  Gemini calls have no ids unless
the server sends one, so calls get ``<name>#<n>`` and results are linked by name.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...cassettes.model import Interaction
from ..models import Message, ModelCall, StreamInfo, ToolSpec, Usage
from .common import error_of, make_tool_call, request_json, response_json, safe_int, split_uri, tool_spec, unusable_response
from .sse import json_events, looks_like_sse, parse_json_array_stream, parse_sse

API = "gemini-generateContent"
_PATH = re.compile(r"/models/([^/:]+):(generateContent|streamGenerateContent)$")
FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter",
          "PROHIBITED_CONTENT": "content_filter", "BLOCKLIST": "content_filter", "SPII": "content_filter",
          "IMAGE_SAFETY": "content_filter", "MALFORMED_FUNCTION_CALL": "error", "UNEXPECTED_TOOL_CALL": "error"}


def matches(path: str, body: Any) -> bool:
    return "Content" in path and bool(_PATH.search(path))


def parse_request_messages(req: dict) -> list[Message]:
    out: list[Message] = []
    si = req.get("systemInstruction") or req.get("system_instruction")
    if isinstance(si, dict):
        out.append(Message(role="system", text="\n".join(str(p.get("text") or "") for p in si.get("parts") or [] if isinstance(p, dict))))
    for c in req.get("contents") or []:
        if not isinstance(c, dict):
            continue
        role = "assistant" if c.get("role") == "model" else str(c.get("role") or "user")
        msg = Message(role=role)
        texts = []
        for p in c.get("parts") or []:
            if not isinstance(p, dict):
                continue
            if isinstance(p.get("text"), str) and not p.get("thought"):
                texts.append(p["text"])
            fc = p.get("functionCall") or p.get("function_call")
            if isinstance(fc, dict):
                msg.tool_calls.append(make_tool_call(fc.get("id"), fc.get("name") or "", fc.get("args") or {}))
            fr = p.get("functionResponse") or p.get("function_response")
            if isinstance(fr, dict):
                resp = fr.get("response")
                out.append(Message(role="tool", tool_call_id=fr.get("id"), tool_name=fr.get("name"),
                                   text=json.dumps(resp, ensure_ascii=False) if not isinstance(resp, str) else resp,
                                   content_json=resp))
        msg.text = "\n".join(texts)
        if msg.text or msg.tool_calls:
            out.append(msg)
    return out


def parse_tools(req: dict) -> list[ToolSpec]:
    tools = []
    raw = req.get("tools") or []
    for t in [raw] if isinstance(raw, dict) else raw:
        if not isinstance(t, dict):
            continue
        for fd in t.get("functionDeclarations") or t.get("function_declarations") or []:
            if isinstance(fd, dict) and fd.get("name"):
                # google-genai sends the snake_case spelling inside camelCase declarations
                schema = fd.get("parametersJsonSchema") or fd.get("parameters_json_schema") or fd.get("parameters")
                tools.append(tool_spec(fd["name"], schema if isinstance(schema, dict) else None))
    return tools


def _schema(gc: dict) -> dict | None:
    """``responseJsonSchema`` (JSON Schema) or ``responseSchema`` (Gemini's OpenAPI subset:
    upper-case type names, ``nullable``; the validator lower-cases them)."""
    for key in ("responseJsonSchema", "response_json_schema", "responseSchema", "response_schema"):
        if isinstance(gc.get(key), dict):
            return gc[key]
    return None


def _forced(req: dict) -> str | None:
    tc = req.get("toolConfig") or req.get("tool_config")
    fcc = (tc.get("functionCallingConfig") or tc.get("function_calling_config")) if isinstance(tc, dict) else None
    if not isinstance(fcc, dict) or str(fcc.get("mode", "")).upper() != "ANY":
        return None
    names = fcc.get("allowedFunctionNames") or fcc.get("allowed_function_names") or []
    return names[0] if isinstance(names, list) and len(names) == 1 and isinstance(names[0], str) else None


def parse(it: Interaction, provider: str = "gemini", req: Any = None) -> ModelCall:
    """Parse one generateContent / streamGenerateContent interaction into a ModelCall."""
    req = request_json(it) if req is None else req
    req = req if isinstance(req, dict) else {}
    m = _PATH.search(split_uri(it.request.uri)[1])
    gc = req.get("generationConfig") if isinstance(req.get("generationConfig"), dict) else {}
    call = ModelCall(provider=provider, api=API, model=m.group(1) if m else None, messages=parse_request_messages(req),
                     tools=parse_tools(req), max_tokens=safe_int(gc.get("maxOutputTokens")),
                     structured_output=gc.get("responseMimeType") == "application/json" or bool(_schema(gc)),
                     response_schema=_schema(gc), response_tool=_forced(req))
    streaming = bool(m and m.group(2) == "streamGenerateContent")
    call.stream.is_stream = streaming
    if unusable_response(call, it):
        return call
    resp = it.response
    info = StreamInfo(is_stream=streaming)
    if looks_like_sse(resp.body, resp):
        info.format = "sse"
        chunks = [d for _, d in json_events(parse_sse(resp.body)) if isinstance(d, dict)]
        closed = True
    elif streaming:
        info.format = "json-array"
        chunks, closed = parse_json_array_stream(resp.body)
    else:
        doc = response_json(it)
        chunks, closed = ([doc] if isinstance(doc, dict) else []), True
    calls = 0
    for ch in chunks:
        if not isinstance(ch, dict):
            continue
        info.events += 1
        if ch.get("error"):
            call.error, call.error_code = error_of(ch)
        call.model = ch.get("modelVersion") or call.model
        u = ch.get("usageMetadata")
        if isinstance(u, dict):
            out_tokens = (safe_int(u.get("candidatesTokenCount")) or 0) + (safe_int(u.get("thoughtsTokenCount")) or 0)
            call.usage = Usage(input_tokens=safe_int(u.get("promptTokenCount")), output_tokens=out_tokens,
                               total_tokens=safe_int(u.get("totalTokenCount")),
                               cache_read_tokens=safe_int(u.get("cachedContentTokenCount")))
        pf = ch.get("promptFeedback")
        if isinstance(pf, dict) and pf.get("blockReason"):
            call.refusal = f"prompt blocked: {pf['blockReason']}"
            call.finish_reason, call.finish_reason_raw = "content_filter", str(pf["blockReason"])
            info.finish_seen = True
        for cand in (ch.get("candidates") or [])[:1]:
            if not isinstance(cand, dict):
                continue
            for p in (cand.get("content") or {}).get("parts") or []:
                if not isinstance(p, dict):
                    continue
                if isinstance(p.get("text"), str):
                    if p.get("thought"):
                        call.reasoning += p["text"]
                    else:
                        call.text += p["text"]
                fc = p.get("functionCall")
                if isinstance(fc, dict):
                    calls += 1
                    call.tool_calls.append(make_tool_call(fc.get("id") or f"{fc.get('name')}#{calls}", fc.get("name") or "", fc.get("args") or {}))
            fr = cand.get("finishReason")
            if fr and fr != "FINISH_REASON_UNSPECIFIED":
                info.finish_seen = True
                call.finish_reason_raw = str(fr)
                call.finish_reason = FINISH.get(str(fr), "other")  # type: ignore[assignment]
    if call.finish_reason == "stop" and call.tool_calls:
        call.finish_reason = "tool_calls"
    # the terminal event: the closing ``]`` of a streamed JSON array, else the finish reason
    info.terminal_seen = closed if info.format == "json-array" else info.finish_seen
    info.complete = (info.finish_seen and closed) if streaming else True
    call.stream = info
    return call
