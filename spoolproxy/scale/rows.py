"""One cassette in, one row out: the pure per-cassette work that any engine maps.

:func:`cassette_row` parses one cassette's bytes, runs the detectors and reads the run's
triage facts (:func:`spoolproxy.triage.runs.run_of`); :func:`batch_rows` does that for a
batch of cassettes named by URL or path, fetched through :func:`~spoolproxy.store.fs.read_many`.
Neither depends on an engine: the local engine calls :func:`batch_rows` in-process (or in a
process pool), the Dask engine ships it to its workers.

A row is a plain dict (JSON- and Parquet-ready; :mod:`.parquet` gives its schema)::

    {"cassette": str,                      # the name shown (URL or path)
     "verdict": "pass"|"fail"|"error"|"skip",  # error: corrupt; skip: not a cassette
     "error": str|None,                    # the one-line problem of an error/skip row
     "interactions", "llm_calls", "tokens": int, "cost_usd": float|None,
     "when": datetime|None (UTC), "tags": {str: str}, "commit": str|None,
     "providers": [str],
     "failure_kind", "failure_cause", "failure_document", "failure_message",
     "failure_provider": str|None, "failure_kinds": [str],   # the normalised root cause
     "findings": [{"kind", "severity", "interactions": [int], "message",
                   "evidence": [{"interaction", "path", "quote"}]}],
     "cost": {"usd", "calls", "unpriced_models", "sources", "prices_as_of"}|None,
     "checks": [{"name", "status", "severity", "message", "interactions", "duration_ms",
                 "exit_code"}]}                  # the project's [[checks]] that applied
"""

from __future__ import annotations

from typing import Any, Iterable

from ..errors import CassetteError

#: the verdicts of rows that are not analysed runs
ERROR, SKIP = "error", "skip"
#: the loader's problem text for a YAML/JSON mapping without ``interactions`` (as ``detect`` reads it)
NOT_A_CASSETTE = "not a cassette:"


def empty_row(name: str, verdict: str, error: str | None = None) -> dict[str, Any]:
    """A row with every column, for a cassette that could not be analysed."""
    return {"cassette": name, "verdict": verdict, "error": error, "interactions": 0, "llm_calls": 0, "tokens": 0,
            "cost_usd": None, "when": None, "tags": {}, "commit": None, "providers": [], "failure_kind": None,
            "failure_cause": None, "failure_document": None, "failure_message": None, "failure_provider": None,
            "failure_kinds": [], "findings": [], "cost": None, "checks": []}


def run_row(run, report=None) -> dict[str, Any]:
    """The row of a :class:`~spoolproxy.triage.runs.Run` (its ``name`` is the cassette
    column); ``report``, the run's :class:`~spoolproxy.detectors.Report`, adds its cost and
    user-check results."""
    f = run.failure
    row = empty_row(run.name, run.verdict)
    if report is not None:
        row.update(cost=report.cost.model_dump(mode="json") if report.cost is not None else None,
                   checks=[c.model_dump(mode="json") for c in report.checks])
    row.update(interactions=run.interactions, llm_calls=run.llm_calls, tokens=run.tokens, cost_usd=run.cost_usd,
               when=run.when, tags=dict(run.tags), commit=run.commit, providers=list(run.providers),
               findings=[x.model_dump(mode="json") for x in run.findings])
    if f is not None:
        row.update(failure_kind=f.kind, failure_cause=f.cause, failure_document=f.document, failure_message=f.message,
                   failure_provider=f.provider, failure_kinds=list(f.kinds))
    return row


def cassette_row(name: str, data: bytes, config=None, *, path: str | None = None) -> dict[str, Any]:
    """Analyse one cassette given as bytes (YAML, or JSON when ``name`` ends in ``.json``).

    ``config``: a :class:`~spoolproxy.detectors.DetectConfig` (None: the defaults);
    ``path``: the cassette's local file, when it has one (user checks get it as
    ``SPOOLPROXY_CASSETTE``, side bodies are found beside it).  Never
    raises for bad input: a corrupt cassette is an ``error`` row, a YAML/JSON file that is
    not a cassette a ``skip`` row, both with the one-line problem in ``error`` (so is a
    detector that fails on it: one bad run must not stop a job over a million)."""
    from pathlib import Path

    from ..cassettes.storage import parse_text
    from ..detectors import analyze, build_transcript
    from ..triage.runs import run_of

    try:
        cas = parse_text(data, name)
    except CassetteError as exc:
        return empty_row(name, SKIP if str(exc.problem).startswith(NOT_A_CASSETTE) else ERROR, str(exc))
    if path is not None:
        cas.path = Path(path)
    try:
        t = build_transcript(cas, config)
        report = analyze(cas, config, transcript=t)
        return run_row(run_of(cas, None, name, config=config, report=report, transcript=t), report)
    except Exception as exc:  # noqa: BLE001 - a detector bug: reported on this run's row
        return empty_row(name, ERROR, f"{name}: the detectors failed on this cassette ({type(exc).__name__}: "
                                      f"{str(exc).splitlines()[0] if str(exc) else ''}); please report it")


def batch_rows(items: Iterable[tuple[str, str]], config=None, options: dict[str, Any] | None = None) -> list[dict]:
    """Rows of a batch of ``(name, url_or_path)`` items, in order: the batch is fetched
    (concurrently from an object store; fsspec ``options`` for URLs), then each cassette
    analysed by :func:`cassette_row`; an unreadable one is an ``error`` row.  This is the function engines map.  Raises SpoolError when a URL's
    protocol needs a backend that is not installed (every row would fail)."""
    from ..store.fs import read_many

    from ..store.fs import is_url

    items = list(items)
    out: list[dict] = []
    for (name, url), data in zip(items, read_many([u for _, u in items], options)):
        if isinstance(data, CassetteError):
            out.append(empty_row(name, ERROR, str(data)))
        else:
            out.append(cassette_row(name, data, config, path=None if is_url(url) else url))
    return out


def detect_doc(row: dict[str, Any]) -> dict[str, Any]:
    """The ``spoolproxy detect --json`` object of an analysed row:
    ``{"cassette", "verdict", "findings", "cost", "checks"}`` (the
    :class:`~spoolproxy.detectors.Report` shape)."""
    return {"cassette": row["cassette"], "verdict": row["verdict"], "findings": row["findings"],
            "cost": row.get("cost"), "checks": row.get("checks") or []}


def row_run(row: dict[str, Any]):
    """The :class:`~spoolproxy.triage.runs.Run` of an analysed row (the inverse of
    :func:`run_row`): ``path`` is the cassette when it names a local file that exists (so a
    dashboard can link its report), else None; ``name`` is the cassette column."""
    from pathlib import Path

    from ..detectors.models import Finding
    from ..store.fs import is_url
    from ..triage.normalize import FailureText
    from ..triage.runs import Run

    name = row["cassette"]
    path = Path(name) if not is_url(name) and Path(name).is_file() else None
    failure = None
    if row.get("failure_document") is not None:
        failure = FailureText(document=row["failure_document"], kind=row.get("failure_kind") or "",
                              cause=row.get("failure_cause"), message=row.get("failure_message") or "",
                              kinds=list(row.get("failure_kinds") or []), provider=row.get("failure_provider"))
    return Run(path=path.resolve() if path else None, name=name, when=row.get("when"), tags=dict(row.get("tags") or {}),
               commit=row.get("commit"), verdict=row["verdict"],
               findings=[Finding.model_validate(f) for f in row.get("findings") or []], failure=failure,
               interactions=row.get("interactions") or 0, llm_calls=row.get("llm_calls") or 0,
               tokens=row.get("tokens") or 0, cost_usd=row.get("cost_usd"), providers=list(row.get("providers") or []))
