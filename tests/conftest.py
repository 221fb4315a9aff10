"""Shared test fixtures: paths to ../shared material (skipped with a reason when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["tests.fakes.fixtures"]

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SPOOLPROXY_SHARED", REPO.parent / "shared"))
CORPUS = SHARED / "corpus" / "cassettes"
CASES = SHARED / "cases"


@pytest.fixture(scope="session", autouse=True)
def _private_spoolproxy_home(tmp_path_factory):
    """Every test session gets its own SPOOLPROXY_HOME and SPOOLPROXY_CACHE, so the CA, its
    key and the parsed-cassette cache live in temporary directories, never in the user's
    home (tests may still set their own)."""
    set_here = [k for k in ("SPOOLPROXY_HOME", "SPOOLPROXY_CACHE") if not os.environ.get(k)]
    for key in set_here:
        os.environ[key] = str(tmp_path_factory.mktemp(key.lower()))
    try:
        yield
    finally:
        for key in set_here:
            os.environ.pop(key, None)


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """../shared/corpus/cassettes, or skip."""
    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS} (set SPOOLPROXY_SHARED)")
    return CORPUS


@pytest.fixture(scope="session")
def cases_dir() -> Path:
    """../shared/cases, or skip."""
    if not CASES.is_dir():
        pytest.skip(f"shared cases not found at {CASES} (set SPOOLPROXY_SHARED)")
    return CASES


def corpus_files() -> list[Path]:
    """Every corpus cassette (empty when the corpus is absent; tests then skip)."""
    return sorted(CORPUS.rglob("*.yaml")) if CORPUS.is_dir() else []
