"""Sizes and repeat counts of a full run and of a ``--quick`` smoke run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """Every knob of a run.  Sizes are counts (interactions, requests) or MiB; times seconds."""

    quick: bool
    b1_runs: int
    b1_requests_1k: int
    b1_requests_100k: int
    b1_sse_streams: int
    b1_sse_events: int
    b1_sse_gap_ms: float
    b1_sse_first_gap_ms: float
    b2_sizes: tuple[int, int, int]
    b2_runs: int
    b2_requests: int
    b2_run_budget_s: float
    b3_runs: int
    b3_synth_n: int
    b4_runs: int
    b4_synth_n: int
    b5_runs: int
    b6_download_mib: int
    b6_read_steps: int  # steps of the long agent run read by B6's read rows (210: ~50 MB)
    corpus_stride: int  # use every n-th corpus file (1: all)


FULL = Config(
    quick=False, b1_runs=5, b1_requests_1k=300, b1_requests_100k=100, b1_sse_streams=8,
    b1_sse_events=200, b1_sse_gap_ms=0.0, b1_sse_first_gap_ms=5.0, b2_sizes=(10, 1000, 10000), b2_runs=5, b2_requests=100,
    b2_run_budget_s=1.5, b3_runs=3, b3_synth_n=10000, b4_runs=3, b4_synth_n=10000, b5_runs=7,
    b6_download_mib=200, b6_read_steps=210, corpus_stride=1,
)

QUICK = Config(
    quick=True, b1_runs=2, b1_requests_1k=20, b1_requests_100k=10, b1_sse_streams=2,
    b1_sse_events=200, b1_sse_gap_ms=0.0, b1_sse_first_gap_ms=5.0, b2_sizes=(10, 50, 200), b2_runs=2, b2_requests=10,
    b2_run_budget_s=0.3, b3_runs=1, b3_synth_n=500, b4_runs=1, b4_synth_n=500, b5_runs=1,
    b6_download_mib=20, b6_read_steps=40, corpus_stride=6,
)
