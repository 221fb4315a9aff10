"""The playback report: what happened to every request, and what was never requested.

Outcomes: ``exact`` (the index found the request), ``divergence`` (no exact match; the
nearest unused interaction with the same method, URL and stream flag was served,
vcrpy-style), ``miss`` (nothing served; the client got an explained error), ``optional``
(a miss on an endpoint a built-in SDK rule marks optional, such as telemetry: reported, not
a failure), ``live`` (sent upstream: ``--live`` host or ``new_episodes``).  ``--report
FILE`` writes :class:`PlaybackReport` as JSON; the text form ends with the summary line
``spoolproxy playback: served exactly N, served with divergence N, missed N, unused N``.

Reports stay small whatever the bodies: each request keeps at most 50 differences with
bounded previews (:mod:`.diff`), a whole report at most :data:`MAX_REPORT_CHANGES`, and the
text form at most :data:`MAX_RENDER_LINES_PER_REQUEST` lines per request and
:data:`MAX_RENDER_LINES` in all; ``--diff-dir DIR`` writes the complete detail to files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..cassettes.storage import atomic_write
from .diff import Change

Outcome = Literal["exact", "divergence", "miss", "optional", "live"]
#: ``method`` of report entries for network access blocked by ``--isolate`` (see :mod:`.blocked`)
BLOCKED_METHODS = ("DNS", "CONNECT")

#: body differences kept in one report (later requests keep their reasons and suggestions)
MAX_REPORT_CHANGES = 1000
#: lines the text report prints for one request, and in all
MAX_RENDER_LINES_PER_REQUEST = 60
MAX_RENDER_LINES = 2000


class RecordedRef(BaseModel):
    """A recorded interaction: ``cassette`` path, 0-based ``interaction`` index, method and URI."""

    cassette: str
    interaction: int
    method: str
    uri: str

    def label(self) -> str:
        return f"{self.cassette} #{self.interaction} ({self.method} {self.uri})"


class RequestOutcome(BaseModel):
    """One request the proxy saw, in arrival order (``seq`` from 1).

    ``served``: the interaction replayed (exact/divergence); ``nearest``: for a miss, the
    closest recorded request for the same endpoint; ``reasons``: matcher messages;
    ``differences``: field-level body diff vs served/nearest; ``suggestions``: flags that
    would remove the body differences, ``suggestion_verified`` True when applying them all
    makes the request match exactly; ``repeat``: served again under ``--allow-repeats``;
    ``warnings``: what the client got differs from what was recorded although the request
    matched (a body elided at record time is served empty); they fail ``--strict`` like a
    divergence.  A request whose recorded side body file could not be read at serve time is
    a ``miss`` (the client got an error) with the reason in ``reasons``.  ``detail_files``:
    the files ``--diff-dir`` wrote for this request (both normalised bodies, every
    difference).
    """

    seq: int
    outcome: Outcome
    method: str
    uri: str
    served: RecordedRef | None = None
    nearest: RecordedRef | None = None
    repeat: bool = False
    reasons: list[str] = Field(default_factory=list)
    differences: list[Change] = Field(default_factory=list)
    suggestions: list[str] = Field(default_factory=list)
    suggestion_verified: bool | None = None
    warnings: list[str] = Field(default_factory=list)
    detail_files: list[str] = Field(default_factory=list)

    def render(self) -> list[str]:
        """Human lines (used for divergences and misses at exit), at most
        :data:`MAX_RENDER_LINES_PER_REQUEST`."""
        head = {"miss": "MISS", "divergence": "DIVERGENCE", "exact": "WARNING", "live": "live",
                "optional": "OPTIONAL"}[self.outcome]
        lines = [f"{head} #{self.seq} {self.method} {self.uri}"]
        if self.served is not None:
            lines.append(f"  served {self.served.label()}" + (" again (--allow-repeats)" if self.repeat else ""))
        if self.nearest is not None:
            lines.append(f"  nearest recorded request: {self.nearest.label()}")
        elif self.outcome == "miss" and self.method not in BLOCKED_METHODS:
            lines.append("  no recorded request for this host")
        lines += [f"  {r}" for r in self.reasons if not r.startswith("body:") or not self.differences]
        for c in self.differences:
            lines += ["  " + ln for ln in c.render()]
        if self.suggestions:
            verdict = (
                " (verified: then it matches exactly)" if self.suggestion_verified
                else " (removes part of the difference)" if self.suggestion_verified is False else ""
            )
            lines.append(f"  to match, add: {' '.join(self.suggestions)}{verdict}")
        lines += [f"  warning: {w}" for w in self.warnings]
        if self.detail_files:
            lines.append(f"  full detail: {', '.join(self.detail_files)}")
        if len(lines) > MAX_RENDER_LINES_PER_REQUEST:
            more = len(lines) - MAX_RENDER_LINES_PER_REQUEST + 1
            lines = [*lines[: MAX_RENDER_LINES_PER_REQUEST - 1], f"  … {more} more lines (see --report FILE or --diff-dir DIR)"]
        return lines


class PlaybackReport(BaseModel):
    """Everything a playback run served, diverged on, missed and left unused."""

    cassettes: list[str] = Field(default_factory=list)
    match: Literal["default", "exact"] = "default"
    record_mode: str = "none"
    requests: list[RequestOutcome] = Field(default_factory=list)
    unused: list[RecordedRef] = Field(default_factory=list)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.requests if r.outcome == outcome)

    @property
    def exact(self) -> int:
        return self.count("exact")

    @property
    def divergences(self) -> int:
        return self.count("divergence")

    @property
    def misses(self) -> int:
        return self.count("miss")

    @property
    def live(self) -> int:
        return self.count("live")

    @property
    def optional(self) -> int:
        """Requests to an optional endpoint (SDK rule) that no cassette holds."""
        return self.count("optional")

    @property
    def warned(self) -> int:
        """Requests served with a warning (e.g. a body elided at record time)."""
        return sum(1 for r in self.requests if r.warnings)

    @property
    def clean(self) -> bool:
        """True when nothing diverged, missed, was served with a warning or stayed unused
        (what ``--strict`` requires)."""
        return not (self.divergences or self.misses or self.unused or self.warned)

    def summary_line(self) -> str:
        """``spoolproxy playback: served exactly N, served with divergence N, missed N, unused N``."""
        line = (
            f"spoolproxy playback: served exactly {self.exact}, served with divergence {self.divergences}, "
            f"missed {self.misses}, unused {len(self.unused)}"
        )
        return (line + (f", live {self.live}" if self.live else "") + (f", optional {self.optional}" if self.optional else "")
                + (f", warnings {self.warned}" if self.warned else ""))

    def render(self, *, max_unused: int = 20) -> str:
        """The end-of-run text: every divergence and miss with its diff, unused interactions,
        then the summary line."""
        lines: list[str] = []
        shown = 0
        for r in self.requests:
            if r.outcome in ("divergence", "miss", "optional") or r.warnings:
                if len(lines) >= MAX_RENDER_LINES:
                    break
                lines += r.render()
                shown += 1
        rest = sum(1 for r in self.requests if r.outcome in ("divergence", "miss", "optional") or r.warnings) - shown
        if rest:
            lines.append(f"… {rest} more misses and divergences not shown (see --report FILE)")
        if self.unused:
            lines.append(f"never requested ({len(self.unused)}):")
            lines += [f"  {u.label()}" for u in self.unused[:max_unused]]
            if len(self.unused) > max_unused:
                lines.append(f"  … and {len(self.unused) - max_unused} more (see --report FILE)")
        lines.append(self.summary_line())
        return "\n".join(lines)

    def merge(self, other: "PlaybackReport") -> "PlaybackReport":
        """This report followed by ``other`` (cassette switches make segments)."""
        offset = len(self.requests)
        reqs = [*self.requests, *(r.model_copy(update={"seq": r.seq + offset}) for r in other.requests)]
        cas = [*self.cassettes, *(c for c in other.cassettes if c not in self.cassettes)]
        return PlaybackReport(
            cassettes=cas, match=self.match, record_mode=self.record_mode,
            requests=reqs, unused=[*self.unused, *other.unused],
        )

    def write(self, path: str | Path, redactor=None) -> Path:
        """Write the report as JSON atomically.  Raises OutputError when it cannot be written.

        Request data in the report was redacted before matching; ``redactor`` (a
        :class:`~spoolproxy.cassettes.redact.Redactor` that knows the run's secrets) is
        applied to the whole text on top.
        """
        p = Path(path)
        text = self.model_dump_json(indent=2)
        if redactor is not None:
            text = redactor.text(text)
        atomic_write(p, text + "\n")
        return p
