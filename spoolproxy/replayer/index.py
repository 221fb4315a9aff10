"""The matching index: O(1) look-ups of recorded interactions, served in recorded order.

Two dictionaries over the loaded cassettes, each mapping a key to a deque of
:class:`Entry` in recorded order:

* ``exact``: method, scheme, host, port, path, normalised query, body fingerprint (and the
  ``--match-header`` values) → identical requests get successive recorded responses, one
  queue per cassette: when several cassettes hold the key, the cassette served last is
  asked first (a run keeps being served from the recording it is following: a pooled
  directory does not mix two recordings of the same agent), else the first in load order;
  within one cassette, recorded order;
* ``by_url``: method, URL and the **stream flag** (:attr:`~.fingerprint.Normalized.stream`
  of the live request, False when it does not say; for a recorded request that does not say,
  whether its recorded response was a stream), vcrpy's default ``match_on`` made safe: the
  fallback that serves an unused interaction with the same method and URL as a
  *divergence*, never a stream to a request that did not ask for one or the reverse.  Among the first :data:`NEAREST_CANDIDATES` unused candidates
  it picks the one whose body is nearest (fewest differing JSON leaf paths; on a tie, one
  from the cassette served last, else the earliest), so drifted requests in a pooled
  directory find their own test's recording.

Between the exact look-up and the fallback, a recorded request holding a redaction
wildcard that the live request cannot reproduce by itself (the recording recognised that
secret elsewhere in its run: a password in a prompt, a token in a URL path) still matches
exactly when the live request is the same with something in each wildcard's place
(:func:`~.fingerprint.wildcard_match`); only entries with a wildcard are tried, in recorded
order.

Served entries are removed lazily, so every look-up costs O(1) amortised whatever the
cassette size (the nearest-body choice looks at a bounded number of candidates within
:data:`CHOOSE_BUDGET_S`).  Explaining a divergence or a miss (:meth:`Index.explain`: the
nearest recorded request, matcher reasons, the body diff, suggested flags) is separate from
the look-up and bounded by a :class:`~.diff.Budget`; the session runs it off the request
path.  All methods are thread-safe (one lock).

An entry keeps only the keys of its recorded request's normalised view: the canonical body
and its parsed JSON (together several times the body's size, for every interaction) are
rebuilt from the recorded request (:meth:`Index.full_norm`) when a body must be compared:
explaining a miss or divergence, or choosing the nearest body among several fallback
candidates.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Literal

from ..cassettes.model import Cassette, Interaction, Request
from . import matchers
from .bodydiff import bounded_diff
from .diff import MAX_CHANGES, Budget, Change, distance, suggest
from .fingerprint import WILDCARD, Fingerprinter, Normalized, wildcard_match
from .report import RecordedRef

MatchMode = Literal["default", "exact"]
NEAREST_CANDIDATES = 200
#: seconds the fallback may spend comparing candidate bodies on the request path
CHOOSE_BUDGET_S = 0.02
#: Rebuilt normalised views (:meth:`Index.full_norm`) kept for reuse: at most this many, each
#: with a canonical body of at most FULL_CACHE_BODY_MAX bytes (so at most ~32 MiB).
FULL_CACHE_ENTRIES = 512
FULL_CACHE_BODY_MAX = 64 * 1024
#: seconds an explanation computed by :meth:`Index.lookup` itself (explain=True) may take
INLINE_EXPLAIN_S = 0.05


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
    light: bool = False  #: ``norm`` lacks the body (rebuilt by :meth:`Index.full_norm`)

    def ref(self) -> RecordedRef:
        r = self.interaction.request
        return RecordedRef(cassette=self.name, interaction=self.index, method=r.method, uri=self.uri or r.uri)


@dataclass
class Lookup:
    """The result of :meth:`Index.lookup`.

    ``outcome``: exact | divergence | miss | optional (a miss on an endpoint an SDK rule
    marks optional); ``entry``: what to serve (None for a miss); ``candidates``: how many
    unused interactions the fallback chose among.  Filled in by :meth:`Index.explain`
    (then ``explained`` is set): ``nearest`` (for a miss, the closest recorded request for
    the endpoint), ``reasons`` (matcher messages), ``changes``/``suggestions`` (body diff
    and the flags that remove it), ``cut`` (why the diff may be incomplete).
    """

    outcome: Literal["exact", "divergence", "miss", "optional"]
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
    candidates: int = 0
    cut: str | None = None
    explained: threading.Event = field(default_factory=threading.Event, repr=False)


class Index:
    """Recorded interactions from one or more cassettes, ready to be served.

    ``match``: ``default`` (exact, else the nearest unused same method+URL+stream flag as a
    divergence) or ``exact``; ``allow_repeats``: when a key's queue is empty, serve its last
    interaction again (always so for endpoints an SDK rule marks optional).
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
        #: exact key -> {id(cassette): its entries in recorded order}, cassettes in load order
        self._exact: dict[tuple, dict[int, deque[Entry]]] = {}
        self._by_url: dict[tuple, deque[Entry]] = {}
        self._by_endpoint: dict[tuple, list[Entry]] = {}
        self._by_host: dict[str, list[Entry]] = {}
        self._wild_by_host: dict[str, list[Entry]] = {}
        self._last_exact: dict[tuple, Entry] = {}
        self._last_url: dict[tuple, Entry] = {}
        self._cut: dict[tuple, deque[Entry]] = {}  # (url_key, full size) -> uploads cut by an early response
        self._last_cassette: Cassette | None = None  # the cassette of the entry served last
        self._full: OrderedDict[int, Normalized] = OrderedDict()  # recently rebuilt small views (see full_norm)
        self._full_lock = threading.Lock()
        self._lock = threading.Lock()
        for cas in cassettes:
            self.add(cas)

    def add(self, cas: Cassette, name: str | None = None) -> None:
        """Index every interaction of ``cas`` after those already present."""
        label = name or (_display(cas.path) if cas.path else "<cassette>")
        with self._lock:
            for i, it in enumerate(cas.interactions):
                norm = self.fp.normalize(it.request)
                wild = WILDCARD in norm.path or WILDCARD.encode() in norm.body
                light = replace(norm, body=norm.body if wild else b"", body_json=None)  # wildcards match on the body
                e = Entry(len(self.entries), cas, label, i, it, light, self.fp.redactor.uri(it.request.uri), light=True)
                self.entries.append(e)
                self._exact.setdefault(norm.key, {}).setdefault(id(cas), deque()).append(e)
                self._by_url.setdefault(norm.fallback_key(_recorded_flag(e)), deque()).append(e)
                self._by_endpoint.setdefault(norm.endpoint, []).append(e)
                self._by_host.setdefault(norm.host, []).append(e)
                full = _cut_size(it)
                if full is not None:
                    self._cut.setdefault((norm.url_key, full), deque()).append(e)
                if wild:
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

    def _pop_exact(self, key: tuple) -> Entry | None:
        """The next unused entry for an exact ``key``: from the cassette served last when it
        holds one, else from the first cassette (load order) that does.  Queues found empty
        are dropped, so this stays O(1) amortised.  Caller holds the lock."""
        queues = self._exact.get(key)
        if not queues:
            return None
        last = self._last_cassette
        if last is not None and len(queues) > 1:
            e = self._pop(queues.get(id(last)))
            if e is not None:
                return e
        for cid in list(queues):
            e = self._pop(queues[cid])
            if e is not None:
                return e
            del queues[cid]
        return None

    def lookup(self, request: Request, *, explain: bool = True) -> Lookup:
        """Find what to serve for ``request`` and mark it served (see the module docstring).

        ``request`` is the live request (decoded body); it is redacted and normalised here.
        With ``explain`` the divergence or miss is also explained at once (within
        :data:`INLINE_EXPLAIN_S`); the playback session passes False and explains later,
        off the request path.
        """
        self.fp.observe(request)
        actual = self.fp.normalize(request)
        exact = actual.key
        fallback = actual.fallback_key(bool(actual.stream))
        repeat = False
        candidates = 0
        with self._lock:
            entry = self._pop_exact(exact)
            outcome = "exact"
            if entry is None:
                entry = self._wildcard(actual)
            if entry is None and self._cut:
                entry = self._cut_match(request, actual)
            if entry is None and self.match == "default":
                entry, candidates = self._nearest_unused(self._by_url.get(fallback), actual)
                outcome = "divergence"
            if entry is None and (self.allow_repeats or actual.optional):
                entry, outcome = self._last_exact.get(exact), "exact"
                if entry is None and self.match == "default":
                    entry, outcome = self._last_url.get(fallback), "divergence"
                repeat = entry is not None
            if entry is not None:
                entry.served += 1
                self._last_cassette = entry.cassette
                self._last_exact[entry.norm.key] = entry
                self._last_url[entry.norm.fallback_key(_recorded_flag(entry))] = entry
        display = self.fp.display_uri(request.uri)
        if entry is None:
            result = Lookup("optional" if actual.optional else "miss", request, actual, display_uri=display)
        else:
            result = Lookup(outcome, request, actual, entry=entry, repeat=repeat,  # type: ignore[arg-type]
                            display_uri=display, candidates=candidates)
        if outcome == "exact" and entry is not None:
            result.explained.set()
        elif explain:
            self.explain(result, Budget(INLINE_EXPLAIN_S))
        return result

    def _nearest_unused(self, q: deque[Entry] | None, actual: Normalized) -> tuple[Entry | None, int]:
        """The unused entry of ``q`` whose body is nearest to ``actual`` among the first
        :data:`NEAREST_CANDIDATES` (on a tie: from the cassette served last, else the
        earliest), and how many were compared.  Caller holds the lock."""
        if not q:
            return None, 0
        while q and q[0].served:
            q.popleft()
        cands: list[Entry] = []
        skipped = 0
        for e in q:
            if e.served:
                skipped += 1
                continue
            cands.append(e)
            if len(cands) >= NEAREST_CANDIDATES:
                break
        if skipped > NEAREST_CANDIDATES:  # served entries pile up in the middle: compact once
            keep = [e for e in q if not e.served]
            q.clear()
            q.extend(keep)
        if len(cands) <= 1 or actual.body_json is None:
            return (cands[0] if cands else None), len(cands)
        budget = Budget(CHOOSE_BUDGET_S)
        last = self._last_cassette
        key = lambda e, d: (d, e.cassette is not last)  # noqa: E731 - on a tie, the cassette served last
        best, best_d = cands[0], _body_distance(self.full_norm(cands[0]), actual, None, budget)
        for e in cands[1:]:
            if (best_d == 0 and best.cassette is last) or budget.spent():
                break
            d = _body_distance(self.full_norm(e), actual, best_d, budget)
            if budget.spent():  # a distance the budget cut short is no measurement
                break
            if key(e, d) < key(best, best_d):
                best, best_d = e, d
        return best, len(cands)

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

    def full_norm(self, e: Entry) -> Normalized:
        """The whole normalised view of ``e``'s recorded request (body included)."""
        if not e.light:
            return e.norm
        with self._full_lock:
            hit = self._full.get(e.seq)
            if hit is not None:
                self._full.move_to_end(e.seq)
                return hit
        norm = self.fp.normalize(e.interaction.request)
        if len(norm.body) <= FULL_CACHE_BODY_MAX:  # drifted suites compare the same candidates again and again
            with self._full_lock:
                self._full[e.seq] = norm
                while len(self._full) > FULL_CACHE_ENTRIES:
                    self._full.popitem(last=False)
        return norm

    def _cut_match(self, request: Request, actual: Normalized) -> Entry | None:
        """An unused recorded upload that an early response cut (``request_body.truncated``)
        whose declared size is this body's and whose stored bytes start it.  Caller holds
        the lock."""
        for e in self._cut.get((actual.url_key, len(request.body)), ()):
            if e.served:
                continue
            stored = e.interaction.request.body
            head = request.model_copy(update={"body": request.body[: len(stored)]})
            if self.fp.normalize(head).fingerprint == e.norm.fingerprint:
                return e
        return None

    # -- explanations ------------------------------------------------------------------
    def explain(self, result: Lookup, budget: Budget | None = None, limit: int | None = MAX_CHANGES) -> None:
        """Fill in ``result``'s explanation (see :class:`Lookup`) within ``budget``, with at
        most ``limit`` body differences, then set ``result.explained``.  Never raises for a
        body it cannot explain (the reason says so)."""
        try:
            if result.outcome in ("miss", "optional"):
                nearest = self._nearest(result.actual, budget)
                result.nearest = nearest
                if nearest is not None:
                    self._explain(result, nearest, budget, limit)
                    if nearest.served and not result.reasons:
                        result.reasons = [
                            f"every matching interaction was already served ({nearest.served}x); "
                            "use --allow-repeats to serve it again"
                        ]
                if result.outcome == "optional":
                    result.reasons = [f"optional request (SDK rule {', '.join(result.actual.rules)}): no cassette "
                                      "holds it; the client got the miss response", *result.reasons]
            elif result.entry is not None:
                self._explain(result, result.entry, budget, limit)
                if result.candidates > 1:
                    result.reasons.append(f"chosen as the nearest body among {result.candidates} unused "
                                          "interactions with the same method and URL")
        except Exception as exc:  # noqa: BLE001 - an explanation must never break serving
            result.reasons.append(f"could not explain the difference: {type(exc).__name__}: {exc}")
        finally:
            result.explained.set()

    def _explain(self, result: Lookup, rec: Entry, budget: Budget | None, limit: int | None) -> None:
        a, r = result.actual, self.full_norm(rec)
        result.reasons = matchers.explain(r, a)
        if r.fingerprint != a.fingerprint:
            d = bounded_diff(r.body_json, a.body_json, r.body, a.body, kinds=(r.body_kind, a.body_kind),
                            limit=limit, budget=budget)
            result.changes, result.cut = d.changes, d.cut
            result.suggestions = suggest(d.changes)
            if result.suggestions and d.cut is None and not (budget is not None and budget.spent()):
                result.verified = self._verify(r, a, result.suggestions)

    def _verify(self, r: Normalized, a: Normalized, flags: list[str]) -> bool:
        """True when applying ``flags`` makes both requests match exactly."""
        paths = [f.split(" ", 1)[1].strip("'") for f in flags if f.startswith("--ignore-json-path")]
        rxs = [f.split(" ", 1)[1][1:-1].replace("'\"'\"'", "'") for f in flags if f.startswith("--normalize")]
        try:
            return r.url_key == a.url_key and r.headers == a.headers and \
                self.fp.refined(r, paths, rxs) == self.fp.refined(a, paths, rxs)
        except Exception:  # noqa: BLE001 - an unverifiable suggestion is just not verified
            return False

    def _nearest(self, actual: Normalized, budget: Budget | None) -> Entry | None:
        """The closest recorded request for ``actual``'s endpoint (else host): fewest URL
        differences, then fewest differing body paths.  Takes the lock only to copy the
        candidates: the comparisons run without it."""
        with self._lock:
            cands = list(self._by_endpoint.get(actual.endpoint) or self._by_host.get(actual.host) or [])
        if not cands:
            return None
        same = [e for e in cands if e.norm.method == actual.method] or cands
        unused = [e for e in same if not e.served] or same
        best, best_d = None, (0, 0)
        for e in unused[:NEAREST_CANDIDATES]:
            n = len(matchers.explain(e.norm, actual, matchers.URL_MATCHERS))
            if best is not None and n > best_d[0]:
                continue
            stop = best_d[1] if best is not None and n == best_d[0] else None
            d = (n, _body_distance(self.full_norm(e), actual, stop))
            if best is None or d < best_d:
                best, best_d = e, d
            if budget is not None and budget.spent():
                break
        return best

    def unused(self) -> list[Entry]:
        """Recorded interactions never served, in recorded order (interactions of an
        endpoint an SDK rule marks optional are never unused)."""
        with self._lock:
            return [e for e in self.entries if not e.served and not e.norm.optional]


def _cut_size(it: Interaction) -> int | None:
    """The declared size of a recorded upload that an early response cut, else None."""
    ref = it.extra.get("request_body")
    if isinstance(ref, dict) and ref.get("truncated") and isinstance(ref.get("full_size"), int):
        return ref["full_size"]
    return None


def _body_distance(r: Normalized, a: Normalized, stop_at: int | None, budget: Budget | None = None) -> int:
    """Differing JSON paths between two normalised bodies (0 when identical, 1 for two
    different non-JSON bodies)."""
    if r.fingerprint == a.fingerprint:
        return 0
    if r.body_json is None or a.body_json is None:
        return 1
    return distance(r.body_json, a.body_json, stop_at, budget)


STREAM_TYPES = ("text/event-stream", "ndjson", "jsonl", "application/vnd.amazon.eventstream")


def _recorded_flag(e: Entry) -> bool:
    """The stream flag a recorded request is filed under: the request's own (body
    ``stream`` field, else ``Accept``), else whether the recorded response was a stream."""
    if e.norm.stream is not None:
        return e.norm.stream
    resp = e.interaction.response
    ctype = (resp.header("content-type") or "").lower() if resp is not None else ""
    return any(t in ctype for t in STREAM_TYPES)
