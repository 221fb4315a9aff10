"""Clients that refuse the spoolproxy CA: named by host, with the fix for that client.

A client with its own trust store (``verify=certifi.where()``, a pinned certificate, a JVM
without the CA imported) aborts the TLS handshake with the proxy: no HTTP request ever
reaches the recorder, so the cassette would just be empty or short.  :class:`TlsWatch`
(a mitmproxy addon: one hook, ``tls_failed_client``) counts those handshakes per host;
:meth:`TlsWatch.facts` is what the cassette keeps (``meta.extra["tls_rejected"]``, read by
the ``tls_rejected`` detector, which also words the message and the fix for the summary).
"""

from __future__ import annotations

from collections import Counter

#: mitmproxy's handshake error text when the client sent a certificate alert
_REJECTED = ("does not trust", "unknown ca", "bad certificate", "certificate unknown")
#: ... when it hung up during the handshake (some clients do that instead of an alert)
_CLOSED = "disconnected during the handshake"


class TlsWatch:
    """mitmproxy addon noting failed client handshakes per host (SNI, else the address).

    ``rejected``: host -> handshakes the client aborted with a certificate alert (it does
    not trust the spoolproxy CA); ``closed``: host -> handshakes it hung up on, which may be
    the same problem.  Thread-safe enough for mitmproxy's single event loop."""

    def __init__(self) -> None:
        self.rejected: Counter[str] = Counter()
        self.closed: Counter[str] = Counter()

    def tls_failed_client(self, data) -> None:
        conn = data.conn
        host = conn.sni or _address(data)
        err = conn.error or ""
        if any(s in err for s in _REJECTED):
            self.rejected[host] += 1
        elif _CLOSED in err:
            self.closed[host] += 1

    def facts(self) -> list[dict]:
        """``[{host, connections, certain}]`` for ``meta.extra["tls_rejected"]``:
        ``certain`` False for handshakes the client only hung up on."""
        out = [{"host": h, "connections": n, "certain": True} for h, n in sorted(self.rejected.items())]
        out += [{"host": h, "connections": n, "certain": False} for h, n in sorted(self.closed.items())
                if h not in self.rejected]
        return out


def _address(data) -> str:
    addr = getattr(data.context.server, "address", None)
    return f"{addr[0]}:{addr[1]}" if addr else "an unknown host"
