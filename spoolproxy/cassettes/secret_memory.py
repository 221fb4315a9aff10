"""The secrets a run has seen, replaced wherever they appear again (by value, not by rule).

A :class:`SecretMemory` holds each remembered secret with its placeholder, and every form
it takes on the wire (:func:`variants`: as is, JSON-escaped, URL-encoded).  :meth:`replace`
costs one substring test per form and body, so the memory is bounded
(:data:`MAX_REMEMBERED`); reads never lock (``add`` swaps immutable snapshots), so the proxy
thread and the journal thread share one memory safely.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Iterator
from urllib.parse import quote, quote_plus

from .secret_rules import NOT_SECRETS

#: shortest value remembered and replaced everywhere (shorter ones only where they stand)
MIN_REMEMBERED = 6
#: most secrets one memory holds (each costs a substring test per body); later ones are
#: still redacted where they stand
MAX_REMEMBERED = 256
_ALNUM = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_PLACEHOLDER_B = re.compile(rb"REDACTED(?:-[a-z0-9]+(?:-[a-z0-9]+)*)?")


def variants(secret: bytes) -> set[bytes]:
    """The forms a secret takes on the wire: as is, JSON-escaped (once and twice, with and
    without ``\\/`` and ``\\uXXXX``), percent-encoded (``quote``, ``quote_plus``)."""
    text = secret.decode("utf-8", "surrogateescape")
    out = {secret}
    for ascii_only in (False, True):
        once = json.dumps(text, ensure_ascii=ascii_only)[1:-1]
        out |= {once.encode("utf-8", "surrogateescape"), once.replace("/", "\\/").encode("utf-8", "surrogateescape"),
                json.dumps(once, ensure_ascii=ascii_only)[1:-1].encode("utf-8", "surrogateescape")}
    out |= {quote(text, safe="").encode(), quote(text).encode(), quote_plus(text).encode()}
    return out


def edges_free(data: bytes, start: int, end: int, value: bytes) -> bool:
    """A remembered value found at ``data[start:end]`` is not just part of a longer word:
    an alphanumeric edge of the value may not touch another alphanumeric character
    (one ending an escape, ``%3D`` or ``\\n``, does not count)."""
    if start > 0 and value[0] in _ALNUM and data[start - 1] in _ALNUM:
        if not ((start >= 2 and data[start - 2] == 0x5C) or (start >= 3 and data[start - 3] == 0x25)):
            return False
    if end < len(data) and value[-1] in _ALNUM and data[end] in _ALNUM:
        return False
    return True


class SecretMemory:
    """Remembered secrets (bytes) and their placeholders (bytes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: (form, placeholder, finder), longest first, so a secret holding another goes first
        self._forms: tuple[tuple[bytes, bytes, re.Pattern[bytes]], ...] = ()
        self._secrets: dict[bytes, bytes] = {}

    def copy(self) -> "SecretMemory":
        """An independent memory holding the same secrets."""
        other = SecretMemory()
        other._forms, other._secrets = self._forms, dict(self._secrets)
        return other

    def __len__(self) -> int:
        return len(self._secrets)

    def items(self) -> list[tuple[bytes, bytes]]:
        """``(secret, placeholder)`` pairs."""
        return list(self._secrets.items())

    def get(self, secret: bytes) -> bytes | None:
        """The placeholder ``secret`` was remembered with, or None."""
        return self._secrets.get(secret)

    @staticmethod
    def worth_remembering(raw: bytes) -> bool:
        """Not too short, not a placeholder, not a stand-in word (``ollama``, ``dummy`` ...),
        not one repeated character or two."""
        return (len(raw) >= MIN_REMEMBERED and not _PLACEHOLDER_B.search(raw) and len(set(raw)) > 2
                and raw.lower().decode("ascii", "replace") not in NOT_SECRETS)

    def add(self, raw: bytes, ph: bytes) -> bool:
        """Remember ``raw`` (see :meth:`worth_remembering`) with placeholder ``ph``; True
        when new.  Beyond :data:`MAX_REMEMBERED` secrets nothing more is remembered."""
        if raw in self._secrets or len(self._secrets) >= MAX_REMEMBERED or not self.worth_remembering(raw):
            return False
        with self._lock:
            if raw in self._secrets:
                return False
            forms = {v: (p, f) for v, p, f in self._forms}
            for v in variants(raw):
                if len(v) >= MIN_REMEMBERED and v not in forms:
                    forms[v] = (ph, re.compile(re.escape(v)))
            secrets = {**self._secrets, raw: ph}
            self._forms = tuple(sorted(((v, p, f) for v, (p, f) in forms.items()), key=lambda t: -len(t[0])))
            self._secrets = secrets
        return True

    def replace(self, data: bytes) -> bytes:
        """``data`` with every remembered secret, in any of its forms, replaced."""
        for form, ph, finder in self._forms:  # a snapshot: add() swaps the tuple
            if form in data:
                data = finder.sub(lambda m, v=form, p=ph: p if edges_free(m.string, m.start(), m.end(), v) else m.group(0),
                                  data)
        return data

    def finditer(self, data: bytes) -> Iterator[tuple[int, int, bool]]:
        """``(start, end, whole)`` of each occurrence of a remembered form in ``data``;
        ``whole`` False when it is only part of a longer word (:func:`edges_free`)."""
        for form, _ph, finder in self._forms:
            if form in data:
                for m in finder.finditer(data):
                    yield m.start(), m.end(), edges_free(data, m.start(), m.end(), form)
