"""Pure decisions of the recording gateway (``spoolproxy serve``): which session a request
belongs to, what its cassette is called, which sessions are idle, what a control request asks.

No mitmproxy here; :mod:`.gateway` carries these decisions out.

* A request carrying ``x-spoolproxy-session: ID`` belongs to session ``ID`` (the header is
  removed before the request goes upstream); any other request belongs to the session of
  its client connection.
* ``x-spoolproxy-tags: k=v,k=v`` (also removed) adds run tags to its session.
* A session ends when idle (no request in flight and none started for ``--idle`` seconds),
  when its connection closes (connection sessions), on
  ``POST http://spoolproxy.control/sessions/ID/end``, or when the gateway stops.
* Its cassette's key in the store is ``<UTC day it started>/<session id>.yaml``.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable

from ..replayer.control import CONTROL_HOST  # the magic host of control requests, as in playback
from ..triage.tags import parse_tag

__all__ = ["CONTROL_HOST", "SESSION_HEADER", "TAGS_HEADER", "session_id", "connection_session_id", "store_key",
           "parse_tags_header", "SessionState", "idle_sessions", "ControlRequest", "control_request"]

SESSION_HEADER = "x-spoolproxy-session"
TAGS_HEADER = "x-spoolproxy-tags"
#: the longest session id kept as given; longer ones are cut and get a hash suffix
MAX_ID = 96
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def session_id(value: str) -> str:
    """A session header value made safe as a file and object name: characters other than
    letters, digits, ``. _ -`` become ``_``, a leading ``.`` or ``-`` is dropped, and an id
    longer than :data:`MAX_ID` (or changed by the cleaning) keeps a short hash of the
    original so distinct values stay distinct.  An empty result is ``session``."""
    raw = value.strip()
    safe = _UNSAFE.sub("_", raw).lstrip(".-")
    if safe != raw or len(safe) > MAX_ID:
        digest = hashlib.sha1(raw.encode("utf-8", "surrogateescape")).hexdigest()[:8]
        safe = f"{safe[:MAX_ID - 9].rstrip('_') or 'session'}-{digest}"
    return safe or "session"


def connection_session_id(started: datetime | None = None) -> str:
    """A fresh id for the session of a client connection without a session header:
    ``conn-<YYYYmmddTHHMMSS>-<8 hex>`` (UTC; unique across gateways)."""
    started = started or datetime.now(timezone.utc)
    return f"conn-{started.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"


def store_key(sid: str, started: datetime, suffix: str = ".yaml") -> str:
    """The cassette key of session ``sid`` started at ``started``: ``YYYY-MM-DD/<sid>.yaml``
    (the UTC day, so a day's runs list together)."""
    return f"{started.astimezone(timezone.utc).strftime('%Y-%m-%d')}/{sid}{suffix}"


def parse_tags_header(values: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """``["agent=refund-bot,version=1.4.0"]`` -> (tags, malformed pairs).

    Pairs are separated by commas; a later pair wins.  A malformed pair (see
    :func:`spoolproxy.triage.tags.parse_tag`) is returned in the second list instead of
    raising: a bad header must never stop the agent's traffic."""
    tags: dict[str, str] = {}
    bad: list[str] = []
    for value in values:
        for pair in value.split(","):
            if not pair.strip():
                continue
            try:
                k, v = parse_tag(pair, source=TAGS_HEADER)
            except Exception:  # noqa: BLE001 - UsageError: reported, not raised
                bad.append(pair.strip())
                continue
            tags[k] = v
    return tags, bad


@dataclass(frozen=True)
class SessionState:
    """What :func:`idle_sessions` needs of an open session: ``key``, requests ``in_flight``,
    ``last_activity`` (a monotonic time, seconds)."""

    key: str
    in_flight: int
    last_activity: float


def idle_sessions(sessions: Iterable[SessionState], now: float, idle_s: float) -> list[str]:
    """Keys of the sessions with nothing in flight and no activity for ``idle_s`` seconds."""
    return [s.key for s in sessions if s.in_flight == 0 and now - s.last_activity >= idle_s]


@dataclass(frozen=True)
class ControlRequest:
    """A request to ``spoolproxy.control`` understood: ``action`` is ``end`` (end session
    ``session``), ``list`` (the open sessions) or ``unknown``/``method`` (answered 404/405)."""

    action: str
    session: str | None = None


def control_request(method: str, path: str) -> ControlRequest:
    """Parse a control request: ``POST /sessions/ID/end`` or ``GET /sessions``."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts == ["sessions"]:
        return ControlRequest("list" if method == "GET" else "method")
    if len(parts) == 3 and parts[0] == "sessions" and parts[2] == "end":
        from urllib.parse import unquote

        return ControlRequest("end" if method == "POST" else "method", session_id(unquote(parts[1])))
    return ControlRequest("unknown")


#: the answer to an unknown control path
CONTROL_HELP = ("spoolproxy serve control endpoints: POST http://spoolproxy.control/sessions/ID/end (end session "
                "ID, publish its cassette), GET http://spoolproxy.control/sessions (the open sessions)")
