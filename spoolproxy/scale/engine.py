"""Engines: what maps the per-cassette function over batches of cassettes.

Both engines have the same shape: a context manager whose :meth:`map` calls
``fn(batch, **kwargs)`` for every batch and yields the results **in batch order** (so output
order never depends on the engine), and a :attr:`workers` count used to size batches.

* :class:`LocalEngine`: in this process, or ``jobs`` worker processes.
* :class:`DaskEngine`: a Dask cluster, either an existing one (``scheduler`` address, e.g.
  ``tcp://10.0.0.5:8786``; its workers must be able to import spoolproxy and reach the
  store) or a :class:`distributed.LocalCluster` of ``workers`` processes (one thread each)
  started for the run on 127.0.0.1.  Dask comes with ``pip install 'spoolproxy[scale]'``.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Iterator, Sequence

from ..errors import SpoolError, UsageError
from ..store.fs import SCALE_HINT

ENGINES = ("local", "dask")


def batched(items: Sequence, size: int) -> list[list]:
    """``items`` cut into lists of at most ``size`` (the last may be shorter)."""
    return [list(items[i:i + size]) for i in range(0, len(items), max(1, size))]


def batch_size_for(n_items: int, workers: int, requested: int | None = None) -> int:
    """``requested``, else about eight batches per worker, between 1 and 256 cassettes:
    enough tasks to balance uneven cassettes, few enough that scheduling stays cheap."""
    if requested:
        return requested
    return max(1, min(256, -(-n_items // max(1, workers * 8))))


class LocalEngine:
    """Runs batches in this process (``jobs`` <= 1) or in ``jobs`` worker processes."""

    name = "local"

    def __init__(self, jobs: int = 1) -> None:
        self.jobs = max(1, jobs)

    @property
    def workers(self) -> int:
        return self.jobs

    def __enter__(self) -> "LocalEngine":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(self, fn: Callable[..., Any], batches: list, **kwargs: Any) -> Iterator[Any]:
        """``fn(batch, **kwargs)`` for each batch, results in order."""
        if self.jobs <= 1 or len(batches) < 2:
            for b in batches:
                yield fn(b, **kwargs)
            return
        from concurrent.futures import ProcessPoolExecutor
        from functools import partial

        with ProcessPoolExecutor(max_workers=self.jobs) as pool:
            yield from pool.map(partial(fn, **kwargs), batches)


class DaskEngine:
    """Runs batches as Dask tasks (see the module docstring).  Entering raises SpoolError
    when dask/distributed are missing or the scheduler cannot be reached; a task's exception
    is re-raised by :meth:`map`."""

    name = "dask"

    def __init__(self, scheduler: str | None = None, workers: int | None = None, *, timeout_s: float = 10.0) -> None:
        if workers is not None and workers < 1:
            raise UsageError("--workers must be at least 1")
        if scheduler and workers:
            raise UsageError("--workers starts a local cluster; with --scheduler the cluster's own workers are used")
        self.scheduler = scheduler
        self.n_workers = workers or (os.cpu_count() or 1)
        self.timeout_s = timeout_s
        self.client = None
        self.cluster = None

    @property
    def workers(self) -> int:
        if self.client is None:
            return self.n_workers
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def __enter__(self) -> "DaskEngine":
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise SpoolError(f"--engine dask needs dask and distributed: {SCALE_HINT}") from None
        try:
            if self.scheduler:
                self.client = Client(self.scheduler, timeout=self.timeout_s)
            else:
                self.cluster = LocalCluster(n_workers=self.n_workers, threads_per_worker=1, processes=True,
                                            host="127.0.0.1", dashboard_address=None, silence_logs=logging.ERROR)
                self.client = Client(self.cluster, timeout=self.timeout_s)
        except (OSError, TimeoutError, ValueError) as exc:
            self.__exit__()
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if self.scheduler:
                raise SpoolError(f"cannot reach the Dask scheduler at {self.scheduler}: {why}; "
                                 "check --scheduler (tcp://HOST:PORT)") from None
            raise SpoolError(f"cannot start a local Dask cluster: {why}") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None

    def map(self, fn: Callable[..., Any], batches: list, **kwargs: Any) -> Iterator[Any]:
        """Submit every batch, then yield results in order, releasing each once read (the
        rest keep running meanwhile); the unread ones are cancelled if the caller stops."""
        if self.client is None:
            raise SpoolError("the Dask engine is not started")
        futures = self.client.map(fn, batches, pure=False, **kwargs)
        try:
            for fut in futures:
                yield fut.result()
                fut.release()
        finally:
            pending = [f for f in futures if not f.done()]
            if pending:
                self.client.cancel(pending)


def make_engine(name: str, *, jobs: int = 1, scheduler: str | None = None, workers: int | None = None):
    """The engine called ``name`` (``local`` or ``dask``).  Raises UsageError for options
    that do not belong to it."""
    if name == "dask":
        return DaskEngine(scheduler, workers)
    if scheduler or workers:
        raise UsageError("--scheduler and --workers need --engine dask")
    return LocalEngine(jobs)
