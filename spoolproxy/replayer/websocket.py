"""Replaying a recorded WebSocket session: which server messages answer which client message.

Pure (no sockets, no mitmproxy): :class:`Conversation` walks one recorded
:class:`~spoolproxy.cassettes.websocket.WsSession`; the loopback server
(:mod:`.wsserver`) only carries its steps out.

The recording is cut at the client's messages: the server messages before the first client
message are the *opening* (e.g. OpenAI Realtime's ``session.created``), and the server
messages after client message *k* (up to the next client message) answer it.  Each live
client message is compared with the next recorded one, in recorded order, through the
session's :class:`~.fingerprint.Fingerprinter` (so ``--ignore-json-path`` / ``--normalize``
apply, and redaction placeholders match any value):

* **exact**: same payload after normalising: its recorded answers are sent;
* **divergence** (``--match default`` only): a different payload of the same kind (text or
  binary, and for JSON objects the same ``type``, or the same top-level keys when there is
  no ``type``): its recorded answers are sent anyway and the difference is reported, as
  vcrpy-style HTTP divergences are;
* **miss**: anything else, or more client messages than were recorded: nothing is sent and
  the connection is closed with code 1008 (policy violation) and a short reason, so the
  client fails at once instead of waiting for an answer that will never come.

The worst step decides the interaction's outcome in the playback report.  A session left
before every recorded client message was sent gets a warning (it fails ``--strict`` like a
divergence): the client could not use what was recorded after that point.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..cassettes.websocket import WsClose, WsMessage, WsSession
from .diff import Change, diff_bodies, suggest
from .fingerprint import Fingerprinter

StepOutcome = Literal["exact", "divergence", "miss"]
_RANK = {"exact": 0, "divergence": 1, "miss": 2}

#: close code sent on a miss (RFC 6455 7.4.1: "policy violation")
MISS_CLOSE_CODE = 1008


@dataclass
class Step:
    """What the server does now: send ``replies`` in order (each with its recorded delay in ms
    after the message that triggered it), then close with ``close`` when set."""

    outcome: StepOutcome = "exact"
    replies: list[tuple[float, WsMessage]] = field(default_factory=list)
    close: WsClose | None = None


def _kind(fp: Fingerprinter, m: WsMessage) -> tuple[str, bytes, object]:
    """``(kind, canonical bytes, normalised JSON or None)`` of a message payload."""
    return fp.body(m.data, "application/json" if m.is_text else "application/octet-stream")


def _shape(m: WsMessage, value: object) -> tuple:
    """What must agree for a divergence: frame type and, for a JSON object, its ``type`` field
    (or its top-level keys when it has none)."""
    if isinstance(value, dict):
        if "type" in value:
            return (m.is_text, "type", repr(value["type"]))
        return (m.is_text, "keys", tuple(sorted(value)))
    return (m.is_text, type(value).__name__ if value is not None else "raw")


class Conversation:
    """Replays one recorded WebSocket session (see the module docstring).

    ``fingerprinter``: the playback session's (its match options apply to messages too);
    ``match``: ``default`` (divergences allowed) or ``exact``.  Not thread-safe: one
    connection drives it.  The report view is :attr:`outcome`, :attr:`reasons`,
    :attr:`changes`, :attr:`suggestions` and the list :meth:`finish` returns.
    """

    def __init__(self, session: WsSession, fingerprinter: Fingerprinter, match: str = "default") -> None:
        self.session = session
        self.fp = fingerprinter
        self.match = match
        msgs = session.messages
        self._client = [i for i, m in enumerate(msgs) if m.from_client]
        first = self._client[0] if self._client else len(msgs)
        self._opening = msgs[:first]
        self._next = 0  # index into _client of the next expected client message
        self.outcome: StepOutcome = "exact"
        self.reasons: list[str] = []
        self.changes: list[Change] = []
        self.suggestions: list[str] = []
        self.closed = False

    # -- steps ----------------------------------------------------------------------------
    def opening(self) -> Step:
        """Right after the handshake: the server messages recorded before any client message
        (and the recorded server close when the recording holds no client message)."""
        step = Step(replies=[(m.at_ms, m) for m in self._opening])
        if not self._client:
            step.close = self._server_close()
        return step

    def receive(self, actual: WsMessage) -> Step:
        """The client sent ``actual``: match it with the next recorded client message and
        return the answers (or the miss)."""
        total = len(self._client)
        k = self._next
        if self.closed:
            return Step(outcome="miss")
        if k >= total:
            return self._miss(f"WebSocket: client message {k + 1} ({actual.describe()}) was never recorded: "
                              f"the recording has {total} client message{'s' if total != 1 else ''}")
        recorded = self.session.messages[self._client[k]]
        rk, rcanon, rjson = _kind(self.fp, recorded)
        ak, acanon, ajson = _kind(self.fp, actual)
        same = recorded.is_text == actual.is_text and rk == ak and rcanon == acanon
        outcome: StepOutcome = "exact"
        if not same:
            changes = diff_bodies(rjson, ajson, rcanon, acanon) if recorded.is_text == actual.is_text else []
            shape_ok = _shape(recorded, rjson) == _shape(actual, ajson)
            where = f"client message {k + 1} of {total}"
            self._note(changes, k, suggest_flags=shape_ok)  # another event type is a real change
            if self.match == "default" and shape_ok:
                outcome = "divergence"
                self.reasons.append(f"WebSocket: {where} differs from the recording; its recorded answers were "
                                    "sent anyway (--match exact makes this a miss)")
            else:
                return self._miss(f"WebSocket: {where} does not match the recording: recorded "
                                  f"{recorded.describe()}, actual {actual.describe()}; the connection was closed "
                                  f"({MISS_CLOSE_CODE})")
        self._next = k + 1
        self._raise(outcome)
        start = self._client[k]
        end = self._client[k + 1] if k + 1 < total else len(self.session.messages)
        step = Step(outcome=outcome, replies=[(m.at_ms - recorded.at_ms, m) for m in self.session.messages[start + 1:end]])
        if self._next == total:
            step.close = self._server_close()
        return step

    def finish(self, closed_by: str | None) -> list[str]:
        """The connection ended (``closed_by`` client | server | None for "still open when
        playback stopped"); returns warnings for what the client never got to use."""
        self.closed = True
        total, sent = len(self._client), self._next
        if self.outcome == "miss" or sent >= total:
            return []
        how = {"client": "the client closed the connection", "server": "the connection was closed"}.get(
            closed_by or "", "the connection was still open when playback stopped")
        return [f"WebSocket: {how} after {sent} of {total} recorded client messages; the rest of the recording "
                "was never replayed"]

    def fail(self, reason: str) -> None:
        """The replay broke for a reason outside the recording (an internal error): a miss."""
        self.reasons.append(reason)
        self._raise("miss")
        self.closed = True

    # -- helpers --------------------------------------------------------------------------
    def _server_close(self) -> WsClose | None:
        c = self.session.close
        return c if c is not None and c.by == "server" else None

    def _miss(self, reason: str) -> Step:
        self.reasons.append(reason)
        self._raise("miss")
        self.closed = True
        return Step(outcome="miss", close=WsClose(by="server", code=MISS_CLOSE_CODE,
                                                  reason="spoolproxy: message not in the cassette"))

    def _raise(self, outcome: StepOutcome) -> None:
        if _RANK[outcome] > _RANK[self.outcome]:
            self.outcome = outcome

    def _note(self, changes: list[Change], k: int, *, suggest_flags: bool = True) -> None:
        for flag in suggest(changes) if suggest_flags else ():
            if flag not in self.suggestions:
                self.suggestions.append(flag)
        self.changes += [c.model_copy(update={"path": f"client message {k + 1} {c.path}"}) for c in changes]
