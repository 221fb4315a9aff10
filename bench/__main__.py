"""``python -m bench [--quick] [--only B1,B3] [--out DIR] [--keep]``: run the benchmarks and
write ``results.md``/``results.json`` into ``--out`` (default: ``bench/``; with ``--quick``,
``results-quick.*`` in the git-ignored ``bench/out/``).  Exit status 0 when every row was produced, even if targets were
missed or a subject was not available (those rows say so); 1 on an internal error."""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from . import b1_record, b2_playback, b3_load, b4_detect, b5_startup, b6_memory, env, report
from .config import FULL, QUICK
from .stats import Summary

SECTIONS = {
    "B1": (b1_record.run, [b1_record.specs]),
    "B2": (b2_playback.run, [b2_playback.specs, b2_playback.b6_specs]),
    "B3": (b3_load.run, [b3_load.specs]),
    "B4": (b4_detect.run, [b4_detect.specs]),
    "B5": (b5_startup.run, [b5_startup.specs]),
    "B6": (b6_memory.run, [b6_memory.specs]),
}
HERE = Path(__file__).resolve().parent


def all_specs() -> dict[str, list[tuple[str, str, str, str]]]:
    """Section -> every row it declares (``(id, subject, metric, unit)``), in table order."""
    out: dict[str, list] = {}
    for sec, (_, fns) in SECTIONS.items():
        for fn in fns:
            rows = fn()
            out.setdefault(rows[0][0].split(".")[0], []).extend(rows)
    return dict(sorted(out.items()))


def row_ids() -> list[str]:
    """Every row id a complete run writes (the smoke test checks them all)."""
    return [r[0] for rows in all_specs().values() for r in rows]


def merge(res: report.Results, rows: list[dict]) -> None:
    """Copy the measured rows of a section's JSON into ``res``."""
    for d in rows:
        row = res.rows.get(d["id"])
        if row is None or (d["value"] is None and d["status"] == "not available: not measured"):
            continue
        row.metric, row.reference, row.target = d["metric"], d["reference"], d["target"]
        row.status, row.note = d["status"], d["note"]
        row.value = Summary(**d["value"]) if d["value"] else None
        row.ratio = Summary(**d["ratio"]) if d["ratio"] else None


def render(out: Path, *, quick: bool) -> int:
    """Rewrite ``results.md`` from ``results.json`` in ``out`` with the current notes."""
    stem = "results-quick" if quick else "results"
    doc = json.loads((out / f"{stem}.json").read_text())
    res = report.Results()
    for sec, rows in all_specs().items():
        res.declare(sec, rows)
    merge(res, doc["rows"])
    notes_file = HERE / "analysis.md"
    notes = notes_file.read_text() if notes_file.exists() and not quick else ""
    _, mpath = report.write(res, out, doc["header"], stem=stem, notes=notes)
    print(f"bench: rewrote {mpath}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, few repeats (smoke run, ~30 s)")
    ap.add_argument("--only", default="", help="comma-separated sections, e.g. B1,B3 (others: not run)")
    ap.add_argument("--out", type=Path, default=None,
                    help="directory for the results files (default: bench/, or bench/out/ with --quick)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory (logs, cassettes)")
    ap.add_argument("--render", action="store_true",
                    help="measure nothing: rewrite results.md from results.json (e.g. after editing analysis.md)")
    args = ap.parse_args(argv)
    if args.render:
        return render(args.out or (HERE / "out" if args.quick else HERE), quick=args.quick)
    cfg = QUICK if args.quick else FULL
    out = args.out or (HERE / "out" if args.quick else HERE)
    only = {s.strip().upper() for s in args.only.split(",") if s.strip()}
    res = report.Results()
    for sec, rows in all_specs().items():
        res.declare(sec, rows)
    started = time.time()
    header = {
        "command": shlex.join(["python", "-m", "bench", *(sys.argv[1:] if argv is None else argv)]),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick (smoke sizes; not for comparison)" if cfg.quick else "full",
        "machine": env.machine(),
        "versions": env.versions(),
        "config": cfg.__dict__,
    }
    failed = False
    with tempfile.TemporaryDirectory(prefix="spoolproxy-bench-rows-") as tmp:
        for sec in SECTIONS:
            if only and sec not in only:
                res.unavailable(sec + ".", "section not run (--only)")
                if sec == "B2":
                    res.unavailable("B6.playback", "measured in B2, which was not run (--only)")
                continue
            t0 = time.time()
            print(f"bench: {sec} ...", file=sys.stderr, flush=True)
            rows_file = Path(tmp) / f"{sec}.json"
            cmd = [sys.executable, "-m", "bench.section", sec, "--out", str(rows_file)]
            cmd += ["--quick"] if cfg.quick else []
            cmd += ["--keep"] if args.keep else []
            try:
                rc = subprocess.run(cmd, cwd=HERE.parent, timeout=1800).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
            if rows_file.exists():
                merge(res, json.loads(rows_file.read_text()))
            if rc != 0:
                failed = True
                res.unavailable(sec + ".", f"{sec} exited with {rc}; see the output above")
            print(f"bench: {sec} done in {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
    header["duration_s"] = time.time() - started
    header["machine"]["load_end"] = env.load()
    notes_file = HERE / "analysis.md"
    notes = notes_file.read_text() if notes_file.exists() and not cfg.quick else ""
    stem = "results-quick" if cfg.quick else "results"
    jpath, mpath = report.write(res, out, header, stem=stem, notes=notes)
    print(f"bench: wrote {mpath} and {jpath} in {header['duration_s']:.0f} s", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
