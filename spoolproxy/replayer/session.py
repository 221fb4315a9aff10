"""A playback session: the loaded cassettes, the index, the record mode and the report.

Pure (no mitmproxy): :meth:`PlaybackSession.decide` takes a live request and says what the
proxy must do; the mitmproxy addon (:mod:`.addon`) only carries that out.  Record modes
have vcrpy's meanings:

* ``none`` (playback's default): replay only; a miss gets an explained error;
* ``once``: replay when the cassette exists; when it does not, everything goes upstream and
  is recorded;
* ``new_episodes``: replay what matches, send misses upstream and record them;
* ``all``: send everything upstream and record it (what ``spoolproxy record`` does).

``--live GLOB`` sends requests whose host (or ``host:port``) matches the glob upstream (and records them),
whatever the mode.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal

from ..cassettes import iter_paths, load
from ..cassettes.model import Cassette, Request
from ..errors import CassetteError, UsageError
from .fingerprint import Fingerprinter, MatchOptions
from .hostglob import any_matches
from .explain import Explainer
from .index import Index, Lookup, MatchMode
from .report import PlaybackReport, RecordedRef, RequestOutcome

RecordMode = Literal["none", "once", "new_episodes", "all"]
RECORD_MODES = ("none", "once", "new_episodes", "all")


@dataclass
class PlaybackConfig:
    """Everything ``spoolproxy playback`` is told (options, config file ``[playback]``)."""

    cassettes: list[str] = field(default_factory=list)
    match: MatchMode = "default"
    allow_repeats: bool = False
    options: MatchOptions = field(default_factory=MatchOptions)
    realtime: bool = False
    record_mode: RecordMode = "none"
    live: tuple[str, ...] = ()
    skip_bad: bool = False
    diff_dir: str | None = None  #: --diff-dir: write each divergence's and miss's full detail here
    encode_as_recorded: bool = False  #: --encode-as-recorded: serve bodies with their recorded Content-Encoding
    close_connections: bool = False  #: close each HTTP/1 client connection after its response (pytest --spoolproxy)


def load_cassettes(paths: Iterable[str | Path], *, skip_bad: bool = False, missing_ok: bool = False) -> tuple[list[Cassette], list[str]]:
    """Load every cassette under ``paths`` (files or directories), in order.

    Returns ``(cassettes, skipped)`` where ``skipped`` holds one error line per bad file
    (only with ``skip_bad``).  Raises CassetteError naming the bad file (and line) otherwise;
    ``missing_ok`` accepts a file that does not exist yet (record mode ``once``).
    """
    out: list[Cassette] = []
    skipped: list[str] = []
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if missing_ok and not p.exists():
            continue
        if not p.exists():
            raise CassetteError(p, "no such cassette or directory; check the path, or record it first "
                                   "(spoolproxy record -c PATH -- CMD)")
        files = list(iter_paths([p]))
        if p.is_dir() and not files:
            raise CassetteError(p, "directory holds no cassettes (*.yaml, *.yml, *.json)")
        for f in files:
            if f.resolve() in seen:  # a file named twice (itself and through its directory)
                continue
            seen.add(f.resolve())
            try:
                cas = load(f)
                check_side_bodies(cas)
                out.append(cas)
            except CassetteError as exc:
                if skip_bad:
                    skipped.append(str(exc))
                    continue
                if p.is_dir():
                    msg = f"{exc.problem}; fix or remove this file, or pass --skip-bad to serve the others"
                    raise CassetteError(exc.path, msg, line=exc.line) from None
                raise
    return out, skipped


def check_side_bodies(cas: Cassette) -> None:
    """Check that every side body file (``<cassette>.bodies/*.bin``) of ``cas`` exists and
    has its recorded size (the sha256 is checked when the body is served), and read request
    bodies stored outside (so they can be matched) into ``Request.body``.  Raises
    CassetteError naming the side file and the interaction."""
    base = cas.path.parent if cas.path else Path.cwd()
    for n, it in enumerate(cas.interactions):
        req_ref = it.extra.get("request_body")
        if isinstance(req_ref, dict) and req_ref.get("file") and not it.request.body:
            it.request.body = _request_side_body(base / str(req_ref["file"]), req_ref.get("size"), n, cas)
        ref = it.response.body_ref if it.response is not None else None
        if ref is None or not ref.file:
            continue
        f = base / ref.file
        try:
            size = f.stat().st_size
        except OSError:
            raise CassetteError(f, f"side body file of interaction {n} of {cas.path} is missing; "
                                   "restore it or re-record the cassette") from None
        if size != ref.size:
            raise CassetteError(f, f"side body file of interaction {n} of {cas.path} has {size} bytes, "
                                   f"the cassette says {ref.size}; restore it or re-record the cassette")


def _request_side_body(f: Path, size, n: int, cas: Cassette) -> bytes:
    """The request body ``record`` stored outside the YAML (``spoolproxy.request_body``
    extension), needed to match the request.  Raises CassetteError when missing or resized."""
    try:
        data = f.read_bytes()
    except OSError:
        raise CassetteError(f, f"request side body file of interaction {n} of {cas.path} is missing; "
                               "restore it or re-record the cassette") from None
    if isinstance(size, int) and len(data) != size:
        raise CassetteError(f, f"request side body file of interaction {n} of {cas.path} has {len(data)} bytes, "
                               f"the cassette says {size}; restore it or re-record the cassette")
    return data


@dataclass
class Decision:
    """What the proxy does with one request.

    ``action``: serve (``lookup.entry``'s response) | kill (the recording has a transport
    failure and no response: close the connection) | miss (answer with the explained
    error) | live (send upstream; a recorder, when present, records it).  ``explained``:
    the background explanation of a divergence or miss (a miss response may wait for it
    up to :data:`~.explain.MISS_WAIT_S`).
    """

    action: Literal["serve", "kill", "miss", "live"]
    lookup: Lookup | None = None
    outcome: RequestOutcome | None = None  # the report entry of this request
    explained: Future | None = None


class PlaybackSession:
    """Loaded cassettes + index + report for one run, in segments (one per control-endpoint
    load or checkpoint).

    Unused interactions are counted once per loaded set: when a load replaces the
    cassettes, the replaced set's unused interactions join the run's report, except for
    the set given at start-up when it was replaced before serving anything (a proxy
    started with a directory and then driven one cassette per test); a checkpoint closes a
    segment's requests but keeps the set and what it served.

    Thread-safe.  Raises CassetteError / UsageError when the cassettes or options are bad.
    """

    def __init__(self, config: PlaybackConfig) -> None:
        if config.record_mode not in RECORD_MODES:
            raise UsageError(f"--record-mode {config.record_mode!r}: choose one of {', '.join(RECORD_MODES)}")
        self.config = config
        self.fingerprinter = Fingerprinter(config.options)
        self.explainer = Explainer(config.diff_dir)
        self._lock = threading.Lock()
        self._done_requests: list[RequestOutcome] = []  # closed segments, in order
        self._done_unused: list[RecordedRef] = []  # sets replaced by a load
        self._by_control = False  # the current set came from a control-endpoint load
        self._served_by_set = 0  # requests answered from the current set
        self._all_names: list[str] = []  # cassettes of the replaced sets
        self.skipped: list[str] = []
        self._load(config.cassettes)

    def _load(self, paths: list[str]) -> None:
        missing_ok = self.config.record_mode in ("once", "all")
        cassettes, skipped = load_cassettes(paths, skip_bad=self.config.skip_bad, missing_ok=missing_ok)
        self.cassette_paths = list(paths)
        self.recording_new = self.config.record_mode == "all" or (
            self.config.record_mode == "once" and not any(Path(p).exists() for p in paths)
        )
        index = Index(cassettes, self.fingerprinter, match=self.config.match, allow_repeats=self.config.allow_repeats)
        with self._lock:  # a load may run on a worker thread while requests are decided
            self.index = index
            self.skipped = skipped
            self._outcomes: list[RequestOutcome] = []
            self._names = [str(c.path) for c in cassettes]

    # -- per request -------------------------------------------------------------------
    def is_live(self, uri: str) -> bool:
        """True when the host of the absolute ``uri`` matches a ``--live`` glob (``host`` or
        ``host:port``, case-insensitive; :mod:`.hostglob`)."""
        return any_matches(self.config.live, uri)

    def decide(self, request: Request) -> Decision:
        """Look ``request`` up and record its outcome (see :class:`Decision`).  Costs the
        body's normalisation (linear in its size) plus an O(1) look-up; explaining a
        divergence or miss is handed to the background :class:`~.explain.Explainer`."""
        if self.recording_new or self.is_live(request.uri):
            self._add_live(request)
            return Decision("live")
        index = self.index
        lookup = index.lookup(request, explain=False)
        if lookup.outcome in ("miss", "optional") and self.config.record_mode == "new_episodes":
            self._add_live(request)
            return Decision("live", lookup)
        outcome = self._add(lookup)
        explained = None
        if lookup.outcome != "exact":
            explained = self.explainer.submit(index, lookup, outcome, self._lock)
        if lookup.outcome in ("miss", "optional"):
            return Decision("miss", lookup, outcome, explained)
        it = lookup.entry.interaction  # type: ignore[union-attr]
        if it.response is None:
            return Decision("kill", lookup, outcome, explained)
        ref = it.response.body_ref
        if ref is not None and not ref.file:
            outcome.warnings.append(f"body was elided at record time (--large-bodies elide, {ref.size} bytes "
                                    "not stored): the client got an empty body")
        return Decision("serve", lookup, outcome, explained)

    def serve_failed(self, decision: Decision, reason: str) -> None:
        """The recorded response of ``decision`` could not be served (a side body file went
        missing or changed since start-up): the request counts as a miss with ``reason``."""
        if decision.outcome is None:
            return
        with self._lock:
            decision.outcome.outcome = "miss"
            decision.outcome.reasons.append(f"could not serve the recorded response: {reason}")

    def amend(self, decision: Decision, *, outcome: str | None = None, reasons: Iterable[str] = (),
              differences: Iterable = (), suggestions: Iterable[str] = (), warnings: Iterable[str] = ()) -> None:
        """Update the report entry of a served ``decision`` once serving it has finished (a
        WebSocket session ends): a worse ``outcome`` (exact < divergence < miss) replaces the
        current one; reasons, differences (:class:`~.diff.Change`), suggested flags and warnings
        are added."""
        out = decision.outcome
        if out is None:
            return
        rank = {"exact": 0, "divergence": 1, "miss": 2}
        with self._lock:
            if outcome in rank and rank[outcome] > rank.get(out.outcome, 0):
                out.outcome = outcome  # type: ignore[assignment]
                if outcome == "miss" and out.nearest is None:
                    out.nearest = out.served  # what the client could not use, not "no recorded request"
            out.reasons += list(reasons)
            out.differences += list(differences)
            out.suggestions += [s for s in suggestions if s not in out.suggestions]
            out.warnings += list(warnings)

    def _add_live(self, request: Request) -> None:
        with self._lock:
            self._outcomes.append(
                RequestOutcome(
                    seq=len(self._outcomes) + 1, outcome="live", method=request.method,
                    uri=self.fingerprinter.display_uri(request.uri),
                )
            )

    def _add(self, lk: Lookup) -> RequestOutcome:
        with self._lock:
            self._served_by_set += 1
            self._outcomes.append(
                RequestOutcome(
                    seq=len(self._outcomes) + 1,
                    outcome=lk.outcome,
                    method=lk.request.method,
                    uri=lk.display_uri,
                    served=lk.entry.ref() if lk.entry else None,
                    repeat=lk.repeat,
                )
            )
            return self._outcomes[-1]

    # -- reports -------------------------------------------------------------------------
    def _drain(self) -> None:
        left = self.explainer.drain()
        if left:
            with self._lock:
                for o in self._outcomes:
                    if o.outcome != "exact" and not o.reasons:
                        o.reasons.append("explanation still running when the report was made")

    def segment_report(self) -> PlaybackReport:
        """The report of the current segment: its requests and the current set's unused
        interactions (waits for explanations still running)."""
        self._drain()
        with self._lock:
            outcomes = [o.model_copy(deep=True) for o in self._outcomes]
        return PlaybackReport(
            cassettes=self._names,
            match=self.config.match,
            record_mode=self.config.record_mode,
            requests=outcomes,
            unused=[e.ref() for e in self.index.unused()],
        )

    def report(self) -> PlaybackReport:
        """The whole run: every segment's requests (renumbered in order), the unused
        interactions of every replaced set that counts and of the current one."""
        current = self.segment_report()
        with self._lock:
            done = list(self._done_requests)
            unused = [*self._done_unused, *current.unused]
            names = list(self._all_names)
        requests = [r.model_copy(update={"seq": n}) for n, r in enumerate([*done, *current.requests], 1)]
        cassettes = [*names, *(c for c in current.cassettes if c not in names)]
        return PlaybackReport(cassettes=cassettes, match=self.config.match, record_mode=self.config.record_mode,
                              requests=requests, unused=unused)

    def checkpoint(self) -> PlaybackReport:
        """Close the current segment (control endpoint ``POST /checkpoint``) and return its
        report; the same cassettes stay loaded with what they already served."""
        closed = self.segment_report()
        with self._lock:
            self._done_requests += closed.requests
            self._outcomes = []
        return closed

    def switch(self, paths: list[str]) -> PlaybackReport:
        """Serve ``paths`` from now on (control endpoint ``POST /cassettes``, a fresh load
        even of the same files); returns the closed segment's report.

        Raises CassetteError (and keeps serving the old cassettes) when a new one is bad.
        """
        old = (self.index, self.cassette_paths, self.skipped, self._outcomes, self._names)
        closed = self.segment_report()
        try:
            self._load(paths)
        except Exception:
            self.index, self.cassette_paths, self.skipped, self._outcomes, self._names = old
            raise
        with self._lock:
            if self._by_control or self._served_by_set:
                self._done_unused += closed.unused
            self._done_requests += closed.requests
            self._all_names += [c for c in closed.cassettes if c not in self._all_names]
            self._by_control, self._served_by_set = True, 0
        return closed
