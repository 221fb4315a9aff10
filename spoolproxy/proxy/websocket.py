"""Recording WebSocket sessions: the messages of an upgraded connection, for the recorder.

mitmproxy relays a WebSocket connection after the ``101`` handshake and calls the addon
hooks ``websocket_start``, ``websocket_message`` (the newest message is
``flow.websocket.messages[-1]``) and ``websocket_end`` (``flow.websocket.close_code`` /
``closed_by_client``).  The recorder (:mod:`.recorder`) keeps one :class:`WsRecording` per
upgraded flow from the ``response`` hook of the handshake on, feeds it every message and
writes the interaction when the connection ends (or, still open, when recording stops),
with :meth:`WsRecording.extension` as its ``websocket`` extension
(:mod:`spoolproxy.cassettes.websocket`).

Message payloads are redacted here, before they reach the journal: key-shaped strings and
``--redact-pattern`` matches (:meth:`Redactor.bytes_`), and any value of a credential header
or query parameter of the handshake (an ``Authorization`` token echoed in a message) becomes
the same placeholder as in the handshake.
"""

from __future__ import annotations

import time
from urllib.parse import parse_qsl, urlsplit

from ..cassettes.model import Request
from ..cassettes.redact import PLACEHOLDER_RE, Redactor, placeholder
from ..cassettes.websocket import WsClose, WsMessage, WsSession, to_extension

#: credential values shorter than this are not replaced by value (too likely to collide)
MIN_SECRET_LEN = 6


class WsRecording:
    """The messages of one live WebSocket connection.

    ``opened``: ``time.time()`` when the handshake completed (message offsets count from
    there).  Not thread-safe: fed from mitmproxy's event loop only.
    """

    def __init__(self, opened: float | None = None) -> None:
        self.opened = opened or time.time()
        self.session = WsSession()

    def add(self, message) -> None:
        """Note one mitmproxy ``WebSocketMessage`` (``from_client``, ``content``, ``is_text``,
        ``timestamp``)."""
        at_ms = max(0.0, (float(message.timestamp or time.time()) - self.opened) * 1000.0)
        self.session.messages.append(
            WsMessage(from_client=bool(message.from_client), data=bytes(message.content),
                      is_text=bool(message.is_text), at_ms=at_ms)
        )

    def closed(self, websocket) -> None:
        """Note how mitmproxy's ``WebSocketData`` ended (who closed it, code, reason)."""
        if websocket is None or websocket.closed_by_client is None:
            return
        self.session.close = WsClose(
            by="client" if websocket.closed_by_client else "server",
            code=int(websocket.close_code if websocket.close_code is not None else 1006),
            reason=str(websocket.close_reason or ""),
        )

    def extension(self, redactor: Redactor, handshake: Request | None) -> dict:
        """The ``websocket`` extension for the cassette, payloads redacted (see the module
        docstring)."""
        learned = learned_secrets(redactor, handshake) if handshake is not None else {}
        msgs = []
        for m in self.session.messages:
            data = redactor.bytes_(m.data)
            for secret, ph in learned.items():
                if secret in data:
                    data = data.replace(secret, ph)
            msgs.append(WsMessage(m.from_client, data, m.is_text, m.at_ms))
        return to_extension(WsSession(messages=msgs, close=self.session.close))


def learned_secrets(redactor: Redactor, req: Request) -> dict[bytes, bytes]:
    """Credential values of the handshake ``req`` -> their placeholders: the values of secret
    headers (without an auth scheme such as ``Bearer``) and secret query parameters, the same
    placeholders :class:`Redactor` gives them in the handshake itself."""
    found: dict[bytes, bytes] = {}
    for name, values in req.headers.items():
        if not redactor.is_secret_header(name):
            continue
        for v in values:
            cred = v.partition(" ")[2] if " " in v else v
            if len(cred) >= MIN_SECRET_LEN and not PLACEHOLDER_RE.fullmatch(cred):
                found[cred.encode("utf-8", "surrogateescape")] = placeholder(name.lower(), cred).encode()
    for k, v in parse_qsl(urlsplit(req.uri).query, keep_blank_values=True):
        if redactor.is_secret_query(k) and len(v) >= MIN_SECRET_LEN and not PLACEHOLDER_RE.fullmatch(v):
            found[v.encode("utf-8", "surrogateescape")] = placeholder("query", v).encode()
    return found
