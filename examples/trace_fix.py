"""Regression from a trace, at the wire: a silent tool bug found in a recorded run, proven
with a counterfactual, fixed, rerun live, saved as a test and gated on a pass rate.

The agent is the careful support agent (``agent_v2.py``, real openai SDK + httpx); its
order lookup (``orders_api.py``) has a silent bug: an unknown order id gets another order's
record with the requested id stamped on it, so the agent confidently describes someone
else's kettle.  Every step prints the command a user would type and runs it, in a scratch
project (default ``build/trace-fix``):

1. record the run for ``ORD-1999`` (an order that does not exist);
2. ``spoolproxy detect``: it passes; nothing looks wrong (the silent-failure class);
   ``spoolproxy show`` has the smoking gun: a 200 with ORD-1001's kettle for ORD-1999;
3. the counterfactual: ``spoolproxy fork --tool-result`` serves the lookup a 404 instead
   and the model, live, re-reads it: "I couldn't find order ORD-1999"; ``spoolproxy diff``
   shows the first divergence is the tool's answer;
4. fix the tool (the fixed service) and ``spoolproxy fork --route`` the tool host to it: the
   same run, model live, with the real fixed tool;
5. ``spoolproxy export-test --passing`` saves that run as a regression test with an
   assertion; ``spoolproxy test --repeat 3 --fail-under 1.0`` gates CI on it offline;
6. against the live model, which samples (a seeded flaky model), ``spoolproxy test --live
   --repeat 5 --fail-under 0.8`` measures a pass rate and holds the gate.

Usage: ``python examples/trace_fix.py [--workdir DIR]``; exit 0 when every step behaved
as described.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import model_server  # noqa: E402
import orders_api  # noqa: E402
from demo import BOLD, GREEN, RED, RESET, Demo, DemoError  # noqa: E402

QUESTION = "What's the status of order ORD-1999?"
NOT_FOUND = {"error": {"code": "order_not_found", "message": "no order 'ORD-1999'"}}


def seed_with(flaky: float, flips: list[bool]) -> int:
    """A seed whose first judgement calls flip exactly as ``flips`` says (reproducible sampling)."""
    for seed in range(100_000):
        rng = random.Random(seed)
        if [rng.random() < flaky for _ in flips] == flips:
            return seed
    raise DemoError("no seed found")


class TraceFix(Demo):
    def main(self) -> None:
        if self.work.exists():
            shutil.rmtree(self.work)
        (self.work / "cassettes").mkdir(parents=True)
        (self.work / "fixes").mkdir()
        (self.work / "spoolproxy.toml").write_text("# the trace-fix example project\n")
        self.shop, self.model = orders_api.start(), model_server.start()
        self.step("0. a buggy order-lookup service and a scripted model on 127.0.0.1 (shop.example, model.example)")
        self.run(["cp", str(HERE / "agent_v2.py"), "agent.py"], shown=["cp", "examples/agent_v2.py", "agent.py"])

        self.step("1. a customer asks about an order that does not exist; record the run")
        self.run(["spoolproxy", "record", "--cassette", "cassettes/ord-1999.yaml", *self.routes(), "--", "python",
                  "agent.py", QUESTION])

        self.step("2. nothing looks wrong: the detectors pass the run (the silent-failure class)")
        self.run(["spoolproxy", "detect", "cassettes/ord-1999.yaml"])
        self.say("the smoking gun: the lookup answered 200 with ORD-1001's kettle, stamped ORD-1999")
        self.run(["spoolproxy", "show", "cassettes/ord-1999.yaml"])

        self.step("3. the counterfactual: what if the tool had said 'not found'? fork with a tool-result override")
        (self.work / "fixes" / "not-found.json").write_text(json.dumps(NOT_FOUND) + "\n")
        r = self.run(["spoolproxy", "fork", "cassettes/ord-1999.yaml", "--tool-result",
                      "GET shop.example/orders*=404:fixes/not-found.json", *self.routes(shop_too=False),
                      "-o", "cassettes/ord-1999.what-if.yaml"])
        self.check("couldn't find order ORD-1999" in r.stdout, "the counterfactual run should not find the order")
        self.run(["spoolproxy", "diff", "cassettes/ord-1999.what-if.yaml"])

        self.step("4. fix the tool, then rerun the trace live against the fixed service (route the tool host)")
        fixed = orders_api.start(fixed=True)
        try:
            r = self.run(["spoolproxy", "fork", "cassettes/ord-1999.yaml", "--at", "0", "--route",
                          f"shop.example=http://127.0.0.1:{fixed.server_address[1]}", *self.routes(shop_too=False),
                          "-o", "cassettes/ord-1999.fixed.yaml"])
        finally:
            fixed.shutdown()
        self.check("couldn't find order ORD-1999" in r.stdout, "the fixed tool should make the agent say so")

        self.step("5. save the fixed run as a regression test and gate CI on it (offline)")
        self.run(["spoolproxy", "export-test", "cassettes/ord-1999.fixed.yaml", "--passing", "--confirm",
                  "--final-answer-contains", "couldn't find order ORD-1999"])
        self.run(["cat", "spool/ord-1999.fixed.yaml"])
        self.run(["spoolproxy", "test", "--repeat", "3", "--fail-under", "1.0", "--junit", "gate.xml"])
        self.expect(self.work / "gate.xml", {"ord-1999.fixed": "passes"})

        self.step("6. the same gate against the live model, which samples: a pass rate, not a coin toss")
        self.model.brain = model_server.Brain(seed=seed_with(0.2, [False, False, True, False, False]), flaky=0.2)
        self.say("the model now words a missing order vaguely 20% of the time (seeded, so this run is reproducible)")
        r = self.run(["spoolproxy", "test", "--live", "model.example", *self.routes(shop_too=False), "--repeat", "5",
                      "--fail-under", "0.8", "--junit", "live-gate.xml"])
        self.check("pass rate: 4/5 runs (80%" in r.stdout and "--fail-under 0.8: ok" in r.stdout,
                   "the live gate should measure 4/5 and hold at 0.8")
        self.shop.shutdown()
        self.model.shutdown()

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            raise DemoError(what)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="spoolproxy example: regression from a trace, at the wire")
    parser.add_argument("--workdir", type=Path, default=HERE.parent / "build" / "trace-fix",
                        help="scratch project (recreated)")
    args = parser.parse_args(argv)
    demo = TraceFix(args.workdir.resolve())
    t0 = time.monotonic()
    try:
        demo.main()
    except DemoError as exc:
        print(f"\n{RED}trace-fix example failed: {exc}{RESET}", file=sys.stderr)
        return 1
    finally:
        for server in (demo.shop, demo.model):
            if server is not None:
                server.shutdown()
    print(f"\n{GREEN}{BOLD}trace-fix example complete in {time.monotonic() - t0:.0f} s: a silent tool bug found, "
          f"proven with a counterfactual, fixed, rerun live, saved as a test and gated on a pass rate.{RESET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
