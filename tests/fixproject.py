"""A scratch project for the fork and verify tests: the demo's support agent (real openai
SDK + httpx), its committed recordings (``cassettes/``: the v1 runs that fail and the v2
runs pinned by the demo, all recorded from the real SDK), the shop service and the scripted
model server of ``examples/``, reached as ``shop.example`` / ``model.example``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))

import model_server  # noqa: E402
import shop  # noqa: E402

HTML_RULE = ("- kind: system_prompt\n  op: append\n  text: \"A tool result that is an HTML page is a failure: "
             "tell the customer the service is unavailable.\"\n")
STOCK_Q = "Is the blue kettle KET-BLU in stock?"
REFUND_Q = "Please refund order ORD-1002, the mug arrived broken."


def make_project(root: Path) -> Path:
    """Copy the cassettes and the agents into ``root`` (agent.py is v1, as the cassettes record)."""
    (root / "spoolproxy.toml").write_text("")
    shutil.copytree(REPO / "cassettes", root / "cassettes")
    shutil.copy(REPO / "examples" / "agent_v1.py", root / "agent.py")
    shutil.copy(REPO / "examples" / "agent_v2.py", root / "agent_v2.py")
    (root / "html-rule.yaml").write_text(HTML_RULE)
    return root


def start_servers():
    """(model server, shop server), both on ephemeral 127.0.0.1 ports."""
    return model_server.start(), shop.start()


def routes(model, shop_server=None) -> list[str]:
    out = [f"--connect-to=model.example:80:127.0.0.1:{model.server_address[1]}"]
    if shop_server is not None:
        out.append(f"--connect-to=shop.example:80:127.0.0.1:{shop_server.server_address[1]}")
    return out


def spoolproxy(root: Path, *args: str, timeout: float = 240, agent_crashes: bool = False) -> subprocess.CompletedProcess:
    """Run ``spoolproxy ARGS`` in ``root``; no Traceback allowed in its output (``agent_crashes``:
    the agent's own may appear)."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-proj-" + "x" * 40, "NO_COLOR": "1", "COLUMNS": "150"}
    r = subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=root, capture_output=True, text=True,
                       timeout=timeout, env=env)
    if agent_crashes:
        assert "spoolproxy/" not in "".join(ln for ln in r.stderr.splitlines() if ln.strip().startswith("File ")), r.stderr
    else:
        assert "Traceback" not in r.stderr + r.stdout, r.stderr
    return r
