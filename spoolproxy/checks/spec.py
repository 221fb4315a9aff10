"""How a user check is declared: ``[[checks]]`` in spoolproxy.toml, or ``checks:`` in a case.

```toml
[[checks]]
name = "refund-within-total"
command = "python checks/refund_within_total.py"   # run with sh -c in the config's directory
severity = "error"          # info | warn | error | critical (default error)
timeout = 30                # seconds; a check still running then is killed and fails
tags = { agent = "refund-bot" }        # applies only to runs tagged so (globs allowed)
hosts = ["api.openai.com", "*.shop.example"]   # applies only to runs that reached one of them

[[checks]]
name = "no-pii"
function = "checks.pii:no_email_in_answer"     # Python: module:function, gets the Transcript
```

A check reads the run document (``spoolproxy show --json``, :mod:`spoolproxy.detectors.document`)
on stdin and exits 0 to pass or non-zero to fail, printing its reason.  See docs/checks.md.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Severity = Literal["info", "warn", "error", "critical"]
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
FUNCTION_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class CheckSpec(BaseModel):
    """One check: ``name``; exactly one of ``command`` (a shell command line, or an argv
    list run without a shell) and ``function`` (``module:function``); ``severity`` of the
    ``check_failed`` finding it produces; ``timeout`` in seconds; ``tags`` (every one must
    match the run's ``meta.extra['tags']``, values are fnmatch globs) and ``hosts`` (fnmatch
    globs, one must match a host the run reached) restrict the runs it applies to; ``cwd``
    where it runs, relative to ``base_dir`` (the config file's directory, or the project
    root for a case's checks; set by the loader, never written back)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    command: str | list[str] | None = None
    function: str | None = None
    severity: Severity = "error"
    timeout: float = Field(30.0, gt=0, le=3600)
    tags: dict[str, str] = Field(default_factory=dict)
    hosts: list[str] = Field(default_factory=list)
    cwd: str | None = None
    description: str | None = None
    base_dir: str | None = Field(None, exclude=True)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(f"check name {v!r}: use letters, digits, '.', '_' and '-' only")
        return v

    @field_validator("function")
    @classmethod
    def _function(cls, v: str | None) -> str | None:
        if v is not None and not FUNCTION_RE.match(v):
            raise ValueError(f"function {v!r}: write it as module:function (e.g. checks.refunds:within_total)")
        return v

    @model_validator(mode="after")
    def _one_way(self) -> "CheckSpec":
        if (self.command is None) == (self.function is None):
            raise ValueError(f"check {self.name!r}: give exactly one of command = '...' or function = 'module:function'")
        if isinstance(self.command, list) and not self.command:
            raise ValueError(f"check {self.name!r}: command is an empty list")
        if isinstance(self.command, str) and not self.command.strip():
            raise ValueError(f"check {self.name!r}: command is empty")
        return self

    def applies(self, tags: dict[str, str], hosts: set[str]) -> str | None:
        """None when the check applies to a run with these tags and hosts, else why not
        (one line, e.g. ``tag agent is not refund-bot``)."""
        for key, want in self.tags.items():
            have = tags.get(key)
            if have is None:
                return f"the run has no tag {key}"
            if not fnmatchcase(str(have), want):
                return f"tag {key}={have} does not match {want}"
        if self.hosts and not any(fnmatchcase(h.lower(), g.lower()) for h in hosts for g in self.hosts):
            return f"the run reached none of {', '.join(self.hosts)}"
        return None
