"""``python -m bench.section B3 --out ROWS.json [--quick] [--keep]``: run one section in a
fresh process and write its rows as JSON.

``python -m bench`` runs every section this way so that one section's memory (B2 holds
10,000-interaction cassettes) cannot slow the next through garbage-collection work, and a
crash stays inside its section.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

from .config import FULL, QUICK
from .ctx import RunContext
from .report import Results


def main(argv: list[str] | None = None) -> int:
    from .__main__ import SECTIONS, all_specs

    ap = argparse.ArgumentParser(prog="python -m bench.section")
    ap.add_argument("section", choices=list(SECTIONS))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    res = Results()
    for sec, rows in all_specs().items():
        res.declare(sec, rows)
    status = 0
    with RunContext(QUICK if args.quick else FULL, keep=args.keep) as ctx:
        if args.keep:
            print(f"bench: {args.section} scratch directory {ctx.work}", file=sys.stderr)
        try:
            SECTIONS[args.section][0](res, ctx)
        except Exception as exc:
            traceback.print_exc()
            res.unavailable(args.section + ".", f"{args.section} failed: {type(exc).__name__}: {exc}")
            status = 1
    args.out.write_text(json.dumps([r.as_dict() for r in res.rows.values()], default=str))
    return status


if __name__ == "__main__":
    sys.exit(main())
