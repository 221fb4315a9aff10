"""Typed results of the judge (pydantic): a :class:`Diagnosis` of one run, the
:class:`Proposal` list of a fix call, and the :class:`Fixes` that hold them.

Interactions are 0-based indexes into the cassette, as ``spoolproxy show`` numbers them.
Evidence uses the detectors' :class:`~spoolproxy.detectors.models.Evidence` (``interaction``,
``path``, ``quote``): every kept quote is a verbatim substring of the field it cites.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ..detectors.models import Evidence


class RejectedQuote(BaseModel):
    """A quote the model gave that did not check out: where it said it was, the quote,
    and why it was dropped (``no such field``, ``not in the cited field`` ...)."""

    interaction: Any = None
    path: Any = None
    quote: Any = None
    reason: str


class Diagnosis(BaseModel):
    """What went wrong in a run, and where.

    ``label``: one of :data:`~.taxonomy.LABELS`; ``interaction``: the failing interaction
    (None for ``no_failure`` / ``unknown``); ``root_cause``: one sentence; ``evidence``:
    verified verbatim quotes; ``rejected``: the quotes that were dropped;
    ``claimed_label`` / ``claimed_interaction``: what the model said when its answer was
    turned into ``unknown``;
    ``confidence``: 0-1 (the model's own, capped at 0.2 after a downgrade; 1.0 for the
    heuristic when an error-level finding backs it); ``notes``: one line per check that
    changed the answer.  ``source``: ``model`` or ``heuristic``; ``model`` / ``base_url``
    / ``prompt_version``: who answered to which prompt; ``cassette_sha256``: the run it is
    about; ``judge_cassette``: where the model's own traffic was recorded (or replayed from).
    """

    label: str
    interaction: int | None = None
    root_cause: str = ""
    evidence: list[Evidence] = Field(default_factory=list)
    rejected: list[RejectedQuote] = Field(default_factory=list)
    claimed_label: str | None = None
    claimed_interaction: int | None = None
    confidence: float | None = None
    notes: list[str] = Field(default_factory=list)
    source: Literal["model", "heuristic"] = "model"
    model: str | None = None
    base_url: str | None = None
    prompt_version: str | None = None
    cassette_sha256: str | None = None
    judge_cassette: str | None = None
    created: str | None = None
    cached: bool = Field(default=False, exclude=True)  # this answer came from the results file

    @property
    def is_failure(self) -> bool:
        """True for a failure label (not ``no_failure``, not ``unknown``)."""
        from .taxonomy import FAILURE_LABELS

        return self.label in FAILURE_LABELS


class Proposal(BaseModel):
    """One proposed fix: ``patch`` (a patch mapping in the file format of ``fork``),
    ``rationale``, ``expected_effect``; ``kept`` when it passed every check, else
    ``problems`` says why it was dropped; ``rank`` (1 = best) among the kept ones;
    ``test_only`` for a ``tool_result`` counterfactual (it tests a hypothesis, it is not a
    fix to ship); ``file``: the patch file written for a kept proposal."""

    patch: dict[str, Any] = Field(default_factory=dict)
    rationale: str = ""
    expected_effect: str = ""
    kept: bool = False
    problems: list[str] = Field(default_factory=list)
    rank: int | None = None
    test_only: bool = False
    file: str | None = None


class Fixes(BaseModel):
    """The result of a fix call: the proposals in the model's order (kept and dropped),
    the diagnosis it was based on (label, interaction), and the call's provenance."""

    proposals: list[Proposal] = Field(default_factory=list)
    diagnosis_label: str | None = None
    diagnosis_interaction: int | None = None
    model: str | None = None
    base_url: str | None = None
    prompt_version: str | None = None
    cassette_sha256: str | None = None
    judge_cassette: str | None = None
    created: str | None = None
    notes: list[str] = Field(default_factory=list)
    cached: bool = Field(default=False, exclude=True)  # this answer came from the results file

    @property
    def kept(self) -> list[Proposal]:
        """The kept proposals, best first."""
        return sorted((p for p in self.proposals if p.kept), key=lambda p: p.rank or 0)
