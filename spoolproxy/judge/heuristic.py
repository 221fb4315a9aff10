"""A diagnosis from the deterministic findings alone (``spoolproxy diagnose --heuristic``).

The root finding is the error- or critical-level finding that explains the others: kinds
that are causes (an unknown tool, malformed or cut arguments, a tool error taken as
success, a loop) are preferred over kinds that are consequences (an HTTP error the cause
produced, no final answer), then the earliest.  Its kind gives the label
(:data:`KIND_LABEL`; ``html_error_page`` and ``http_error`` read as ``external_failure``
on a model call and as ``tool_error_mishandled`` on a tool request; ``truncated_output``
as ``bad_tool_arguments`` when the cut answer was a tool call), its first interaction of
the right kind the failing interaction, its verified evidence the evidence.  A run with
no error-level finding is ``no_failure``: the heuristic cannot see silent failures (a
wrong record, a stale value, an answer that ignores the data); that is what the model
judge is for.  Pure.
"""

from __future__ import annotations

from ..detectors.models import Finding, Report, Transcript
from .models import Diagnosis

#: finding kind -> label (for kinds whose label does not depend on where they occur)
KIND_LABEL: dict[str, str] = {
    "unknown_tool": "wrong_tool_selection",
    "invalid_tool_arguments": "bad_tool_arguments",
    "tool_error_ignored": "tool_error_mishandled",
    "duplicate_side_effect": "tool_error_mishandled",
    "tool_loop": "step_repetition",
    "budget_exceeded": "step_repetition",
    "stream_incomplete": "external_failure",
    "refusal": "task_spec_violation",
    "empty_output": "task_spec_violation",
    "no_final_answer": "task_spec_violation",
    "check_failed": "task_spec_violation",
    "off_track": "unsupported_claim",
}
#: causes first, consequences last (lower is preferred)
PRIORITY: tuple[str, ...] = (
    "unknown_tool", "invalid_tool_arguments", "truncated_output", "tool_error_ignored", "duplicate_side_effect",
    "tool_loop", "retry_storm", "html_error_page", "stream_incomplete", "refusal", "empty_output", "check_failed",
    "off_track", "http_error", "budget_exceeded", "no_final_answer",
)


def _label(f: Finding, t: Transcript) -> tuple[str, int]:
    """(label, failing interaction) for one finding."""
    steps = {s.index: s for s in t.steps}
    first = f.interactions[0] if f.interactions else 0
    on_llm = [i for i in f.interactions if i in steps and steps[i].kind == "llm"]
    on_tool = [i for i in f.interactions if i in steps and steps[i].kind != "llm"]
    if f.kind in ("html_error_page", "http_error", "retry_storm"):
        if on_tool:
            return ("tool_error_mishandled" if f.kind != "retry_storm" else "step_repetition"), on_tool[0]
        return "external_failure", first
    if f.kind == "truncated_output":
        cut_call = next((i for i in on_llm if steps[i].llm and steps[i].llm.tool_calls), None)
        return ("bad_tool_arguments", cut_call) if cut_call is not None else ("task_spec_violation", first)
    if f.kind == "tool_error_ignored":
        return KIND_LABEL[f.kind], (on_tool or f.interactions[1:2] or [first])[0]
    if f.kind == "tool_loop" and len(f.interactions) > 1:
        return KIND_LABEL[f.kind], f.interactions[1]  # the first repeat
    return KIND_LABEL.get(f.kind, "unknown"), first


def root_finding(report: Report) -> Finding | None:
    """The error- or critical-level finding taken as the root cause (None when none)."""
    failing = [f for f in report.findings if f.severity in ("error", "critical")]
    if not failing:
        return None
    rank = {k: n for n, k in enumerate(PRIORITY)}
    return min(failing, key=lambda f: (rank.get(f.kind, len(PRIORITY)), f.interactions[0] if f.interactions else 0))


def heuristic_diagnosis(report: Report, transcript: Transcript) -> Diagnosis:
    """The heuristic :class:`Diagnosis` of a run from its report (see the module docstring)."""
    f = root_finding(report)
    if f is None:
        warned = [x.kind for x in report.findings if x.severity == "warn"]
        note = [f"warn-level findings only ({', '.join(sorted(set(warned)))}): recovered, not failures"] if warned else []
        return Diagnosis(label="no_failure", root_cause="No error-level finding: the detectors see no failure "
                         "(silent failures need the model judge).", source="heuristic", confidence=None, notes=note)
    label, at = _label(f, transcript)
    others = sorted({x.kind for x in report.findings if x.severity in ("error", "critical") and x is not f})
    notes = [f"root finding {f.kind} (also: {', '.join(others)})"] if others else [f"root finding {f.kind}"]
    return Diagnosis(label=label, interaction=at, root_cause=f.message, evidence=list(f.evidence[:4]),
                     source="heuristic", confidence=1.0, notes=notes)
