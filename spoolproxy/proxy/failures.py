"""Turning mitmproxy's error messages into a recorded :class:`~spoolproxy.cassettes.model.Failure`.

mitmproxy reports upstream problems as text on ``flow.error.msg`` (the underlying OSError
or h11/h2 message).  :func:`classify` maps it to a ``kind``: refused | dns | timeout |
reset | tls | protocol | other, and ``during``: connect (no response), request, or
response (headers arrived, body cut).
"""

from __future__ import annotations

from ..cassettes.model import Failure

_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("dns", ("name or service not known", "nodename nor servname", "temporary failure in name resolution",
             "no address associated", "name resolution", "getaddrinfo", "errno -2", "errno -3", "errno -5")),
    ("refused", ("connection refused", "connect call failed", "errno 111", "errno 61")),
    ("timeout", ("timed out", "timeout", "errno 110")),
    ("tls", ("tls", "ssl", "certificate", "handshake")),
    ("reset", ("reset", "closed connection", "connection closed", "server disconnected", "broken pipe",
               "without sending complete message", "incomplete", "eof", "errno 104", "errno 32")),
    ("protocol", ("protocol", "invalid", "malformed", "h11", "h2 ", "stream")),
)

#: how mitmproxy words a client that hung up first: HTTP/1 ``Client disconnected.``,
#: HTTP/2 ``stream reset by client (CANCEL)``
CLIENT_GONE = ("client disconnected", "reset by client")


def closed_by_client(message: str | None) -> bool:
    """True when mitmproxy's error ``message`` says the *client* ended the exchange (it
    closed its connection or cancelled its HTTP/2 stream), not the upstream."""
    low = (message or "").lower()
    return any(n in low for n in CLIENT_GONE)


def classify(message: str, *, had_response: bool, request_sent: bool = True) -> Failure:
    """A Failure for mitmproxy error ``message``.  ``had_response``: response headers had
    arrived (the body was cut).  A client that went away is kind ``other`` with the
    message saying so (:func:`closed_by_client`); the recorder keeps one that leaves after
    the response headers apart from failures (see ``Recorder.error``)."""
    low = (message or "").lower()
    kind = "other"
    if not closed_by_client(low):
        for k, needles in _KINDS:
            if any(n in low for n in needles):
                kind = k
                break
    if had_response:
        during = "response"
    elif kind in ("refused", "dns", "tls") or not request_sent or "errno 110" in low or "cannot connect" in low:
        during = "connect"
    else:
        during = "request"  # sent, but the connection broke before any response header
    return Failure(kind=kind, message=message or "", during=during)
