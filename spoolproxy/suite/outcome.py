"""Judging a regression run: the outcome of one case and the one-line explanation.

Outcomes, in the order they are decided:

``error``              the case could not run (bad case file, missing cassette or command,
                       the command failed to start or timed out); set by the runner.
``unreplayable``       the agent sent a request the cassette cannot answer (a miss, or under
                       ``match: exact`` any divergence): the agent changed, the case needs a
                       new recording; the near-miss diff is in the details.
``still_fails``        a signature kind came back at error level or above.
``fails_differently``  another error-level finding, a failed assertion, or a non-zero exit
                       where the recorded run exited 0.
``passes``             none of the above.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from ..detectors.models import SEVERITY_RANK, Finding, Report, Transcript
from ..replayer.report import PlaybackReport, RequestOutcome
from .model import Case

Outcome = Literal["passes", "still_fails", "fails_differently", "unreplayable", "error"]
OUTCOMES: tuple[str, ...] = ("passes", "still_fails", "fails_differently", "unreplayable", "error")


@dataclass
class CaseResult:
    """The result of running one case.

    ``explanation`` is one line; ``details`` extra lines (findings, near-miss diffs);
    ``artifact`` the cassette recorded during the run; ``report`` its playback report JSON;
    ``duration_s`` wall time in seconds; ``status`` the case's status (skipped cases are
    reported with ``outcome`` None); ``runs`` / ``passed_runs``: how often the case ran
    (``spoolproxy test --repeat``) and how many of those runs passed.
    """

    name: str
    outcome: Outcome | None
    explanation: str
    status: str = "confirmed"
    details: list[str] = field(default_factory=list)
    case_path: Path | None = None
    cassette: str | None = None
    artifact: Path | None = None
    report: Path | None = None
    exit_code: int | None = None
    duration_s: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    pinned: Path | None = None
    baseline: str | None = None
    regression: bool = False
    runs: int = 1
    passed_runs: int | None = None

    @property
    def pass_rate(self) -> float | None:
        """Passed runs over runs (None for a case that did not run)."""
        if self.outcome is None:
            return None
        passed = self.passed_runs if self.passed_runs is not None else int(self.outcome == "passes")
        return passed / max(self.runs, 1)

    def to_json(self) -> dict:
        """A JSON-ready dict (paths as strings)."""
        return {
            "name": self.name, "status": self.status, "outcome": self.outcome,
            "explanation": self.explanation, "details": self.details,
            "case": str(self.case_path) if self.case_path else None, "cassette": self.cassette,
            "artifact": str(self.artifact) if self.artifact else None,
            "report": str(self.report) if self.report else None,
            "exit_code": self.exit_code, "duration_s": round(self.duration_s, 3),
            "findings": [f.model_dump() for f in self.findings],
            "pinned": str(self.pinned) if self.pinned else None,
            "baseline": self.baseline, "regression": self.regression,
            "runs": self.runs, "passed_runs": self.passed_runs, "pass_rate": self.pass_rate,
        }


def result_from_json(d: dict) -> CaseResult:
    """The inverse of :meth:`CaseResult.to_json` (used to collect parallel workers' results)."""
    path = lambda v: Path(v) if v else None  # noqa: E731
    return CaseResult(
        name=d["name"], outcome=d["outcome"], explanation=d["explanation"], status=d.get("status", "confirmed"),
        details=list(d.get("details") or []), case_path=path(d.get("case")), cassette=d.get("cassette"),
        artifact=path(d.get("artifact")), report=path(d.get("report")), exit_code=d.get("exit_code"),
        duration_s=float(d.get("duration_s") or 0.0), findings=[Finding.model_validate(f) for f in d.get("findings") or []],
        pinned=path(d.get("pinned")), runs=int(d.get("runs") or 1), passed_runs=d.get("passed_runs"))


def suite_pass_rate(results) -> tuple[int, int]:
    """(passed runs, runs) over the cases that ran; a case that could not run (``error``)
    counts as its runs failed."""
    passed = runs = 0
    for r in results:
        if r.outcome is None:
            continue
        runs += max(r.runs, 1)
        passed += r.passed_runs if r.passed_runs is not None else int(r.outcome == "passes")
    return passed, runs


def pass_rate_line(results, fail_under: float | None = None) -> str | None:
    """``pass rate: 8/9 runs (89%, 95% CI 57-98%)`` plus the ``--fail-under`` result, or
    None when no case ran."""
    from ..fix.stats import wilson

    passed, runs = suite_pass_rate(results)
    if not runs:
        return None
    lo, hi = wilson(passed, runs)
    line = f"pass rate: {passed}/{runs} runs ({passed / runs:.0%}, 95% CI {lo:.0%}-{hi:.0%})"
    if fail_under is not None:
        ok = passed / runs >= fail_under
        line += f"; --fail-under {fail_under:g}: {'ok' if ok else 'FAILED (below the threshold)'}"
    return line


def _error_level(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if SEVERITY_RANK.get(f.severity, 0) >= SEVERITY_RANK["error"]]


def unreplayable_reason(case: Case, playback: PlaybackReport) -> tuple[str, list[str]] | None:
    """(explanation, diff lines) when the run needed responses the cassette does not have."""
    bad = [r for r in playback.requests
           if r.outcome == "miss" or (r.outcome == "divergence" and case.match == "exact")]
    if not bad:
        return None
    first = bad[0]
    near = f"; nearest recorded: {first.nearest.label()}" if first.nearest else \
        f"; served instead: {first.served.label()}" if first.served else "; no recorded request for this endpoint"
    what = "request" if len(bad) == 1 else "requests"
    lines: list[str] = []
    for r in bad:
        lines += regression_lines(r, case.name)
    host = urlsplit(first.uri).hostname
    if host:
        lines.append(f"hint: if the agent changed on purpose, try it with this host live and pin the run: "
                     f"spoolproxy test --case {case.name} --live {host} --pin")
    return f"{len(bad)} {what} not in the cassette, first: {first.method} {first.uri}{near}", lines


#: JSON paths under these top-level keys hold the conversation (messages, tool results):
#: ignoring them in a regression run would hide exactly what the agent changed.
CONVERSATION_KEYS = ("messages", "input", "contents", "prompt", "system", "instructions", "tools")
_SUGGESTION_RE = re.compile(r"^--(normalize|ignore-json-path) (.+)$")


def regression_lines(r: RequestOutcome, case_name: str) -> list[str]:
    """A miss or divergence rendered for ``spoolproxy test``: playback's ``to match, add:``
    line becomes an ``annotate`` command for the flags ``test`` honours (``--normalize``, and
    ``--ignore-json-path`` only outside the conversation: a changed message or tool result is
    a real change, to re-pin with ``--live HOST --pin``); an exhausted interaction (the agent
    sent a request more often than recorded) never suggests ``--allow-repeats``."""
    lines: list[str] = []
    for line in r.render():
        if "use --allow-repeats" in line:
            line = line.split(";")[0] + ("; the run sent this request more often than the recording did "
                                         "(a repeated request is never served twice in a regression run)")
        elif line.strip().startswith("to match, add:"):
            kept = [f for f in r.suggestions if _keep_suggestion(f)]
            if not kept:
                continue
            verified = " (verified: then it matches exactly)" if r.suggestion_verified and kept == r.suggestions else ""
            line = (f"  if that part is volatile, not a change: spoolproxy annotate {case_name} {' '.join(kept)}"
                    f"{verified} (or spoolproxy test {' '.join(kept)})")
        elif line.endswith(" again (--allow-repeats)"):
            line = line.removesuffix(" (--allow-repeats)")
        lines.append(line)
    return lines


def _keep_suggestion(flag: str) -> bool:
    m = _SUGGESTION_RE.match(flag)
    if m is None:
        return False
    if m.group(1) == "normalize":
        return True
    path = m.group(2).strip("'")
    top = re.match(r"^\$\.?\[?[\"']?([A-Za-z0-9_-]+)", path)
    return bool(top) and top.group(1) not in CONVERSATION_KEYS


def check_assertions(case: Case, transcript: Transcript) -> list[str]:
    """One line per failed optional assertion (final answer, tools called, LLM calls)."""
    a = case.assertions
    failed: list[str] = []
    answer = transcript.final_answer.text if transcript.final_answer else None
    for text in a.final_answer_contains:
        if answer is None:
            failed.append(f"final answer should contain {text!r}, but the run has no final answer")
        elif text not in answer:
            failed.append(f"final answer does not contain {text!r}: {_short(answer)!r}")
    if a.final_answer_matches is not None:
        if answer is None:
            failed.append(f"final answer should match /{a.final_answer_matches}/, but the run has no final answer")
        elif not re.search(a.final_answer_matches, answer):
            failed.append(f"final answer does not match /{a.final_answer_matches}/: {_short(answer)!r}")
    called = {tc.name for s in transcript.llm_steps() for tc in (s.llm.tool_calls if s.llm else [])}
    for tool in a.tools_called:
        if tool not in called:
            failed.append(f"tool {tool!r} was never called (called: {', '.join(sorted(called)) or 'none'})")
    n_llm = len(transcript.llm_steps())
    if a.max_llm_calls is not None and n_llm > a.max_llm_calls:
        failed.append(f"{n_llm} LLM calls, at most {a.max_llm_calls} allowed")
    n_tools = sum(len(s.llm.tool_calls) for s in transcript.llm_steps() if s.llm)
    if a.max_tool_calls is not None and n_tools > a.max_tool_calls:
        failed.append(f"{n_tools} tool calls, at most {a.max_tool_calls} allowed")
    return failed


def judge(case: Case, playback: PlaybackReport, report: Report, transcript: Transcript, *,
          exit_code: int | None, recorded_exit: int | None, recorded_interactions: int = 0) -> tuple[Outcome, str, list[str]]:
    """Decide the outcome of a run that happened: ``(outcome, explanation, details)``.

    ``recorded_interactions``: how many interactions the case's cassette holds; a run that
    sends nothing through the proxy while the recording has traffic never passes.
    """
    miss = unreplayable_reason(case, playback)
    if miss is not None:
        return "unreplayable", miss[0], miss[1]
    if not playback.requests and recorded_interactions:
        return ("fails_differently", f"the command made no request through the proxy (exit status {exit_code}; "
                f"the recording has {recorded_interactions} interactions)", [])
    errors = _error_level(report.findings)
    details = [f"{f.severity} {f.kind} (interactions {', '.join(map(str, f.interactions))}): {f.message}"
               for f in report.findings]
    for r in playback.requests:  # under `match: default` divergences are served, and listed here
        if r.outcome == "divergence":
            details += regression_lines(r, case.name)
    sig = set(case.signature_kinds)
    back = [f for f in errors if f.kind in sig] if case.assertions.signature_absent else []
    if back:
        kinds = ", ".join(dict.fromkeys(f.kind for f in back))
        return "still_fails", f"signature came back: {kinds}: {back[0].message}", details
    other = [f for f in errors if f.kind not in sig]  # signature kinds are never "different"
    failed = check_assertions(case, transcript)
    if other:
        f = other[0]
        more = f" (+{len(other) - 1} more)" if len(other) > 1 else ""
        return "fails_differently", f"new failure: {f.kind}: {f.message}{more}", details + failed
    if failed:
        more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
        return "fails_differently", f"assertion failed: {failed[0]}{more}", details + failed
    if exit_code not in (0, None) and recorded_exit in (0, None):
        return "fails_differently", f"the command exited {exit_code} (the recorded run exited {recorded_exit or 0})", details
    return "passes", _pass_line(case, report), details


def _pass_line(case: Case, report: Report) -> str:
    sig = ", ".join(case.signature_kinds)
    note = f"signature ({sig}) gone" if sig else "no error-level finding"
    return note + ("; all assertions hold" if _has_assertions(case) else "")


def _has_assertions(case: Case) -> bool:
    a = case.assertions
    return bool(a.final_answer_contains or a.final_answer_matches or a.tools_called or a.max_llm_calls is not None
                or a.max_tool_calls is not None)


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
