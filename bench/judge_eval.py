"""Measure the judge: label and failing-interaction accuracy on a labelled set of runs.

``python -m bench.judge_eval [--model M --base-url URL ...] [--work DIR] [--out FILE]``

Reads ``bench/judge_set/manifest.yaml`` (failing and clean runs: the shared cases, the
example agent's recordings, planted silent failures), diagnoses every run with the
heuristic and, with ``--model``, with the model judge (its traffic recorded beside a copy
of each run in ``--work``, so a second pass with ``--offline`` replays it), and prints:

* label accuracy over all runs (the gold label or one of its ``also`` labels);
* on failing runs: label accuracy and failing-interaction accuracy (the diagnosis names
  one of the gold interactions);
* on clean runs: false alarms (a failure label);
* on the planted silent failures: how many were caught (any failure label) and labelled.

``--recorded DIR`` replays judge cassettes recorded by an earlier run (the Gemma 3 270M
run of docs/judge.md is in ``bench/judge_set/recorded/gemma-3-270m``, with its per-run
results), so the model's numbers can be checked again offline, without the model:
``python -m bench.judge_eval --model gemma-3-270m-it-q4_k_m --no-system-role --max-tokens 300
--max-chars 8000 --recorded bench/judge_set/recorded/gemma-3-270m`` (the endpoint is the recorded one).

``unknown`` counts as wrong everywhere.  Runs under ``shared:`` are skipped (and
counted) when ../shared is absent.  Per-run results go to ``--jsonl FILE``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "bench" / "judge_set" / "manifest.yaml"
SHARED = Path(os.environ.get("SPOOLPROXY_SHARED", REPO.parent / "shared"))


def load_manifest(path: Path = MANIFEST) -> list[dict]:
    """The manifest's cases with ``path`` resolved (None when a shared run is absent)."""
    cases = yaml.safe_load(path.read_text(encoding="utf-8"))["cases"]
    for c in cases:
        raw = c["cassette"]
        p = SHARED / raw.removeprefix("shared:") if raw.startswith("shared:") else REPO / raw
        c["path"] = p if p.is_file() else None
        c.setdefault("also", [])
        c.setdefault("silent", False)
    return cases


def right_label(case: dict, label: str) -> bool:
    return label == case["label"] or label in case["also"]


def score(cases: list[dict], preds: dict[str, dict]) -> dict:
    """Counts for one judge: ``preds`` maps case name -> {"label", "interaction"}."""
    from spoolproxy.judge.taxonomy import FAILURE_LABELS

    s = {"runs": 0, "label_ok": 0, "failing": 0, "failing_label_ok": 0, "failing_at_ok": 0, "clean": 0,
         "false_alarms": 0, "silent": 0, "silent_caught": 0, "silent_label_ok": 0, "unknown": 0, "errors": 0}
    for c in cases:
        p = preds.get(c["name"])
        if p is None:
            continue
        s["runs"] += 1
        if p.get("error"):
            s["errors"] += 1
        label = p.get("label") or "unknown"
        s["unknown"] += label == "unknown"
        ok = right_label(c, label)
        s["label_ok"] += ok
        if c["label"] == "no_failure":
            s["clean"] += 1
            s["false_alarms"] += label in FAILURE_LABELS
            continue
        s["failing"] += 1
        s["failing_label_ok"] += ok
        s["failing_at_ok"] += p.get("interaction") in c["interactions"]
        if c["silent"]:
            s["silent"] += 1
            s["silent_caught"] += label in FAILURE_LABELS
            s["silent_label_ok"] += ok
    return s


def pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "n/a"


def table(results: dict[str, dict]) -> str:
    """A Markdown table of the scores, one column per judge."""
    rows = [("runs judged", lambda s: str(s["runs"])),
            ("label right (all runs)", lambda s: pct(s["label_ok"], s["runs"])),
            ("label right (failing runs)", lambda s: pct(s["failing_label_ok"], s["failing"])),
            ("failing interaction right", lambda s: pct(s["failing_at_ok"], s["failing"])),
            ("false alarms (clean runs)", lambda s: pct(s["false_alarms"], s["clean"])),
            ("silent failures caught", lambda s: pct(s["silent_caught"], s["silent"])),
            ("silent failures labelled right", lambda s: pct(s["silent_label_ok"], s["silent"])),
            ("answers `unknown`", lambda s: str(s["unknown"])),
            ("calls that failed", lambda s: str(s["errors"]))]
    names = list(results)
    out = ["| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for title, f in rows:
        out.append(f"| {title} | " + " | ".join(f(results[n]) for n in names) + " |")
    return "\n".join(out)


def rescore(path: Path) -> str:
    """The table for the results in a ``--jsonl`` file: every judge on the runs all of them
    judged (a slow model's partial run is compared on the same runs), then each judge on all
    the runs it judged."""
    cases = {c["name"]: c for c in load_manifest()}
    preds: dict[str, dict[str, dict]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        preds.setdefault(row["judge"], {})[row["case"]] = row
    for name in [n for n in preds if n != "heuristic"]:  # what the model said, before the evidence check
        preds[f"{name} (claimed, unchecked)"] = {
            case: {**row, "label": row.get("claimed") or row["label"],
                   "interaction": row.get("claimed_interaction", row.get("interaction"))}
            for case, row in preds[name].items()}
    common = set.intersection(*(set(p) for p in preds.values())) if preds else set()
    subset = [c for n, c in cases.items() if n in common]
    out = [f"On the {len(subset)} runs every judge judged:", "",
           table({name: score(subset, p) for name, p in preds.items()})]
    for name, p in preds.items():
        if set(p) != common:
            judged = [c for n, c in cases.items() if n in p]
            out += ["", f"{name} on all {len(judged)} runs it judged:", "", table({name: score(judged, p)})]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model")
    ap.add_argument("--base-url")
    ap.add_argument("--api-key-env")
    ap.add_argument("--provider", choices=["openai", "anthropic"])
    ap.add_argument("--no-system-role", action="store_true", help="instructions in the user message (Gemma)")
    ap.add_argument("--offline", action="store_true", help="replay the judge cassettes recorded in --work")
    ap.add_argument("--recorded", type=Path, default=None, metavar="DIR",
                    help="judge cassettes recorded earlier (e.g. bench/judge_set/recorded/gemma-3-270m): copied "
                         "into --work and replayed, so the measurement reruns offline without the model")
    ap.add_argument("--refresh", action="store_true", help="ignore cached diagnoses (with --offline: re-check "
                                                           "the recorded answers with the current code)")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--max-chars", type=int, default=16_000)
    ap.add_argument("--max-tokens", type=int, default=1024, help="the model's answer budget")
    ap.add_argument("--structured", default="json_schema", choices=["json_schema", "json_object_schema", "json_object", "none"],
                    help="the first response_format mode to ask for")
    ap.add_argument("--silent-first", action="store_true",
                    help="judge the planted runs first, then the examples, then the shared cases (partial runs "
                         "of a slow model still cover the silent failures)")
    ap.add_argument("--work", type=Path, default=None, help="where the runs are copied and judged (default: a temp dir)")
    ap.add_argument("--only", nargs="*", default=None, help="case names to run")
    ap.add_argument("--jsonl", type=Path, default=None, help="write per-run results here")
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown table here too")
    ap.add_argument("--rescore", type=Path, default=None, metavar="JSONL",
                    help="score the per-run results of an earlier (maybe partial) run; no judging")
    a = ap.parse_args(argv)
    if a.rescore:
        md = rescore(a.rescore)
        print(md)
        if a.out:
            a.out.write_text(md + "\n", encoding="utf-8")
        return 0
    sys.path.insert(0, str(REPO))
    from spoolproxy.errors import SpoolError
    from spoolproxy.judge.client import JudgeSettings
    from spoolproxy.judge.service import JudgeOptions, diagnose, load_run

    cases = [c for c in load_manifest() if a.only is None or c["name"] in a.only]
    absent = [c["name"] for c in cases if c["path"] is None]
    cases = [c for c in cases if c["path"] is not None]
    if a.silent_first:
        rank = {"bench": 0, "cassettes": 1}
        cases.sort(key=lambda c: rank.get(c["cassette"].split("/")[0], 2))
    work = a.work or Path(tempfile.mkdtemp(prefix="judge-eval-"))
    work.mkdir(parents=True, exist_ok=True)
    if a.jsonl and a.jsonl.exists():
        a.jsonl.unlink()
    if a.recorded is not None:
        for f in a.recorded.glob(".*.judge.yaml"):
            shutil.copyfile(f, work / f.name)
        a.offline = a.refresh = True
    judges = {"heuristic": JudgeOptions()}
    if a.model:
        settings = JudgeSettings(model=a.model, base_url=a.base_url, api_key_env=a.api_key_env, provider=a.provider,
                                 timeout=a.timeout, system_role=not a.no_system_role,
                                 max_tokens=a.max_tokens, structured=a.structured)
        judges[a.model] = JudgeOptions(settings=settings, offline=a.offline, max_chars=a.max_chars, refresh=a.refresh)
    preds: dict[str, dict[str, dict]] = {name: {} for name in judges}
    lines = []
    for c in cases:
        copy = work / f"{c['name']}.yaml"
        if not copy.exists():
            shutil.copyfile(c["path"], copy)
        run = load_run(copy)
        for name, opts in judges.items():
            t0 = time.monotonic()
            try:
                d = diagnose(copy, opts, run=run)
                p = {"label": d.label, "interaction": d.interaction, "claimed": d.claimed_label,
                     "claimed_interaction": d.claimed_interaction,
                     "evidence": len(d.evidence), "rejected": len(d.rejected), "cached": d.cached}
            except SpoolError as exc:
                p = {"label": "unknown", "interaction": None, "error": str(exc)}
            p["seconds"] = round(time.monotonic() - t0, 1)
            preds[name][c["name"]] = p
            lines.append({"case": c["name"], "judge": name, "gold": c["label"], "gold_interactions": c["interactions"],
                          **p})
            if a.jsonl:  # written as it goes: a slow model's partial run still counts
                with a.jsonl.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(lines[-1]) + "\n")
            print(f"{c['name']:28} {name:22} {p['label']:22} {p['interaction']!s:5} "
                  f"{'ok' if right_label(c, p['label']) else '--'} {p['seconds']}s"
                  + (f"  ({p.get('error') or 'claimed ' + str(p.get('claimed'))})" if p.get('error') or p.get('claimed') else ""),
                  file=sys.stderr, flush=True)
    results = {name: score(cases, preds[name]) for name in judges}
    md = table(results)
    if absent:
        md += f"\n\n{len(absent)} runs skipped: ../shared is absent ({', '.join(absent[:3])} ...)"
    print(md)
    if a.out:
        a.out.write_text(md + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
