"""Checking a model's answer against the run: quotes, label, failing interaction.

:func:`find_verbatim` finds a quote in a field the way a careful reader would (Unicode
NFKC, curly quotes and dashes as plain ones, whitespace runs as one space, leading and
trailing ellipses and quote marks dropped; case-sensitive; at least 3 characters) and
returns the field's own text for it, so every kept quote is a verbatim substring of the
field it cites.

:func:`settle` turns a model's parsed answer into a :class:`~.models.Diagnosis`:

* each evidence quote is looked up in the field it cites (``interaction`` + ``path``);
  when it is not there, the other fields of that interaction the judge was shown are
  tried (the citation is then corrected and noted); a quote found nowhere is *rejected*;
* a label outside the taxonomy, a failure label without a valid failing interaction or
  without one surviving quote, becomes ``unknown`` (the claimed label is kept in
  ``claimed_label``, the confidence capped at 0.2, the reason noted);
* ``no_failure`` on a run the detectors fail (an error-level finding, whose evidence is
  itself verified) becomes ``unknown`` too.

Pure: no I/O.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Iterable

from ..detectors.evidence import EvidenceBuilder
from ..detectors.models import Evidence, Report
from .models import Diagnosis, RejectedQuote
from .taxonomy import FAILURE_LABELS, normalize_label

MIN_QUOTE = 3
MAX_QUOTE = 300
DOWNGRADED_CONFIDENCE = 0.2
_PLAIN = {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"',
          "\u2032": "'", "\u2033": '"', "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
          "\u2212": "-", "\u00a0": " "}


def _normal(text: str) -> tuple[str, list[int]]:
    """``text`` normalised (see the module docstring) and, for each character of the
    result, the index of the original character it came from."""
    out: list[str] = []
    where: list[int] = []
    space = False
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKC", ch):
            c = _PLAIN.get(c, c)
            if c.isspace():
                if space or not out:
                    continue
                space = True
                out.append(" ")
                where.append(i)
                continue
            space = False
            out.append(c)
            where.append(i)
    while out and out[-1] == " ":
        out.pop()
        where.pop()
    return "".join(out), where


def _trim(quote: str) -> str:
    q, _ = _normal(quote)
    while True:
        before = q
        for junk in ("...", "…", '"', "'", "`"):
            q = q.removeprefix(junk).removesuffix(junk).strip()
        if q == before:
            return q


def find_verbatim(field: str | None, quote: Any) -> str | None:
    """The exact text of ``field`` that ``quote`` stands for (see the module docstring),
    or None when the quote is not in the field (or is shorter than 3 characters)."""
    if not field or not isinstance(quote, str):
        return None
    q = _trim(quote)
    if len(q) < MIN_QUOTE:
        return None
    if q in field:
        return q
    norm, where = _normal(field)
    at = norm.find(q)
    if at < 0:
        return None
    return field[where[at]:where[at + len(q) - 1] + 1]


def _as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("#").isdigit():
        return int(v.strip().lstrip("#"))
    return None


def check_quotes(items: Iterable[Any], ev: EvidenceBuilder, shown: set[tuple[int, str]] | None = None,
                 limit: int = 8) -> tuple[list[Evidence], list[RejectedQuote], list[str]]:
    """Verify evidence items (``{"interaction", "field" | "path", "quote"}``): returns
    (kept evidence, rejected quotes, notes).  ``shown``: the fields the judge was shown,
    tried when the cited field does not hold the quote."""
    kept: list[Evidence] = []
    rejected: list[RejectedQuote] = []
    notes: list[str] = []
    n_steps = len(ev.cassette.interactions)
    for item in list(items)[:limit * 2]:
        if not isinstance(item, dict):
            rejected.append(RejectedQuote(quote=item, reason="not an object with interaction, field and quote"))
            continue
        i = _as_int(item.get("interaction"))
        path = item.get("field") or item.get("path")
        quote = item.get("quote")
        bad = RejectedQuote(interaction=item.get("interaction"), path=path, quote=quote, reason="")
        if i is None or not 0 <= i < n_steps:
            bad.reason = f"interaction {item.get('interaction')!r} is not in the run (0-{n_steps - 1})"
            rejected.append(bad)
            continue
        if not isinstance(quote, str) or len(_trim(quote)) < MIN_QUOTE:
            bad.reason = "the quote is missing or shorter than 3 characters"
            rejected.append(bad)
            continue
        text = find_verbatim(ev.resolve(i, path), quote) if isinstance(path, str) else None
        if text is None:
            for j, other in sorted(shown or ()):
                if j == i and other != path:
                    text = find_verbatim(ev.resolve(i, other), quote)
                    if text is not None:
                        notes.append(f"a quote cited {path!r} of interaction {i}; it is in {other!r}")
                        path = other
                        break
        if text is None:
            bad.reason = (f"not in field {path!r} of interaction {i}" if isinstance(path, str) and ev.resolve(i, path)
                          is not None else f"interaction {i} has no field {path!r}; the quote is in none of its fields")
            rejected.append(bad)
            continue
        e = Evidence(interaction=i, path=path, quote=text[:MAX_QUOTE])
        if e not in kept and len(kept) < limit:
            kept.append(e)
    return kept, rejected, notes


def settle(answer: dict[str, Any], ev: EvidenceBuilder, report: Report | None,
           shown: set[tuple[int, str]] | None = None) -> Diagnosis:
    """A :class:`Diagnosis` from the model's parsed ``answer`` (``label``,
    ``failing_interaction``, ``root_cause``, ``evidence``, ``confidence``), checked against
    the run (see the module docstring).  Provenance fields are left for the caller."""
    raw_label = answer.get("label")
    label = normalize_label(raw_label)
    evidence, rejected, notes = check_quotes(answer.get("evidence") or [], ev, shown)
    conf = answer.get("confidence")
    confidence = float(conf) if isinstance(conf, (int, float)) and not isinstance(conf, bool) else None
    if confidence is not None:
        confidence = min(1.0, max(0.0, confidence))
    interaction = _as_int(answer.get("failing_interaction", answer.get("interaction")))
    root = answer.get("root_cause") if isinstance(answer.get("root_cause"), str) else ""
    d = Diagnosis(label=label or "unknown", interaction=interaction, root_cause=" ".join(root.split())[:500],
                  evidence=evidence, rejected=rejected, confidence=confidence, notes=notes)
    n_steps = len(ev.cassette.interactions)

    def downgrade(why: str) -> Diagnosis:
        d.claimed_label = label or (str(raw_label) if raw_label is not None else None)
        d.claimed_interaction = d.interaction
        d.label = "unknown"
        d.interaction = None
        d.confidence = min(d.confidence if d.confidence is not None else DOWNGRADED_CONFIDENCE, DOWNGRADED_CONFIDENCE)
        d.notes.append(why)
        return d

    if label is None:
        return downgrade(f"the label {raw_label!r} is not in the taxonomy")
    if label == "unknown":
        d.interaction = None
        return d
    if label == "no_failure":
        d.interaction = None
        failing = [f for f in (report.findings if report else []) if f.severity in ("error", "critical")]
        if failing:
            kinds = ", ".join(sorted({f.kind for f in failing}))
            return downgrade(f"no_failure contradicts the detectors' error-level findings ({kinds})")
        return d
    assert label in FAILURE_LABELS
    if interaction is None or not 0 <= interaction < n_steps:
        return downgrade(f"the failing interaction {answer.get('failing_interaction')!r} is not in the run "
                         f"(0-{n_steps - 1})")
    if not evidence:
        return downgrade(f"no evidence quote checked out ({len(rejected)} rejected): a {label} verdict needs "
                         "at least one verbatim quote")
    return d
