"""Options shared by ``detect`` and ``cluster`` for analysis beyond one machine:
``--engine``, ``--scheduler``, ``--workers``, ``--batch-size``, ``--parquet``,
``--storage-option``; and the rows and runs they produce (:mod:`spoolproxy.scale`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import click


@dataclass
class ScaleSettings:
    """What the options say: ``engine`` (local | dask), Dask ``scheduler`` address,
    local-cluster ``workers``, ``batch_size`` (cassettes per task), ``parquet`` output and
    fsspec ``storage_options``."""

    engine: str = "local"
    scheduler: str | None = None
    workers: int | None = None
    batch_size: int | None = None
    parquet: str | None = None
    storage_options: dict[str, Any] = field(default_factory=dict)

    def wanted(self, paths: Iterable[str]) -> bool:
        """True when the scale path is needed: a Dask engine, a Parquet output, or a store
        URL or findings table among ``paths``."""
        from ..scale.parquet import is_parquet
        from ..store.fs import is_url

        return self.engine != "local" or bool(self.parquet) or any(is_url(p) or is_parquet(p) for p in paths)

    def rows(self, paths: Iterable[str], config=None, *, jobs: int = 1) -> Iterator[dict]:
        """Rows of everything under ``paths`` (see :func:`spoolproxy.scale.pipeline.rows_for`),
        each also written to ``--parquet`` unless it is a skipped non-cassette; the file is
        finished when the rows are exhausted (and removed if they stop with an error)."""
        from ..scale.engine import make_engine
        from ..scale.parquet import ParquetSink
        from ..scale.pipeline import rows_for
        from ..scale.rows import SKIP

        engine = make_engine(self.engine, jobs=jobs, scheduler=self.scheduler, workers=self.workers)
        sink = ParquetSink(self.parquet, options=self.storage_options) if self.parquet else None
        try:
            for row in rows_for(paths, engine, config=config, options=self.storage_options,
                                batch_size=self.batch_size):
                if sink is not None and row["verdict"] != SKIP:
                    sink.add(row)
                yield row
        except BaseException:
            if sink is not None:
                sink.abort()
            raise
        if sink is not None:
            sink.close()
            click.echo(f"spoolproxy: wrote {self.parquet} ({sink.rows} run{'s' if sink.rows != 1 else ''})", err=True)

    def runs(self, paths: Iterable[str], config=None, *, tags: dict[str, str] | None = None,
             on_skip: Callable[[str, str], None] | None = None) -> list:
        """The triage runs of everything under ``paths`` whose tags match ``tags``; rows that
        are not runs (corrupt, not a cassette) go to ``on_skip(name, why)``."""
        from ..scale.rows import ERROR, SKIP, row_run
        from ..triage.tags import matches

        out = []
        for row in self.rows(paths, config):
            if row["verdict"] in (ERROR, SKIP):
                if on_skip is not None:  # the error names the file already: give just why
                    why = str(row["error"] or row["verdict"])
                    on_skip(row["cassette"], why.removeprefix(f"{row['cassette']}: "))
                continue
            run = row_run(row)
            if matches(run.tags, tags or {}):
                out.append(run)
        return out


def scale_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the options; the command receives them as one ``scale: ScaleSettings`` keyword."""

    @functools.wraps(fn)
    def wrapper(**kw: Any) -> Any:
        from ..store.fs import parse_storage_options

        settings = ScaleSettings(engine=kw.pop("engine"), scheduler=kw.pop("scheduler"), workers=kw.pop("workers"),
                                 batch_size=kw.pop("batch_size"), parquet=kw.pop("parquet"),
                                 storage_options=parse_storage_options(kw.pop("storage_options")))
        if settings.engine != "dask" and (settings.scheduler or settings.workers):
            raise click.UsageError("--scheduler and --workers need --engine dask")
        if settings.scheduler and settings.workers:
            raise click.UsageError("--workers sizes a local cluster; with --scheduler the cluster's own workers are used")
        return fn(scale=settings, **kw)

    for opt in reversed([
        click.option("--engine", type=click.Choice(["local", "dask"]), default="local", show_default=True,
                     help="Who analyses the cassettes: this machine, or a Dask cluster fanning out per batch of "
                          "cassettes (pip install 'spoolproxy[scale]')."),
        click.option("--scheduler", default=None, metavar="ADDRESS",
                     help="With --engine dask: an existing cluster's scheduler (tcp://HOST:PORT); default: a local "
                          "cluster of worker processes started for the run."),
        click.option("--workers", type=click.IntRange(min=1), default=None,
                     help="With --engine dask and no --scheduler: worker processes of the local cluster "
                          "(default: one per CPU)."),
        click.option("--batch-size", type=click.IntRange(min=1), default=None,
                     help="Cassettes per task (default: about eight tasks per worker, at most 256 cassettes each)."),
        click.option("--parquet", default=None, metavar="OUT",
                     help="Also write one row per run (verdict, findings, tags, root cause) to this Parquet file "
                          "or URL; dashboard and cluster read it back."),
        click.option("--storage-option", "storage_options", multiple=True, metavar="KEY=VALUE",
                     help="fsspec storage option for store URLs (repeatable), e.g. "
                          "endpoint_url=http://127.0.0.1:9000; credentials come from AWS_* variables."),
    ]):
        wrapper = opt(wrapper)
    return wrapper
