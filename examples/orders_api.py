"""An order-lookup service with a silent bug, and its fix: the tool of the
regression-from-trace example (``examples/trace_fix.py``).

``GET /orders?id=ORD-nnnn`` answers ``{"orders": [{...}]}`` for a known order (the shop's
orders, :data:`shop.ORDERS`).  For an unknown id:

* **buggy** (the default): it falls back to ORD-1001's record and stamps the requested id
  on it, HTTP 200, so the agent gets a coherent, wrong order and confidently tells the
  customer about someone else's kettle.  Nothing fails; no detector can tell;
* **fixed** (``start(fixed=True)``, ``--fixed``): ``404 {"error": {"code":
  "order_not_found", "message": ...}}``.

Run alone: ``python examples/orders_api.py --port 8083 [--fixed]``.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from shop import ORDERS


def lookup(order_id: str, fixed: bool) -> tuple[int, dict]:
    """(status, JSON body) of ``GET /orders?id=order_id``."""
    found = ORDERS.get(order_id.strip().upper())
    if found is not None:
        return 200, {"orders": [found]}
    if fixed:
        return 404, {"error": {"code": "order_not_found", "message": f"no order {order_id!r}"}}
    fallback = dict(ORDERS["ORD-1001"])  # the bug: a silent fallback, made to look like the answer
    fallback["order_id"] = order_id
    return 200, {"orders": [fallback]}


class Handler(BaseHTTPRequestHandler):
    server_version = "orders/1.0"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args) -> None:
        pass

    def date_time_string(self, timestamp=None) -> str:  # no wall clock in responses
        return "Tue, 01 Dec 2026 09:00:00 GMT"

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path != "/orders":
            status, body = 404, {"error": {"code": "not_found", "message": f"no route {url.path}"}}
        else:
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            status, body = lookup(query.get("id", ""), self.server.fixed)  # type: ignore[attr-defined]
        raw = json.dumps(body, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def start(port: int = 0, *, fixed: bool = False) -> ThreadingHTTPServer:
    """Start the service on 127.0.0.1:``port`` (0: ephemeral) in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.fixed = fixed  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, name="orders", daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8083)
    parser.add_argument("--fixed", action="store_true", help="answer 404 for unknown ids (the fix)")
    args = parser.parse_args()
    server = start(args.port, fixed=args.fixed)
    print(f"orders service ({'fixed' if args.fixed else 'buggy'}) on http://127.0.0.1:{server.server_address[1]}",
          flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
