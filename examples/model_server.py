"""A scripted, deterministic OpenAI-compatible model server for the support-agent demo.

Speaks OpenAI Chat Completions on ``POST /v1/chat/completions``: a plain
``chat.completion`` JSON body, or with ``"stream": true`` the streaming wire format
(``chat.completion.chunk`` objects as ``data:`` SSE events, tool-call argument fragments,
an optional usage chunk for ``stream_options.include_usage``, then ``data: [DONE]``).

The "model" is a script that reads the conversation and decides, so a changed prompt or
tool result changes the run:

* a question naming ``ORD-nnnn`` -> ``lookup_order``; a found order is cited in the answer;
  an empty result is *not what it expected*, so it looks the order up again (a lookup
  loop) until the agent tells it the repeat was suppressed;
* a question about stock of a SKU -> ``check_stock``; JSON data is cited; an HTML page is
  taken as success (the classic bug: "good news, it's in stock"); a JSON error is told
  to the customer;
* a refund request -> ``lookup_order``, then ``create_refund`` for the order total; the
  answer cites the refund id, or says the outcome is unknown when the tool reports an error.

Ids (``chatcmpl-...``, ``call_...``) are hashes of the conversation, ``created`` is fixed,
token counts are word counts: the same conversation always gets byte-identical responses.
Run alone: ``python examples/model_server.py --port 8082``; tests and the demo use :func:`start`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "shop-scripted-1"
CREATED = 1764579600  # fixed: no wall clock in bodies


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def _tool_results(messages: list[dict]) -> list[tuple[str, dict, str]]:
    """(tool name, parsed arguments, result text) for every answered tool call, in order."""
    calls: dict[str, tuple[str, dict]] = {}
    out = []
    for m in messages:
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = {}
            calls[tc.get("id")] = (fn.get("name", ""), args)
        if m.get("role") == "tool" and m.get("tool_call_id") in calls:
            name, args = calls[m["tool_call_id"]]
            content = m.get("content")
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            out.append((name, args, content or ""))
    return out


def _as_json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _money(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"


def decide(messages: list[dict]) -> dict:
    """The script: ``{"tool": name, "args": {...}}`` or ``{"text": answer}`` for a conversation."""
    question = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    if isinstance(question, list):
        question = " ".join(p.get("text", "") for p in question if isinstance(p, dict))
    results = _tool_results(messages)
    order_ids = re.findall(r"\bORD-\d{4}\b", question.upper())
    sku = next(iter(re.findall(r"\b[A-Z]{3}-[A-Z]{3}\b", question.upper())), None)
    lowered = question.lower()

    if "refund" in lowered and order_ids:
        return _refund_flow(order_ids[0], results)
    if "stock" in lowered and sku:
        return _stock_flow(sku, results)
    if order_ids:
        return _status_flow(order_ids[0], results)
    return {"text": "I can help with order status, refunds and stock questions. Which order is it about?"}


def _status_flow(order_id: str, results) -> dict:
    lookups = [(a, r) for n, a, r in results if n == "lookup_order"]
    if not lookups:
        return {"tool": "lookup_order", "args": {"order_id": order_id}}
    last = lookups[-1][1]
    if "suppressed" in last:
        return {"text": f"I couldn't find an order {order_id} in our system. "
                        "Could you double-check the order number on your confirmation email?"}
    data = _as_json(last) or {}
    orders = data.get("orders") if isinstance(data, dict) else None
    if orders:
        o = orders[0]
        return {"text": f"Your order {o['order_id']} ({o['item']}) is {o['status']}: it shipped on "
                        f"{o['shipped_on']} with {o['carrier']}, tracking number {o['tracking']}."}
    # Not what it expected: look again (the lookup loop).
    return {"tool": "lookup_order", "args": {"order_id": order_id}}


def _stock_flow(sku: str, results) -> dict:
    checks = [r for n, _a, r in results if n == "check_stock"]
    if not checks:
        return {"tool": "check_stock", "args": {"sku": sku}}
    last = checks[-1]
    data = _as_json(last)
    if isinstance(data, dict) and "in_stock" in data:
        n = data["in_stock"]
        return {"text": f"{sku} is in stock ({n} left)." if n else f"{sku} is sold out at the moment."}
    if isinstance(data, dict) and data.get("error"):
        return {"text": f"I'm sorry, I can't check the stock of {sku} right now: the inventory "
                        "service is unavailable. Please try again in a few minutes."}
    # An HTML page (or anything else) taken as success: the classic bug.
    return {"text": f"Good news: {sku} is in stock and ready to ship today!"}


def _refund_flow(order_id: str, results) -> dict:
    lookups = [r for n, _a, r in results if n == "lookup_order"]
    if not lookups:
        return {"tool": "lookup_order", "args": {"order_id": order_id}}
    data = _as_json(lookups[-1]) or {}
    orders = data.get("orders") if isinstance(data, dict) else None
    if not orders:
        return {"text": f"I couldn't find order {order_id}, so I can't refund it."}
    refunds = [r for n, _a, r in results if n == "create_refund"]
    if not refunds:
        return {"tool": "create_refund", "args": {"order_id": order_id, "amount_cents": orders[0]["total_cents"],
                                                  "reason": "damaged"}}
    result = _as_json(refunds[-1]) or {}
    if isinstance(result, dict) and result.get("refund_id"):
        return {"text": f"I've refunded {_money(result['amount_cents'])} for order {order_id} "
                        f"(refund {result['refund_id']}). It will reach your card in 3-5 business days."}
    return {"text": f"The refund request for order {order_id} timed out at the payment gateway, so I "
                    "can't confirm it yet. I have not sent it again, to avoid refunding you twice; "
                    "we'll email you as soon as it is confirmed."}


def completion(request: dict) -> tuple[dict, list[dict]]:
    """The OpenAI Chat Completions response for ``request``: (``chat.completion`` body, stream chunks)."""
    messages = request.get("messages") or []
    action = decide(messages)
    digest = _digest(messages)
    cid = f"chatcmpl-{digest[:24]}"
    prompt_tokens = sum(len(json.dumps(m).split()) for m in messages)
    base = {"id": cid, "created": CREATED, "model": request.get("model") or MODEL, "system_fingerprint": "fp_scripted"}
    if "tool" in action:
        call = {"id": f"call_{digest[24:40]}", "type": "function",
                "function": {"name": action["tool"], "arguments": json.dumps(action["args"])}}
        message = {"role": "assistant", "content": None, "tool_calls": [call], "refusal": None}
        finish, completion_tokens = "tool_calls", 12
        args = call["function"]["arguments"]
        pieces = [args[i:i + 12] for i in range(0, len(args), 12)]
        deltas = [{"role": "assistant", "content": None,
                   "tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                   "function": {"name": call["function"]["name"], "arguments": ""}}]}]
        deltas += [{"tool_calls": [{"index": 0, "function": {"arguments": p}}]} for p in pieces]
    else:
        text = action["text"]
        message = {"role": "assistant", "content": text, "refusal": None}
        finish, completion_tokens = "stop", len(text.split())
        words = re.findall(r"\S+\s*", text)
        deltas = [{"role": "assistant", "content": "", "refusal": None}]
        deltas += [{"content": "".join(words[i:i + 3])} for i in range(0, len(words), 3)]
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    body = {**base, "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": usage}
    chunks = [{**base, "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": d, "logprobs": None, "finish_reason": None}]} for d in deltas]
    chunks.append({**base, "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}]})
    if (request.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    return body, chunks


class Handler(BaseHTTPRequestHandler):
    server_version = "scripted-model/1.0"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args) -> None:
        pass

    def date_time_string(self, timestamp=None) -> str:
        return "Tue, 01 Dec 2026 09:00:00 GMT"

    def _error(self, status: int, message: str) -> None:
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                     "param": None, "code": None}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        if self.path.split("?")[0].rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            return self._error(404, f"unknown path {self.path}")
        try:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except ValueError:
            return self._error(400, "request body is not JSON")
        body, chunks = completion(request)
        if not request.get("stream"):
            raw = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        events = [f"data: {json.dumps(c, separators=(',', ':'))}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
        for event in events:
            data = event.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


def start(port: int = 0) -> ThreadingHTTPServer:
    """Start the scripted model on 127.0.0.1:``port`` (0: ephemeral) in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="model", daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8082)
    server = start(parser.parse_args().port)
    print(f"scripted model listening on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
