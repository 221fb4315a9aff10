"""Support agent, version 2: version 1 with its three bugs fixed (``diff agent_v1.py agent_v2.py``).

Usage: ``python agent_v2.py [--no-stream] "customer question"``; same environment as v1.

Fixes:
1. a tool response that is not a 2xx JSON body becomes an explicit error for the model
   (status and content type are checked), so an HTML 502 page is never taken as data;
2. a refund POST is sent once, with an idempotency key derived from the order; a 504 means
   "outcome unknown", reported as such instead of blindly sending a second refund;
3. a loop guard: a tool call repeating earlier arguments is not run again, the model is told so.
"""

from __future__ import annotations

import json
import os
import sys

import httpx
from openai import OpenAI

SHOP = os.environ.get("SHOP_URL", "http://shop.example").rstrip("/")
MODEL = os.environ.get("SUPPORT_MODEL", "shop-scripted-1")
MAX_STEPS = 5
SYSTEM = ("You are the support agent of a small online shop. Use the tools to look up orders, "
          "check stock and issue refunds. Answer in one or two sentences, citing the tool data.")
TOOLS = [
    {"type": "function", "function": {
        "name": "lookup_order", "description": "Find an order by its id (ORD-nnnn).",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                       "required": ["order_id"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "check_stock", "description": "Units in stock for a product SKU (e.g. KET-BLU).",
        "parameters": {"type": "object", "properties": {"sku": {"type": "string"}},
                       "required": ["sku"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "create_refund", "description": "Refund an order (amount in cents). Not idempotent.",
        "parameters": {"type": "object", "properties": {
            "order_id": {"type": "string"}, "amount_cents": {"type": "integer"}, "reason": {"type": "string"}},
            "required": ["order_id", "amount_cents", "reason"], "additionalProperties": False}}},
]


def call_tool(http: httpx.Client, name: str, args: dict) -> str:
    """Run one tool over HTTP and return the text handed to the model."""
    if name == "lookup_order":
        r = http.get(f"{SHOP}/orders", params={"id": args["order_id"]})
    elif name == "check_stock":
        r = http.get(f"{SHOP}/inventory/{args['sku']}")
    elif name == "create_refund":
        # FIX 2: one attempt, a stable idempotency key; a timeout is reported, never retried blindly.
        r = http.post(f"{SHOP}/refunds", json=args, headers={"Idempotency-Key": f"refund-{args['order_id']}"})
        if r.status_code == 504:
            return json.dumps({"error": "the refund request timed out (HTTP 504); its outcome is unknown, "
                                        "do not send it again", "status": 504})
    else:
        return json.dumps({"error": f"unknown tool {name}"})
    # FIX 1: only a 2xx JSON body is data; anything else is an error the model must see as one.
    ctype = r.headers.get("content-type", "").split(";")[0].strip()
    if not r.is_success or ctype != "application/json":
        return json.dumps({"error": f"{name} failed: HTTP {r.status_code} ({ctype or 'no content type'})",
                           "status": r.status_code})
    return r.text


def complete(client: OpenAI, messages: list[dict], stream: bool) -> dict:
    """One model turn as an assistant message dict (content and/or tool_calls)."""
    if not stream:
        msg = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS).choices[0].message
        calls = [{"id": c.id, "type": "function",
                  "function": {"name": c.function.name, "arguments": c.function.arguments}}
                 for c in msg.tool_calls or []]
        return {"role": "assistant", "content": msg.content, **({"tool_calls": calls} if calls else {})}
    text, calls = [], {}
    for chunk in client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, stream=True,
                                                stream_options={"include_usage": True}):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        text.append(delta.content or "")
        for tc in delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
            slot["id"] = tc.id or slot["id"]
            if tc.function:
                slot["function"]["name"] += tc.function.name or ""
                slot["function"]["arguments"] += tc.function.arguments or ""
    message = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def run(question: str, stream: bool = True) -> int:
    """Answer ``question``; prints the answer and returns the exit status."""
    client = OpenAI(base_url=os.environ.get("OPENAI_BASE_URL", "http://model.example/v1"),
                    api_key=os.environ.get("OPENAI_API_KEY", "unused-by-the-scripted-model"), max_retries=0)
    messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    seen: set[str] = set()
    with httpx.Client(timeout=30) as http:  # generous: CI machines running tests side by side can be slow
        for _ in range(MAX_STEPS):
            message = complete(client, messages, stream)
            messages.append(message)
            if not message.get("tool_calls"):
                print(message["content"])
                return 0
            for call in message["tool_calls"]:
                name, args = call["function"]["name"], json.loads(call["function"]["arguments"])
                key = json.dumps([name, args], sort_keys=True)
                if key in seen:  # FIX 3: loop guard
                    result = json.dumps({"note": f"duplicate call suppressed: {name} was already called "
                                                 "with these arguments; answer with what you have"})
                else:
                    seen.add(key)
                    result = call_tool(http, name, args)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    print(f"agent stopped: no answer after {MAX_STEPS} steps", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    stream = "--no-stream" not in argv
    words = [a for a in argv if a != "--no-stream"]
    if not words:
        print("usage: agent_v2.py [--no-stream] QUESTION", file=sys.stderr)
        return 2
    return run(" ".join(words), stream)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
