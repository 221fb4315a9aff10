"""Runs with planted *silent* failures, recorded from the example support agent.

Each scenario runs the real example agent (``examples/agent_v2.py``: the real openai SDK
and httpx, its loud bugs fixed) through ``spoolproxy record`` against two local servers:

* a planted shop (the example shop's API with a twist per scenario: ORD-1404 answered
  with another customer's record, a stock count that changes between two reads, refunds
  that never time out), and
* the example's scripted model with a planted brain: for some questions it answers
  against the data it was given (a delivered order "on its way", a stale count, an
  invented tracking number) or calls a tool with a wrong amount or order id.

Nothing fails loudly (every request answers 2xx, every stream ends), so the detectors
pass these runs; only a judge that reads the answer against the data can catch them.
``python -m bench.judge_planted [OUT_DIR]`` records every scenario into OUT_DIR (default
``bench/judge_set/runs``); the committed cassettes there were made this way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))

import model_server  # noqa: E402  (examples/ is not a package)
import shop  # noqa: E402

#: name -> (question, what is planted); the gold labels are in bench/judge_set/manifest.yaml
SCENARIOS: dict[str, tuple[str, str]] = {
    "planted-wrong-record": ("I'm ben@example.com. Where is my order ORD-1404?",
                             "the order API answers ORD-1404 with ana@example.com's order, and the agent reports it"),
    "planted-stale-stock": ("Is the stoneware mug MUG-STN still in stock? Please double-check, I need it today.",
                            "the second stock read says 0; the answer gives the first read's 31"),
    "planted-ignores-data": ("Where is my order ORD-1002?",
                             "the order is delivered; the answer says it is on its way"),
    "planted-invented-tracking": ("What is the tracking number of my order ORD-1001?",
                                  "the answer gives a tracking number that is not in the data"),
    "planted-wrong-amount": ("Please refund order ORD-1002, the mug arrived broken.",
                             "create_refund is called with 10x the order total, and the answer repeats it"),
    "planted-wrong-order-refund": ("Please refund my order ORD-1002, it arrived broken. (My other order ORD-1001 is fine.)",
                                   "create_refund is called for ORD-1001, the order the customer said is fine"),
    "clean-stock-mug": ("Is the stoneware mug MUG-STN in stock?", "clean"),
    "clean-stock-red-kettle": ("Is the red kettle KET-RED in stock?", "clean"),
    "clean-order-delivered": ("Where is my order ORD-1002? Has it arrived?", "clean"),
    "clean-refund": ("Please refund order ORD-1002, the mug arrived broken. Thanks!", "clean"),
}


class PlantedHandler(shop.Handler):
    """The example shop with the planted twists (see the module docstring)."""

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/orders" and query.get("id", "").upper() == "ORD-1404":
            wrong = dict(shop.ORDERS["ORD-1001"], order_id="ORD-1404")  # another customer's order, relabelled
            return self._json(200, {"orders": [wrong]})
        if url.path.rstrip("/").upper().endswith("/MUG-STN"):
            with self.server.lock:  # type: ignore[attr-defined]
                self.server.reads += 1  # type: ignore[attr-defined]
                first = self.server.reads == 1  # type: ignore[attr-defined]
            return self._json(200, {"sku": "MUG-STN", "in_stock": 31 if first or not self.server.stale else 0})  # type: ignore[attr-defined]
        return super().do_GET()


class NoTimeoutShop(shop.Shop):
    """Refunds are answered at once (201): the planted failures here are in the arguments."""

    def refund(self, body: dict, key: str | None) -> tuple[int, dict]:
        order = shop.ORDERS.get(str(body.get("order_id")))
        if order is None:
            return 404, {"error": {"code": "order_not_found", "message": f"no order {body.get('order_id')!r}"}}
        with self.lock:
            refund = {"refund_id": f"RF-{self.next_id}", "order_id": order["order_id"],
                      "amount_cents": int(body.get("amount_cents") or order["total_cents"]), "status": "succeeded"}
            self.next_id += 1
            self.refunds.append(refund)
        return 201, refund


class PlantedBrain(model_server.Brain):
    """The scripted model, with planted answers for the planted questions."""

    def decide(self, messages: list[dict]) -> dict:
        question = next((model_server._text(m.get("content")) for m in messages if m.get("role") == "user"), "")
        results = model_server._tool_results(messages)
        q = question.lower()
        if "double-check" in q and "mug-stn" in q:
            reads = [r for n, _a, r in results if n == "check_stock"]
            if not reads:
                return {"tool": "check_stock", "args": {"sku": "MUG-STN"}}
            if len(reads) == 1:
                return {"tool": "check_stock", "args": {"sku": "mug-stn"}}  # the re-read (another spelling)
            first = json.loads(reads[0])
            return {"text": f"Yes: MUG-STN is in stock ({first['in_stock']} left), so you can order it for today."}
        if q.startswith("where is my order ord-1002?") and "arrived" not in q:
            if not results:
                return {"tool": "lookup_order", "args": {"order_id": "ORD-1002"}}
            o = json.loads(results[-1][2])["orders"][0]
            return {"text": f"Your order {o['order_id']} ({o['item']}) is on its way with {o['carrier']} and should "
                            "arrive in 3-5 business days."}
        if "tracking number" in q and "ord-1001" in q:
            if not results:
                return {"tool": "lookup_order", "args": {"order_id": "ORD-1001"}}
            return {"text": "Your order ORD-1001 is with ParcelCo, tracking number PC-88412907."}
        if "refund" in q and ("arrived broken." in q and q.endswith("broken.")) and "ord-1002" in q:
            return self._refund(results, "ORD-1002", factor=10)
        if "other order ord-1001" in q:
            return self._refund(results, "ORD-1001", factor=1, looked_up="ORD-1002")
        return super().decide(messages)

    @staticmethod
    def _refund(results, order_id: str, factor: int, looked_up: str | None = None) -> dict:
        lookups = [r for n, _a, r in results if n == "lookup_order"]
        if not lookups:
            return {"tool": "lookup_order", "args": {"order_id": looked_up or order_id}}
        refunds = [r for n, _a, r in results if n == "create_refund"]
        if not refunds:
            total = shop.ORDERS[order_id]["total_cents"]
            return {"tool": "create_refund", "args": {"order_id": order_id, "amount_cents": total * factor,
                                                      "reason": "damaged"}}
        r = json.loads(refunds[-1])
        return {"text": f"I've refunded {model_server._money(r['amount_cents'])} for order {r['order_id']} "
                        f"(refund {r['refund_id']}). It will reach your card in 3-5 business days."}


def start_servers() -> tuple[ThreadingHTTPServer, model_server.ModelServer]:
    """The planted shop and the planted model on ephemeral 127.0.0.1 ports."""
    s = ThreadingHTTPServer(("127.0.0.1", 0), PlantedHandler)
    s.daemon_threads = True
    s.shop = NoTimeoutShop()  # type: ignore[attr-defined]
    s.lock, s.reads, s.stale = threading.Lock(), 0, True  # type: ignore[attr-defined]
    threading.Thread(target=s.serve_forever, daemon=True).start()
    m = model_server.ModelServer(0, PlantedBrain())
    threading.Thread(target=m.serve_forever, daemon=True).start()
    return s, m


def record_all(out: Path, names: list[str] | None = None) -> list[Path]:
    """Record every scenario (or ``names``) into ``out/<name>.yaml``; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    spool = Path(sys.executable).with_name("spoolproxy")
    done = []
    for name, (question, _what) in SCENARIOS.items():
        if names and name not in names:
            continue
        s, m = start_servers()
        try:
            path = out / f"{name}.yaml"
            cmd = [str(spool), "record", "-q", "-c", str(path),
                   "--connect-to", f"shop.example:80:127.0.0.1:{s.server_address[1]}",
                   "--connect-to", f"model.example:80:127.0.0.1:{m.server_address[1]}",
                   "--", sys.executable, "examples/agent_v2.py", "--no-stream", question]
            subprocess.run(cmd, cwd=REPO, check=True, env={**os.environ, "SPOOLPROXY_TAGS": f"scenario={name}"})
            done.append(path)
        finally:
            s.shutdown()
            m.shutdown()
    return done


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "bench" / "judge_set" / "runs"
    for p in record_all(target, sys.argv[2:] or None):
        print(p)
