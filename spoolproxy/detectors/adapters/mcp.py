"""MCP JSON-RPC 2.0 over streamable HTTP (MCP spec 2025-03-26 / 2025-06-18 "Streamable
HTTP" transport): a POST whose body is a JSON-RPC request or notification; the reply is
JSON or an SSE stream of JSON-RPC messages (usually one ``event: message``).  An SSE reply
has no ``[DONE]``: it is not an LLM stream.  ``tools/call`` results carry ``content`` parts
and ``isError``; JSON-RPC ``error`` objects are failures too.
"""

from __future__ import annotations

import json
from typing import Any

from ...cassettes.model import Interaction, parse_json
from ..models import McpCall
from .common import content_text
from .sse import json_events, looks_like_sse, parse_sse


def matches(body: Any) -> bool:
    """True for a JSON-RPC 2.0 request/notification (or a batch of them) with a method."""
    if isinstance(body, list) and body:
        body = body[0]
    return isinstance(body, dict) and body.get("jsonrpc") == "2.0" and isinstance(body.get("method"), str)


def parse(it: Interaction, body: Any) -> McpCall:
    """Parse one MCP interaction (``body`` is the parsed request JSON)."""
    first = body[0] if isinstance(body, list) else body
    params = first.get("params") if isinstance(first.get("params"), dict) else {}
    call = McpCall(method=first.get("method"), rpc_id=first.get("id"))
    if call.method == "tools/call":
        call.tool_name = params.get("name")
        call.arguments = params.get("arguments")
    resp = it.response
    if resp is None or not resp.body:
        return call
    if looks_like_sse(resp.body, resp):
        msgs = [d for _, d in json_events(parse_sse(resp.body)) if isinstance(d, dict)]
    else:
        doc = parse_json(resp.body)
        msgs = doc if isinstance(doc, list) else [doc] if isinstance(doc, dict) else []
    for msg in msgs:
        if not isinstance(msg, dict) or ("result" not in msg and "error" not in msg):
            continue
        if call.rpc_id is not None and msg.get("id") not in (None, call.rpc_id):
            continue
        if isinstance(msg.get("error"), dict):
            call.is_error = True
            call.error = str(msg["error"].get("message") or json.dumps(msg["error"]))
        res = msg.get("result")
        if isinstance(res, dict):
            if res.get("isError"):
                call.is_error = True
            if isinstance(res.get("content"), list):
                call.result_text = content_text(res["content"])
            if isinstance(res.get("structuredContent"), dict) and not call.result_text:
                call.result_text = json.dumps(res["structuredContent"])
            if isinstance(res.get("tools"), list):
                call.tools = [t.get("name") for t in res["tools"] if isinstance(t, dict) and t.get("name")]
    return call
