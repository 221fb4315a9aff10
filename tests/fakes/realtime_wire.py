"""A local fake WebSocket API speaking the OpenAI Realtime event format (and a plain echo).

:class:`FakeRealtime` runs a real WebSocket server (the ``websockets`` library, asyncio, on
its own thread) on 127.0.0.1 with TLS from the test CA (:mod:`tests.fakes.certs`), so a
client that believes it talks to ``wss://api.openai.com/v1/realtime`` verifies it.

``/v1/realtime`` (OpenAI Realtime API, GA event names): on connect the server sends
``session.created``; it answers ``session.update`` with ``session.updated``,
``conversation.item.create`` with ``conversation.item.added`` and ``response.create`` with
``response.created``, one ``response.output_text.delta`` per word of the reply (``Echo:``
and the last user text), ``response.output_text.done`` and ``response.done`` (with usage);
an unknown event gets an ``error`` event.

``/echo``: a text message ``bye`` is answered ``goodbye`` and the server closes (1000);
other text messages come back upper-cased, binary messages reversed.

Every accepted TCP connection is counted (:attr:`connections`), so playback tests can
assert that nothing reached the server.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading

from .certs import TestCA


class FakeRealtime:
    """A fake WebSocket server on an ephemeral port (TLS when ``ca`` is given)."""

    def __init__(self, ca: TestCA | None = None) -> None:
        self.ca = ca
        self.port = 0
        self.connections = 0
        self.received: list[str | bytes] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-realtime", daemon=True)
        self._server = None

    def __enter__(self) -> "FakeRealtime":
        from websockets.asyncio.server import serve

        ctx = None
        if self.ca is not None:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(str(self.ca.cert_pem_path), str(self.ca.key_pem_path))
        self._thread.start()

        async def start():
            return await serve(self._handle, "127.0.0.1", 0, ssl=ctx, process_request=self._count)

        self._server = asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)
        self.port = list(self._server.sockets)[0].getsockname()[1]
        return self

    def __exit__(self, *exc) -> None:
        async def stop():
            self._server.close()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _count(self, connection, request):
        self.connections += 1
        return None

    async def _handle(self, ws) -> None:
        path = ws.request.path.split("?", 1)[0]
        if path.endswith("/realtime"):
            await self._realtime(ws)
        else:
            await self._echo(ws)

    async def _echo(self, ws) -> None:
        async for msg in ws:
            self.received.append(msg)
            if msg == "bye":
                await ws.send("goodbye")
                await ws.close(1000, "done")
                return
            await ws.send(msg.upper() if isinstance(msg, str) else bytes(reversed(msg)))

    async def _realtime(self, ws) -> None:
        ids = iter(range(1, 10_000))
        session = {"id": "sess_fake1", "object": "realtime.session", "type": "realtime", "model": "gpt-realtime",
                   "output_modalities": ["text"], "instructions": ""}

        def event(kind: str, **fields) -> str:
            return json.dumps({"type": kind, "event_id": f"event_{next(ids)}", **fields})

        await ws.send(event("session.created", session=session))
        last_text = ""
        async for raw in ws:
            self.received.append(raw)
            try:
                ev = json.loads(raw)
            except (TypeError, ValueError):
                await ws.send(event("error", error={"type": "invalid_request_error", "message": "not JSON"}))
                continue
            kind = ev.get("type")
            if kind == "session.update":
                session.update(ev.get("session") or {})
                await ws.send(event("session.updated", session=session))
            elif kind == "conversation.item.create":
                item = dict(ev.get("item") or {})
                item.setdefault("id", "item_user1")
                for part in item.get("content") or []:
                    if isinstance(part, dict) and part.get("text"):
                        last_text = part["text"]
                await ws.send(event("conversation.item.added", previous_item_id=None, item=item))
            elif kind == "response.create":
                words = ["Echo:", *last_text.split()]
                resp = {"id": "resp_fake1", "object": "realtime.response", "status": "in_progress", "output": []}
                await ws.send(event("response.created", response=resp))
                for i, w in enumerate(words):
                    await ws.send(event("response.output_text.delta", response_id="resp_fake1", item_id="item_asst1",
                                        output_index=0, content_index=0, delta=(" " if i else "") + w))
                text = " ".join(words)
                await ws.send(event("response.output_text.done", response_id="resp_fake1", item_id="item_asst1",
                                    output_index=0, content_index=0, text=text))
                done = {**resp, "status": "completed",
                        "usage": {"total_tokens": 12, "input_tokens": 5, "output_tokens": 7}}
                await ws.send(event("response.done", response=done))
            else:
                await ws.send(event("error", error={"type": "invalid_request_error",
                                                    "message": f"unknown event {kind!r}"}))
