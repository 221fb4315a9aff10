"""Stream framings: Server-Sent Events (WHATWG HTML "server-sent events" parsing rules),
newline-delimited JSON (Ollama) and the streamed JSON array (Gemini without ``alt=sse``).

Pure functions over decoded body bytes; none raises on malformed input.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from ...cassettes.jsonparse import loads


class SSEEvent(NamedTuple):
    """One dispatched event: ``event`` name ('' when absent) and ``data`` (lines joined by \\n)."""

    event: str
    data: str


def parse_sse(body: bytes | str) -> list[SSEEvent]:
    """Split an SSE body into events.  Comment lines (``: ping``) are skipped; an event
    not closed by a blank line at the end of the body is still returned (a cut stream)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    events: list[SSEEvent] = []
    append = events.append
    for block in text.split("\n\n"):
        if not block:
            continue
        if block.startswith("data: ") and "\n" not in block:  # the common one-line event
            append(SSEEvent("", block[6:]))
            continue
        name = ""
        data: list[str] = []
        for line in block.split("\n"):
            if not line or line[0] == ":":
                continue
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "data":
                data.append(value)
            elif field == "event":
                name = value
        if data or name:
            append(SSEEvent(name, "\n".join(data)))
    return events


def looks_like_sse(body: bytes, content_type: Any = "") -> bool:
    """True when the body is an SSE stream: a leading ``data:``/``event:`` field, or the
    ``text/event-stream`` content type (``content_type`` may be the Response, whose header
    is then read only when the body's first byte does not decide)."""
    first = body[:1]
    if first in (b"{", b"["):
        return False
    head = body.lstrip()[:7]
    if head.startswith(b"data:") or head.startswith(b"event:"):
        return True
    if not isinstance(content_type, str):
        from .common import content_type as ctype

        content_type = ctype(content_type)
    return content_type == "text/event-stream"


def json_events(events: list[SSEEvent]) -> list[tuple[str, Any]]:
    """``(event name, parsed data)`` for each event whose data is JSON; ``[DONE]`` and other
    non-JSON data are returned as the raw string."""
    out: list[tuple[str, Any]] = []
    for ev in events:
        d = ev.data
        if not d:
            continue
        if d[0] not in "{[" or d == "[DONE]":  # plain text: no exception round trip
            out.append((ev.event, d))
            continue
        try:
            out.append((ev.event, loads(d)))
        except ValueError:
            out.append((ev.event, d))
    return out


def parse_ndjson(body: bytes) -> tuple[list[Any], bool]:
    """Parse newline-delimited JSON; returns (objects, all_lines_parsed)."""
    objs: list[Any] = []
    ok = True
    for line in body.split(b"\n"):
        line = line.strip()
        if not line:
            continue
        try:
            objs.append(loads(line))
        except ValueError:
            ok = False
    return objs, ok


def parse_json_array_stream(body: bytes) -> tuple[list[Any], bool]:
    """Parse Gemini's streamed JSON array (``[{...},\\r\\n{...}]``).  Returns (objects,
    closed) where ``closed`` is False when the array was cut before its ``]``; the objects
    that arrived whole are still returned."""
    try:
        value = loads(body)
        return (value if isinstance(value, list) else [value]), True
    except ValueError:
        pass
    dec = json.JSONDecoder()
    text = body.decode("utf-8", "replace").strip()
    objs: list[Any] = []
    pos = 1 if text.startswith("[") else 0
    while pos < len(text):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            obj, pos = dec.raw_decode(text, pos)
        except ValueError:
            break
        objs.append(obj)
    return objs, False
