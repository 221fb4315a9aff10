"""A local upstream that echoes every request back (method, path, query, headers, body),
as a server that reflects input would: small JSON, or a big chunked JSON stream for
``/v1/form`` (so the recording spills it to a side file through the streaming redactor)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _echo(self) -> None:
        n = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(n).decode("utf-8", "replace") if n else ""
        doc = {"method": self.command, "path": self.path, "headers": dict(self.headers.items()), "body": body}
        if self.path.startswith("/v1/form"):
            payload = json.dumps({"echo": [doc] * 30}).encode()  # ~40+ KB, sent in 997-byte chunks
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for i in range(0, len(payload), 997):
                part = payload[i:i + 997]
                self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        payload = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _echo

    def log_message(self, *args) -> None:  # quiet
        pass


def start() -> ThreadingHTTPServer:
    """An echo server on 127.0.0.1 (a free port), serving on a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
