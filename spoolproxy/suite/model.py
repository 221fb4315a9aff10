"""Regression test cases: one small YAML file per failing run, read by a reviewer in a diff.

A case file (``spool/<name>.yaml``)::

    name: refund-twice
    status: confirmed              # pending | confirmed | rejected; only confirmed cases run
    command:                       # what produced the run (from the cassette's meta)
      argv: [python, agent.py, Please refund order ORD-1002]
      cwd: .                       # relative to the project root
    cassette: cassettes/refund.yaml
    failing_cassette: ...          # set by `spoolproxy test --pin`: the original failing run
    routing:
      replay: ["*"]                # hosts served from the cassette: everything not live
      live: []                     # host globs sent upstream (e.g. a live LLM to try a fix)
    match: exact                   # exact (default) | default (vcrpy-compatible, divergences allowed)
    match_options:                 # optional: what request matching ignores (as `spoolproxy playback`)
      normalize: ['\\d{4}-\\d{2}-\\d{2}T[\\d:.]+Z?']   # regexes replaced on both sides
      ignore_json_paths: [$.metadata.request_id]        # body fields ignored
      match_headers: []                                 # headers that must be equal
    signature:                     # error-level findings of the original run
      - {kind: duplicate_side_effect, severity: error, message: "..."}
    assertions:
      signature_absent: true       # the signature's kinds must not come back (default)
      final_answer_contains: [refund]
      final_answer_matches: "RF-\\d+"
      tools_called: [create_refund]
      max_llm_calls: 4
      max_tool_calls: 6
    checks:                        # optional: user checks for this case, as [[checks]] in spoolproxy.toml
      - {name: refund-within-total, command: "python checks/refund_total.py", severity: error}

Paths (``command.cwd``, ``cassette``) are relative to the project root: the nearest
directory above the suite holding ``spoolproxy.toml``, ``pyproject.toml`` or ``.git``
(as for ``spoolproxy record``), else the suite directory's parent.  Unknown keys are rejected with one
line naming the key and the keys allowed there.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..checks.spec import CheckSpec
from ..errors import SpoolError

Status = Literal["pending", "confirmed", "rejected"]
STATUSES: tuple[str, ...] = ("pending", "confirmed", "rejected")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Command(_Strict):
    """The command that produced the run: ``argv`` (argv[0] ``python``/``python3`` means the
    interpreter running spoolproxy) and ``cwd`` relative to the project root."""

    argv: list[str] = Field(min_length=1)
    cwd: str = "."


class Routing(_Strict):
    """Which hosts replay from the cassette and which go live (fnmatch globs on the host)."""

    replay: list[str] = Field(default_factory=lambda: ["*"])
    live: list[str] = Field(default_factory=list)


class SignatureFinding(_Strict):
    """One finding of the original run (``kind``, ``severity``, one-line ``message``)."""

    kind: str
    severity: str = "error"
    message: str = ""
    interactions: list[int] = Field(default_factory=list)


class Assertions(_Strict):
    """What a passing run must satisfy besides having no error-level finding.

    ``signature_absent``: no finding of a signature kind at error level or above.
    ``final_answer_contains``: each text appears in the final answer (case-sensitive).
    ``final_answer_matches``: a Python regex searched in the final answer.
    ``tools_called``: each named tool is called at least once.
    ``max_llm_calls``: at most this many LLM requests.
    ``max_tool_calls``: at most this many tool calls asked for by the model.
    """

    signature_absent: bool = True
    final_answer_contains: list[str] = Field(default_factory=list)
    final_answer_matches: str | None = None
    tools_called: list[str] = Field(default_factory=list)
    max_llm_calls: int | None = Field(default=None, ge=0)
    max_tool_calls: int | None = Field(default=None, ge=0)

    @field_validator("final_answer_contains", mode="before")
    @classmethod
    def _one_or_many(cls, v):
        return [v] if isinstance(v, str) else v

    @field_validator("final_answer_matches")
    @classmethod
    def _regex(cls, v):
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"not a valid regex ({exc})") from None
        return v


class CaseMatchOptions(_Strict):
    """Per-case matching settings, added to the project's ``[playback]`` table and to the
    ``spoolproxy test`` flags: ``normalize`` (regexes whose matches are replaced on both
    sides), ``ignore_json_paths`` (JSONPath subset, ``$.a.b``, ``$.a[*].c``), ``match_headers``
    (request header names that must be equal).  Invalid regexes or paths are rejected."""

    normalize: list[str] = Field(default_factory=list)
    ignore_json_paths: list[str] = Field(default_factory=list)
    match_headers: list[str] = Field(default_factory=list)

    @field_validator("normalize")
    @classmethod
    def _regexes(cls, v):
        for rx in v:
            try:
                re.compile(rx)
            except re.error as exc:
                raise ValueError(f"{rx!r} is not a valid regex ({exc})") from None
        return v

    @field_validator("ignore_json_paths")
    @classmethod
    def _paths(cls, v):
        from ..replayer.fingerprint import parse_json_path

        for path in v:
            try:
                parse_json_path(path)
            except SpoolError as exc:
                raise ValueError(str(exc)) from None
        return v

    def is_empty(self) -> bool:
        return not (self.normalize or self.ignore_json_paths or self.match_headers)


class Case(_Strict):
    """A regression test case (see the module docstring for the file layout)."""

    name: str
    status: Status = "pending"
    description: str | None = None
    command: Command
    cassette: str
    failing_cassette: str | None = None
    routing: Routing = Field(default_factory=Routing)
    match: Literal["exact", "default"] = "exact"
    match_options: CaseMatchOptions = Field(default_factory=CaseMatchOptions)
    signature: list[SignatureFinding] = Field(default_factory=list)
    assertions: Assertions = Field(default_factory=Assertions)
    checks: list[CheckSpec] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError("use letters, digits, '.', '_' and '-' only")
        return v

    @property
    def signature_kinds(self) -> list[str]:
        """The distinct signature kinds, in order of first appearance."""
        return list(dict.fromkeys(f.kind for f in self.signature))


def validation_message(path: str | Path, exc: ValidationError, model: type[BaseModel] = Case) -> str:
    """One line for the first problem of a pydantic ``ValidationError`` on a case file."""
    errors = exc.errors()
    # a typo'd key also makes the real key "missing": report the typo first
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        allowed = _allowed_keys(model, err["loc"][:-1])
        close = difflib.get_close_matches(str(err["loc"][-1]), allowed, n=1)
        hint = f" (allowed here: {', '.join(allowed)})" if allowed else ""
        mean = f"did you mean '{close[0]}'? " if close else ""
        return f"{path}: unknown key '{loc}'{hint}; {mean}fix the typo"
    if err["type"] == "missing":
        return f"{path}: missing key '{loc}'"
    msg = err["msg"].removeprefix("Value error, ")
    return f"{path}: {loc}: {msg}"


def _allowed_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None or isinstance(part, int):
            continue
        field = current.model_fields.get(str(part))
        ann = getattr(field, "annotation", None)
        current = _model_in(ann)
    return list(current.model_fields) if current else []


def _model_in(ann) -> type[BaseModel] | None:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in getattr(ann, "__args__", ()) or ():
        found = _model_in(arg)
        if found:
            return found
    return None


class CaseError(SpoolError):
    """A case file that cannot be read or is invalid (one line naming the file)."""
