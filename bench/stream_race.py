"""``python -m bench.stream_race [-n 100] [--tail-ms 5]``: how many healthy streaming runs
``detect`` passes when the server sends its terminating chunk a few ms after the terminal
event (issue 9: "100 of 100 recordings pass").

Not a timed benchmark: a count.  Each run is a real ``spoolproxy record -- python CLIENT``
(a subprocess, as a user runs it) against the fake provider of ``tests/fakes`` with the
directive ``tail:MS`` (the last event at once, ``0\\r\\n\\r\\n`` MS later).  The client uses the
real openai SDK (a streamed chat completion with usage, which the SDK stops reading at
``data: [DONE]``, and a streamed tool call) and the real anthropic SDK (``messages.stream``,
and ``messages.create(stream=True)`` left at ``message_stop`` as agent loops do).  Then
``spoolproxy detect --json`` over all cassettes.  Prints the verdict count, how many streams
the client closed before the server finished (the race actually happened), and every
finding of a failed run.  Exit 0 when every run passed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CLIENT = textwrap.dedent('''
    import os, anthropic, openai
    TAIL = os.environ["RACE_TAIL"]
    oa = openai.OpenAI(api_key="sk-" + "x" * 20, max_retries=0, base_url=f"https://api.openai.com/_fake/{TAIL}/v1")
    s = oa.chat.completions.create(model="gpt-4o-mini", stream=True, stream_options={"include_usage": True},
                                   messages=[{"role": "user", "content": "count the race"}])
    assert "".join(c.choices[0].delta.content or "" for c in s if c.choices) == "Echo: count the race"
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]
    s = oa.chat.completions.create(model="gpt-4o-mini", stream=True, tools=tools,
                                   messages=[{"role": "user", "content": "Paris"}])
    calls = [tc for c in s if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert calls and calls[0].function.name == "lookup"
    an = anthropic.Anthropic(api_key="sk-ant-" + "x" * 20, max_retries=0,
                             base_url=f"https://api.anthropic.com/_fake/{TAIL}")
    with an.messages.stream(model="claude-sonnet-4-20250514", max_tokens=64,
                            messages=[{"role": "user", "content": "race helper"}]) as st:
        assert st.get_final_text() == "Echo: race helper"
    text = ""
    with an.messages.create(model="claude-sonnet-4-20250514", max_tokens=64, stream=True,
                            messages=[{"role": "user", "content": "race loop"}]) as st:
        for ev in st:
            if ev.type == "content_block_delta":
                text += ev.delta.text
            if ev.type == "message_stop":
                break
    assert text == "Echo: race loop", text
''')


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=100, help="recordings to make (default 100)")
    ap.add_argument("--tail-ms", type=float, default=5.0, help="ms between the terminal event and the terminating chunk")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from tests.fakes import FakeProvider

    work = Path(tempfile.mkdtemp(prefix="spoolproxy-race-"))
    (work / "client.py").write_text(CLIENT)
    env = {k: v for k, v in os.environ.items() if k not in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy")}
    env.update(SPOOLPROXY_HOME=str(work / "home"), SPOOLPROXY_CONFIG=str(work / "none.toml"),
               RACE_TAIL=f"tail:{args.tail_ms:g}", PYTHONPATH=str(REPO))
    (work / "none.toml").write_text("")
    crashed = 0
    with FakeProvider() as fake:
        rules = [f"{h}:443:127.0.0.1:{fake.port}" for h in ("api.openai.com", "api.anthropic.com")]
        for n in range(args.n):
            cmd = [sys.executable, "-m", "spoolproxy", "record", "-q", "-c", str(work / "runs" / f"run-{n:03d}.yaml"),
                   "--upstream-ca", str(fake.ca_pem_path), *[x for r in rules for x in ("--connect-to", r)],
                   "--", sys.executable, str(work / "client.py")]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            if proc.returncode:
                crashed += 1
                print(f"run {n}: record exited {proc.returncode}: {proc.stderr.strip()[-300:]}", file=sys.stderr)
            print(f"\r{n + 1}/{args.n} recorded", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    out = subprocess.run([sys.executable, "-m", "spoolproxy", "detect", str(work / "runs"), "--json"],
                         env=env, capture_output=True, text=True, timeout=600)
    docs = [json.loads(line) for line in out.stdout.splitlines()]
    passed = [d for d in docs if d["verdict"] == "pass"]
    from spoolproxy.cassettes import load

    closed = streams = 0
    for p in sorted((work / "runs").glob("*.yaml")):
        for it in load(p).interactions:
            streams += 1
            closed += bool(it.extra.get("client_closed"))
    for d in docs:
        if d["verdict"] != "pass":
            for f in d["findings"]:
                print(f"  {Path(d['cassette']).name}: {f['severity']} {f['kind']}: {f['message']}")
    print(f"{len(passed)} of {args.n} recordings pass (tail {args.tail_ms:g} ms; {crashed} client runs failed; "
          f"{closed} of {streams} streams closed by the client before the server's terminating chunk)")
    print(f"cassettes: {work / 'runs'}")
    return 0 if len(passed) == args.n and not crashed else 1


if __name__ == "__main__":
    raise SystemExit(main())
