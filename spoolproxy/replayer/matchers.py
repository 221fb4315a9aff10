"""Matchers in vcrpy's style: one tiny pure function per aspect of a request.

Each takes the recorded and the actual :class:`~.fingerprint.Normalized` request and returns
``None`` when they agree, or one line saying what differed (recorded first, then actual).
The index does the O(1) look-ups; these functions explain a divergence or a miss.
"""

from __future__ import annotations

from typing import Callable

from .fingerprint import Normalized

Matcher = Callable[[Normalized, Normalized], "str | None"]


def _differ(name: str, recorded: object, actual: object) -> str | None:
    return None if recorded == actual else f"{name}: recorded {recorded!r}, actual {actual!r}"


def method(r: Normalized, a: Normalized) -> str | None:
    """HTTP method (upper-case)."""
    return _differ("method", r.method, a.method)


def scheme(r: Normalized, a: Normalized) -> str | None:
    """URL scheme (http/https)."""
    return _differ("scheme", r.scheme, a.scheme)


def host(r: Normalized, a: Normalized) -> str | None:
    """Host name, case-insensitive."""
    return _differ("host", r.host, a.host)


def port(r: Normalized, a: Normalized) -> str | None:
    """Port, with the scheme's default filled in."""
    return _differ("port", r.port, a.port)


def path(r: Normalized, a: Normalized) -> str | None:
    """URL path."""
    return _differ("path", r.path, a.path)


def query(r: Normalized, a: Normalized) -> str | None:
    """Query parameters, order-insensitive, placeholders as wildcards."""
    if r.query == a.query:
        return None
    rd, ad = dict(r.query), dict(a.query)
    parts = [f"{k}={rd[k]!r}→{ad[k]!r}" for k in sorted(rd.keys() & ad.keys()) if rd[k] != ad[k]]
    parts += [f"-{k}" for k in sorted(rd.keys() - ad.keys())]
    parts += [f"+{k}" for k in sorted(ad.keys() - rd.keys())]
    return "query: " + (", ".join(parts) if parts else "repeated parameters differ")


def body(r: Normalized, a: Normalized) -> str | None:
    """Body fingerprint (canonical JSON / form / multipart / raw bytes)."""
    if r.fingerprint == a.fingerprint:
        return None
    if r.body_kind != a.body_kind:
        return f"body: recorded {r.body_kind} ({len(r.body)} bytes), actual {a.body_kind} ({len(a.body)} bytes)"
    return f"body: {r.body_kind} bodies differ (recorded {len(r.body)} bytes, actual {len(a.body)} bytes)"


def headers(r: Normalized, a: Normalized) -> str | None:
    """The ``--match-header`` headers."""
    diffs = [f"{n}: {rv!r}→{av!r}" for (n, rv), (_, av) in zip(r.headers, a.headers) if rv != av]
    return "headers: " + ", ".join(diffs) if diffs else None


URL_MATCHERS: tuple[Matcher, ...] = (method, scheme, host, port, path, query)
ALL_MATCHERS: tuple[Matcher, ...] = (*URL_MATCHERS, body, headers)


def explain(recorded: Normalized, actual: Normalized, matchers: tuple[Matcher, ...] = ALL_MATCHERS) -> list[str]:
    """Every difference, one line per failing matcher (empty when the requests match)."""
    return [m for m in (fn(recorded, actual) for fn in matchers) if m]
