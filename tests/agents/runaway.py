"""A runaway agent: the real openai SDK in a tool-calling loop that never decides it is done.

It asks the model, runs any tool call against ``http://tools.example.test/echo/lookup``
(httpx), and when the model answers in text it asks the same question again.  It stops on
its own only after ``--max-iterations`` model calls; an API error ends it with exit status 3
and one JSON line on stdout: the calls made, the status, the SDK's exception type and
message, and the ``x-should-retry`` header it saw.

    python runaway.py [--stream] [--pause S] [--max-iterations N] [--base-url URL] [--tool-url URL] [--question Q]

``--base-url`` points the SDK at another OpenAI-compatible server (the scripted model of
``examples/model_server.py``: asked about an order the shop does not know, it looks the order
up again and again), ``--tool-url`` the tool calls at another HTTP API (the shop's
``/orders``), ``--question`` changes what it asks.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import httpx
import openai

TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Look something up.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]
QUESTION = "Find the delivery date of order 7."


def ask(client: openai.OpenAI, messages: list, stream: bool):
    if not stream:
        return client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS).choices[0].message
    text, calls = "", {}
    with client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS, stream=True,
                                        stream_options={"include_usage": True}) as events:
        for chunk in events:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for tc in choice.delta.tool_calls or []:
                    slot = calls.setdefault(tc.index, {"id": tc.id, "name": "", "arguments": ""})
                    slot["name"] += (tc.function.name or "") if tc.function else ""
                    slot["arguments"] += (tc.function.arguments or "") if tc.function else ""
    tool_calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                  for c in calls.values()]
    return openai.types.chat.ChatCompletionMessage(role="assistant", content=text or None, tool_calls=tool_calls or None)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--pause", type=float, default=0.0)
    ap.add_argument("--max-iterations", type=int, default=50)
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--tool-url", default="http://tools.example.test/echo/lookup")
    ap.add_argument("--question", default=QUESTION)
    args = ap.parse_args()
    client = openai.OpenAI(api_key="sk-proj-" + "r" * 40, max_retries=2, base_url=args.base_url)
    messages: list = [{"role": "user", "content": args.question}]
    calls = 0
    try:
        with httpx.Client(timeout=30) as tools:
            while calls < args.max_iterations:
                calls += 1
                msg = ask(client, messages, args.stream)
                messages.append(msg.model_dump(exclude_none=True))
                for tc in msg.tool_calls or []:
                    result = tools.get(args.tool_url, params=json.loads(tc.function.arguments))
                    messages.append({"role": "tool", "tool_call_id": tc.id, "content": result.text})
                if not msg.tool_calls:
                    messages.append({"role": "user", "content": args.question})  # never satisfied: asks again
                time.sleep(args.pause)
    except openai.APIStatusError as exc:
        print(json.dumps({"calls": calls, "status": exc.status_code, "type": type(exc).__name__,
                          "message": exc.message, "should_retry": exc.response.headers.get("x-should-retry")}))
        return 3
    print(json.dumps({"calls": calls, "status": None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
