"""The committed recorded judge (tests/data/judge/): how it was made, and how to remake it.

``python -m tests.judge_fixture`` copies ``cassettes/stock-check.yaml`` into
``tests/data/judge/`` and diagnoses it once against the fake OpenAI-compatible judge
(:mod:`tests.fakes.judge_server`) with :data:`ANSWER`, recording the judge's traffic through
spoolproxy's recorder into ``tests/data/judge/.stock-check.judge.yaml``.  Remake it after a
change of the diagnosis prompt (its version changes too); the replay test then passes again.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "judge"
RUN = DATA / "stock-check.yaml"

#: the scripted judgement: quotes copied from the run, the failure where it happened
ANSWER = {"evidence": [{"interaction": 1, "field": "response.body", "quote": "<title>502 Bad Gateway</title>"},
                       {"interaction": 2, "field": "message.text",
                        "quote": "Good news: KET-BLU is in stock and ready to ship today!"}],
          "failing_interaction": 1, "label": "tool_error_mishandled",
          "root_cause": "The inventory service's HTML 502 page was read as stock data and the customer was told "
                        "the kettle is in stock.", "confidence": 0.9}


def record(target: Path = DATA) -> Path:
    """Record the fixture into ``target``; returns the judge cassette."""
    sys.path.insert(0, str(REPO))
    from spoolproxy.judge import JudgeOptions, JudgeSettings, diagnose
    from spoolproxy.judge.cache import judge_cassette, results_path
    from tests.fakes.judge_server import JudgeServer

    target.mkdir(parents=True, exist_ok=True)
    run = target / RUN.name
    shutil.copyfile(REPO / "cassettes" / "stock-check.yaml", run)
    with JudgeServer(lambda req: ANSWER) as server:
        diagnose(run, JudgeOptions(settings=JudgeSettings(model="fake-judge-1", base_url=server.url), refresh=True))
    results_path(run).unlink(missing_ok=True)  # the cache is not part of the fixture: the replay must answer
    return judge_cassette(run)


if __name__ == "__main__":
    print(record())
