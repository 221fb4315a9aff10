"""The run document: one JSON object describing a recorded run, as ``spoolproxy show --json``
prints it and as user checks read it on stdin.

```json
{"schema_version": 1, "cassette": "cassettes/run.yaml",
 "meta": {"recorder": ..., "command": [...], "exit_code": 0, "extra": {"tags": {"agent": "refund"}}},
 "transcript": {"steps": [...], "tool_results": [...], "final_answer": {...}, "cost_usd": ...},
 "report": {"verdict": "pass", "findings": [...], "cost": {...}, "checks": [...]}}
```

Its JSON Schema ships with the package as ``transcript.schema.json`` beside this module
(:data:`SCHEMA_PATH`), generated from the pydantic models (:func:`json_schema`; regenerate
with ``python -m spoolproxy.detectors.document``).  ``schema_version`` changes only when a
field is removed, renamed or changes meaning; new fields may appear within a version, so
readers should ignore keys they do not know.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..cassettes.model import Cassette, CassetteMeta
from .models import Report, Transcript

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("transcript.schema.json")
SCHEMA_ID = f"urn:spoolproxy:run-document:{SCHEMA_VERSION}"


class RunDocument(BaseModel):
    """A run as JSON: the cassette path, its run-level ``meta`` (command, exit status,
    ``extra`` with e.g. ``tags`` and ``circuit_breaker``), the :class:`Transcript` and the
    detectors' :class:`Report`."""

    schema_version: Literal[1] = SCHEMA_VERSION
    cassette: str | None = None
    meta: CassetteMeta = Field(default_factory=CassetteMeta)
    transcript: Transcript
    report: Report


def run_document(cassette: Cassette, transcript: Transcript, report: Report) -> dict[str, Any]:
    """The run document of ``cassette`` as a JSON-ready dict (see the module docstring)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "cassette": str(cassette.path) if cassette.path else transcript.cassette,
        "meta": cassette.meta.model_dump(mode="json"),
        "transcript": transcript.model_dump(mode="json", by_alias=True),
        "report": report.model_dump(mode="json"),
    }


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the run document, generated from the models."""
    schema = RunDocument.model_json_schema(by_alias=True, mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": f"spoolproxy run document, version {SCHEMA_VERSION}",
            "description": "What `spoolproxy show --json` prints and what a user check reads on stdin.", **schema}


def shipped_schema() -> dict[str, Any]:
    """The schema file shipped with the package (:data:`SCHEMA_PATH`)."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


if __name__ == "__main__":  # python -m spoolproxy.detectors.document: regenerate the shipped file
    SCHEMA_PATH.write_text(json.dumps(json_schema(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {SCHEMA_PATH}")
