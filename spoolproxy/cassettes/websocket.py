"""WebSocket sessions in a cassette: the messages exchanged after an HTTP ``101`` upgrade.

A WebSocket session (OpenAI Realtime, Gemini Live, any ``ws://``/``wss://`` API) is stored
as one interaction: the handshake is its ``request`` (the HTTP ``GET`` with ``Upgrade:
websocket``, its URI ``https://``/``http://`` as on the wire) and ``response`` (``101
Switching Protocols``); the messages sit in the interaction's ``spoolproxy:`` extension
under ``websocket`` (a key vcrpy ignores), as a readable list in the order they crossed the
proxy (RFC 6455 terms: a *message* is one text or binary payload, however fragmented)::

    spoolproxy:
      websocket:
        messages:
        - {from: server, at_ms: 3.1, text: '{"type":"session.created",...}'}
        - {from: client, at_ms: 10.4, text: '{"type":"response.create"}'}
        - {from: server, at_ms: 52.0, binary: !!binary AAEC}
        close: {by: client, code: 1000, reason: ''}

``at_ms`` is milliseconds after the handshake completed; ``close`` is absent while the
connection was still open when recording stopped.  :class:`WsSession` is the typed view;
:func:`session_of` reads it from an :class:`~.model.Interaction`, :func:`to_extension` writes
it (the dict stored in ``Interaction.extra["websocket"]``, which :mod:`.format` writes as is).

Runs imported from other tools (``spoolproxy import`` of a HAR or a mitmproxy flow file)
keep their messages under ``websocket_messages`` instead (``from``, ``time``, ``data``: the
text, or base64 for a binary message marked ``type: binary`` / ``opcode: 2``).
:func:`map_payloads` and :func:`payloads` reach the payloads of both, for the redactor and
``spoolproxy scan``.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal

from .model import Interaction

#: ``Interaction.extra`` key of a WebSocket session
EXTENSION_KEY = "websocket"
#: ``Interaction.extra`` key of WebSocket messages imported from a HAR or mitmproxy flow file
IMPORTED_KEY = "websocket_messages"


@dataclass(frozen=True)
class WsMessage:
    """One WebSocket message: ``from_client`` (True: client to server), ``data`` (the payload,
    UTF-8 for text), ``is_text`` (TEXT frames, else BINARY), ``at_ms`` (ms after the handshake)."""

    from_client: bool
    data: bytes
    is_text: bool = True
    at_ms: float = 0.0

    @property
    def sender(self) -> Literal["client", "server"]:
        return "client" if self.from_client else "server"

    def describe(self, limit: int = 80) -> str:
        """A short human form: ``text '{"type":"x"}'`` or ``binary, 12 bytes``."""
        if not self.is_text:
            return f"binary, {len(self.data)} bytes"
        text = self.data.decode("utf-8", "replace")
        return "text " + repr(text if len(text) <= limit else text[: limit - 1] + "…")


@dataclass(frozen=True)
class WsClose:
    """How the connection ended: ``by`` client | server, the close ``code`` (RFC 6455 7.4;
    1006 when the TCP connection dropped without a close frame) and ``reason``."""

    by: Literal["client", "server"]
    code: int = 1000
    reason: str = ""


@dataclass
class WsSession:
    """The messages of one WebSocket connection in the order they crossed the proxy, and its close."""

    messages: list[WsMessage] = field(default_factory=list)
    close: WsClose | None = None

    @property
    def client_messages(self) -> list[WsMessage]:
        return [m for m in self.messages if m.from_client]


def _message(d: Any, n: int) -> WsMessage:
    if not isinstance(d, dict):
        raise ValueError(f"websocket message {n} must be a mapping")
    sender = d.get("from")
    if sender not in ("client", "server"):
        raise ValueError(f"websocket message {n}: 'from' must be client or server")
    if "text" in d:
        text = d["text"]
        data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
        is_text = True
    elif "binary" in d:
        raw = d["binary"]
        data = raw if isinstance(raw, bytes) else str(raw).encode("utf-8", "surrogateescape")
        is_text = False
    else:
        raise ValueError(f"websocket message {n} has neither 'text' nor 'binary'")
    return WsMessage(from_client=sender == "client", data=data, is_text=is_text, at_ms=float(d.get("at_ms") or 0.0))


def session_of(it: Interaction) -> WsSession | None:
    """The WebSocket session recorded with ``it``, or None when ``it`` is no WebSocket
    handshake.  A ``101`` handshake recorded without messages (by another tool) gives an
    empty session.  Raises ValueError for a malformed extension."""
    ext = it.extra.get(EXTENSION_KEY)
    if ext is None:
        if it.response is not None and it.response.status == 101 and is_upgrade(it.request.headers):
            return WsSession()
        return None
    if not isinstance(ext, dict):
        raise ValueError("the websocket extension must be a mapping")
    raw = ext.get("messages") or []
    if not isinstance(raw, list):
        raise ValueError("websocket messages must be a list")
    close = None
    c = ext.get("close")
    if isinstance(c, dict) and c.get("by") in ("client", "server"):
        close = WsClose(by=c["by"], code=int(c.get("code") or 1000), reason=str(c.get("reason") or ""))
    return WsSession(messages=[_message(d, n) for n, d in enumerate(raw)], close=close)


def to_extension(session: WsSession) -> dict[str, Any]:
    """The ``Interaction.extra["websocket"]`` dict for ``session`` (text payloads as str, binary
    ones as bytes, which the YAML writer turns into ``!!binary``)."""
    msgs: list[dict[str, Any]] = []
    for m in session.messages:
        d: dict[str, Any] = {"from": m.sender, "at_ms": round(m.at_ms, 3)}
        if m.is_text:
            try:
                d["text"] = m.data.decode("utf-8")
            except UnicodeDecodeError:  # not valid UTF-8 after all: keep the bytes
                d["binary"] = m.data
        else:
            d["binary"] = m.data
        msgs.append(d)
    out: dict[str, Any] = {"messages": msgs}
    if session.close is not None:
        out["close"] = {"by": session.close.by, "code": session.close.code, "reason": session.close.reason}
    return out


def is_upgrade(headers: dict[str, list[str]]) -> bool:
    """True when request ``headers`` ask for a WebSocket upgrade (``Upgrade: websocket``)."""
    for k, vs in headers.items():
        if k.lower() == "upgrade" and any(v.strip().lower() == "websocket" for v in vs):
            return True
    return False


def _imported_binary(m: dict) -> bool:
    return m.get("type") == "binary" or m.get("opcode") == 2


def map_payloads(extra: dict[str, Any], text: Callable[[str], str], data: Callable[[bytes], bytes]) -> dict[str, Any]:
    """``extra`` (an ``Interaction.extra``) with every WebSocket payload passed through
    ``text`` (text messages, the close reason) or ``data`` (binary messages; an imported
    one's base64 is decoded, mapped and encoded again only when the bytes changed), in both
    the ``websocket`` extension and imported ``websocket_messages``.  Entries of an
    unexpected shape are kept as they are.  Returns ``extra`` itself when it holds no
    WebSocket messages, else a new dict (the input is not modified)."""
    ext, imported = extra.get(EXTENSION_KEY), extra.get(IMPORTED_KEY)
    if not isinstance(ext, dict) and not isinstance(imported, list):
        return extra
    out = dict(extra)
    if isinstance(ext, dict):
        new = dict(ext)
        if isinstance(ext.get("messages"), list):
            new["messages"] = [_map_recorded(m, text, data) for m in ext["messages"]]
        close = ext.get("close")
        if isinstance(close, dict) and isinstance(close.get("reason"), str) and close["reason"]:
            new["close"] = {**close, "reason": text(close["reason"])}
        out[EXTENSION_KEY] = new
    if isinstance(imported, list):
        out[IMPORTED_KEY] = [_map_imported(m, text, data) for m in imported]
    return out


def _map_recorded(m: Any, text: Callable[[str], str], data: Callable[[bytes], bytes]) -> Any:
    if not isinstance(m, dict):
        return m
    if isinstance(m.get("text"), str):
        return {**m, "text": text(m["text"])}
    if isinstance(m.get("binary"), (bytes, bytearray)):
        return {**m, "binary": data(bytes(m["binary"]))}
    return m


def _map_imported(m: Any, text: Callable[[str], str], data: Callable[[bytes], bytes]) -> Any:
    if not isinstance(m, dict) or not isinstance(m.get("data"), str):
        return m
    if not _imported_binary(m):
        return {**m, "data": text(m["data"])}
    try:
        raw = base64.b64decode(m["data"], validate=True)
    except (binascii.Error, ValueError):
        return {**m, "data": text(m["data"])}
    new = data(raw)
    return m if new == raw else {**m, "data": base64.b64encode(new).decode("ascii")}


def payloads(extra: dict[str, Any]) -> Iterator[tuple[str, bytes]]:
    """``(field, payload)`` of every WebSocket message in ``extra`` (an ``Interaction.extra``):
    ``websocket.messages[3].text``, ``websocket.messages[4].binary``,
    ``websocket_messages[0].data`` (an imported binary message's base64 decoded), and the
    close reason; for ``spoolproxy scan``."""
    ext, imported = extra.get(EXTENSION_KEY), extra.get(IMPORTED_KEY)
    if isinstance(ext, dict):
        for n, m in enumerate(ext.get("messages") if isinstance(ext.get("messages"), list) else []):
            if not isinstance(m, dict):
                continue
            if isinstance(m.get("text"), str):
                yield f"{EXTENSION_KEY}.messages[{n}].text", m["text"].encode("utf-8", "surrogateescape")
            elif isinstance(m.get("binary"), (bytes, bytearray)):
                yield f"{EXTENSION_KEY}.messages[{n}].binary", bytes(m["binary"])
        close = ext.get("close")
        if isinstance(close, dict) and isinstance(close.get("reason"), str) and close["reason"]:
            yield f"{EXTENSION_KEY}.close.reason", close["reason"].encode("utf-8", "surrogateescape")
    if isinstance(imported, list):
        for n, m in enumerate(imported):
            if not isinstance(m, dict) or not isinstance(m.get("data"), str):
                continue
            raw = m["data"].encode("utf-8", "surrogateescape")
            if _imported_binary(m):
                try:
                    raw = base64.b64decode(m["data"], validate=True)
                except (binascii.Error, ValueError):
                    pass
            yield f"{IMPORTED_KEY}[{n}].data", raw
