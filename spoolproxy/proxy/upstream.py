"""Upstream options: ``--connect-to`` (curl's meaning), ``--reverse`` URLs, a private upstream CA.

``--connect-to HOST1:PORT1:HOST2:PORT2`` sends connections meant for HOST1:PORT1 to
HOST2:PORT2 instead, while the request (its URL, ``Host`` header, TLS SNI and the name the
upstream certificate is verified against) keeps HOST1.  An empty HOST1 or PORT1 matches any
host or port; an empty HOST2 or PORT2 keeps the original.  IPv6 hosts go in brackets
(``[::1]``).  The first matching rule wins.

:class:`ConnectTo` is a mitmproxy addon: ``server_connect`` swaps the address just before
the TCP connection opens, ``server_connected`` puts the original back so connection reuse,
SNI and certificate checks all see the original host.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence
from urllib.parse import urlsplit

from ..errors import UsageError


@dataclass(frozen=True)
class ConnectRule:
    """One ``--connect-to`` rule; ``None`` fields match anything / keep the original."""

    host: str | None
    port: int | None
    to_host: str | None
    to_port: int | None

    def target(self, host: str, port: int) -> tuple[str, int] | None:
        """The address to connect to for ``host:port``, or None when the rule does not apply."""
        if self.host is not None and self.host.lower() != host.lower():
            return None
        if self.port is not None and self.port != port:
            return None
        return (self.to_host or host, self.to_port or port)


_PART = r"(\[[^\]]*\]|[^:\[\]]*)"
_SPEC = re.compile(rf"^{_PART}:(\d*):{_PART}:(\d*)$")


def _port(text: str, spec: str) -> int | None:
    if not text:
        return None
    n = int(text)
    if not 0 < n < 65536:
        raise UsageError(f"--connect-to {spec!r}: port {n} is out of range 1-65535")
    return n


def parse_connect_to(spec: str) -> ConnectRule:
    """Parse ``HOST1:PORT1:HOST2:PORT2``.  Raises UsageError with an example when malformed."""
    m = _SPEC.match(spec.strip())
    if not m:
        raise UsageError(
            f"--connect-to {spec!r} is malformed; use HOST1:PORT1:HOST2:PORT2, e.g. api.openai.com:443:127.0.0.1:8443"
        )
    h1, p1, h2, p2 = m.groups()
    strip = lambda h: h[1:-1] if h.startswith("[") else h  # noqa: E731
    return ConnectRule(strip(h1) or None, _port(p1, spec), strip(h2) or None, _port(p2, spec))


def parse_upstream_proxy(url: str) -> tuple[str, str | None]:
    """``http(s)://[user:pass@]host:port`` of a proxy to chain to -> (``scheme://host:port``,
    ``"user:pass"`` or None).  Raises UsageError when malformed."""
    from urllib.parse import unquote

    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--upstream-proxy {url!r}: give a proxy URL such as http://proxy.corp:3128")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UsageError(f"--upstream-proxy {url!r}: invalid port") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    auth = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}" if parts.username else None
    return f"{parts.scheme}://{host}:{port}", auth


def parse_reverse_spec(spec: str) -> tuple[str, int | None]:
    """``URL`` or ``URL@PORT`` -> (normalised URL, local port or None for a free one)."""
    url, sep, port = spec.strip().rpartition("@")
    if not sep or "/" in port:
        return parse_reverse(spec), None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--reverse {spec!r}: the local port after '@' must be 1-65535")
    return parse_reverse(url), int(port)


def parse_reverse(url: str) -> str:
    """Validate a ``--reverse`` upstream (``http(s)://host[:port]``) and return it normalised.

    Raises UsageError for another scheme, a missing host or a path (the path belongs in
    the client's base URL, e.g. ``OPENAI_BASE_URL=http://127.0.0.1:PORT/v1``).
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--reverse {url!r}: give an upstream base URL such as https://api.openai.com")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UsageError(
            f"--reverse {url!r}: leave out the path ({parts.path}); put it in the client's base URL instead"
        )
    try:
        parts.port
    except ValueError:
        raise UsageError(f"--reverse {url!r}: invalid port") from None
    return f"{parts.scheme}://{parts.netloc}"


class ConnectTo:
    """mitmproxy addon applying :class:`ConnectRule` s to upstream connections.

    It also short-cuts requests that reach the *forward* proxy for one of our own reverse
    proxy ports (a client with both ``HTTP_PROXY`` and ``OPENAI_BASE_URL=http://127.0.0.1:PORT``
    set): ``reverse_ports`` maps such a local port to its upstream URL, and the request is
    sent straight to that upstream, recorded once, under the upstream's URL.  A connection
    that would end at one of the proxy's own listening ports on this machine (``own_ports``)
    is refused, so a request for the proxy itself cannot loop through it forever (the guard
    mitmproxy keeps for its own listeners, which the runner leaves off).
    """

    LOCAL_NAMES = ("127.0.0.1", "localhost", "::1")

    def __init__(self, rules: Sequence[ConnectRule], reverse_ports: dict[int, str] | None = None) -> None:
        self.rules = list(rules)
        self.reverse_ports = dict(reverse_ports or {})
        self.own_ports: set[int] = set()
        self._original: dict[str, tuple] = {}

    def requestheaders(self, flow) -> None:
        if not self.reverse_ports:
            return
        req = flow.request
        url = self.reverse_ports.get(req.port)
        if url is None or req.host not in self.LOCAL_NAMES or req.scheme != "http":
            return
        if getattr(flow.client_conn.proxy_mode, "type_name", "") not in ("regular", "upstream"):
            return
        up = urlsplit(url)
        req.scheme = up.scheme
        req.host = up.hostname
        req.port = up.port or (443 if up.scheme == "https" else 80)
        req.host_header = up.netloc

    def target(self, host: str, port: int) -> tuple[str, int] | None:
        """Where a connection to ``host:port`` goes instead, or None."""
        for rule in self.rules:
            t = rule.target(host, port)
            if t is not None:
                return t
        return None

    def server_connect(self, data) -> None:
        server = data.server
        if server.address is None or server.via is not None:
            return
        host, port, *_ = server.address
        target = self.target(host, port) if self.rules else None
        if target is not None and target != (host, port):
            if server.sni is None and not _is_ip(host):
                server.sni = host
            self._original[server.id] = server.address
            server.address = target
            host, port = target
        if port in self.own_ports and host in self.LOCAL_NAMES:
            server.error = "Request destination unknown: it is this proxy itself."

    def server_connected(self, data) -> None:
        orig = self._original.pop(data.server.id, None)
        if orig is not None:
            # mitmproxy forbids changing the address of an open connection (to catch addon
            # mistakes); here it only restores the name the connection is known by, which is
            # what lets later requests to the original host reuse it.
            object.__setattr__(data.server, "address", orig)

    def server_connect_error(self, data) -> None:
        orig = self._original.pop(data.server.id, None)
        if orig is not None:
            data.server.address = orig


def _is_ip(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def upstream_trust_file(upstream_ca: Path, directory: Path) -> Path:
    """A PEM file trusting the usual roots plus ``upstream_ca``, for mitmproxy's
    ``ssl_verify_upstream_trusted_ca`` (which otherwise *replaces* the default roots).

    Written into ``directory`` (the per-user spoolproxy directory).  Raises UsageError
    when ``upstream_ca`` is missing or holds no PEM certificate.
    """
    from .ca import _root_stores

    try:
        extra = Path(upstream_ca).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"--upstream-ca {upstream_ca}: cannot read ({exc.strerror})") from None
    if "-----BEGIN CERTIFICATE-----" not in extra:
        raise UsageError(f"--upstream-ca {upstream_ca}: no PEM certificate in the file")
    parts = [p.read_text(encoding="utf-8", errors="replace").strip() for p in _root_stores()]
    parts.append(extra.strip())
    text = "\n".join(parts) + "\n"
    out = directory / f"upstream-trust-{hashlib.sha256(text.encode()).hexdigest()[:12]}.pem"
    if not out.exists():
        from ..cassettes.storage import atomic_write

        atomic_write(out, text)
    return out
