"""The judge's loop over one run: diagnose (model or heuristic), propose fixes, and the
``off_track`` finding of ``detect --judge``.  Plain functions that never print; the CLI
(``spoolproxy diagnose`` / ``fix`` / ``detect --judge``) is a thin layer over them.

:class:`JudgeOptions` says who judges and how its traffic is handled (recorded beside the
run by default, replayed with ``offline`` / ``replay``).  Results are cached in
``<stem>.diagnosis.json`` (:mod:`.cache`) under the cassette's hash, the model and the
prompt version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..cassettes.model import Cassette
from ..cassettes.redact import Redactor
from ..cassettes.storage import atomic_write, load
from ..detectors.evidence import EvidenceBuilder
from ..detectors.models import Finding, Report, Transcript
from ..errors import UsageError
from . import cache
from .client import Answer, ChatClient, JudgeSettings
from .compact import DEFAULT_MAX_CHARS, Compacted, compact, cut
from .heuristic import heuristic_diagnosis
from .models import Diagnosis, Fixes
from .parse import AnswerError
from .prompt import FIX_PROMPT_VERSION, PROMPT_VERSION, diagnose_messages, diagnosis_schema, fix_messages, fix_schema
from .proposals import validate
from .quotes import settle
from .taxonomy import FAILURE_LABELS
from .traffic import judge_http

HEURISTIC = "heuristic"
#: the finding kind ``detect --judge`` adds (not one of the built-in detectors' KINDS)
OFF_TRACK = "off_track"
HEURISTIC_VERSION = "heuristic-1"


@dataclass
class JudgeOptions:
    """Who judges and how.  ``settings``: the model (None: the heuristic, no model);
    ``record``: record the judge's traffic beside the run (``.<stem>.judge.yaml``);
    ``offline``: replay that recording instead of calling the model (an error when it is
    missing); ``replay``: replay this judge cassette; ``refresh``: ignore cached results;
    ``max_chars``: size bound of the compacted run; ``redactor``: for every write."""

    settings: JudgeSettings | None = None
    record: bool = True
    offline: bool = False
    replay: Path | None = None
    refresh: bool = False
    max_chars: int = DEFAULT_MAX_CHARS
    redactor: Redactor = field(default_factory=Redactor)


@dataclass
class LoadedRun:
    """A run ready to judge: path, cassette, transcript, detector report, file hash."""

    path: Path
    cassette: Cassette
    transcript: Transcript
    report: Report
    sha256: str


def load_run(path: str | Path, detect_config=None) -> LoadedRun:
    """Load and analyze a run.  Raises CassetteError for an unreadable cassette."""
    from ..detectors import analyze, build_transcript

    p = Path(path)
    cas = load(p)
    t = build_transcript(cas, detect_config)
    return LoadedRun(p, cas, t, analyze(cas, detect_config, transcript=t), cache.cassette_sha256(p))


def compacted(run: LoadedRun, max_chars: int = DEFAULT_MAX_CHARS) -> Compacted:
    """The compacted transcript of a run (see :mod:`.compact`)."""
    return compact(run.cassette, run.transcript, run.report, max_chars)


def prompt_messages(run: LoadedRun, max_chars: int = DEFAULT_MAX_CHARS) -> list[dict[str, str]]:
    """What the diagnosis model reads (``--show-prompt``)."""
    return diagnose_messages(compacted(run, max_chars).text)


def _mode(run: LoadedRun, opts: JudgeOptions, call: str) -> tuple[str, Path | None]:
    if opts.replay is not None:
        return "replay", opts.replay
    own = cache.judge_cassette(run.path, call)
    if opts.offline:
        if not own.is_file():
            raise UsageError(f"--offline: no recorded judge for {run.path.name} ({own.name} is missing); run it once "
                             "without --offline to record it, or name a judge cassette with --replay-judge")
        return "replay", own
    return ("record", own) if opts.record else ("direct", None)


def _settings(run: LoadedRun, opts: JudgeOptions, call: str) -> JudgeSettings:
    """The judge settings for one call: when it is replayed, the model, endpoint and
    provider not given are those the judge cassette recorded."""
    s = opts.settings
    assert s is not None
    mode, jpath = _mode(run, opts, call)
    if mode != "replay" or jpath is None or (s.model and s.base_url):
        return s
    from dataclasses import replace

    from .traffic import recorded_judge

    info = recorded_judge(jpath)
    return replace(s, model=s.model or str(info.get("model") or ""), base_url=s.base_url or info.get("base_url"),
                   provider=s.provider or info.get("provider"))


def _ask(run: LoadedRun, opts: JudgeOptions, call: str, messages, schema, name: str, version: str):
    s = _settings(run, opts, call)
    mode, jpath = _mode(run, opts, call)
    info = {"of": run.path.name, "call": call, "model": s.model, "base_url": s.url(),
            "provider": s.resolved_provider(), "prompt_version": version}
    # the run was redacted when it was recorded; a cassette from elsewhere may not be
    messages = [{**m, "content": opts.redactor.text(m["content"])} for m in messages]
    with judge_http(mode, jpath, info=info, redactor=opts.redactor) as http:  # type: ignore[arg-type]
        api_key = None if mode == "replay" else s.api_key()
        try:
            answer = ChatClient(s, http, api_key).ask(messages, schema, name)
        except AnswerError as exc:  # the call worked, the answer is unusable: kept (recorded), judged unknown
            answer = Answer(data={}, text=str(exc), mode="unparseable")
    return answer, (str(jpath.name) if jpath is not None and mode != "direct" else None)


def diagnose(path: str | Path, opts: JudgeOptions, detect_config=None, run: LoadedRun | None = None) -> Diagnosis:
    """The diagnosis of the run at ``path``: from the cache when this cassette, model and
    prompt version were judged before (unless ``opts.refresh``), else from the model,
    checked, cached and returned; without a model (``opts.settings`` None) the heuristic's,
    computed each time and not stored.  Raises SpoolError (JudgeCallError, a
    missing judge cassette, an unreadable run)."""
    run = run or load_run(path, detect_config)
    if opts.settings is None:  # cheap and derived: computed, never stored
        d = heuristic_diagnosis(run.report, run.transcript)
        d.prompt_version, d.cassette_sha256, d.created = HEURISTIC_VERSION, run.sha256, cache.now()
        return d
    settings = _settings(run, opts, "diagnosis")
    if not settings.model:
        raise UsageError("name the judge model: --model M (the judge cassette does not say which)")
    model = settings.model
    key = cache.cache_key(run.sha256, model, PROMPT_VERSION)
    if not opts.refresh:
        hit = cache.lookup(run.path, key)
        if hit is not None:
            return Diagnosis.model_validate({**hit, "cached": True})
    comp = compacted(run, opts.max_chars)
    answer, jname = _ask(run, opts, "diagnosis", diagnose_messages(comp.text), diagnosis_schema(),
                         "diagnosis", PROMPT_VERSION)
    if answer.mode == "unparseable":
        d = Diagnosis(label="unknown", confidence=0.0, notes=[answer.text])
    else:
        d = settle(answer.data, EvidenceBuilder(run.cassette, run.transcript), run.report, comp.fields)
    d.source, d.model, d.base_url, d.judge_cassette = "model", model, settings.url(), jname
    if answer.mode not in ("json_schema", "tool", "unparseable"):
        d.notes.append(f"asked with response_format {answer.mode} (the endpoint refused json_schema)")
    d.prompt_version, d.cassette_sha256, d.created = PROMPT_VERSION, run.sha256, cache.now()
    cache.store(run.path, key, "diagnosis", d.model_dump(mode="json"), opts.redactor)
    return d


def fix_context(run: LoadedRun) -> str:
    """The run's system prompt, declared tools and tool endpoints, for the fix prompt."""
    system, tools = "", {}
    for s in run.transcript.steps:
        if s.llm is None:
            continue
        for m in s.llm.messages:
            if m.role in ("system", "developer") and m.text.strip() and not system:
                system = m.text
        for tl in s.llm.tools:
            tools.setdefault(tl.name, tl)
    lines = ["SYSTEM PROMPT of the agent (edit it with a system_prompt patch): "
             + (cut(system, 1500) if system else "(none)")]
    lines.append("TOOLS declared (tool_description / tool_schema patches must name one of these): "
                 + (", ".join(tools) if tools else "(none)"))
    hosts = sorted({f"{s.method} {s.host}{s.url.split(s.host, 1)[-1].split('?')[0]}" for s in run.transcript.steps
                    if s.llm is None})
    if hosts:
        lines.append("TOOL REQUESTS made (tool_result patches must match one): " + ", ".join(hosts[:12]))
    return "\n".join(lines)


def fixable(run: LoadedRun, opts: JudgeOptions, detect_config=None) -> Diagnosis:
    """The diagnosis a fix is based on: the model's (diagnosing first when needed); when
    it found no failure it can stand by, the heuristic's.  Raises UsageError when neither
    names a failure (nothing to fix)."""
    d = diagnose(run.path, opts, detect_config, run=run)
    if d.is_failure:
        return d
    h = heuristic_diagnosis(run.report, run.transcript)
    if h.is_failure:
        h.notes.append(f"the model's diagnosis was {d.label}; the fix is based on the detectors' root finding")
        h.cassette_sha256 = run.sha256
        return h
    raise UsageError(f"{run.path.name}: no failure diagnosed ({d.label}"
                     + (f", claimed {d.claimed_label}" if d.claimed_label else "") + "); nothing to fix")


def propose(path: str | Path, opts: JudgeOptions, detect_config=None, run: LoadedRun | None = None,
            diagnosis: Diagnosis | None = None) -> Fixes:
    """Fix proposals for the run at ``path``: a second model call turns the diagnosis into
    1-3 patches, each checked (:mod:`.proposals`); kept ones are written as
    ``<stem>.fix-N.yaml``.  Cached like a diagnosis.  Raises SpoolError."""
    if opts.settings is None:
        raise UsageError("fix needs a model: --model M [--base-url URL] (the heuristic proposes no patches)")
    run = run or load_run(path, detect_config)
    d = diagnosis or fixable(run, opts, detect_config)
    settings = _settings(run, opts, "fixes")
    basis = json.dumps([d.source, d.label, d.interaction, d.root_cause])  # the fix answers this diagnosis
    key = cache.cache_key(run.sha256, settings.model, FIX_PROMPT_VERSION + "/" + basis, "fixes")
    if not opts.refresh:
        hit = cache.lookup(run.path, key)
        if hit is not None:
            return Fixes.model_validate({**hit, "cached": True})
    comp = compacted(run, int(opts.max_chars * 0.75))
    brief = {"label": d.label, "failing_interaction": d.interaction, "root_cause": d.root_cause,
             "evidence": [e.model_dump() for e in d.evidence]}
    answer, jname = _ask(run, opts, "fixes", fix_messages(brief, fix_context(run), comp.text), fix_schema(),
                         "fix_proposals", FIX_PROMPT_VERSION)
    fixes = Fixes(proposals=validate(answer.data, run.cassette, run.transcript) if answer.data else [],
                  diagnosis_label=d.label,
                  diagnosis_interaction=d.interaction, model=settings.model, base_url=settings.url(),
                  prompt_version=FIX_PROMPT_VERSION, cassette_sha256=run.sha256, judge_cassette=jname,
                  created=cache.now())
    if answer.mode == "unparseable":
        fixes.notes.append(answer.text)
    elif not fixes.kept:
        fixes.notes.append("no proposal passed the checks; see each one's problems")
    write_fix_files(run.path, fixes, opts.redactor)
    cache.store(run.path, key, "fixes", fixes.model_dump(mode="json"), opts.redactor)
    return fixes


MARK = "proposed_by"


def write_fix_files(path: Path, fixes: Fixes, redactor: Redactor) -> list[Path]:
    """Write each kept proposal as ``<stem>.fix-<rank>.yaml`` (``{patches: [...],
    rationale, expected_effect, test_only, proposed_by}``); earlier files of this kind
    beyond the new ranks are removed.  Returns the files written."""
    out: list[Path] = []
    for p in fixes.kept:
        f = cache.fix_file(path, p.rank or 1)
        doc: dict[str, Any] = {"patches": [p.patch], "rationale": p.rationale, "expected_effect": p.expected_effect,
                               "test_only": p.test_only, MARK: f"spoolproxy judge {fixes.model} ({fixes.prompt_version})"}
        atomic_write(f, redactor.text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)))
        p.file = f.name
        out.append(f)
    for stale in path.parent.glob(f"{path.stem}.fix-*.yaml"):
        if stale in out:
            continue
        try:
            doc = yaml.safe_load(stale.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict) and str(doc.get(MARK, "")).startswith("spoolproxy judge"):
            stale.unlink(missing_ok=True)
    return out


def off_track(d: Diagnosis) -> Finding | None:
    """The ``off_track`` finding of ``detect --judge`` for a diagnosis: ``error`` when it
    names a failure backed by verified evidence, ``warn`` when the model claimed a failure
    whose evidence did not check out (so it became ``unknown``), none otherwise."""
    who = f"the judge ({d.model or d.source})"
    if d.is_failure and d.evidence:
        idx = sorted({d.interaction, *(e.interaction for e in d.evidence)} - {None})  # type: ignore[arg-type]
        at = f" at interaction {d.interaction}" if d.interaction is not None else ""
        return Finding(kind=OFF_TRACK, severity="error", interactions=idx,
                       message=f"{who} says {d.label}{at}: {d.root_cause or '(no root cause given)'}",
                       evidence=list(d.evidence))
    if d.label == "unknown" and d.claimed_label in FAILURE_LABELS:
        why = d.notes[-1] if d.notes else "its evidence did not check out"
        return Finding(kind=OFF_TRACK, severity="warn", interactions=[],
                       message=f"{who} claims {d.claimed_label}, unverified: {why}")
    return None


def stored(path: str | Path) -> tuple[Diagnosis | None, Fixes | None]:
    """The newest stored model diagnosis and fixes of the run at ``path`` as it is now
    (same cassette hash), for ``show`` and ``report``; (None, None) when there are none."""
    p = Path(path)
    if not cache.results_path(p).is_file():
        return None, None
    sha = cache.cassette_sha256(p)
    d, f = cache.latest(p, "diagnosis", sha), cache.latest(p, "fixes", sha)
    try:
        return (Diagnosis.model_validate(d) if d else None, Fixes.model_validate(f) if f else None)
    except ValueError:
        return None, None
