"""From the paths a user gives to rows: list the cassettes, batch them, let an engine map
:func:`~.rows.batch_rows` over the batches, and read findings tables given directly.

A path is a cassette file, a directory (its cassettes, as ``detect`` finds them), a store
URL (``s3://bucket/prefix``: every cassette key under it, see
:meth:`~spoolproxy.store.Store.keys`), one cassette's URL, or a ``*.parquet`` findings
table (its rows are taken as they are, nothing re-analysed).
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Iterator

from ..store.fs import CASSETTE_SUFFIXES, Store, is_url
from .engine import batch_size_for, batched
from .parquet import is_parquet, read_rows
from .rows import batch_rows


def cassette_items(paths: Iterable[str], options: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """``(name, url_or_absolute_path)`` of every cassette under ``paths`` (findings tables
    excluded), in path order then key order.  Names are what ``detect`` prints: the path as
    given for local files, the URL for stored ones.  Raises SpoolError/CassetteError for a
    path or store that does not exist or cannot be listed."""
    from ..cassettes.storage import iter_paths

    items: list[tuple[str, str]] = []
    for raw in paths:
        raw = str(raw)
        if is_parquet(raw):
            continue
        if is_url(raw):
            if raw.endswith(CASSETTE_SUFFIXES):
                items.append((raw, raw))
                continue
            store = Store(raw, options)
            items += [(store.url_of(k), store.url_of(k)) for k in store.keys()]
            continue
        items += [(str(f), os.path.abspath(f)) for f in iter_paths([raw])]
    return items


def analyse(items: list[tuple[str, str]], engine, *, config=None, options: dict[str, Any] | None = None,
            batch_size: int | None = None) -> Iterator[dict[str, Any]]:
    """Rows of ``items`` (see :mod:`.rows`), in item order, computed by ``engine`` (entered
    already) in batches of ``batch_size`` (default: :func:`~.engine.batch_size_for`)."""
    if not items:
        return
    size = batch_size_for(len(items), engine.workers, batch_size)
    for rows in engine.map(batch_rows, batched(items, size), config=config, options=options):
        yield from rows


def rows_for(paths: Iterable[str], engine, *, config=None, options: dict[str, Any] | None = None,
             batch_size: int | None = None) -> Iterator[dict[str, Any]]:
    """Rows of everything under ``paths``: findings tables first as they are, then the
    cassettes analysed by ``engine`` (a context manager; started only when there are
    cassettes).  Raises SpoolError as :func:`cassette_items` and the engine do."""
    paths = [str(p) for p in paths]
    for p in paths:
        if is_parquet(p):
            yield from read_rows(p, options)
    items = cassette_items(paths, options)
    if not items:
        return
    with engine:
        yield from analyse(items, engine, config=config, options=options, batch_size=batch_size)
