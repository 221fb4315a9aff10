"""Others' recordings in, ours out: import foreign formats as cassettes, export OTLP.

Readers, one module per format, each ``read(path, data) -> list[ImportedRun]``:

* :mod:`.har`: HAR 1.2 (browser devtools, Charles, Proxyman, mitmproxy's ``hardump``);
* :mod:`.mitmflow`: mitmproxy flow files, read with mitmproxy's own ``FlowReader``;
* :mod:`.messages`: OpenAI-style message logs (JSON Lines of ``messages`` with
  ``tool_calls``), synthesised into Chat Completions and tool interactions (:mod:`.synth`);
* :mod:`.otel`: OpenTelemetry GenAI spans in OTLP JSON (:mod:`.otlp` reads the encoding).

:func:`sniff` picks the format from a file's content; :func:`import_file` reads, marks the
provenance (``meta.extra["imported_from"]``: ``format``, ``file`` and what the format
adds) and redacts.  Writing is the CLI's business (``spoolproxy import``).
:mod:`.otel_export` goes the other way: a cassette as OTLP JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..cassettes.redact import Redactor
from ..errors import CassetteError
from . import har, messages, mitmflow, otel
from .run import ImportedRun

#: format names accepted by ``--format``, in sniffing order
FORMATS = ("har", "mitmproxy", "messages", "otel")
_READERS = {"har": har.read, "mitmproxy": mitmflow.read, "messages": messages.read, "otel": otel.read}

__all__ = ["FORMATS", "ImportedRun", "import_file", "sniff"]


def sniff(path: Path, data: bytes) -> str:
    """The format of a file from its first bytes and, for JSON, its top-level shape.

    Raises CassetteError (one line, naming the file) for anything that is none of them.
    """
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head:
        raise CassetteError(path, "is empty; nothing to import")
    if mitmflow.looks_like(head):
        return "mitmproxy"
    text = har.unpack(data) if head[:1] == b"\x78" else data
    doc = _first_json(text)
    if har.looks_like(doc):
        return "har"
    if otel.looks_like(doc):
        return "otel"
    if messages.looks_like(doc):
        return "messages"
    raise CassetteError(path, "is not a HAR, a mitmproxy flow file, a message log (JSON Lines with 'messages') "
                        "or OTLP JSON; give --format to read it as one")


def _first_json(data: bytes) -> Any:
    """The whole file as JSON, else its first JSON Lines line, else None."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in text.splitlines():
        if line.strip():
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def import_file(path: str | Path, fmt: str | None = None, *, redactor: Redactor | None = None,
                split: str = "auto") -> list[ImportedRun]:
    """Read ``path`` as ``fmt`` (sniffed when None) into redacted runs.

    ``split`` applies to OTLP files (see :mod:`.otel`).  Raises CassetteError for a
    missing, unreadable or unrecognised file, or one its format's reader rejects.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise CassetteError(p, "no such file") from None
    except IsADirectoryError:
        raise CassetteError(p, "is a directory; pass the recording files") from None
    except OSError as exc:
        raise CassetteError(p, f"cannot read: {exc.strerror}") from None
    fmt = fmt or sniff(p, data)
    if fmt not in _READERS:
        raise CassetteError(p, f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    runs = otel.read(p, data, split=split) if fmt == "otel" else _READERS[fmt](p, data)
    red = redactor or Redactor()
    for run in runs:
        cas = red.cassette(run.cassette)
        cas = cas.model_copy(update={"interactions": [
            it.model_copy(update={"extra": _redact_values(it.extra, red)}) for it in cas.interactions]})
        cas.meta = cas.meta.model_copy(update={"extra": _redact_values(cas.meta.extra, red)})
        if cas.meta.recorded_at is None:
            from datetime import datetime, timezone

            cas.meta.recorded_at = datetime.fromtimestamp(p.stat().st_mtime, timezone.utc).replace(microsecond=0)
        run.cassette = cas
    return runs


def _redact_values(v: Any, red: Redactor) -> Any:
    """``v`` with every string redacted (extension keys: WebSocket messages, provenance)."""
    if isinstance(v, str):
        return red.text(v)
    if isinstance(v, dict):
        return {k: _redact_values(x, red) for k, x in v.items()}
    if isinstance(v, list):
        return [_redact_values(x, red) for x in v]
    return v
