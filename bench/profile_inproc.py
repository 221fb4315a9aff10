"""Profile the in-process figures with pyinstrument (``pip install pyinstrument``; not a
dependency) and write the call tree to ``bench/profiles/<name>.txt``.

    python -m bench.profile_inproc detect    # B4: analyze() over a 10,000-interaction agent run
    python -m bench.profile_inproc load      # B3: parse_text() of a 2,000-interaction v1 cassette
    python -m bench.profile_inproc playback-load   # B6: memory of loading + indexing for playback
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _profile(fn, title: str, name: str) -> str:
    from pyinstrument import Profiler

    fn()  # warm-up
    t0 = time.perf_counter()
    fn()
    plain = time.perf_counter() - t0
    p = Profiler(interval=0.0005)
    p.start()
    fn()
    p.stop()
    text = f"# {title}\n\nunprofiled wall time: {plain:.3f} s\n\n" + p.output_text(unicode=False, color=False)
    out = HERE / "profiles" / f"{name}.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    what = args[0] if args else "detect"
    from . import synth

    if what == "detect":
        from spoolproxy.detectors import analyze

        cas = synth.agent_run(10_000)
        print(_profile(lambda: analyze(cas), "pyinstrument: spoolproxy.detectors.analyze, synthetic 10,000-interaction "
                       "OpenAI chat agent run", "detect-synth"))
    elif what == "load":
        from spoolproxy.cassettes.storage import dumps, parse_text

        text = dumps(synth.mixed_cassette(2_000))
        print(_profile(lambda: parse_text(text, Path("synth.yaml")), "pyinstrument: storage.parse_text, synthetic "
                       "2,000-interaction cassette in format v1", "load-v1"))
    elif what == "playback-load":
        import gc
        import os

        os.environ["SPOOLPROXY_CACHE"] = "off"  # the YAML path (a first start)
        import tracemalloc

        from spoolproxy.cassettes import load, save
        from spoolproxy.replayer.fingerprint import Fingerprinter
        from spoolproxy.replayer.index import Index

        import tempfile

        with tempfile.TemporaryDirectory() as d:
            path = save(synth.playback_cassette(10_000), Path(d) / "c.yaml")
            size = path.stat().st_size
            gc.collect()
            tracemalloc.start()
            cas = load(path)
            cur, peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            Index([cas], Fingerprinter(), match="exact", allow_repeats=True)
            cur2, peak2 = tracemalloc.get_traced_memory()
        text = (f"# tracemalloc: loading and indexing a 10,000-interaction cassette for playback\n\n"
                f"cassette file: {size / 1e6:.1f} MB (format v1)\n"
                f"peak Python allocations while loading (yaml.load document + models): {peak / 1e6:.0f} MB\n"
                f"kept after loading (the Cassette models): {cur / 1e6:.0f} MB\n"
                f"added by the playback index: {(cur2 - cur) / 1e6:.0f} MB (peak {peak2 / 1e6:.0f} MB)\n")
        (HERE / "profiles").mkdir(exist_ok=True)
        (HERE / "profiles" / "playback-load-memory.txt").write_text(text)
        print(text)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
