"""Planted secrets through the gateway and the scale path: no shape reaches a write path.

The planted agent (``tests/planted/agent.py``: every secret shape in every place a client
can put it, its upstream echoing everything back) runs through ``spoolproxy serve``, which
publishes its sessions to a store; then ``detect`` over the store writes Parquet, and
``cluster`` and ``dashboard`` read it.  Write paths checked: the published cassettes and
their side bodies, everything left in the spool, serve's terminal lines, the control
endpoint's answer, the Parquet table, detect's and cluster's output and the dashboard.

Each session has its own ``Redactor`` (a fork of the gateway's), which learns a secret where
it first appears in a credential place (a header, a query parameter, a JSON field) and
replaces it everywhere else in the run.  ``env-only-token`` is caught that way too: unlike
``record``, a gateway does not start its agents, so it cannot learn their environment
(``Redactor.learn_env``); a secret an agent sends only in ordinary places needs
``--redact-pattern``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.planted import echo
from tests.planted.shapes import ENV_ONLY, build, forms

from .scale_support import need_scale
from .test_gateway import _start_serve
from .test_scale import spool as run_cli_inprocess
from .test_proxy_support import spool_home  # noqa: F401 (fixture)

HERE = Path(__file__).resolve().parent


def test_no_planted_secret_reaches_the_store_the_spool_the_parquet_or_any_output(tmp_path, spool_home,  # noqa: F811
                                                                                 capsys):
    need_scale()
    shapes = build(seed=15)
    secrets_file = tmp_path / "outside" / "secrets.json"
    secrets_file.parent.mkdir()
    secrets_file.write_text(json.dumps({n: v for n, (v, _) in shapes.items() if n != "env-only-token"}))
    store, spool = tmp_path / "store", tmp_path / "spool"
    server = echo.start()
    outputs: dict[str, str] = {}
    try:
        proc, proxy, lines = _start_serve(["--store", f"file://{store}", "--spool", str(spool), "--max-body-size",
                                           "4k", "--idle", "600"], spool_home)
        try:
            env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "all_proxy")}
            env |= {"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "PLANTED_SECRETS_FILE": str(secrets_file),
                    ENV_ONLY: shapes["env-only-token"][0], "PYTHONPATH": str(HERE.parent),
                    "PLANTED_UPSTREAM": f"http://127.0.0.1:{server.server_address[1]}"}
            agent = subprocess.run([sys.executable, str(HERE / "planted" / "agent.py")], env=env, capture_output=True,
                                   text=True, timeout=240)
            assert agent.returncode == 0, agent.stderr
            with httpx.Client(proxy=proxy, timeout=30) as c:
                outputs["control: GET /sessions"] = c.get("http://spoolproxy.control/sessions").text
            os.killpg(proc.pid, signal.SIGTERM)
            assert proc.wait(60) == 0, "\n".join(lines)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    finally:
        server.shutdown()
    outputs["serve: terminal"] = "\n".join(lines)
    table = tmp_path / "out" / "findings.parquet"
    for name, args in {"detect --json --parquet": ["detect", f"file://{store}", "--json", "--parquet", str(table)],
                       "detect table": ["detect", f"file://{store}"],
                       "cluster (Parquet) --json": ["cluster", str(table), "--json", "-v"],
                       "dashboard --findings": ["dashboard", "--findings", str(table), "-o",
                                                str(tmp_path / "out" / "site" / "index.html")]}.items():
        code, out, err = run_cli_inprocess(capsys, *args)  # in-process: the same code paths, no interpreter start-up each
        assert code in (0, 1), err
        outputs[name] = out + err
    files = {str(f.relative_to(tmp_path)): f.read_bytes().decode("utf-8", "replace")
             for d in (store, spool, tmp_path / "out") for f in sorted(d.rglob("*")) if f.is_file()}
    assert any(".bodies/" in n for n in files), sorted(files)  # side bodies were published too
    assert any(n.endswith(".parquet") for n in files) and any(n.endswith("index.html") for n in files)
    assert "published to file:" in outputs["serve: terminal"]
    texts = files | outputs
    # Parquet pages may be compressed: check the rows as read back too
    from spoolproxy.scale.parquet import read_rows

    texts["findings.parquet (rows)"] = json.dumps(read_rows(table), default=str)
    hits = []
    for name, (_value, secret) in shapes.items():
        for form in forms(secret):
            hits += [f"{name} ({form[:6]}…) in {where}" for where, text in texts.items() if form in text]
    assert hits == [], hits[:20]
