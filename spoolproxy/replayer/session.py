"""A playback session: the loaded cassettes, the index, the record mode and the report.

Pure (no mitmproxy): :meth:`PlaybackSession.decide` takes a live request and says what the
proxy must do; the mitmproxy addon (:mod:`.addon`) only carries that out.  Record modes
have vcrpy's meanings:

* ``none`` (playback's default): replay only; a miss gets an explained error;
* ``once``: replay when the cassette exists; when it does not, everything goes upstream and
  is recorded;
* ``new_episodes``: replay what matches, send misses upstream and record them;
* ``all``: send everything upstream and record it (what ``spoolproxy record`` does).

``--live GLOB`` sends requests whose host matches the glob upstream (and records them),
whatever the mode.
"""

from __future__ import annotations

import fnmatch
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal

from ..cassettes import iter_paths, load
from ..cassettes.model import Cassette, Request
from ..errors import CassetteError, UsageError
from .fingerprint import Fingerprinter, MatchOptions
from .index import Index, Lookup, MatchMode
from .report import PlaybackReport, RequestOutcome

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
    error) | live (send upstream; a recorder, when present, records it).
    """

    action: Literal["serve", "kill", "miss", "live"]
    lookup: Lookup | None = None
    outcome: RequestOutcome | None = None  # the report entry of this request


class PlaybackSession:
    """Loaded cassettes + index + report for one run (or one control-endpoint segment).

    Thread-safe.  Raises CassetteError / UsageError when the cassettes or options are bad.
    """

    def __init__(self, config: PlaybackConfig) -> None:
        if config.record_mode not in RECORD_MODES:
            raise UsageError(f"--record-mode {config.record_mode!r}: choose one of {', '.join(RECORD_MODES)}")
        self.config = config
        self.fingerprinter = Fingerprinter(config.options)
        self._lock = threading.Lock()
        self._previous = PlaybackReport(match=config.match, record_mode=config.record_mode)
        self.skipped: list[str] = []
        self._load(config.cassettes)

    def _load(self, paths: list[str]) -> None:
        missing_ok = self.config.record_mode in ("once", "all")
        cassettes, skipped = load_cassettes(paths, skip_bad=self.config.skip_bad, missing_ok=missing_ok)
        self.cassette_paths = list(paths)
        self.recording_new = self.config.record_mode == "all" or (
            self.config.record_mode == "once" and not any(Path(p).exists() for p in paths)
        )
        self.index = Index(cassettes, self.fingerprinter, match=self.config.match, allow_repeats=self.config.allow_repeats)
        self.skipped = skipped
        self._outcomes: list[RequestOutcome] = []
        self._names = [str(c.path) for c in cassettes]

    # -- per request -------------------------------------------------------------------
    def is_live_host(self, host: str) -> bool:
        """True when ``host`` matches a ``--live`` glob (case-insensitive)."""
        h = host.lower()
        return any(fnmatch.fnmatchcase(h, g.lower()) for g in self.config.live)

    def decide(self, request: Request) -> Decision:
        """Look ``request`` up and record its outcome (see :class:`Decision`)."""
        if self.recording_new or self.is_live_host(request.host):
            self._add_live(request)
            return Decision("live")
        lookup = self.index.lookup(request)
        if lookup.outcome == "miss" and self.config.record_mode == "new_episodes":
            self._add_live(request)
            return Decision("live", lookup)
        outcome = self._add(lookup)
        if lookup.outcome == "miss":
            return Decision("miss", lookup, outcome)
        it = lookup.entry.interaction  # type: ignore[union-attr]
        if it.response is None:
            return Decision("kill", lookup, outcome)
        ref = it.response.body_ref
        if ref is not None and not ref.file:
            outcome.warnings.append(f"body was elided at record time (--large-bodies elide, {ref.size} bytes "
                                    "not stored): the client got an empty body")
        return Decision("serve", lookup, outcome)

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
            self._outcomes.append(
                RequestOutcome(
                    seq=len(self._outcomes) + 1,
                    outcome=lk.outcome,
                    method=lk.request.method,
                    uri=lk.display_uri,
                    served=lk.entry.ref() if lk.entry else None,
                    nearest=lk.nearest.ref() if lk.nearest else None,
                    repeat=lk.repeat,
                    reasons=lk.reasons,
                    differences=lk.changes,
                    suggestions=lk.suggestions,
                    suggestion_verified=lk.verified,
                )
            )
            return self._outcomes[-1]

    # -- reports -------------------------------------------------------------------------
    def segment_report(self) -> PlaybackReport:
        """The report of the cassettes currently loaded (requests so far, unused now)."""
        with self._lock:
            outcomes = list(self._outcomes)
        return PlaybackReport(
            cassettes=self._names,
            match=self.config.match,
            record_mode=self.config.record_mode,
            requests=outcomes,
            unused=[e.ref() for e in self.index.unused()],
        )

    def report(self) -> PlaybackReport:
        """The whole run: every earlier segment followed by the current one."""
        return self._previous.merge(self.segment_report())

    def switch(self, paths: list[str]) -> PlaybackReport:
        """Serve ``paths`` from now on (control endpoint); returns the closed segment's report.

        Raises CassetteError (and keeps serving the old cassettes) when a new one is bad.
        """
        old_index, old_paths, old_skipped = self.index, self.cassette_paths, self.skipped
        closed = self.segment_report()
        try:
            self._load(paths)
        except Exception:
            self.index, self.cassette_paths, self.skipped = old_index, old_paths, old_skipped
            raise
        self._previous = self._previous.merge(closed)
        return closed
