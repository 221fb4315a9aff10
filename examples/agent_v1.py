"""Support agent, version 1 (has three planted bugs; ``diff agent_v1.py agent_v2.py`` shows the fixes).

Usage: ``python agent_v1.py [--no-stream] "customer question"``.  It talks to an
OpenAI-compatible model with the real openai SDK (``OPENAI_BASE_URL``, default
``http://model.example/v1``; ``OPENAI_API_KEY``)
and calls the shop's HTTP API (``SHOP_URL``, default ``http://shop.example``) with httpx.
Both go through ``HTTP(S)_PROXY`` when set, which is how spoolproxy records and replays it.

Planted bugs:
1. tool results are passed to the model without looking at the status or content type,
   so the inventory service's HTML 502 page is taken as data (and the model says "in stock");
2. a refund POST answered 504 (gateway timeout) is sent again with a fresh idempotency key,
   although the first one went through: the customer is refunded twice;
3. no loop guard: the same empty lookup is repeated until the step limit.
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
        for attempt in (1, 2):
            # BUG 2: a timed-out POST is retried blindly, with a new idempotency key.
            r = http.post(f"{SHOP}/refunds", json=args,
                          headers={"Idempotency-Key": f"{args['order_id']}-attempt-{attempt}"})
            if r.status_code != 504:
                break
    else:
        return json.dumps({"error": f"unknown tool {name}"})
    return r.text  # BUG 1: status code and content type are never checked


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
    with httpx.Client(timeout=30) as http:  # generous: CI machines running tests side by side can be slow
        for _ in range(MAX_STEPS):  # BUG 3: no loop guard, only a step limit
            message = complete(client, messages, stream)
            messages.append(message)
            if not message.get("tool_calls"):
                print(message["content"])
                return 0
            for call in message["tool_calls"]:
                result = call_tool(http, call["function"]["name"], json.loads(call["function"]["arguments"]))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    print(f"agent stopped: no answer after {MAX_STEPS} steps", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    stream = "--no-stream" not in argv
    words = [a for a in argv if a != "--no-stream"]
    if not words:
        print("usage: agent_v1.py [--no-stream] QUESTION", file=sys.stderr)
        return 2
    return run(" ".join(words), stream)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
