"""Amazon Bedrock ConverseStream wire format (``POST /model/{id}/converse-stream``): an
``application/vnd.amazon.eventstream`` body of binary messages (AWS event stream encoding:
prelude = total length and headers length as big-endian uint32, the prelude's CRC32, the
headers, the JSON payload, the message's CRC32; string headers ``:event-type``,
``:content-type``, ``:message-type``).  Events: ``messageStart``, ``contentBlockDelta`` per
text piece, ``contentBlockStop``, ``messageStop`` (``stopReason``) and the ``metadata``
event (usage, latency) that follows it.  The answer echoes the last user text.
"""

from __future__ import annotations

import binascii
import json
import struct
from typing import Any

from .common import count_tokens, pieces


def _header(name: str, value: str) -> bytes:
    n, v = name.encode(), value.encode()
    return bytes([len(n)]) + n + b"\x07" + struct.pack(">H", len(v)) + v


def frame(event_type: str, payload: dict[str, Any]) -> bytes:
    """One AWS event stream message carrying ``payload`` as JSON."""
    headers = (_header(":event-type", event_type) + _header(":content-type", "application/json")
               + _header(":message-type", "event"))
    body = json.dumps(payload, separators=(",", ":")).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    msg = prelude + headers + body
    return msg + struct.pack(">I", binascii.crc32(msg))


def _answer(req: dict[str, Any]) -> str:
    msgs = req.get("messages") or []
    texts = [b.get("text", "") for b in (msgs[-1].get("content") or []) if isinstance(b, dict)] if msgs else []
    return f"Echo: {''.join(texts)}"


def converse_stream(req: dict[str, Any]) -> list[bytes]:
    """The ConverseStream body, one event stream message per ``bytes``."""
    answer = _answer(req)
    out = [frame("messageStart", {"role": "assistant"})]
    out += [frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": p}}) for p in pieces(answer)]
    out.append(frame("contentBlockStop", {"contentBlockIndex": 0}))
    out.append(frame("messageStop", {"stopReason": "end_turn"}))
    prompt = count_tokens(json.dumps(req.get("messages") or []))
    out.append(frame("metadata", {"usage": {"inputTokens": prompt, "outputTokens": count_tokens(answer),
                                            "totalTokens": prompt + count_tokens(answer)}, "metrics": {"latencyMs": 120}}))
    return out
