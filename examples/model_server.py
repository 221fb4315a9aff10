"""A scripted model server for the support-agent demo: it reads the conversation the way a
model does, follows rules its system prompt states, and can be made to vary.

Speaks two wire formats, plain JSON or streamed:

* OpenAI Chat Completions on ``POST /v1/chat/completions``: a ``chat.completion`` body, or
  with ``"stream": true`` ``chat.completion.chunk`` objects as ``data:`` SSE events (tool-call
  argument fragments, an optional usage chunk for ``stream_options.include_usage``, then
  ``data: [DONE]``);
* Anthropic Messages on ``POST /v1/messages``: a ``message`` body, or the
  ``message_start`` ... ``message_stop`` SSE events (``text_delta`` / ``input_json_delta``).

The "model" is a script that reads the conversation and decides, so a changed prompt or
tool result changes the run:

* a question naming ``ORD-nnnn`` -> ``lookup_order``; a found order is cited in the answer;
  a tool error (``{"error": ...}``) means the order does not exist, and it says so; an empty
  result is *not what it expected*, so it looks the order up again (a lookup loop) until
  the agent tells it the repeat was suppressed;
* a question about stock of a SKU -> ``check_stock``; JSON data is cited; a JSON error is
  told to the customer; an HTML page is taken as success (the classic bug: "good news, it's
  in stock") **unless the system prompt says an HTML page is a failure** (a rule: the
  prompt mentions HTML and failure/error/unavailable), then the customer hears the service
  is unavailable;
* a refund request -> ``lookup_order``, then ``create_refund`` for the order total; the
  answer cites the refund id, or says the outcome is unknown when the tool reports an error.

Variance: ``start(seed=S, flaky=P)`` makes each judgement call (follow the HTML rule or not;
report a missing order clearly or vaguely) go the other way with probability P, drawn from
a generator seeded with S, so repeated runs differ the way a sampled model's do and
``spoolproxy verify`` has a real pass rate to measure.  With ``flaky=0`` (the default) ids
(``chatcmpl-...``, ``call_...``) are hashes of the conversation, ``created`` is fixed and
token counts are word counts: the same conversation always gets byte-identical responses.
:meth:`ModelServer.fail_next` answers the next requests with a provider error (503 ...).

Run alone: ``python examples/model_server.py --port 8082 [--seed 7 --flaky 0.2]``; tests
and the demo use :func:`start`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
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


#: system-prompt rules the scripted model follows when the prompt states them (name -> test)
RULES = {
    # "an HTML page (or error) from a tool is a failure": then the model tells the customer
    "html_is_failure": lambda s: "html" in s.lower() and re.search(r"fail|error|unavailable", s, re.I) is not None,
}


def rules_in(system: str) -> set[str]:
    """The names of the :data:`RULES` a system prompt states."""
    return {name for name, test in RULES.items() if test(system)}


class Brain:
    """The script's state: ``flaky`` is the probability (0-1) that a judgement call goes the
    other way (a stated rule is ignored, or an unstated one followed by luck); ``seed``
    makes the sequence of judgement calls reproducible (one random draw per judgement call,
    in the order calls arrive).  ``flaky=0`` (the default) is fully deterministic."""

    def __init__(self, seed: int | None = None, flaky: float = 0.0) -> None:
        if not 0.0 <= flaky <= 1.0:
            raise ValueError("flaky is a probability between 0 and 1")
        self.flaky = flaky
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.draws = 0

    def judge(self, expected: bool) -> bool:
        """``expected`` (what the prompt and tool results call for), flipped with probability ``flaky``."""
        if self.flaky <= 0.0:
            return expected
        with self.lock:
            self.draws += 1
            flip = self.rng.random() < self.flaky
        return (not expected) if flip else expected

    def decide(self, messages: list[dict]) -> dict:
        """The script: ``{"tool": name, "args": {...}}`` or ``{"text": answer}`` for a
        conversation in OpenAI Chat Completions message shape."""
        system = " ".join(_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
        question = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
        results = _tool_results(messages)
        rules = rules_in(system)
        order_ids = re.findall(r"\bORD-\d{4}\b", question.upper())
        sku = next(iter(re.findall(r"\b[A-Z]{3}-[A-Z]{3}\b", question.upper())), None)
        lowered = question.lower()
        if "refund" in lowered and order_ids:
            return _refund_flow(order_ids[0], results)
        if "stock" in lowered and sku:
            return _stock_flow(sku, results, self, rules)
        if order_ids:
            return _status_flow(order_ids[0], results, self)
        return {"text": "I can help with order status, refunds and stock questions. Which order is it about?"}


#: the deterministic brain the plain module functions use
DEFAULT_BRAIN = Brain()


def _text(content) -> str:
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def decide(messages: list[dict]) -> dict:
    """The deterministic script (see :meth:`Brain.decide`)."""
    return DEFAULT_BRAIN.decide(messages)


def _status_flow(order_id: str, results, brain: Brain) -> dict:
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
    if isinstance(data, dict) and data.get("error"):  # the tool says so: not found (or failed)
        if brain.judge(True):
            return {"text": f"I couldn't find order {order_id} in our system. Could you double-check the "
                            "order number on your confirmation email?"}
        return {"text": f"Sorry, I'm having trouble looking up order {order_id} right now."}
    # Not what it expected: look again (the lookup loop).
    return {"tool": "lookup_order", "args": {"order_id": order_id}}


def _stock_flow(sku: str, results, brain: Brain, rules: set[str]) -> dict:
    checks = [r for n, _a, r in results if n == "check_stock"]
    if not checks:
        return {"tool": "check_stock", "args": {"sku": sku}}
    last = checks[-1]
    data = _as_json(last)
    unavailable = {"text": f"I'm sorry, I can't check the stock of {sku} right now: the inventory "
                           "service is unavailable. Please try again in a few minutes."}
    if isinstance(data, dict) and "in_stock" in data:
        n = data["in_stock"]
        return {"text": f"{sku} is in stock ({n} left)." if n else f"{sku} is sold out at the moment."}
    if isinstance(data, dict) and data.get("error"):
        return unavailable
    # An HTML page (or anything else): taken as success (the classic bug) unless the prompt
    # says an HTML page is a failure; a judgement call, so `flaky` can flip it.
    if brain.judge("html_is_failure" in rules):
        return unavailable
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


def _cut(action: dict, limit) -> tuple[dict, bool]:
    """A text answer cut to ``limit`` words (the script's tokens), and whether it was cut."""
    if "text" not in action or not isinstance(limit, int) or limit <= 0:
        return action, False
    words = action["text"].split()
    if len(words) <= limit:
        return action, False
    return {"text": " ".join(words[:limit])}, True


def completion(request: dict, brain: Brain | None = None) -> tuple[dict, list[dict]]:
    """The OpenAI Chat Completions response for ``request``: (``chat.completion`` body, stream chunks).
    A text answer longer than ``max_completion_tokens`` / ``max_tokens`` words is cut there
    (``finish_reason: length``)."""
    messages = request.get("messages") or []
    action, cut = _cut((brain or DEFAULT_BRAIN).decide(messages),
                       request.get("max_completion_tokens") or request.get("max_tokens"))
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
        finish, completion_tokens = "length" if cut else "stop", len(text.split())
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


def _from_anthropic(request: dict) -> list[dict]:
    """An Anthropic Messages request's conversation in Chat Completions shape (for the script)."""
    out: list[dict] = []
    system = request.get("system")
    if system:
        out.append({"role": "system", "content": _text(system)})
    for m in request.get("messages") or []:
        content = m.get("content")
        if isinstance(content, str):
            out.append({"role": m.get("role"), "content": content})
            continue
        blocks = [b for b in content or [] if isinstance(b, dict)]
        texts = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        if m.get("role") == "assistant":
            calls = [{"id": b.get("id"), "type": "function",
                      "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})}}
                     for b in blocks if b.get("type") == "tool_use"]
            out.append({"role": "assistant", "content": texts or None, **({"tool_calls": calls} if calls else {})})
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                inner = b.get("content")
                out.append({"role": "tool", "tool_call_id": b.get("tool_use_id"),
                            "content": inner if isinstance(inner, str) else _text(inner)})
        if texts:
            out.append({"role": "user", "content": texts})
    return out


def anthropic_message(request: dict, brain: Brain | None = None) -> tuple[dict, list[tuple[str, dict]]]:
    """The Anthropic Messages response for ``request``: (``message`` body, SSE ``(event, data)`` list).
    A text answer longer than ``max_tokens`` words is cut there (``stop_reason: max_tokens``)."""
    messages = _from_anthropic(request)
    action, cut = _cut((brain or DEFAULT_BRAIN).decide(messages), request.get("max_tokens"))
    digest = _digest(messages)
    model = request.get("model") or MODEL
    input_tokens = sum(len(json.dumps(m).split()) for m in messages)
    if "tool" in action:
        block = {"type": "tool_use", "id": f"toolu_{digest[:24]}", "name": action["tool"], "input": action["args"]}
        stop, output_tokens = "tool_use", 12
        args = json.dumps(action["args"])
        start = {**block, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": args[i:i + 12]} for i in range(0, len(args), 12)]
    else:
        block = {"type": "text", "text": action["text"]}
        stop, output_tokens = "max_tokens" if cut else "end_turn", len(action["text"].split())
        start = {"type": "text", "text": ""}
        words = re.findall(r"\S+\s*", action["text"])
        deltas = [{"type": "text_delta", "text": "".join(words[i:i + 3])} for i in range(0, len(words), 3)]
    body = {"id": f"msg_{digest[24:48]}", "type": "message", "role": "assistant", "model": model, "content": [block],
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}
    head = {**body, "content": [], "stop_reason": None, "usage": {"input_tokens": input_tokens, "output_tokens": 1}}
    events = [("message_start", {"type": "message_start", "message": head}),
              ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d}) for d in deltas]
    events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": output_tokens}}),
               ("message_stop", {"type": "message_stop"})]
    return body, events


class Handler(BaseHTTPRequestHandler):
    server_version = "scripted-model/1.0"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    server: "ModelServer"

    def log_message(self, fmt: str, *args) -> None:
        pass

    def date_time_string(self, timestamp=None) -> str:
        return "Tue, 01 Dec 2026 09:00:00 GMT"

    def _error(self, status: int, message: str, anthropic: bool = False) -> None:
        if anthropic:
            kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error" if status >= 500
                                                                          else "invalid_request_error")
            doc = {"type": "error", "error": {"type": kind, "message": message}}
        else:
            doc = {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                             "param": None, "code": None}}
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status in (429, 503, 529):
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        anthropic = path in ("/v1/messages", "/messages")
        if path not in ("/v1/chat/completions", "/chat/completions") and not anthropic:
            return self._error(404, f"unknown path {self.path}")
        try:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except ValueError:
            return self._error(400, "request body is not JSON", anthropic)
        self.server.log.append(request)
        failure = self.server.take_failure()
        if failure:
            return self._error(failure, "the scripted model is overloaded (a simulated provider error)", anthropic)
        if anthropic:
            body, events = anthropic_message(request, self.server.brain)
            sse = [f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n" for name, data in events]
        else:
            body, chunks = completion(request, self.server.brain)
            sse = [f"data: {json.dumps(c, separators=(',', ':'))}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
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
        for event in sse:
            data = event.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


class ModelServer(ThreadingHTTPServer):
    """The running scripted model: ``brain`` (its :class:`Brain`), ``log`` (every request
    body received, parsed, in arrival order) and :meth:`fail_next`."""

    daemon_threads = True

    def __init__(self, port: int, brain: Brain) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.brain = brain
        self.log: list[dict] = []
        self._failures: list[int] = []
        self._lock = threading.Lock()

    def fail_next(self, status: int = 503, times: int = 1) -> None:
        """Answer the next ``times`` requests with a provider error ``status`` (429, 500, 503, 529)."""
        with self._lock:
            self._failures += [status] * times

    def take_failure(self) -> int | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None


def start(port: int = 0, *, seed: int | None = None, flaky: float = 0.0) -> ModelServer:
    """Start the scripted model on 127.0.0.1:``port`` (0: ephemeral) in a daemon thread.
    ``seed`` / ``flaky``: see :class:`Brain` (default: deterministic)."""
    server = ModelServer(port, Brain(seed, flaky))
    threading.Thread(target=server.serve_forever, name="model", daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8082)
    parser.add_argument("--seed", type=int, default=None, help="seed of the judgement calls (reproducible runs)")
    parser.add_argument("--flaky", type=float, default=0.0,
                        help="probability (0-1) that a judgement call goes the other way (default 0: deterministic)")
    args = parser.parse_args()
    server = start(args.port, seed=args.seed, flaky=args.flaky)
    print(f"scripted model listening on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
