"""Findings as Parquet: one row per run (cassette), its findings nested (pyarrow).

:func:`schema` is the table (the row of :mod:`.rows`): run columns (``cassette``,
``verdict``, ``error``, ``interactions``, ``llm_calls``, ``tokens``, ``cost_usd``, ``when``,
``tags`` as a map, ``commit``, ``providers``), the normalised root cause (``failure_*``),
``findings`` as a list of structs ``{kind, severity, interactions, message, evidence:
[{interaction, path, quote}]}``, the run's ``cost`` (a struct) and the user ``checks`` that
applied (a list of structs).  The file's metadata key ``spoolproxy`` says
``{"table": "runs", "version": 1}``.  Query it with anything that reads Parquet, e.g. DuckDB::

    SELECT f.kind, count(*) FROM (SELECT unnest(findings) AS f FROM 'findings.parquet') GROUP BY 1;

:class:`ParquetSink` writes rows as they come (row groups of ``row_group`` rows: bounded
memory for any number of runs), to a local file atomically or to an fsspec URL;
:func:`read_rows` reads them back.  pyarrow comes with ``pip install 'spoolproxy[scale]'``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

from ..errors import SpoolError
from ..store.fs import SCALE_HINT, is_url

#: the file-level metadata that marks a spoolproxy findings table
TABLE_META = {"table": "runs", "version": 1}


def _pa():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise SpoolError(f"Parquet needs pyarrow: {SCALE_HINT}") from None
    return pa, pq


def schema():
    """The pyarrow schema of a findings table (see the module docstring)."""
    pa, _ = _pa()
    evidence = pa.struct([("interaction", pa.int32()), ("path", pa.string()), ("quote", pa.string())])
    finding = pa.struct([("kind", pa.string()), ("severity", pa.string()), ("interactions", pa.list_(pa.int32())),
                         ("message", pa.string()), ("evidence", pa.list_(evidence))])
    text = pa.string()
    cost = pa.struct([("usd", pa.float64()), ("calls", pa.int32()), ("unpriced_models", pa.list_(text)),
                      ("sources", pa.list_(text)), ("prices_as_of", text)])
    check = pa.struct([("name", text), ("status", text), ("severity", text), ("message", text),
                       ("interactions", pa.list_(pa.int32())), ("duration_ms", pa.float64()),
                       ("exit_code", pa.int32())])
    return pa.schema(
        [("cassette", text), ("verdict", text), ("error", text), ("interactions", pa.int32()),
         ("llm_calls", pa.int32()), ("tokens", pa.int64()), ("cost_usd", pa.float64()),
         ("when", pa.timestamp("us", tz="UTC")), ("tags", pa.map_(text, text)), ("commit", text),
         ("providers", pa.list_(text)), ("failure_kind", text), ("failure_cause", text), ("failure_document", text),
         ("failure_message", text), ("failure_provider", text), ("failure_kinds", pa.list_(text)),
         ("findings", pa.list_(finding)), ("cost", cost), ("checks", pa.list_(check))],
        metadata={"spoolproxy": json.dumps(TABLE_META)},
    )


class ParquetSink:
    """Writes rows to ``out`` (a path, or an fsspec URL with ``options``) in row groups of
    ``row_group`` rows.  A local file appears whole at :meth:`close` (temporary file, then
    rename); nothing is left behind on :meth:`abort`.  Raises SpoolError when the output
    cannot be written or pyarrow is missing."""

    def __init__(self, out: str | os.PathLike, *, row_group: int = 10_000, options: dict | None = None) -> None:
        self.pa, self.pq = _pa()
        self.out = str(out)
        self.row_group = row_group
        self.rows = 0
        self._buf: list[dict] = []
        self._schema = schema()
        self._tmp: str | None = None
        self._fh = None
        try:
            if is_url(self.out):
                from ..store.fs import require_fsspec

                self._fh = require_fsspec().open(self.out, "wb", **(options or {})).open()
                target = self._fh
            else:
                p = Path(self.out)
                p.parent.mkdir(parents=True, exist_ok=True)
                fd, self._tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
                os.close(fd)
                target = self._tmp
            self._writer = self.pq.ParquetWriter(target, self._schema)
        except OSError as exc:
            self._cleanup()
            raise SpoolError(f"cannot write {self.out}: {exc.strerror or exc}; choose another --parquet path") from None

    def add(self, row: dict[str, Any]) -> None:
        """Queue one row (written with its row group)."""
        self._buf.append(row)
        self.rows += 1
        if len(self._buf) >= self.row_group:
            self._flush()

    def _flush(self) -> None:
        if self._buf:
            self._writer.write_table(self.pa.Table.from_pylist(self._buf, schema=self._schema))
            self._buf = []

    def close(self) -> Path | str:
        """Write what is queued and finish the file; returns its path or URL."""
        self._flush()
        self._writer.close()
        if self._fh is not None:
            self._fh.close()
        if self._tmp is not None:
            os.chmod(self._tmp, 0o644)
            os.replace(self._tmp, self.out)
            self._tmp = None
        return self.out

    def abort(self) -> None:
        """Stop without leaving a partial file (a local one; an object store keeps none
        until the upload completes)."""
        try:
            self._writer.close()
        except Exception:  # noqa: BLE001 - nothing to keep
            pass
        self._cleanup()

    def _cleanup(self) -> None:
        if self._tmp is not None:
            try:
                os.unlink(self._tmp)
            except FileNotFoundError:
                pass
            self._tmp = None

    def __enter__(self) -> "ParquetSink":
        return self

    def __exit__(self, exc_type, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_rows(rows: Iterable[dict[str, Any]], out: str | os.PathLike, **kw: Any) -> int:
    """Write ``rows`` to ``out`` (see :class:`ParquetSink`); returns how many."""
    with ParquetSink(out, **kw) as sink:
        for row in rows:
            sink.add(row)
    return sink.rows


def is_parquet(path: str | os.PathLike) -> bool:
    """True for a ``*.parquet`` path or URL (read as a findings table by cluster and dashboard)."""
    return str(path).lower().endswith(".parquet")


def read_rows(path: str | os.PathLike, options: dict | None = None) -> list[dict[str, Any]]:
    """The rows of a findings table written by :class:`ParquetSink` (``tags`` back as a
    dict).  Raises SpoolError when it is missing, unreadable or not a spoolproxy table."""
    pa, pq = _pa()
    name = str(path)
    try:
        if is_url(name):
            from ..store.fs import require_fsspec

            with require_fsspec().open(name, "rb", **(options or {})) as fh:
                table = pq.read_table(fh)
        else:
            table = pq.read_table(name)
    except FileNotFoundError:
        raise SpoolError(f"{name}: no such findings file; write one with 'spoolproxy detect ... --parquet {name}'") \
            from None
    except (OSError, pa.ArrowException) as exc:
        raise SpoolError(f"{name}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None
    meta = (table.schema.metadata or {}).get(b"spoolproxy")
    if meta is None or json.loads(meta).get("table") != TABLE_META["table"]:
        raise SpoolError(f"{name}: not a spoolproxy findings table; write one with 'spoolproxy detect ... --parquet'")
    rows = table.to_pylist()
    for row in rows:
        row["tags"] = dict(row.get("tags") or [])
    return rows
