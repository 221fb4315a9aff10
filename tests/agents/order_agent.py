"""An order-status agent (the real openai SDK + httpx), in two versions.

``--version 1`` has a bug: it asks the order API at ``/order`` (a 404) and hands the error
to the model; ``--version 2`` asks ``/orders``.  The tool API is
``http://tools.example.test``; the model is whatever ``api.openai.com`` resolves to.

    python order_agent.py --version 1|2 "Where is my order ORD-1001?"
"""

from __future__ import annotations

import argparse
import json

import httpx
import openai

TOOLS = [{"type": "function", "function": {
    "name": "lookup_order", "description": "Look an order up by its id.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", type=int, choices=(1, 2), required=True)
    ap.add_argument("question")
    args = ap.parse_args()
    path = "/order" if args.version == 1 else "/orders"
    client = openai.OpenAI(api_key="sk-proj-" + "o" * 40)
    messages: list = [{"role": "system", "content": "You answer questions about orders."},
                      {"role": "user", "content": args.question}]
    with httpx.Client(base_url="http://tools.example.test", timeout=30) as tools:
        for _ in range(5):
            msg = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS).choices[0].message
            messages.append(msg.model_dump(exclude_none=True))
            if not msg.tool_calls:
                print(msg.content)
                return
            for tc in msg.tool_calls:
                r = tools.get(path, params={"id": json.loads(tc.function.arguments)["order_id"]})
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": r.text})


if __name__ == "__main__":
    main()
