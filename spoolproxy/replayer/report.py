"""The playback report: what happened to every request, and what was never requested.

Outcomes: ``exact`` (the index found the request), ``divergence`` (no exact match; the next
unused interaction with the same method and URL was served, vcrpy-style), ``miss`` (nothing
served; the client got an explained error), ``live`` (sent upstream: ``--live`` host or
``new_episodes``).  ``--report FILE`` writes :class:`PlaybackReport` as JSON; the text form
ends with the summary line
``spoolproxy playback: served exactly N, served with divergence N, missed N, unused N``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..cassettes.storage import atomic_write
from ..errors import SpoolError
from .diff import Change

Outcome = Literal["exact", "divergence", "miss", "live"]
#: ``method`` of report entries for network access blocked by ``--isolate`` (see :mod:`.blocked`)
BLOCKED_METHODS = ("DNS", "CONNECT")


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
    a ``miss`` (the client got an error) with the reason in ``reasons``.
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

    def render(self) -> list[str]:
        """Human lines (used for divergences and misses at exit)."""
        head = {"miss": "MISS", "divergence": "DIVERGENCE", "exact": "WARNING", "live": "live"}[self.outcome]
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
        return line + (f", live {self.live}" if self.live else "") + (f", warnings {self.warned}" if self.warned else "")

    def render(self, *, max_unused: int = 20) -> str:
        """The end-of-run text: every divergence and miss with its diff, unused interactions,
        then the summary line."""
        lines: list[str] = []
        for r in self.requests:
            if r.outcome in ("divergence", "miss") or r.warnings:
                lines += r.render()
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
        """Write the report as JSON atomically.  Raises SpoolError when it cannot be written.

        Request data in the report was redacted before matching; ``redactor`` (a
        :class:`~spoolproxy.cassettes.redact.Redactor` that knows the run's secrets) is
        applied to the whole text on top.
        """
        p = Path(path)
        text = self.model_dump_json(indent=2)
        if redactor is not None:
            text = redactor.text(text)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(p, text + "\n")
        except OSError as exc:
            raise SpoolError(f"cannot write report {p}: {exc.strerror}; choose another --report path") from None
        return p
