"""Explanations off the request path: one background thread explains divergences and misses.

Serving never waits for an explanation: the playback session hands each divergence and
miss to :class:`Explainer`, which runs :meth:`~.index.Index.explain` on its own thread
within :data:`BACKGROUND_BUDGET_S` per request and fills in the request's report entry.
For a miss, the proxy waits for it at most :data:`MISS_WAIT_S` (the documented 50 ms
budget) so the error the client gets can name the nearest recorded request and the fields
that differ; past that the client gets the error without them and the report still gets
the full explanation.

Size caps: at most :data:`~.diff.MAX_CHANGES` differences per request and
:data:`~.report.MAX_REPORT_CHANGES` per report.  With ``diff_dir`` (``--diff-dir DIR``)
each divergence and miss also gets its complete detail in files: ``NNNNN-recorded.json``
and ``NNNNN-actual.json`` (the normalised, redacted bodies, pretty-printed with sorted keys
so any diff tool compares them; ``.txt``/``.bin`` for other bodies) and
``NNNNN-diff.json`` (every difference, without the count cap).
"""

from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

from ..errors import OutputError
from .bodydiff import bounded_diff
from .diff import MAX_CHANGES, Budget
from .fingerprint import Normalized
from .index import Index, Lookup
from .report import MAX_REPORT_CHANGES, RequestOutcome

logger = logging.getLogger(__name__)

#: seconds a miss response waits for its explanation (the request-path budget)
MISS_WAIT_S = 0.05
#: seconds one background explanation may take
BACKGROUND_BUDGET_S = 2.0
#: seconds a report waits for explanations still running
DRAIN_TIMEOUT_S = 60.0
#: seconds the complete diff written to --diff-dir may take per request
DIFF_DIR_BUDGET_S = 10.0


class Explainer:
    """Explains lookups on one daemon thread and writes the results into report entries.

    ``diff_dir``: where to write the complete detail (None: nowhere); ``write_error`` is the
    first reason it could not be written there (None: all written).  Thread-safe.
    """

    def __init__(self, diff_dir: str | Path | None = None, budget_s: float = BACKGROUND_BUDGET_S) -> None:
        self.diff_dir = Path(diff_dir) if diff_dir else None
        self.budget_s = budget_s
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="spoolproxy-explain")
        self._lock = threading.Lock()
        self._pending: set[Future] = set()
        self._kept = 0  # differences stored in reports so far
        self._files = 0
        self._stems: set[str] = set()
        self.write_error: str | None = None

    def submit(self, index: Index, lookup: Lookup, outcome: RequestOutcome | None, lock: threading.Lock) -> Future:
        """Explain ``lookup`` in the background; ``outcome`` (the report entry) is updated
        under ``lock`` when done.  Returns the future (its result is None)."""
        fut = self._pool.submit(self._run, index, lookup, outcome, lock)
        with self._lock:
            self._pending.add(fut)
        fut.add_done_callback(self._forget)
        return fut

    def _forget(self, fut: Future) -> None:
        with self._lock:
            self._pending.discard(fut)

    def _run(self, index: Index, lookup: Lookup, outcome: RequestOutcome | None, lock: threading.Lock) -> None:
        index.explain(lookup, Budget(self.budget_s))
        changes, cut = lookup.changes, lookup.cut
        with self._lock:
            room = max(0, MAX_REPORT_CHANGES - self._kept)
            kept = changes[:room]
            self._kept += len(kept)
        reasons = list(lookup.reasons)
        if len(kept) < len(changes):
            reasons.append(f"{len(changes)} differences not listed: this report already holds {MAX_REPORT_CHANGES}; "
                           "--diff-dir DIR writes every one")
        elif cut:
            reasons.append(f"diff: {cut}" + ("" if self.diff_dir else "; --diff-dir DIR writes every difference"))
        files: list[str] = []
        if self.diff_dir is not None and outcome is not None:
            rec = lookup.entry or lookup.nearest
            if rec is not None:
                files = self._write(index.full_norm(rec), lookup.actual, outcome.seq)
        if outcome is None:
            return
        with lock:
            outcome.nearest = lookup.nearest.ref() if lookup.nearest is not None else outcome.nearest
            outcome.reasons = reasons + [r for r in outcome.reasons if r not in reasons]
            outcome.differences = [*kept, *outcome.differences]  # keep what serving added (a WebSocket session)
            outcome.suggestions = [*lookup.suggestions, *(x for x in outcome.suggestions if x not in lookup.suggestions)]
            outcome.suggestion_verified = lookup.verified
            outcome.detail_files = files

    def _write(self, r: Normalized, a: Normalized, seq: int) -> list[str]:
        """Write both normalised bodies and every difference, named by the request's number
        in the report (``seq``; ``00003-2`` when a later segment reuses the number); returns
        the paths written."""
        assert self.diff_dir is not None
        with self._lock:
            self._files += 1
            stem = f"{seq:05d}"
            if stem in self._stems:
                stem = f"{stem}-{self._files}"
            self._stems.add(stem)
        try:
            self.diff_dir.mkdir(parents=True, exist_ok=True)
            out = []
            for side, norm in (("recorded", r), ("actual", a)):
                out.append(self._body_file(self.diff_dir / f"{stem}-{side}", norm))
            d = bounded_diff(r.body_json, a.body_json, r.body, a.body, kinds=(r.body_kind, a.body_kind), limit=None,
                            budget=Budget(DIFF_DIR_BUDGET_S))
            doc = {"differences": [c.model_dump(mode="json") for c in d.changes], "cut": d.cut}
            p = self.diff_dir / f"{stem}-diff.json"
            p.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            out.append(str(p))
            return out
        except OSError as exc:
            with self._lock:
                first = self.write_error is None
                if first:
                    self.write_error = OutputError.from_os(self.diff_dir, exc).reason
            if first:
                logger.warning("spoolproxy: cannot write --diff-dir files: %s", exc)
            return []

    @staticmethod
    def _body_file(stem: Path, norm: Normalized) -> str:
        if norm.body_json is not None:
            p = stem.with_suffix(".json")
            p.write_text(json.dumps(norm.body_json, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
        else:
            try:
                text = norm.body.decode("utf-8")
            except UnicodeDecodeError:
                p = stem.with_suffix(".bin")
                p.write_bytes(norm.body)
            else:
                p = stem.with_suffix(".txt")
                p.write_text(text, encoding="utf-8")
        return str(p)

    def drain(self, timeout: float = DRAIN_TIMEOUT_S) -> int:
        """Wait for the explanations submitted so far (at most ``timeout`` seconds);
        returns how many are still running."""
        with self._lock:
            pending = list(self._pending)
        if not pending:
            return 0
        _, not_done = wait(pending, timeout=timeout)
        return len(not_done)

    def close(self) -> None:
        """Stop the worker after the explanations already queued."""
        self._pool.shutdown(wait=False, cancel_futures=False)


__all__ = ["Explainer", "MISS_WAIT_S", "BACKGROUND_BUDGET_S", "MAX_CHANGES"]
