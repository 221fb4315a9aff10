"""A small local shop service: the HTTP JSON tool API the support agent calls.

Endpoints (all JSON unless noted; ids and amounts are fixed, no clock in any body):

``GET /orders?id=ORD-1001``
    ``{"orders": [{...}]}``; an unknown id gives ``{"orders": []}`` (HTTP 200).
``POST /refunds``  body ``{"order_id", "amount_cents", "reason"}``, header ``Idempotency-Key``
    NOT idempotent: every POST with a new (or no) key creates a new refund.  The first
    refund POST for an order is processed but answered ``504`` with a gateway-timeout JSON
    error (the payment processor was slow, the gateway gave up): a client that retries
    blindly refunds twice.  A repeated ``Idempotency-Key`` returns the stored refund.
``GET /refunds?order_id=ORD-1002``
    ``{"refunds": [...]}``: what was really refunded (shows a double refund).
``GET /inventory/{sku}``
    ``{"sku", "in_stock"}``; ``KET-BLU`` answers nginx's HTML ``502 Bad Gateway`` page
    (``text/html``), the inventory backend being down.

Run it alone with ``python examples/shop.py --port 8081``; the demo and the tests use
:func:`start` (a background thread on an ephemeral 127.0.0.1 port).
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ORDERS = {
    "ORD-1001": {"order_id": "ORD-1001", "customer": "ana@example.com", "item": "Blue kettle (KET-BLU)",
                 "total_cents": 4900, "status": "shipped", "shipped_on": "2026-11-20",
                 "carrier": "ParcelCo", "tracking": "PC-77120034"},
    "ORD-1002": {"order_id": "ORD-1002", "customer": "ben@example.com", "item": "Stoneware mug (MUG-STN)",
                 "total_cents": 1299, "status": "delivered", "shipped_on": "2026-11-18",
                 "carrier": "ParcelCo", "tracking": "PC-77119870"},
}
STOCK = {"MUG-STN": 31, "KET-RED": 4, "KET-BLU": None}  # None: backend down, nginx 502

NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n"
    "</body>\r\n</html>\r\n"
)


class Shop:
    """The shop's state: refunds made, keys seen, orders whose first refund POST timed out."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.refunds: list[dict] = []
        self.by_key: dict[str, dict] = {}
        self.timed_out: set[str] = set()
        self.next_id = 5001

    def refund(self, body: dict, key: str | None) -> tuple[int, dict]:
        """Create a refund; returns (status, JSON body).  See the module docstring."""
        order = ORDERS.get(str(body.get("order_id")))
        if order is None:
            return 404, {"error": {"code": "order_not_found", "message": f"no order {body.get('order_id')!r}"}}
        with self.lock:
            if key and key in self.by_key:
                return 200, self.by_key[key]
            refund = {"refund_id": f"RF-{self.next_id}", "order_id": order["order_id"],
                      "amount_cents": int(body.get("amount_cents") or order["total_cents"]),
                      "status": "succeeded"}
            self.next_id += 1
            self.refunds.append(refund)
            if key:
                self.by_key[key] = refund
            if order["order_id"] not in self.timed_out:
                self.timed_out.add(order["order_id"])
                return 504, {"error": {"code": "gateway_timeout",
                                       "message": "the payment processor did not answer within 10 s"}}
            return 201, refund


class Handler(BaseHTTPRequestHandler):
    server_version = "shop/1.0"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args) -> None:  # quiet
        pass

    def date_time_string(self, timestamp=None) -> str:  # no wall clock in responses
        return "Tue, 01 Dec 2026 09:00:00 GMT"

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: dict) -> None:
        self._send(status, json.dumps(obj, sort_keys=True).encode(), "application/json")

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        shop: Shop = self.server.shop  # type: ignore[attr-defined]
        if url.path == "/orders":
            found = ORDERS.get(query.get("id", "").strip().upper())
            return self._json(200, {"orders": [found] if found else []})
        if url.path == "/refunds":
            with shop.lock:
                rows = [r for r in shop.refunds if r["order_id"] == query.get("order_id")]
            return self._json(200, {"refunds": rows})
        if url.path.startswith("/inventory/"):
            sku = url.path.rsplit("/", 1)[1].upper()
            if sku not in STOCK:
                return self._json(404, {"error": {"code": "unknown_sku", "message": f"no product {sku}"}})
            if STOCK[sku] is None:
                return self._send(502, NGINX_502.encode(), "text/html")
            return self._json(200, {"sku": sku, "in_stock": STOCK[sku]})
        self._json(404, {"error": {"code": "not_found", "message": f"no route {url.path}"}})

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if url.path != "/refunds":
            return self._json(404, {"error": {"code": "not_found", "message": f"no route {url.path}"}})
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self._json(400, {"error": {"code": "bad_json", "message": "body is not JSON"}})
        status, obj = self.server.shop.refund(body, self.headers.get("Idempotency-Key"))  # type: ignore[attr-defined]
        self._json(status, obj)


def start(port: int = 0) -> ThreadingHTTPServer:
    """Start a fresh shop on 127.0.0.1:``port`` (0: ephemeral) in a daemon thread.

    Returns the server; its port is ``server.server_address[1]``; stop it with ``shutdown()``.
    """
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.shop = Shop()  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, name="shop", daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8081)
    port = parser.parse_args().port
    server = start(port)
    print(f"shop listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
