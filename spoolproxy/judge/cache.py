"""Where the judge keeps its results and its own traffic, beside the run.

For a run ``cassettes/refund.yaml``:

* ``cassettes/refund.diagnosis.json``: the results file, a JSON object
  ``{"spoolproxy_judge": 1, "cassette": "refund.yaml", "entries": [{"key", "kind", "created",
  "result"}]}``, newest last, at most :data:`MAX_ENTRIES`.  ``kind`` is ``diagnosis`` or
  ``fixes``; ``key`` is :func:`cache_key` of the cassette's sha256, the model (``heuristic``
  for ``--heuristic``), the prompt version and the kind, so an unchanged run is not asked
  again and a changed run, model or prompt is.  ``spoolproxy show`` and ``report`` show
  the newest diagnosis (and fixes) whose cassette hash matches the run as it is now;
* ``cassettes/.refund.judge.yaml`` and ``cassettes/.refund.judge-fix.yaml``: cassettes of
  the judge's own model traffic (the diagnosis call and the fix call), recorded through
  spoolproxy's recorder and replayed by ``--offline`` / ``--replay-judge``.  Their names
  start with a dot, so ``detect``, ``cluster`` and ``dashboard`` on the directory do not
  count the judge's calls as one of your runs;
* ``cassettes/refund.fix-1.yaml`` ...: the kept patches, ``{patches: [...], rationale,
  expected_effect}``, ready for ``spoolproxy fork --patch`` / ``verify --patch``.

Every write is atomic and goes through the :class:`~spoolproxy.cassettes.redact.Redactor`.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..cassettes.redact import Redactor
from ..cassettes.storage import atomic_write
from ..errors import SpoolError

FORMAT = 1
MAX_ENTRIES = 20
SUFFIX = ".diagnosis.json"


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cassette_sha256(path: str | Path) -> str:
    """sha256 (hex) of the cassette file's bytes."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        raise SpoolError(f"cannot read {path}: {exc.strerror or exc}") from None


def cache_key(sha: str, model: str, prompt_version: str, kind: str = "diagnosis") -> str:
    """The cache key of one judge call (a hex digest)."""
    return hashlib.sha256(json.dumps([sha, model, prompt_version, kind]).encode()).hexdigest()[:32]


def results_path(cassette: str | Path) -> Path:
    """``<stem>.diagnosis.json`` beside the cassette."""
    p = Path(cassette)
    return p.with_name(p.stem + SUFFIX)


def judge_cassette(cassette: str | Path, call: str = "diagnosis") -> Path:
    """The cassette of the judge's own traffic: ``.<stem>.judge.yaml`` (diagnosis) or
    ``.<stem>.judge-fix.yaml`` (fixes), beside the run."""
    p = Path(cassette)
    return p.with_name(f".{p.stem}.judge{'-fix' if call == 'fixes' else ''}.yaml")


def fix_file(cassette: str | Path, rank: int) -> Path:
    """``<stem>.fix-<rank>.yaml`` beside the run."""
    p = Path(cassette)
    return p.with_name(f"{p.stem}.fix-{rank}.yaml")


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"spoolproxy_judge": FORMAT, "entries": []}
    except (OSError, ValueError, UnicodeDecodeError):
        return {"spoolproxy_judge": FORMAT, "entries": [], "damaged": True}
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
        return {"spoolproxy_judge": FORMAT, "entries": [], "damaged": True}
    return doc


def lookup(cassette: str | Path, key: str) -> dict[str, Any] | None:
    """The cached result for ``key`` (None when absent or the file is unreadable)."""
    for e in reversed(_read(results_path(cassette))["entries"]):
        if isinstance(e, dict) and e.get("key") == key and isinstance(e.get("result"), dict):
            return e["result"]
    return None


def latest(cassette: str | Path, kind: str, sha: str | None = None) -> dict[str, Any] | None:
    """The newest result of ``kind`` (for the cassette hash ``sha`` when given), or None."""
    for e in reversed(_read(results_path(cassette))["entries"]):
        if not isinstance(e, dict) or e.get("kind") != kind or not isinstance(e.get("result"), dict):
            continue
        if sha is None or e["result"].get("cassette_sha256") == sha:
            return e["result"]
    return None


def store(cassette: str | Path, key: str, kind: str, result: dict[str, Any], redactor: Redactor | None = None) -> Path:
    """Add (or replace) the entry ``key`` in the results file, atomically and redacted.
    Raises SpoolError when the file cannot be written."""
    path = results_path(cassette)
    doc = _read(path)
    doc.pop("damaged", None)
    entries = [e for e in doc["entries"] if isinstance(e, dict) and e.get("key") != key]
    entries.append({"key": key, "kind": kind, "created": now(), "result": result})
    doc.update({"spoolproxy_judge": FORMAT, "cassette": Path(cassette).name, "entries": entries[-MAX_ENTRIES:]})
    text = (redactor or Redactor()).text(json.dumps(doc, ensure_ascii=False, indent=1))
    atomic_write(path, text + "\n")
    return path
