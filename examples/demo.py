"""``make demo``: from a failing agent run to a green, offline regression suite.

Offline and deterministic: a local shop service (the agent's tools) and a scripted
OpenAI-compatible model run on 127.0.0.1; the agent reaches them as ``http://shop.example``
and ``http://model.example`` through spoolproxy (``--connect-to`` routes those names to the
local ports, so the cassettes hold portable URLs).  Every step prints the command a user
would type and runs it as a real subprocess, in a scratch project (default ``build/demo``):

1. record support-agent v1 on four customer questions;
2. ``spoolproxy detect``: three runs fail (HTML 502 taken as success, a refund sent twice
   after a timeout, a lookup loop), one passes;
3. ``spoolproxy export-test --confirm``: one regression case per failing run;
4. ``spoolproxy test``: v1 ``still_fails`` on each;
5. without touching the code, try a fix for the HTML-502 run: ``spoolproxy fork`` it with a
   system-prompt patch (``--dry-run`` first), ``spoolproxy diff`` the fork against its
   parent, ``spoolproxy verify -k 5`` (5 patched forks against 5 unpatched controls, live,
   plus a past good run) gives a verdict and ``--pin`` saves a passing run; the verified line
   goes into the agent's prompt, and the case passes offline;
6. ship v2 (the code fixes) and try it against the live model with the tools replayed,
   pinning the passing runs (``--pin``);
7. stop both servers; ``spoolproxy test`` passes offline and writes the baseline.

Usage: ``python examples/demo.py [--workdir DIR] [--write-cassettes]``; exit status 0 when
every step behaved as described.  ``--write-cassettes`` copies the recorded v1 runs and the
pinned v2 runs to the repository's ``cassettes/`` folder and the final suite to
``examples/spool/`` (how the committed ones were made).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import model_server  # noqa: E402
import shop  # noqa: E402

TASKS = {
    "order-status": ["--no-stream", "Where is my order ORD-1001?"],
    "stock-check": ["Is the blue kettle KET-BLU in stock?"],
    "refund": ["Please refund order ORD-1002, the mug arrived broken."],
    "lost-order": ["Where is my order ORD-1404? It's been two weeks."],
}
FAILING = ("lost-order", "refund", "stock-check")
HTML_RULE = "A tool result that is an HTML page is a failure: tell the customer the service is unavailable."
HTML_RULE_PATCH = f"""\
# the verified fix for the stock-check run: one line in the system prompt
- kind: system_prompt
  op: append
  text: "{HTML_RULE}"
  note: the inventory service answers nginx's HTML 502 page when its backend is down
"""
BOLD, DIM, GREEN, RED, RESET = ("\033[1m", "\033[2m", "\033[32m", "\033[31m", "\033[0m") if sys.stdout.isatty() \
    else ("", "", "", "", "")


def _child_cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class DemoError(Exception):
    """A step did not behave as the demo expects."""


class Demo:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
        self.env.update({"OPENAI_BASE_URL": "http://model.example/v1", "SHOP_URL": "http://shop.example",
                         "OPENAI_API_KEY": "demo-key-not-a-secret", "NO_COLOR": "1", "COLUMNS": "120",
                         "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
                         # as in an activated virtualenv: `python` and `spoolproxy` are this interpreter's
                         "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])})
        self.shop = self.model = None

    # -- helpers --------------------------------------------------------------------------
    def step(self, title: str) -> None:
        print(f"\n{BOLD}== {title}{RESET}", flush=True)

    def say(self, text: str) -> None:
        print(f"{DIM}# {text}{RESET}", flush=True)

    def run(self, argv: list[str], *, shown: list[str] | None = None, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        """Print ``$ shown`` and run argv in the scratch project (``spoolproxy`` is this interpreter's)."""
        print(f"{BOLD}$ {shlex.join(shown or argv)}{RESET}", flush=True)
        real = list(argv)
        if real[0] == "spoolproxy":
            real = [sys.executable, "-m", "spoolproxy", *real[1:]]
        t0, c0 = time.monotonic(), _child_cpu()
        proc = subprocess.run(real, cwd=self.work, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        if os.environ.get("DEMO_TIMING"):
            print(f"  [{time.monotonic() - t0:.2f} s wall, {_child_cpu() - c0:.2f} s cpu]")
        out = proc.stdout.rstrip()
        if out:
            print("\n".join("  " + line for line in out.splitlines()), flush=True)
        if proc.returncode not in ok:
            raise DemoError(f"`{shlex.join(shown or argv)}` exited {proc.returncode} (expected {ok})")
        return proc

    def run_all(self, commands: list[list[str]], ok: tuple[int, ...] = (0,)) -> None:
        """Run independent commands concurrently; print each command and its output in order."""
        procs = []
        for argv in commands:
            real = [sys.executable, "-m", "spoolproxy", *argv[1:]] if argv[0] == "spoolproxy" else argv
            procs.append(subprocess.Popen(real, cwd=self.work, env=self.env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        for argv, proc in zip(commands, procs):
            out, _ = proc.communicate()
            print(f"{BOLD}$ {shlex.join(argv)}{RESET}", flush=True)
            if out.strip():
                print("\n".join("  " + line for line in out.rstrip().splitlines()), flush=True)
            if proc.returncode not in ok:
                raise DemoError(f"`{shlex.join(argv)}` exited {proc.returncode} (expected {ok})")

    def routes(self, *, shop_too: bool = True) -> list[str]:
        out = []
        if shop_too:
            out += ["--connect-to", f"shop.example:80:127.0.0.1:{self.shop.server_address[1]}"]
        out += ["--connect-to", f"model.example:80:127.0.0.1:{self.model.server_address[1]}"]
        return out

    def junit_outcomes(self, path: Path) -> dict[str, str]:
        """case name -> outcome read back from a JUnit report."""
        out = {}
        for tc in ET.parse(path).getroot().iter("testcase"):
            failure, error = tc.find("failure"), tc.find("error")
            out[tc.get("name")] = failure.get("type") if failure is not None else "error" if error is not None else "passes"
        return out

    def expect(self, path: Path, want: dict[str, str]) -> None:
        got = self.junit_outcomes(path)
        if got != want:
            raise DemoError(f"expected outcomes {want}, got {got}")

    # -- the story --------------------------------------------------------------------------
    def main(self) -> None:
        if self.work.exists():
            shutil.rmtree(self.work)
        (self.work / "cassettes").mkdir(parents=True)
        (self.work / "spoolproxy.toml").write_text("# spoolproxy settings of the demo project (none needed)\n")
        # (spoolproxy.toml marks the project root: case paths are relative to it)
        self.shop, self.model = shop.start(), model_server.start()
        self.step("0. a shop API and a scripted model on 127.0.0.1, reached as shop.example / model.example")
        self.say(f"shop on 127.0.0.1:{self.shop.server_address[1]}, model on 127.0.0.1:{self.model.server_address[1]}; "
                 f"scratch project: {self.work}")
        self.say("the support agent, with its bugs, as the project's agent.py")
        self.run(["cp", str(HERE / "agent_v1.py"), "agent.py"], shown=["cp", "examples/agent_v1.py", "agent.py"])
        shutil.copy(HERE / "agent_v1.py", self.work / "agent-v1.py")  # for the diff in step 5

        self.step("1. record the agent (v1) on four customer questions")
        self.say("the four recordings run side by side (one proxy each); their output is shown in order")
        self.run_all([["spoolproxy", "record", "--cassette", f"cassettes/{name}.yaml", "--tag", "version=v1",
                       *self.routes(), "--", "python", "agent.py", *args] for name, args in TASKS.items()], ok=(0, 1))

        self.step("2. which runs failed, and why (verbatim evidence)")
        self.run(["spoolproxy", "detect", "cassettes/"], ok=(0, 1))

        self.step("3. turn each failing run into a regression test case")
        self.run(["spoolproxy", "export-test", "cassettes/", "--confirm"])
        self.run(["cat", "spool/refund.yaml"])

        self.step("4. the suite, offline: v1 still fails each case")
        self.run(["spoolproxy", "test", "--junit", "v1.xml"])
        self.expect(self.work / "v1.xml", {n: "still_fails" for n in FAILING})

        self.prompt_fix()

        self.step("6. ship the code fixes (v2) and try them: live model, tools replayed; pin the passing runs")
        self.say("the fix: see `diff examples/agent_v1.py examples/agent_v2.py`")
        self.run(["cp", str(HERE / "agent_v2.py"), "agent.py"], shown=["cp", "examples/agent_v2.py", "agent.py"])
        self.env["SPOOLPROXY_TAGS"] = "version=v2"
        self.say("runs from here on are tagged version=v2 (export SPOOLPROXY_TAGS=version=v2); the dashboard groups by it")
        self.run(["spoolproxy", "test", "--live", "model.example", *self.routes(shop_too=False), "--pin",
                  "--junit", "v2-live.xml"])
        self.expect(self.work / "v2-live.xml", {n: "passes" for n in FAILING})

        self.step("7. stop both servers: CI runs the suite fully offline")
        self.shop.shutdown()
        self.model.shutdown()
        self.shop.server_close()
        self.model.server_close()
        self.say("shop and model stopped; nothing listens on their ports any more")
        self.run(["spoolproxy", "test", "--update-baseline", "--junit", "report.xml", "--fail-on", "any"])
        self.expect(self.work / "report.xml", {n: "passes" for n in FAILING})
        self.run(["ls", "spool", "cassettes"])
        self.say("the runs, clusters and test outcomes in one page (open it in a browser):")
        self.run(["spoolproxy", "dashboard", "cassettes/", "spool/", "-o", "dashboard/index.html"])

    def prompt_fix(self) -> None:
        """Step 5: fork the HTML-502 run with a system-prompt patch, diff, verify, pin, apply."""
        self.step("5. try a prompt fix without touching the code: fork, diff, verify, pin")
        self.say("the model took nginx's HTML 502 page for stock data; would one line in the system prompt fix it?")
        (self.work / "fixes").mkdir()
        (self.work / "fixes" / "html-rule.yaml").write_text(HTML_RULE_PATCH)
        self.run(["cat", "fixes/html-rule.yaml"])
        self.run(["spoolproxy", "fork", "cassettes/stock-check.yaml", "--patch", "fixes/html-rule.yaml", "--dry-run"])
        self.say("rerun the recorded run with the patch: the model live, the shop's answers replayed from the cassette")
        self.run(["spoolproxy", "fork", "cassettes/stock-check.yaml", "--patch", "fixes/html-rule.yaml",
                  *self.routes(shop_too=False), "-o", "cassettes/stock-check.fork.yaml"])
        self.run(["spoolproxy", "diff", "cassettes/stock-check.fork.yaml"])
        self.say("one run proves little with a sampling model: 5 patched forks against 5 unpatched controls, "
                 "plus a past good run that must still pass")
        verify = self.run(["spoolproxy", "verify", "stock-check", "--patch", "fixes/html-rule.yaml", "-k", "5",
                           "--regress", "cassettes/order-status.yaml", "--pin", *self.routes(shop_too=False)],
                          ok=(0, 1))
        if "pinned: " not in verify.stdout:
            raise DemoError("verify did not pin a passing patched run")
        self.say("apply the verified line to the agent's system prompt (the edit a developer commits):")
        agent = self.work / "agent.py"
        before = agent.read_text()
        after = before.replace('citing the tool data.")', 'citing the tool data.\\n"\n          "' + HTML_RULE + '")')
        if after == before:
            raise DemoError("could not find the system prompt in agent.py")
        agent.write_text(after)
        self.run(["diff", "-u", "agent-v1.py", "agent.py"], ok=(1,),
                 shown=["diff", "-u", "examples/agent_v1.py", "agent.py"])
        self.run(["spoolproxy", "test", "--case", "stock-check", "--junit", "prompt-fix.xml"])
        self.expect(self.work / "prompt-fix.xml", {"stock-check": "passes"})

    def write_cassettes(self) -> None:
        target = REPO / "cassettes"
        target.mkdir(exist_ok=True)
        for p in sorted((self.work / "cassettes").glob("*.yaml")):
            shutil.copy(p, target / p.name)
        print(f"copied {len(list((self.work / 'cassettes').glob('*.yaml')))} cassettes to {target}")
        suite = HERE / "spool"  # the final suite, runnable from the repository root
        suite.mkdir(exist_ok=True)
        for p in sorted((self.work / "spool").glob("*.yaml")):
            text = p.read_text().replace("argv: [python, agent.py,", "argv: [python, examples/agent_v2.py,")
            (suite / p.name).write_text(text)
        shutil.copy(self.work / "spool" / "baseline.json", suite / "baseline.json")
        print(f"wrote the example suite to {suite}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="spoolproxy demo: failing agent run -> offline regression suite")
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "demo", help="scratch project (recreated)")
    parser.add_argument("--write-cassettes", action="store_true", help="copy the cassettes to the repository's cassettes/")
    args = parser.parse_args(argv)
    demo = Demo(args.workdir.resolve())
    t0 = time.monotonic()
    try:
        demo.main()
    except DemoError as exc:
        print(f"\n{RED}demo failed: {exc}{RESET}", file=sys.stderr)
        return 1
    finally:
        for server in (demo.shop, demo.model):
            if server is not None:
                server.shutdown()
    if args.write_cassettes:
        demo.write_cassettes()
    print(f"\n{GREEN}{BOLD}demo complete in {time.monotonic() - t0:.0f} s: 3 failures recorded, exported, "
          f"a prompt fix forked, diffed and verified, the code fixed and pinned; the offline suite passes.{RESET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
