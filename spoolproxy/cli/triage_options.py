"""Options shared by the triage commands (``cluster``, ``dashboard``, ``annotate``): tag
filters, the config file, the embedding model and the clustering threshold."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import click


@dataclass
class TriageSettings:
    """What the shared options say: ``tags`` filters (``{key: glob}``), ``config`` path,
    ``embed_model`` / ``ollama_host`` / ``threshold`` for clustering."""

    tags: dict[str, str]
    config: str | None
    embed_model: str | None
    ollama_host: str | None
    threshold: float | None

    def detect_config(self):
        from ..detectors import load_detect_config

        return load_detect_config(self.config)

    def triage_config(self):
        from ..triage.config import load_triage_config

        return load_triage_config(self.config)

    def redactor(self):
        """The project's Redactor: everything these commands print or write goes through it."""
        from .. import config
        from ..cassettes.redact import Redactor

        return Redactor.from_config(config.section("redact", self.config))

    def embedder(self):
        from ..triage.embed import embedder_from

        return embedder_from(self.embed_model, self.ollama_host, self.triage_config().model_dump())

    def cut(self) -> float | None:
        return self.threshold if self.threshold is not None else self.triage_config().threshold

    def collect(self, paths, echo_skip: bool = True):
        """The runs under ``paths`` matching the tag filters; skipped files (found in a
        directory) get one warning line each, and a file named in ``paths`` that is not a
        readable cassette or case raises CassetteError."""
        from ..triage.runs import collect_runs

        def skip(path, why):
            if echo_skip:
                click.echo(f"spoolproxy: warning: skipped {path}: {why}", err=True)

        return collect_runs(paths, tags=self.tags, config=self.detect_config(), on_skip=skip, strict=True)

    def clustering(self, runs):
        from ..triage.clustering import cluster

        return cluster(runs, embedder=self.embedder(), threshold=self.cut())


def triage_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--tag``, ``--config``, ``--embed-model``, ``--ollama-host``, ``--threshold``;
    the command receives them as one ``triage: TriageSettings`` keyword."""

    @functools.wraps(fn)
    def wrapper(**kw: Any) -> Any:
        from ..triage.tags import parse_filters

        settings = TriageSettings(tags=parse_filters(kw.pop("tag_filters")), config=kw.pop("config_path"),
                                  embed_model=kw.pop("embed_model"), ollama_host=kw.pop("ollama_host"),
                                  threshold=kw.pop("threshold"))
        return fn(triage=settings, **kw)

    for opt in reversed([
        click.option("--tag", "tag_filters", multiple=True, metavar="KEY=GLOB",
                     help="Only runs whose tag KEY matches GLOB (fnmatch; repeatable, all must match), "
                          "e.g. --tag agent=refund-bot --tag 'version=1.4.*'."),
        click.option("--embed-model", default=None, metavar="MODEL",
                     help="Cluster with this Ollama embedding model (e.g. nomic-embed-text; also "
                          "SPOOLPROXY_EMBED_MODEL or [triage] embed_model); falls back to the built-in vectoriser "
                          "when Ollama does not answer."),
        click.option("--ollama-host", default=None, metavar="URL",
                     help="Ollama's address (default: $OLLAMA_HOST, [triage] ollama_host, http://127.0.0.1:11434)."),
        click.option("--threshold", type=click.FloatRange(0.0, 2.0, min_open=True), default=None,
                     help="Cosine distance at which clusters are cut (default 0.7 built-in, 0.25 embeddings); "
                          "lower splits more."),
        click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
                     help="spoolproxy.toml to read [detect], [triage] and [redact] from (default: the usual lookup)."),
    ]):
        wrapper = opt(wrapper)
    return wrapper
