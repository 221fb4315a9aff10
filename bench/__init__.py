"""spoolproxy benchmarks (issue 4): ``python -m bench [--quick]``.

Each figure (B1..B6) is measured against its reference in the same run and written to
``bench/results.md`` and ``bench/results.json`` (``--quick``: ``results-quick.*``) as the
median and spread (p10-p90) of repeated runs, with the ratio and the issue's target.
Timing lives here, never in tests; ``tests/test_bench_quick.py`` only checks that a quick
run produces every row.
"""
