"""The matching index: O(1) look-ups of recorded interactions, served in recorded order.

Two dictionaries over the loaded cassettes, each mapping a key to a deque of
:class:`Entry` in recorded order:

* ``exact``: method, scheme, host, port, path, normalised query, body fingerprint (and the
  ``--match-header`` values) → identical requests get successive recorded responses;
* ``by_url``: method and URL only, vcrpy's default ``match_on``: the fallback that serves
  "the next unused interaction with the same method and URL" as a *divergence*.

Between the two, a recorded request holding a redaction wildcard that the live request
cannot reproduce by itself (the recording recognised that secret elsewhere in its run: a
password in a prompt, a token in a URL path) still matches exactly when the live request is
the same with something in each wildcard's place (:func:`~.fingerprint.wildcard_match`);
only entries with a wildcard are tried, in recorded order.

Served entries are removed lazily from both deques, so every look-up costs O(1) amortised
whatever the cassette size.  Maps by endpoint (scheme, host, port, path) and by host are only
read to explain a miss.  All methods are thread-safe (one lock).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal

from ..cassettes.model import Cassette, Interaction, Request
from . import matchers
from .diff import Change, diff_bodies, suggest
from .fingerprint import WILDCARD, Fingerprinter, Normalized, wildcard_match
from .report import RecordedRef

MatchMode = Literal["default", "exact"]
NEAREST_CANDIDATES = 25


def _display(path) -> str:
    """``path`` relative to the cwd when it lies below it, else as given."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@dataclass(eq=False)
class Entry:
    """One recorded interaction in the index (``index`` is its 0-based place in ``cassette``)."""

    seq: int
    cassette: Cassette
    name: str
    index: int
    interaction: Interaction
    norm: Normalized
    uri: str = ""  #: the recorded URI, redacted (what reports and error messages show)
    served: int = 0

    def ref(self) -> RecordedRef:
        r = self.interaction.request
        return RecordedRef(cassette=self.name, interaction=self.index, method=r.method, uri=self.uri or r.uri)


@dataclass
class Lookup:
    """The result of :meth:`Index.lookup`.

    ``outcome``: exact | divergence | miss; ``entry``: what to serve (None for a miss);
    ``nearest``: for a miss, the closest recorded request for the endpoint; ``reasons``:
    matcher messages; ``changes``/``suggestions``: body diff and the flags that remove it.
    """

    outcome: Literal["exact", "divergence", "miss"]
    request: Request
    actual: Normalized
    entry: Entry | None = None
    nearest: Entry | None = None
    repeat: bool = False
    reasons: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    verified: bool | None = None
    display_uri: str = ""  #: the live URI, redacted


class Index:
    """Recorded interactions from one or more cassettes, ready to be served.

    ``match``: ``default`` (exact, else same method+URL as a divergence) or ``exact``;
    ``allow_repeats``: when a key's queue is empty, serve its last interaction again.
    Raises nothing on look-up; building may raise UsageError from the Fingerprinter.
    """

    def __init__(
        self,
        cassettes: Iterable[Cassette] = (),
        fingerprinter: Fingerprinter | None = None,
        *,
        match: MatchMode = "default",
        allow_repeats: bool = False,
    ) -> None:
        self.fp = fingerprinter or Fingerprinter()
        self.match = match
        self.allow_repeats = allow_repeats
        self.entries: list[Entry] = []
        self._exact: dict[tuple, deque[Entry]] = {}
        self._by_url: dict[tuple, deque[Entry]] = {}
        self._by_endpoint: dict[tuple, list[Entry]] = {}
        self._by_host: dict[str, list[Entry]] = {}
        self._wild_by_host: dict[str, list[Entry]] = {}
        self._last_exact: dict[tuple, Entry] = {}
        self._last_url: dict[tuple, Entry] = {}
        self._lock = threading.Lock()
        for cas in cassettes:
            self.add(cas)

    def add(self, cas: Cassette, name: str | None = None) -> None:
        """Index every interaction of ``cas`` after those already present."""
        label = name or (_display(cas.path) if cas.path else "<cassette>")
        with self._lock:
            for i, it in enumerate(cas.interactions):
                norm = self.fp.normalize(it.request)
                e = Entry(len(self.entries), cas, label, i, it, norm, self.fp.redactor.uri(it.request.uri))
                self.entries.append(e)
                self._exact.setdefault(norm.key, deque()).append(e)
                self._by_url.setdefault(norm.url_key, deque()).append(e)
                self._by_endpoint.setdefault(norm.endpoint, []).append(e)
                self._by_host.setdefault(norm.host, []).append(e)
                if WILDCARD in norm.path or WILDCARD.encode() in norm.body:
                    self._wild_by_host.setdefault(norm.host, []).append(e)

    def __len__(self) -> int:
        return len(self.entries)

    @staticmethod
    def _pop(q: deque[Entry] | None) -> Entry | None:
        while q:
            e = q.popleft()
            if not e.served:
                return e
        return None

    def lookup(self, request: Request) -> Lookup:
        """Find what to serve for ``request`` and mark it served (see the module docstring).

        ``request`` is the live request (decoded body); it is redacted and normalised here.
        """
        self.fp.observe(request)
        actual = self.fp.normalize(request)
        repeat = False
        with self._lock:
            entry = self._pop(self._exact.get(actual.key))
            outcome = "exact"
            if entry is None:
                entry = self._wildcard(actual)
            if entry is None and self.match == "default":
                entry = self._pop(self._by_url.get(actual.url_key))
                outcome = "divergence"
            if entry is None and self.allow_repeats:
                entry, outcome = self._last_exact.get(actual.key), "exact"
                if entry is None and self.match == "default":
                    entry, outcome = self._last_url.get(actual.url_key), "divergence"
                repeat = entry is not None
            if entry is not None:
                entry.served += 1
                self._last_exact[entry.norm.key] = entry
                self._last_url[entry.norm.url_key] = entry
        if entry is None:
            return self._miss(request, actual)
        result = Lookup(outcome, request, actual, entry=entry, repeat=repeat,  # type: ignore[arg-type]
                        display_uri=self.fp.display_uri(request.uri))
        if outcome == "divergence":
            self._explain(result, entry)
        return result

    def _wildcard(self, actual: Normalized) -> Entry | None:
        """The first unused recorded entry that equals ``actual`` but for wildcards in its path
        or body (see the module docstring); marked served by the caller.  Holds the lock."""
        for e in self._wild_by_host.get(actual.host, ()):
            r = e.norm
            if e.served or (r.method, r.scheme, r.port, r.query, r.headers) != (
                    actual.method, actual.scheme, actual.port, actual.query, actual.headers):
                continue
            if wildcard_match(r.path.encode(), actual.path.encode()) and wildcard_match(r.body, actual.body):
                return e
        return None

    def _explain(self, result: Lookup, rec: Entry) -> None:
        a, r = result.actual, rec.norm
        result.reasons = matchers.explain(r, a)
        if r.fingerprint != a.fingerprint:
            result.changes = diff_bodies(r.body_json, a.body_json, r.body, a.body)
            result.suggestions = suggest(result.changes)
            if result.suggestions:
                result.verified = self._verify(rec.interaction.request, result.request, result.suggestions)

    def _verify(self, recorded: Request, actual: Request, flags: list[str]) -> bool:
        paths = [f.split(" ", 1)[1].strip("'") for f in flags if f.startswith("--ignore-json-path")]
        rxs = [f.split(" ", 1)[1][1:-1].replace("'\"'\"'", "'") for f in flags if f.startswith("--normalize")]
        try:
            fp = Fingerprinter(self.fp.options.with_extra(ignore_json_paths=paths, normalize=rxs), self.fp.redactor)
        except Exception:
            return False
        return fp.normalize(recorded).key == fp.normalize(actual).key

    def _nearest(self, actual: Normalized) -> Entry | None:
        cands = self._by_endpoint.get(actual.endpoint) or self._by_host.get(actual.host) or []
        if not cands:
            return None
        same = [e for e in cands if e.norm.method == actual.method] or cands
        unused = [e for e in same if not e.served] or same
        pool = unused[:NEAREST_CANDIDATES]

        def distance(e: Entry) -> tuple[int, int]:
            n = len(matchers.explain(e.norm, actual, matchers.URL_MATCHERS))
            d = len(diff_bodies(e.norm.body_json, actual.body_json, e.norm.body, actual.body))
            return (n, d)

        return min(pool, key=distance)

    def _miss(self, request: Request, actual: Normalized) -> Lookup:
        with self._lock:
            nearest = self._nearest(actual)
        result = Lookup("miss", request, actual, nearest=nearest, display_uri=self.fp.display_uri(request.uri))
        if nearest is not None:
            self._explain(result, nearest)
            if nearest.served and not result.reasons:
                result.reasons = [
                    f"every matching interaction was already served ({nearest.served}x); "
                    "use --allow-repeats to serve it again"
                ]
        return result

    def unused(self) -> list[Entry]:
        """Recorded interactions never served, in recorded order."""
        with self._lock:
            return [e for e in self.entries if not e.served]
