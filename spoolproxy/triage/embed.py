"""Vectorisers for failure documents: a local embedding model through Ollama, or the built-in one.

* :class:`OllamaEmbedder`: ``POST {host}/api/embed`` with ``{"model", "input": [texts]}``,
  answered by ``{"embeddings": [[float, ...], ...]}`` (Ollama's embed API).  Used when a
  model is configured (``--embed-model``, ``SPOOLPROXY_EMBED_MODEL`` or ``embed_model`` in
  ``[triage]``) and the server answers; the host is ``--ollama-host``, ``OLLAMA_HOST`` or
  ``ollama_host`` in ``[triage]``, default ``http://127.0.0.1:11434``.
* :func:`tfidf_vectors`: the built-in vectoriser, scikit-learn's ``TfidfVectorizer`` over
  the words and word pairs of the normalised documents (placeholders such as ``<model>``
  and ``http-401`` are single words), L2-normalised, sublinear term frequency.

Both return one row per document; clustering compares rows by cosine distance.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import SpoolError

DEFAULT_OLLAMA = "http://127.0.0.1:11434"
TOKEN_PATTERN = r"<[a-z-]+>|[a-z0-9][a-z0-9_.-]*[a-z0-9]|[a-z0-9]"


class EmbedError(SpoolError):
    """The embedding server could not be used (unreachable, error status, bad answer)."""


@dataclass
class OllamaEmbedder:
    """Embeddings from a local Ollama server.  ``host``: base URL; ``model``: an embedding
    model the server has pulled (e.g. ``nomic-embed-text``); ``timeout_s``: per request;
    ``batch``: texts per request."""

    model: str
    host: str = DEFAULT_OLLAMA
    timeout_s: float = 30.0
    batch: int = 64

    @property
    def name(self) -> str:
        return f"ollama:{self.model}"

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order.  Raises EmbedError (one line) on any failure."""
        import httpx

        url = self.host.rstrip("/") + "/api/embed"
        out: list[list[float]] = []
        try:
            with httpx.Client(timeout=self.timeout_s, trust_env=False) as client:
                for i in range(0, len(texts), self.batch):
                    part = texts[i:i + self.batch]
                    resp = client.post(url, json={"model": self.model, "input": part})
                    if resp.status_code != 200:
                        detail = _error_of(resp)
                        raise EmbedError(f"Ollama at {self.host} answered {resp.status_code} for model "
                                         f"{self.model!r}: {detail}")
                    vectors = resp.json().get("embeddings")
                    if not isinstance(vectors, list) or len(vectors) != len(part):
                        raise EmbedError(f"Ollama at {self.host} sent no 'embeddings' list for {len(part)} inputs")
                    out.extend(vectors)
        except httpx.HTTPError as exc:
            raise EmbedError(f"Ollama at {self.host} is not reachable ({type(exc).__name__}: {exc})") from None
        except ValueError:
            raise EmbedError(f"Ollama at {self.host} did not answer JSON") from None
        return out


def _error_of(resp) -> str:
    try:
        return str(resp.json().get("error") or resp.text[:200])
    except ValueError:
        return resp.text[:200]


def embedder_from(model: str | None = None, host: str | None = None, table: dict | None = None) -> OllamaEmbedder | None:
    """The configured :class:`OllamaEmbedder`, or None when no embedding model is named.

    Lookup order: the arguments, then ``SPOOLPROXY_EMBED_MODEL`` / ``OLLAMA_HOST``, then
    ``embed_model`` / ``ollama_host`` of the ``[triage]`` ``table``.
    """
    table = table or {}
    model = model or os.environ.get("SPOOLPROXY_EMBED_MODEL") or table.get("embed_model")
    if not model:
        return None
    host = host or os.environ.get("OLLAMA_HOST") or table.get("ollama_host") or DEFAULT_OLLAMA
    if not host.startswith(("http://", "https://")):
        host = "http://" + host  # OLLAMA_HOST is often written as host:port
    return OllamaEmbedder(model=str(model), host=str(host))


def have_sklearn() -> bool:
    """True when scikit-learn (the ``triage`` extra) can be imported."""
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return False
    return True


def tfidf_vectors(documents: list[str]):
    """The built-in vectoriser: a dense ``(len(documents), n_terms)`` numpy array of
    L2-normalised TF-IDF weights of words and word pairs.  Needs scikit-learn."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(token_pattern=TOKEN_PATTERN, ngram_range=(1, 2), sublinear_tf=True, lowercase=True)
    return vec.fit_transform(documents).toarray()
