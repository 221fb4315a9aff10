"""Failure clusters: failing runs grouped by root cause, biggest first.

Each failing run's root cause is normalised (:mod:`.normalize`); identical documents are
merged first (so thousands of runs with a few hundred distinct failures stay cheap), then
the distinct documents are vectorised (:mod:`.embed`: a local Ollama embedding model when
one is configured and answers, else the built-in TF-IDF vectoriser) and grouped by
scikit-learn's agglomerative clustering: average linkage on cosine distance, cut at
``threshold``.  Two documents whose recognised causes differ (``invalid api key`` and
``model not found``) are kept apart.  Without scikit-learn (the ``triage`` extra), runs
group by recognised cause, else by identical document (``method`` says ``exact``).

Cluster ids are stable: ``c`` + 7 hex digits of the SHA-1 of the cluster's key.  The key is
its recognised cause and root kind (``invalid api key|http_error``), so that cluster has the
same id in every command, every set of runs and every version of the wording; a cluster
without a recognised cause (or sharing cause and kind with another) is keyed by its most
common document (ties: the alphabetically first).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterable

from .embed import EmbedError, OllamaEmbedder, have_sklearn, tfidf_vectors
from .runs import Run, collect_runs

#: cosine distance at which the dendrogram is cut, per vectoriser kind
DEFAULT_THRESHOLD = {"tfidf": 0.7, "ollama": 0.25}


@dataclass
class Cluster:
    """Failing runs that share a root cause.

    ``id``: stable id (``c3f9a2b1``); ``signature``: the most common normalised failure
    text; ``cause``: the canonical cause when recognised; ``kind``: the root finding kind
    of the signature; ``runs``: members, oldest first.
    """

    id: str
    signature: str
    cause: str | None
    kind: str
    runs: list[Run] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.runs)

    @property
    def kinds(self) -> list[str]:
        """Root finding kinds of the members, most common first."""
        return [k for k, _ in Counter(r.failure.kind for r in self.runs if r.failure).most_common()]

    @property
    def providers(self) -> list[str]:
        return sorted({p for r in self.runs for p in r.providers})

    @property
    def first_seen(self) -> datetime | None:
        return min((r.when for r in self.runs if r.when), default=None)

    @property
    def last_seen(self) -> datetime | None:
        return max((r.when for r in self.runs if r.when), default=None)

    @property
    def exemplar(self) -> Run:
        """The member to keep as a regression case: an existing case first, else the
        smallest run (fewest interactions), then by name."""
        return min(self.runs, key=lambda r: (r.case is None, r.interactions, r.name))

    def versions(self, key: str = "version") -> list[str]:
        return sorted({r.version(key) for r in self.runs})

    def to_json(self) -> dict:
        """A JSON-ready dict (members by name and cassette)."""
        return {
            "id": self.id, "size": self.size, "cause": self.cause, "kind": self.kind, "signature": self.signature,
            "kinds": self.kinds, "providers": self.providers, "versions": self.versions(),
            "first_seen": self.first_seen.isoformat() if self.first_seen else None,
            "last_seen": self.last_seen.isoformat() if self.last_seen else None,
            "exemplar": self.exemplar.name,
            "runs": [{"name": r.name, "cassette": str(r.path) if r.path else None,
                      "case": r.case.name if r.case else None, "status": r.case.status if r.case else None,
                      "message": r.failure.message if r.failure else None} for r in self.runs],
        }


@dataclass
class Clustering:
    """The outcome of :func:`cluster`: ``clusters`` biggest first; ``method`` (``tfidf``,
    ``ollama:<model>`` or ``exact``); ``threshold`` used; ``note`` why a fallback was taken;
    ``passing``: runs that passed (not clustered)."""

    clusters: list[Cluster]
    method: str
    threshold: float | None = None
    note: str | None = None
    passing: int = 0

    def find(self, cluster_id: str) -> Cluster | None:
        """The cluster whose id is ``cluster_id`` or starts with it (unique prefix)."""
        hits = [c for c in self.clusters if c.id == cluster_id] or \
            [c for c in self.clusters if c.id.startswith(cluster_id)]
        return hits[0] if len(hits) == 1 else None


def cluster_id(key: str) -> str:
    """The stable id of a cluster whose key (see the module docstring) is ``key``."""
    return "c" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:7]


def _labels(docs: list[str], causes: list[str | None], vectors, threshold: float) -> list[int]:
    import numpy as np
    from sklearn.cluster import AgglomerativeClustering

    v = np.asarray(vectors, dtype=float)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    v = v / np.where(norms == 0, 1.0, norms)
    dist = np.clip(1.0 - v @ v.T, 0.0, 2.0)
    for i, a in enumerate(causes):
        for j, b in enumerate(causes):
            if a and b and a != b:
                dist[i, j] = 2.0
    np.fill_diagonal(dist, 0.0)
    model = AgglomerativeClustering(n_clusters=None, distance_threshold=threshold, metric="precomputed",
                                    linkage="average")
    return [int(x) for x in model.fit_predict(dist)]


def cluster(runs: Iterable[Run], *, embedder: OllamaEmbedder | None = None, threshold: float | None = None) -> Clustering:
    """Group the failing ``runs`` by root cause (see the module docstring).

    ``embedder``: use this Ollama model for vectors (falls back to the built-in vectoriser,
    with ``note`` saying why, when it fails); ``threshold``: cosine distance cut (default
    :data:`DEFAULT_THRESHOLD` for the vectoriser used; lower splits more).
    """
    runs = list(runs)
    failing = [r for r in runs if r.failure is not None]
    counts = Counter(r.failure.document for r in failing)
    docs = sorted(counts)
    cause_of = {r.failure.document: r.failure.cause for r in failing}
    note = None
    method = "exact"
    labels: list[int]
    if len(docs) <= 1:
        labels = [0] * len(docs)
        method = "tfidf" if have_sklearn() else "exact"
    else:
        vectors = None
        if embedder is not None:
            if not have_sklearn():
                note = f"{embedder.name} needs scikit-learn to cluster: pip install 'spoolproxy[triage]'"
            else:
                try:
                    vectors, method = embedder.embed(docs), embedder.name
                except EmbedError as exc:
                    note = f"{exc}; used the built-in vectoriser"
        if vectors is None and have_sklearn():
            vectors, method = tfidf_vectors(docs), "tfidf"
        if vectors is not None:
            kind = "ollama" if method.startswith("ollama:") else "tfidf"
            threshold = DEFAULT_THRESHOLD[kind] if threshold is None else threshold
            labels = _labels(docs, [cause_of[d] for d in docs], vectors, threshold)
        else:
            note = note or "scikit-learn is not installed: runs grouped by identical cause or failure text " \
                           "(pip install 'spoolproxy[triage]' for similarity)"
            keys = {d: cause_of[d] or d for d in docs}
            order = {k: i for i, k in enumerate(dict.fromkeys(keys.values()))}
            labels = [order[keys[d]] for d in docs]
    label_of = dict(zip(docs, labels))
    groups: dict[int, list[Run]] = {}
    for r in failing:
        groups.setdefault(label_of[r.failure.document], []).append(r)
    clusters = [_make(members, counts) for members in groups.values()]
    keys = Counter(f"{c.cause}|{c.kind}" for c in clusters if c.cause)
    for c in clusters:
        if c.cause and keys[f"{c.cause}|{c.kind}"] == 1:
            c.id = cluster_id(f"{c.cause}|{c.kind}")
    clusters.sort(key=lambda c: (-c.size, -(c.last_seen.timestamp() if c.last_seen else 0), c.id))
    return Clustering(clusters=clusters, method=method, threshold=threshold if method != "exact" else None,
                      note=note, passing=len(runs) - len(failing))


def _make(members: list[Run], counts: Counter) -> Cluster:
    docs = Counter({r.failure.document: counts[r.failure.document] for r in members})
    top = min(docs, key=lambda d: (-docs[d], d))
    causes = Counter(r.failure.cause for r in members if r.failure.cause)
    kind = next(r.failure.kind for r in members if r.failure.document == top)
    members.sort(key=lambda r: (r.when is None, r.when or datetime.min, r.name))
    return Cluster(id=cluster_id(top), signature=top, cause=causes.most_common(1)[0][0] if causes else None,
                   kind=kind, runs=members)


def cluster_runs(paths: Iterable[str | Path], *, tags: dict[str, str] | None = None, config=None,
                 embedder: OllamaEmbedder | None = None, threshold: float | None = None,
                 on_skip: Callable[[Path, str], None] | None = None) -> list[Cluster]:
    """The failure clusters of the runs under ``paths`` (cassettes, directories, suites),
    biggest first; ``tags`` filters runs (``{key: glob}``).  See :func:`cluster` for the
    rest; :func:`cluster` on :func:`~.runs.collect_runs` gives the method and notes too."""
    return cluster(collect_runs(paths, tags=tags, config=config, on_skip=on_skip), embedder=embedder,
                   threshold=threshold).clusters
