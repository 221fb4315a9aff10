"""Result rows and the files a run writes: ``results.json`` and ``results.md``.

A :class:`Row` is one figure for one subject: the median and p10-p90 spread of repeated
runs, its ratio to the reference measured in the same run, the issue's target and whether
it was met.  Every row a section declares appears in the output; a row that could not be
measured says ``not available: <why>`` instead of numbers.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from .stats import Summary, summarize

SECTION_TITLES = {
    "B1": "B1 recording overhead (HTTPS, keep-alive, httpx Client, local server)",
    "B2": "B2 playback scaling (distinct interactions, matched by body)",
    "B3": "B3 cassette loading",
    "B4": "B4 detection throughput",
    "B5": "B5 start-up",
    "B6": "B6 memory (peak RSS of the proxy process, MB = 10^6 bytes)",
}


@dataclass
class Row:
    """One line of the results table (see module docstring); ``unit`` e.g. ms, req/s, MiB."""

    id: str
    section: str
    subject: str
    metric: str
    unit: str
    value: Summary | None = None
    reference: str | None = None
    ratio: Summary | None = None
    target: str = ""
    status: str = "not available: not measured"
    note: str = ""

    def as_dict(self) -> dict:
        return {
            "id": self.id, "section": self.section, "subject": self.subject, "metric": self.metric,
            "unit": self.unit, "value": self.value.as_dict() if self.value else None,
            "reference": self.reference, "ratio": self.ratio.as_dict() if self.ratio else None,
            "target": self.target, "status": self.status, "note": self.note,
        }


@dataclass
class Results:
    """All rows of a run, keyed by id, in declaration order."""

    rows: dict[str, Row] = field(default_factory=dict)

    def declare(self, section: str, specs: list[tuple[str, str, str, str]]) -> None:
        """Declare rows ``(id, subject, metric, unit)`` of ``section`` (not available until set)."""
        for rid, subject, metric, unit in specs:
            self.rows.setdefault(rid, Row(rid, section, subject, metric, unit))

    def set(self, rid: str, values: list[float] | Summary, *, reference: str | None = None,
            ratio: list[float] | float | Summary | None = None, target: str = "",
            met: bool | None = None, note: str = "", metric: str | None = None) -> Row:
        """Fill row ``rid`` with measurements (one value per repeated run)."""
        row = self.rows[rid]
        row.value = values if isinstance(values, Summary) else summarize([float(v) for v in values])
        if ratio is not None:
            if isinstance(ratio, Summary):
                row.ratio = ratio
            else:
                vals = [ratio] if isinstance(ratio, (int, float)) else list(ratio)
                row.ratio = summarize([float(v) for v in vals])
        row.reference = reference
        row.target = target
        row.status = "" if met is None else ("met" if met else "missed")
        if note:
            row.note = note
        if metric:
            row.metric = metric
        return row

    def unavailable(self, prefix: str, why: str) -> None:
        """Mark every still-unmeasured row whose id starts with ``prefix`` as not available."""
        why = " ".join(str(why).split())[:300]
        for row in self.rows.values():
            if row.id.startswith(prefix) and row.value is None:
                row.status = f"not available: {why}"

    def get(self, rid: str) -> Row:
        return self.rows[rid]


def _fmt(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    ax = abs(x)
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def _spread(s: Summary | None) -> str:
    if s is None:
        return "-"
    return f"{_fmt(s.p10)}–{_fmt(s.p90)}"


_PLACEHOLDER = re.compile(r"\{\{([A-Za-z0-9_.]+)(?::(ratio|spread|status|value))?\}\}")


def render_notes(text: str, results: Results) -> str:
    """Fill ``{{row.id}}`` (median with unit), ``{{row.id:ratio}}`` (median ratio ×),
    ``{{row.id:spread}}`` (p10–p90) and ``{{row.id:status}}`` from this run's rows, so the
    hand-written notes always quote the numbers of the run they are printed with."""

    def sub(m: re.Match) -> str:
        row = results.rows.get(m.group(1))
        kind = m.group(2) or "value"
        if row is None:
            return m.group(0)
        if kind == "status":
            return row.status or "-"
        if kind == "ratio":
            return f"{_fmt(row.ratio.median)}×" if row.ratio else "n/a"
        if row.value is None:
            return "n/a"
        if kind == "spread":
            return _spread(row.value)
        return f"{_fmt(row.value.median)} {row.unit}"

    return _PLACEHOLDER.sub(sub, text)


def write(results: Results, out_dir: Path, header: dict, *, stem: str = "results",
          notes: str = "") -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.md`` into ``out_dir``; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jpath, mpath = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
    doc = {"header": header, "rows": [r.as_dict() for r in results.rows.values()]}
    jpath.write_text(json.dumps(doc, indent=2, default=str) + "\n")

    md = ["# spoolproxy benchmark results", ""]
    md.append(f"Command: `{header['command']}`  ")
    md.append(f"Date: {header['date']} (run took {header['duration_s']:.0f} s, mode: {header['mode']})  ")
    m = header["machine"]
    md.append(f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gib']:.1f} GiB RAM, {m['os']}; "
              f"load average {m['load_start']} at start, {m['load_end']} at end  ")
    v = header["versions"]
    md.append("Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()))
    md += ["", "Each value is the median of the repeated runs (n = runs) with the p10–p90 spread of "
           "those runs; ratios are taken per run against the reference measured in the same run "
           "and summarised the same way. Status compares the median with the issue's target.", ""]
    summary = [r for r in results.rows.values() if r.status in ("met", "missed")]
    if summary:
        md += ["## Targets", "", "| row | figure | value | target | status |", "|---|---|---|---|---|"]
        for r in summary:
            val = f"{_fmt(r.value.median)} {r.unit}" if r.value else "-"
            md.append(f"| `{r.id}` | {r.subject}: {r.metric} | {val} | {r.target} | **{r.status}** |")
        md.append("")
    for sec, title in SECTION_TITLES.items():
        rows = [r for r in results.rows.values() if r.section == sec]
        if not rows:
            continue
        md += [f"## {title}", "",
               "| row | subject | metric | median | p10–p90 | n | vs reference (×) | target | status |",
               "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if r.value is None:
                md.append(f"| `{r.id}` | {r.subject} | {r.metric} | - | - | - | - | {r.target} | {r.status} |")
                continue
            ref = "-"
            if r.ratio is not None:
                ref = f"{_fmt(r.ratio.median)} ({_spread(r.ratio)}) vs {r.reference}"
            elif r.reference:
                ref = f"vs {r.reference}"
            md.append(f"| `{r.id}` | {r.subject} | {r.metric} | {_fmt(r.value.median)} {r.unit} | "
                      f"{_spread(r.value)} | {r.value.n} | {ref} | {r.target} | {r.status} |")
        notes_for = [r for r in rows if r.note]
        if notes_for:
            md.append("")
            for r in notes_for:
                md.append(f"- `{r.id}`: {r.note}")
        md.append("")
    if notes:
        md += [render_notes(notes, results).rstrip(), ""]
    mpath.write_text("\n".join(md))
    return jpath, mpath
