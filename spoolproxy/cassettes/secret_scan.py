"""Finding unredacted secrets (``spoolproxy scan``) with the rules the redactor applies.

:func:`scan_interaction` reports, per field of an interaction (WebSocket messages included),
every string a :class:`~.redact.Redactor` would replace: key shapes, URL credentials and secret fields
(:meth:`Redactor.find`, the same compiled rules, so JSON inside a JSON string and
credentials inside URLs count too), every repeat of a secret redaction would remember
(:func:`learn_from`: an echoed password), and credential headers and query parameters by name
whose value looks like a real credential (:func:`looks_secret`; placeholders such as
``AUTHORIZATION-XXX`` or ``<filtered>`` that test suites leave behind are not reported).
Excerpts never reveal the secret: its first characters and its length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .model import Cassette, Interaction
from .redact import PLACEHOLDER_RE, Redactor
from .websocket import payloads


@dataclass
class SecretHit:
    """A secret found by :func:`scan_interaction`: ``interaction`` index, ``field``
    (``request.headers.authorization``, ``response.body`` ...), ``kind`` and a
    non-revealing ``excerpt``."""

    interaction: int
    field: str
    kind: str
    excerpt: str


def excerpt(secret: str | bytes, keep: int = 6) -> str:
    """``sk-pro…(48 chars)``: the first ``keep`` characters (fewer for short secrets) and the length."""
    s = secret.decode("utf-8", "replace") if isinstance(secret, bytes) else secret
    return f"{s[:min(keep, len(s) // 3)]}…({len(s)} chars)"


def scan_data(data: bytes, red: Redactor) -> Iterator[tuple[str, str]]:
    """``(kind, excerpt)`` for every secret the redactor's rules find in ``data``, and every
    secret it remembers (``known-secret``: the values of the environment's secret variables
    when the caller had it learn them)."""
    seen: set[tuple[int, int]] = set()
    for kind, start, end in red.find(data, remembered=True):
        if (start, end) not in seen:
            seen.add((start, end))
            yield kind, excerpt(data[start:end])


def learn_from(cas: Cassette, red: Redactor) -> Redactor:
    """A fork of ``red`` that remembers every secret redacting ``cas`` would find (so a
    password given in a field is also reported where a response echoes it)."""
    run = red.fork()
    run.cassette(cas)
    return run


def scan_interaction(index: int, it: Interaction, red: Redactor | None = None) -> Iterator[SecretHit]:
    """Yield every unredacted secret in one interaction (URI, headers, bodies, error,
    WebSocket messages),
    including the secrets ``red`` remembers (see :func:`learn_from`); by default the
    interaction's own secrets are learned first."""
    if red is None:
        red = learn_from(Cassette(interactions=[it]), Redactor())
    req = it.request
    places: list[tuple[str, bytes]] = [("request.uri", req.uri.encode("utf-8", "surrogateescape")),
                                       ("request.body", req.body)]
    for k, vs in req.headers.items():
        places += [(f"request.headers.{k}", v.encode("utf-8", "surrogateescape")) for v in vs]
    if it.response is not None:
        places.append(("response.body", it.response.body))
        for k, vs in it.response.headers.items():
            places += [(f"response.headers.{k}", v.encode("utf-8", "surrogateescape")) for v in vs]
    if it.error is not None and it.error.message:
        places.append(("error.message", it.error.message.encode("utf-8", "surrogateescape")))
    places += list(payloads(it.extra))  # WebSocket messages: websocket.messages[N].text ...
    for where, data in places:
        for kind, ex in scan_data(data, red):
            yield SecretHit(index, where, kind, ex)
    for k, vs in req.headers.items():
        if red.is_secret_header(k):
            for v in vs:
                cred = v.split(" ", 1)[-1]
                if looks_secret(cred):
                    yield SecretHit(index, f"request.headers.{k}", "credential-header", excerpt(cred, 4))
    for seg in req.url.query.split("&") if req.url.query else ():
        name, eq, value = seg.partition("=")
        if eq and red.is_secret_query(name) and looks_secret(value):
            yield SecretHit(index, f"request.uri?{name}", "credential-query", excerpt(value, 4))


def looks_secret(value: str) -> bool:
    """A credential value worth reporting: 8+ characters with both letters and digits and
    no placeholder in it (so ``AUTHORIZATION-XXX``, ``<filtered>`` and ``REDACTED-...``
    that test suites and spoolproxy leave behind are not reported)."""
    return (len(value) >= 8 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
            and not PLACEHOLDER_RE.search(value))
