"""Many runs on one page (``spoolproxy dashboard PATH... -o DIR/index.html``).

:func:`stats` reads runs (cassettes, directories, suites; filtered by tags) into a
:class:`Stats`: pass rate per agent version per day, runs per day, failure kinds, failure
clusters and the latest ``spoolproxy test`` outcome of each case (``<suite>/.runs/
results.json`` of every suite found).  :func:`write_dashboard` writes ``index.html`` with
inline SVG charts (:mod:`.charts`) and one report per run under ``runs/`` (:mod:`.report`),
each linked from the page; everything goes through the Redactor and nothing on the pages
loads from the network or runs a script.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from ..cassettes.redact import Redactor
from ..cassettes.storage import atomic_write, check_output_file
from ..errors import OutputError, SpoolError
from .clustering import Clustering, cluster
from .runs import Run, collect_runs


@dataclass
class VersionStats:
    """One agent version: ``runs``, ``failing``, ``pass_rate`` (0-100), first and last run."""

    version: str
    runs: int = 0
    failing: int = 0
    first: datetime | None = None
    last: datetime | None = None

    @property
    def pass_rate(self) -> float:
        return 100.0 * (self.runs - self.failing) / self.runs if self.runs else 0.0


@dataclass
class CaseOutcome:
    """The latest ``spoolproxy test`` result of one case (from ``results.json``); ``artifact``
    is the artifact run's cassette when it still exists."""

    suite: Path
    name: str
    outcome: str | None
    explanation: str
    ran_at: str | None
    regression: bool = False
    baseline: str | None = None
    artifact: Path | None = None


@dataclass
class Stats:
    """What the dashboard shows.  ``runs``: every run (undated ones included in totals but
    not in the per-day series); ``days``: ``{day: (runs, failing)}``; ``version_days``:
    ``{version: {day: (runs, failing)}}``; ``kinds``: root failure kinds of the failing runs
    (see :func:`.normalize.root_finding`); ``clustering``: the failure clusters; ``tests``: latest test outcomes."""

    runs: list[Run] = field(default_factory=list)
    versions: list[VersionStats] = field(default_factory=list)
    days: dict[date, tuple[int, int]] = field(default_factory=dict)
    version_days: dict[str, dict[date, tuple[int, int]]] = field(default_factory=dict)
    kinds: Counter = field(default_factory=Counter)
    clustering: Clustering | None = None
    tests: list[CaseOutcome] = field(default_factory=list)
    version_tag: str = "version"

    @property
    def failing(self) -> int:
        return sum(1 for r in self.runs if r.failed)

    @property
    def pass_rate(self) -> float:
        return 100.0 * (len(self.runs) - self.failing) / len(self.runs) if self.runs else 0.0


def find_suites(paths: Iterable[str | Path]) -> list[Path]:
    """Suite directories under ``paths`` that hold a ``.runs/results.json`` (a suite given
    directly counts too)."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if not p.is_dir():
            continue
        for res in [p / ".runs" / "results.json", *p.rglob(".runs/results.json")]:
            if res.is_file() and res.parent.parent.resolve() not in [s.resolve() for s in found]:
                found.append(res.parent.parent)
    return found


def latest_outcomes(suites: Iterable[Path]) -> list[CaseOutcome]:
    """The latest outcome of every case of ``suites``, failures first, then by name."""
    from ..suite.results import load_results

    out: list[CaseOutcome] = []
    for suite in suites:
        for name, d in sorted(load_results(suite).get("cases", {}).items()):
            if not isinstance(d, dict):
                continue
            art = suite / d["artifact"] if d.get("artifact") else None
            out.append(CaseOutcome(suite=suite, name=name, outcome=d.get("outcome"),
                                   explanation=str(d.get("explanation") or ""), ran_at=d.get("ran_at"),
                                   regression=bool(d.get("regression")), baseline=d.get("baseline"),
                                   artifact=art if art is not None and art.is_file() else None))
    out.sort(key=lambda t: (t.outcome == "passes", not t.regression, t.name))
    return out


def stats(paths: Iterable[str | Path], *, tags: dict[str, str] | None = None, config=None,
          version_tag: str = "version", embedder=None, threshold: float | None = None,
          suites: Iterable[Path] = (), on_skip: Callable[[Path, str], None] | None = None,
          runs: Iterable[Run] = (), strict: bool = False) -> Stats:
    """The dashboard's numbers for the runs under ``paths`` (see :class:`Stats`).

    ``version_tag``: the tag read as the agent version (runs without it are grouped by git
    commit, else ``untagged``); ``suites``: suites whose test outcomes to show besides the
    ones found under ``paths``; ``runs``: runs read elsewhere (a findings table), added
    when their tags match; ``strict``: see :func:`.runs.collect_runs`.  Raises
    CassetteError for a path that does not exist.
    """
    from .tags import matches

    paths = list(paths)
    runs = collect_runs(paths, tags=tags, config=config, on_skip=on_skip, strict=strict) + \
        [r for r in runs if matches(r.tags, tags or {})]
    s = Stats(runs=runs, version_tag=version_tag)
    by_version: dict[str, VersionStats] = {}
    for r in runs:
        v = r.version(version_tag)
        vs = by_version.setdefault(v, VersionStats(v))
        vs.runs += 1
        vs.failing += r.failed
        if r.when:
            vs.first = min(vs.first or r.when, r.when)
            vs.last = max(vs.last or r.when, r.when)
            day = r.when.date()
            n, f = s.days.get(day, (0, 0))
            s.days[day] = (n + 1, f + r.failed)
            n, f = s.version_days.setdefault(v, {}).get(day, (0, 0))
            s.version_days[v][day] = (n + 1, f + r.failed)
        if r.failure is not None:
            s.kinds[r.failure.kind] += 1
    s.versions = sorted(by_version.values(), key=lambda v: (v.last or datetime.min.replace(tzinfo=timezone.utc),
                                                           v.version), reverse=True)
    s.clustering = cluster(runs, embedder=embedder, threshold=threshold)
    known = list(suites) + [x for x in find_suites(paths) if x not in list(suites)]
    s.tests = latest_outcomes(known)
    return s


def run_slug(name: str) -> str:
    """A file name for a run's report: its name made safe, plus a short hash (unique)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[-80:] or "run"
    return f"{safe}-{hashlib.sha1(name.encode()).hexdigest()[:6]}.html"


def bucket_unit(days: Iterable[date]) -> str:
    """``day`` when the runs span at most 45 days, ``week`` up to a year, else ``month``."""
    days = list(days)
    span = (max(days) - min(days)).days if days else 0
    return "day" if span <= 45 else "week" if span <= 366 else "month"


def bucket(d: date, unit: str) -> date:
    """The first day of the day / ISO week / month holding ``d``."""
    if unit == "week":
        return date.fromordinal(d.toordinal() - d.weekday())
    if unit == "month":
        return d.replace(day=1)
    return d


def _sum(days: dict[date, tuple[int, int]], unit: str) -> dict[date, tuple[int, int]]:
    out: dict[date, tuple[int, int]] = {}
    for d, (n, f) in days.items():
        b = bucket(d, unit)
        n0, f0 = out.get(b, (0, 0))
        out[b] = (n0 + n, f0 + f)
    return out


def _charts(s: Stats) -> dict[str, str]:
    from . import charts

    out: dict[str, str] = {}
    unit = bucket_unit(s.days)
    series = {v: [(d, 100.0 * (n - f) / n) for d, (n, f) in sorted(_sum(days, unit).items())]
              for v, days in s.version_days.items() if days}
    if series:
        out["pass_rate"] = charts.pass_rate_over_time(series, f"Pass rate per {s.version_tag}, per {unit}")
        per = _sum(s.days, unit)
        days = sorted(per)
        out["per_day"] = charts.runs_per_day(days, [per[d][1] for d in days], [per[d][0] - per[d][1] for d in days],
                                             f"Failing and passing runs per {unit}")
    if s.kinds:
        out["kinds"] = charts.horizontal_counts(s.kinds.most_common(12), "Root failure kinds (failing runs)", "runs")
    if s.clustering and s.clustering.clusters:
        top = s.clustering.clusters[:10]
        out["clusters"] = charts.horizontal_counts([(f"{c.id} {c.cause or c.kind}", c.size) for c in top],
                                                   "Top failure clusters", "runs")
    return out


def write_dashboard(paths: Iterable[str | Path], out: str | Path, *, tags: dict[str, str] | None = None, config=None,
                    version_tag: str = "version", embedder=None, threshold: float | None = None,
                    suites: Iterable[Path] = (), redactor: Redactor | None = None, title: str = "spoolproxy dashboard",
                    run_reports: bool = True, on_skip: Callable[[Path, str], None] | None = None,
                    runs: Iterable[Run] = (), strict: bool = False) -> tuple[Path, Stats]:
    """Write the dashboard to ``out`` (an ``.html`` file; its directory gets ``runs/`` with
    one report per run and per test artifact when ``run_reports``; ``runs`` as for
    :func:`stats`).  Returns ``(out, stats)``.

    Raises OutputError (checked first) when the output cannot be written, CassetteError for
    a missing path (and, with ``strict``, a named file that is not a cassette or a case).
    """
    from .report import environment, write_report

    red = redactor or Redactor()
    target = Path(out)
    check_output_file(target)  # before any run is read or any run report written
    s = stats(paths, tags=tags, config=config, version_tag=version_tag, embedder=embedder, threshold=threshold,
              suites=suites, on_skip=on_skip, runs=runs, strict=strict)
    links: dict[Path, str] = {}
    if run_reports:
        back = {"dashboard": "../" + target.name}
        todo = [(r.path, r.name) for r in s.runs if r.path is not None]
        todo += [(t.artifact, f"{t.suite.name}/{t.name}/{t.artifact.name}") for t in s.tests if t.artifact]
        for path, name in todo:
            slug = run_slug(name)
            try:
                write_report(path, target.parent / "runs" / slug, config=config, redactor=red, links=back,
                             title=name)
            except OutputError:
                raise  # runs/ cannot be written: one error, not a warning per run
            except SpoolError as exc:
                if on_skip:
                    on_skip(path, f"no report: {exc}")
                continue
            links[path] = "runs/" + slug
    env = environment()
    html = env.get_template("dashboard.html.j2").render(
        title=title, s=s, charts=_charts(s), links=links, tags=tags or {},
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    atomic_write(target, red.text(html))
    return target, s
