"""The local HTTPS origin server the benchmarks talk to (HTTP/1.1, keep-alive, asyncio).

Run as ``python -m bench.server --cert server.pem --key server.key``; it prints
``PORT <n>`` on stdout once listening on 127.0.0.1 and serves until killed:

* ``/json?size=N`` (any method): an OpenAI Chat Completions-shaped JSON body of exactly N bytes.
* ``/sse?events=N&gap_ms=G&first_gap_ms=F``: ``text/event-stream`` (chunked), N OpenAI Chat
  Completions streaming chunks (``data: {...}`` events) then ``data: [DONE]``, G ms apart
  (0: each event is written and flushed on its own, back to back), with F ms after the
  first event (a pause in which the client is sure to get the first byte: on 2 cores a
  server busy writing 200 events would otherwise delay the client's wake-up).
* ``/download?bytes=N``: N bytes of ``application/octet-stream`` with a Content-Length,
  written in 256 KiB pieces.

It runs in its own process so the client under test never shares a GIL with it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import sys
from urllib.parse import parse_qs, urlsplit

PIECE = bytes(range(256)) * 1024  # 256 KiB


def json_body(size: int) -> bytes:
    """An OpenAI chat completion JSON document padded to exactly ``size`` bytes (min ~150)."""
    doc = {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }
    base = len(json.dumps(doc, separators=(",", ":")))
    doc["choices"][0]["message"]["content"] = "x" * max(0, size - base)
    return json.dumps(doc, separators=(",", ":")).encode()


def sse_event(i: int) -> bytes:
    """One OpenAI Chat Completions streaming chunk as an SSE event."""
    chunk = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"content": f"tok{i} "}, "finish_reason": None}],
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def _head(status: str, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status}"] + [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                if line[:15].lower() == "content-length:":
                    length = int(line[15:].strip())
            if length:
                await reader.readexactly(length)
            url = urlsplit(target)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/json":
                body = json_body(int(q.get("size", "1024")))
                writer.write(_head("200 OK", [("Content-Type", "application/json"),
                                              ("Content-Length", str(len(body)))]) + body)
                await writer.drain()
            elif url.path == "/sse":
                n, gap = int(q.get("events", "200")), float(q.get("gap_ms", "0")) / 1000
                first_gap = float(q.get("first_gap_ms", "0")) / 1000
                writer.write(_head("200 OK", [("Content-Type", "text/event-stream"),
                                              ("Cache-Control", "no-cache"),
                                              ("Transfer-Encoding", "chunked")]))
                for i in range(n + 1):
                    ev = sse_event(i) if i < n else b"data: [DONE]\n\n"
                    writer.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                    await writer.drain()
                    if i < n:
                        # 0: just yield, so each event leaves at once
                        await asyncio.sleep(first_gap if i == 0 and first_gap else gap)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            elif url.path == "/download":
                left = int(q.get("bytes", "0"))
                writer.write(_head("200 OK", [("Content-Type", "application/octet-stream"),
                                              ("Content-Length", str(left))]))
                while left > 0:
                    piece = PIECE if left >= len(PIECE) else PIECE[:left]
                    writer.write(piece)
                    left -= len(piece)
                    await writer.drain()
            else:
                body = b'{"error":"not found"}'
                writer.write(_head("404 Not Found", [("Content-Type", "application/json"),
                                                     ("Content-Length", str(len(body)))]) + body)
                await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def _main(cert: str, key: str) -> None:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    server = await asyncio.start_server(_handle, "127.0.0.1", 0, ssl=ctx, backlog=256)
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """Entry point: ``--cert PEM --key PEM``."""
    ap = argparse.ArgumentParser(prog="python -m bench.server")
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    args = ap.parse_args(argv)
    try:
        asyncio.run(_main(args.cert, args.key))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
