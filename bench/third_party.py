"""``python -m bench.third_party SUITE --checkout DIR --python VENV/bin/python [--before SRC]``:
replay a real third-party project's own vcrpy / pytest-recording test suite through
spoolproxy and compare it with the project's own in-process VCR run.

Nothing of the project is committed here: :data:`SUITES` names the public repository, the
commit measured, how to install its test dependencies and which tests replay cassettes.
Set-up, by hand (the checkout and the venv live outside this repository)::

    git clone https://github.com/simonw/llm /tmp/llm && git -C /tmp/llm checkout COMMIT
    python3.12 -m venv /tmp/venv-llm
    /tmp/venv-llm/bin/pip install -e /tmp/llm PACKAGES... -e /path/to/spoolproxy
    python -m bench.third_party llm --checkout /tmp/llm --python /tmp/venv-llm/bin/python

Three runs of the same tests, each under a time limit (a freeze is reported, not waited
for), each test's outcome read from a JUnit XML file:

1. **own**: the project's own pytest-recording run, vcrpy patched in-process;
2. **per-test**: ``pytest --spoolproxy`` (vcrpy off; one playback proxy, switched to each
   test's cassettes through the control endpoint);
3. **pooled**: every cassette of the suite copied into one directory and served at once:
   ``spoolproxy playback -c DIR -- pytest --disable-recording``.

``--before SRC`` runs 2 and 3 again with another spoolproxy source tree first on
``PYTHONPATH`` (e.g. a checkout of ``main``), for a before/after comparison.  Prints a
Markdown table: tests passed / run, wall time, and every test that passes under the
project's own VCR but not under spoolproxy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


@dataclass(frozen=True)
class Suite:
    """A public project whose tests replay cassettes in-process."""

    repo: str
    commit: str
    packages: tuple[str, ...]  #: pip install arguments for its test dependencies (besides the checkout)
    pytest_args: tuple[str, ...]  #: selects the tests that replay cassettes
    cassettes: tuple[str, ...]  #: globs of the selected tests' cassettes, relative to the checkout
    env: tuple[tuple[str, str], ...] = ()
    note: str = ""


SUITES: dict[str, Suite] = {
    "llm": Suite(
        repo="https://github.com/simonw/llm",
        commit="f3f4f29c6e5e623c3776cbf6455dda2345638214",
        packages=("-e", ".", "pytest", "numpy", "pytest-httpx>=0.33.0", "pytest-asyncio", "cogapp",
                  "pytest-recording", "syrupy", "llm-echo==0.3a3"),
        pytest_args=("-m", "vcr"),
        cassettes=("tests/cassettes/**/*.yaml",),
        note="every test marked vcr (the rest of its suite mocks httpx with pytest-httpx)",
    ),
    "pydantic-ai": Suite(
        repo="https://github.com/pydantic/pydantic-ai",
        commit="4fda38988f2939fa6ea9cdefcf120693e10ef491",
        packages=("-e", "pydantic_graph", "-e", "pydantic_ai_slim[openai,anthropic]", "pytest", "pytest-recording",
                  "vcrpy", "inline-snapshot>=0.32.5", "dirty-equals>=0.9.0", "pytest-mock", "anyio", "devtools",
                  "blockbuster>=1.5.26,<1.6", "brotli", "pytest-pretty"),
        pytest_args=("tests/models/test_openai.py", "tests/models/test_anthropic.py", "-m", "vcr"),
        cassettes=("tests/models/cassettes/test_openai/*.yaml", "tests/models/cassettes/test_anthropic/*.yaml"),
        env=(("UV_DYNAMIC_VERSIONING_BYPASS", "2.33.0"),),
        note="the OpenAI and Anthropic model tests marked vcr (install with UV_DYNAMIC_VERSIONING_BYPASS=2.33.0 "
             "when the checkout has no git tags)",
    ),
}


@dataclass
class Run:
    """One pytest run: outcome per test id, wall time, whether it hit the time limit."""

    label: str
    outcomes: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    timed_out: bool = False
    tail: str = ""

    @property
    def passed(self) -> set[str]:
        return {t for t, o in self.outcomes.items() if o == "passed"}


def _outcomes(junit: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    if not junit.exists():
        return out
    for tc in ET.parse(junit).getroot().iter("testcase"):
        tid = f"{tc.get('classname')}::{tc.get('name')}"
        kinds = {child.tag for child in tc}
        out[tid] = ("failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed")
    return out


def run_pytest(label: str, argv: list[str], cwd: Path, env: dict[str, str], limit_s: float) -> Run:
    """Run ``argv`` (a pytest command writing ``--junitxml``) under a time limit."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        full = [*argv, f"--junitxml={junit}", "-p", "no:cacheprovider", "-o", "addopts=", "-q"]
        t0 = time.monotonic()
        run = Run(label)
        try:
            proc = subprocess.run(full, cwd=cwd, env=env, capture_output=True, text=True, timeout=limit_s,
                                  start_new_session=True)
            run.tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
        except subprocess.TimeoutExpired:
            run.timed_out = True
        run.wall_s = time.monotonic() - t0
        run.outcomes = _outcomes(junit)
        return run


def pooled_dir(checkout: Path, patterns: tuple[str, ...], dest: Path) -> int:
    """Copy every cassette matching ``patterns`` into ``dest`` (names made unique)."""
    n = 0
    for pattern in patterns:
        for f in sorted(checkout.glob(pattern)):
            shutil.copy(f, dest / f"{f.parent.name}__{f.name}")
            n += 1
    return n


def measure(suite: Suite, checkout: Path, python: str, before: str | None, limit_s: float) -> list[Run]:
    base = dict(os.environ, **dict(suite.env))
    for k in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
        base.pop(k, None)
    pytest = [python, "-m", "pytest", *suite.pytest_args]
    runs = [run_pytest("own VCR (in-process)", pytest, checkout, base, limit_s)]
    variants = [("after", base)]
    if before:
        variants.append(("before", dict(base, PYTHONPATH=before)))
    with tempfile.TemporaryDirectory() as tmp:
        pool = Path(tmp)
        count = pooled_dir(checkout, suite.cassettes, pool)
        for name, env in variants:
            runs.append(run_pytest(f"spoolproxy per-test ({name})", [*pytest, "--spoolproxy"], checkout, env, limit_s))
            play = [python, "-m", "spoolproxy", "playback", "-q", "-c", str(pool), "--", *pytest, "--disable-recording"]
            runs.append(run_pytest(f"spoolproxy pooled, {count} cassettes ({name})", play, checkout, env, limit_s))
    return runs


def table(runs: list[Run]) -> str:
    own = runs[0]
    lines = ["| run | passed / tests | wall time | passes under own VCR but not here |", "|---|---:|---:|---|"]
    for r in runs:
        lost = sorted(own.passed - r.passed) if r is not own else []
        status = " (time limit hit)" if r.timed_out else ""
        shown = ", ".join(t.rsplit("::", 1)[-1] for t in lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
        lines.append(f"| {r.label} | {len(r.passed)} / {len(r.outcomes)} | {r.wall_s:.1f} s{status} | "
                     f"{len(lost) if r is not own else '-'}{': ' + shown if lost else ''} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", choices=sorted(SUITES))
    ap.add_argument("--checkout", required=True, type=Path, help="the project checked out at its SUITES commit")
    ap.add_argument("--python", required=True, help="python of a venv with its test dependencies and spoolproxy")
    ap.add_argument("--before", help="another spoolproxy source tree to compare with (put first on PYTHONPATH)")
    ap.add_argument("--limit", type=float, default=1800, help="seconds per run before it counts as a freeze")
    args = ap.parse_args(argv)
    suite = SUITES[args.suite]
    runs = measure(suite, args.checkout.resolve(), args.python, args.before, args.limit)
    print(f"{args.suite} @ {suite.commit[:12]} ({suite.note})\n")
    print(table(runs))
    for r in runs:
        if not r.outcomes or r.timed_out:
            print(f"\n{r.label}: {'time limit hit' if r.timed_out else 'no test ran'}; last lines:\n{r.tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
