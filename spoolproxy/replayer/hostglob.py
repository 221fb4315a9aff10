"""Host globs (``--live``, ``--route``, ``--tool-result``, ``routing.live``, patch ``host``):
which request hosts a user's ``fnmatch`` glob names.

Every display shows a host as ``host[:port]`` (the port when it is not the scheme's
default, :func:`spoolproxy.proxy.summary.host_port`), so a glob may name either: ``api.openai.com``,
``*.openai.com``, ``127.0.0.1:18801``, ``127.0.0.1:*``, ``api.openai.com:443``.  A glob
without a port matches the host name whatever the port; a glob with one matches that port
only.  Matching is case-insensitive; an IPv6 host may be written bare (``::1``) or in
brackets (``[::1]:8080``).  Pure functions, no I/O.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Iterable
from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def url_names(uri: str) -> tuple[str, ...]:
    """The names a glob is matched against for an absolute ``uri``: the host name, and
    ``host:port`` with the port the URL names or its scheme's default (``("127.0.0.1",
    "127.0.0.1:18801")``; ``("api.openai.com", "api.openai.com:443")`` for ``https://``);
    lower-case, IPv6 hosts both bare and in brackets."""
    u = urlsplit(uri)
    host = (u.hostname or "").lower()
    try:
        port = u.port
    except ValueError:  # a malformed port: the host name alone
        port = None
    if port is None:
        port = _DEFAULT_PORTS.get(u.scheme.lower())
    return _names(host, port)


def label_names(label: str) -> tuple[str, ...]:
    """The names for a ``host[:port]`` label as displays show it (``127.0.0.1:18801``,
    ``[::1]:8080``, ``api.openai.com``); see :func:`url_names`."""
    text = label.strip().lower()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:  # a bare name or a bare IPv6 address
        host, port = text, ""
    return _names(host, int(port) if port.isdigit() else None)


def _names(host: str, port: int | None) -> tuple[str, ...]:
    shown = f"[{host}]" if ":" in host else host
    out = [host] if shown == host else [host, shown]
    if port is not None:
        out.append(f"{shown}:{port}")
    return tuple(out)


def glob_matches(glob: str, names: Iterable[str]) -> bool:
    """True when ``glob`` (case-insensitive ``fnmatch``) matches one of ``names`` (from
    :func:`url_names` or :func:`label_names`)."""
    g = glob.strip().lower()
    return any(fnmatchcase(n, g) for n in names)


def any_matches(globs: Iterable[str], uri: str) -> bool:
    """True when one of ``globs`` names the host of the absolute ``uri``."""
    names = url_names(uri)
    return any(glob_matches(g, names) for g in globs)


def unmatched(globs: Iterable[str], uris: Iterable[str]) -> list[str]:
    """The globs of ``globs`` that name no host of ``uris`` (in their order), for a warning
    or an error that lists the hosts (:func:`host_labels`)."""
    left = list(dict.fromkeys(globs))
    for uri in uris:
        if not left:
            break
        names = url_names(uri)
        left = [g for g in left if not glob_matches(g, names)]
    return left


def host_label(uri: str) -> str:
    """``host[:port]`` of the absolute ``uri`` as displays show it: lower-case, the port when
    it is not the scheme's default, an IPv6 host in brackets."""
    u = urlsplit(uri)
    host = (u.hostname or "").lower()
    shown = f"[{host}]" if ":" in host else host
    try:
        port = u.port
    except ValueError:
        port = None
    return shown if port is None or port == _DEFAULT_PORTS.get(u.scheme.lower()) else f"{shown}:{port}"


def host_labels(uris: Iterable[str], limit: int = 8) -> str:
    """The distinct :func:`host_label` of ``uris``, comma-separated, at most ``limit`` then
    ``...``."""
    seen: list[str] = []
    for uri in uris:
        label = host_label(uri)
        if label not in seen:
            seen.append(label)
            if len(seen) > limit:
                break
    return ", ".join(seen[:limit]) + (", ..." if len(seen) > limit else "")
