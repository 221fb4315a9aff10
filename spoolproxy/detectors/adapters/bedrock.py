"""Amazon Bedrock Converse (``POST /model/<id>/converse``) and ConverseStream
(``/converse-stream``, an ``application/vnd.amazon.eventstream`` binary body: AWS event
stream messages with ``:event-type`` headers messageStart, contentBlockStart,
contentBlockDelta, contentBlockStop, messageStop, metadata).  Requests carry
``toolConfig.tools[].toolSpec {name, inputSchema.json}`` and ``toolResult {toolUseId,
content, status}`` blocks.
"""

from __future__ import annotations

import re
import struct
from typing import Any
from urllib.parse import unquote

from ...cassettes.model import Interaction
from ..models import Message, ModelCall, StreamInfo, Usage
from .common import content_text, make_tool_call, request_json, response_json, safe_int, split_uri, tool_spec, unusable_response

_PATH = re.compile(r"/model/([^/]+)/(converse|converse-stream)$")
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
          "guardrail_intervened": "content_filter", "content_filtered": "content_filter"}


def matches(path: str, body: Any) -> bool:
    return "/converse" in path and bool(_PATH.search(path))


def parse_eventstream(body: bytes) -> tuple[list[tuple[str, bytes]], bool]:
    """Split an AWS event stream into ``(event type, payload)``; returns (events, whole)
    where ``whole`` is False when the body ends inside a message."""
    out: list[tuple[str, bytes]] = []
    pos, n = 0, len(body)
    while pos + 12 <= n:
        total, hlen = struct.unpack_from(">II", body, pos)
        if total < 16 or pos + total > n:
            return out, False
        h, hend = pos + 12, pos + 12 + hlen
        etype = ""
        while h < hend:
            nlen = body[h]
            name = body[h + 1:h + 1 + nlen].decode("latin-1")
            h += 1 + nlen
            vtype = body[h]
            h += 1
            if vtype in (6, 7):
                (vlen,) = struct.unpack_from(">H", body, h)
                value = body[h + 2:h + 2 + vlen]
                h += 2 + vlen
                if name in (":event-type", ":exception-type"):
                    etype = value.decode("utf-8", "replace")
            else:
                h += {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}.get(vtype, 0)
        out.append((etype, body[hend:pos + total - 4]))
        pos += total
    return out, pos == n


def parse(it: Interaction, provider: str = "bedrock", req: Any = None) -> ModelCall:
    """Parse one Converse / ConverseStream interaction into a ModelCall."""
    import json

    req = request_json(it) if req is None else req
    req = req if isinstance(req, dict) else {}
    m = _PATH.search(split_uri(it.request.uri)[1])
    msgs: list[Message] = []
    for s in req.get("system") or []:
        if isinstance(s, dict) and isinstance(s.get("text"), str):
            msgs.append(Message(role="system", text=s["text"]))
    for msg in req.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        out = Message(role=str(msg.get("role") or ""))
        texts = []
        for block in msg.get("content") or []:
            if not isinstance(block, dict):
                continue
            if isinstance(block.get("text"), str):
                texts.append(block["text"])
            tu = block.get("toolUse")
            if isinstance(tu, dict):
                out.tool_calls.append(make_tool_call(tu.get("toolUseId"), tu.get("name") or "", tu.get("input") or {}))
            tr = block.get("toolResult")
            if isinstance(tr, dict):
                msgs.append(Message(role="tool", tool_call_id=tr.get("toolUseId"), text=content_text(tr.get("content")),
                                    is_error=tr.get("status") == "error"))
        out.text = "\n".join(texts)
        if out.text or out.tool_calls:
            msgs.append(out)
    tools = []
    for t in ((req.get("toolConfig") or {}).get("tools") or []):
        spec = (t or {}).get("toolSpec") or {}
        if spec.get("name"):
            schema = (spec.get("inputSchema") or {}).get("json")
            tools.append(tool_spec(spec["name"], schema if isinstance(schema, dict) else None))
    ic = req.get("inferenceConfig") if isinstance(req.get("inferenceConfig"), dict) else {}
    call = ModelCall(provider=provider, api="bedrock-converse", model=unquote(m.group(1)) if m else None, messages=msgs,
                     tools=tools, max_tokens=safe_int(ic.get("maxTokens")))
    streaming = bool(m and m.group(2) == "converse-stream")
    call.stream.is_stream = streaming
    if unusable_response(call, it):
        return call
    resp = it.response
    if not streaming:
        doc = response_json(it)
        if isinstance(doc, dict):
            for block in ((doc.get("output") or {}).get("message") or {}).get("content") or []:
                if not isinstance(block, dict):
                    continue
                if isinstance(block.get("text"), str):
                    call.text += block["text"]
                rc = block.get("reasoningContent")
                if isinstance(rc, dict):
                    call.reasoning += str((rc.get("reasoningText") or {}).get("text") or "")
                tu = block.get("toolUse")
                if isinstance(tu, dict):
                    call.tool_calls.append(make_tool_call(tu.get("toolUseId"), tu.get("name") or "", tu.get("input") or {}))
            _finish(call, doc.get("stopReason"))
            _usage(call, doc.get("usage"))
        return call
    events, _whole = parse_eventstream(resp.body)
    info = StreamInfo(is_stream=True, format="aws-eventstream")
    slots: dict[int, dict] = {}
    for etype, payload in events:
        info.events += 1
        try:
            d = json.loads(payload) if payload else {}
        except ValueError:
            continue
        if not isinstance(d, dict):
            continue
        if etype == "contentBlockStart":
            tu = (d.get("start") or {}).get("toolUse") or {}
            slots[safe_int(d.get("contentBlockIndex")) or 0] = {"id": tu.get("toolUseId"), "name": tu.get("name") or "", "args": []}
        elif etype == "contentBlockDelta":
            delta = d.get("delta") or {}
            if isinstance(delta.get("text"), str):
                call.text += delta["text"]
            if isinstance(delta.get("toolUse"), dict):
                slot = slots.setdefault(safe_int(d.get("contentBlockIndex")) or 0, {"id": None, "name": "", "args": []})
                slot["args"].append(str(delta["toolUse"].get("input") or ""))
            rc = delta.get("reasoningContent")
            if isinstance(rc, dict) and isinstance(rc.get("text"), str):
                call.reasoning += rc["text"]
        elif etype == "messageStop":
            info.finish_seen = info.terminal_seen = True
            _finish(call, d.get("stopReason"))
        elif etype == "metadata":
            _usage(call, d.get("usage"))
        elif etype.endswith("Exception"):
            call.error = str(d.get("message") or etype)
    call.tool_calls = [make_tool_call(s["id"], s["name"], "".join(s["args"])) for _, s in sorted(slots.items()) if s["name"]]
    info.complete = info.terminal_seen  # messageStop; a cut metadata frame after it loses only usage
    call.stream = info
    return call


def _finish(call: ModelCall, raw: Any) -> None:
    if raw:
        call.finish_reason_raw = str(raw)
        call.finish_reason = FINISH.get(str(raw), "other")  # type: ignore[assignment]


def _usage(call: ModelCall, u: Any) -> None:
    if isinstance(u, dict):
        call.usage = Usage(input_tokens=safe_int(u.get("inputTokens")), output_tokens=safe_int(u.get("outputTokens")),
                           total_tokens=safe_int(u.get("totalTokens")))
