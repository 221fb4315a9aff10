"""A cassette redacted with secrets its run recognised late still replays exactly.

The recording replaces a password everywhere once a later request names it in a password
field (also in the earlier prompt), and a key sent in a header also where a later request
puts it in the URL path.  The unmodified agent, replayed with ``--strict``, sends those raw
values where the cassette holds placeholders: every request must still match exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from spoolproxy.cassettes import load
from tests.planted import echo

AGENT = """
import httpx, os, sys
up, pw, key = os.environ["UPSTREAM"], os.environ["PW"], os.environ["KEY"]
with httpx.Client() as c:
    c.post(up + "/v1/chat", json={"messages": [{"role": "user", "content": f"log in with {pw}, then report"}]})
    c.post(up + "/v1/login", json={"user": "bo", "password": pw})
    c.get(up + "/v1/me", headers={"X-Api-Key": key})
    c.get(up + f"/v1/keys/{key}/usage")
print("done")
"""


def test_late_recognised_secrets_replay_exactly(tmp_path):
    (tmp_path / "agent.py").write_text(AGENT)
    pw, key = "Lq4" + "mellon" * 2, "kx" + "Vb7" * 9  # neither has a known shape
    server = echo.start()
    env = {**os.environ, "UPSTREAM": f"http://127.0.0.1:{server.server_address[1]}", "PW": pw, "KEY": key}
    try:
        rec = subprocess.run([sys.executable, "-m", "spoolproxy", "record", "-c", "run.yaml", "--", sys.executable,
                              "agent.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert rec.returncode == 0, rec.stderr
        text = (tmp_path / "run.yaml").read_text()
        assert pw not in text and key not in text
        cas = load(tmp_path / "run.yaml")
        assert "REDACTED-" in cas.interactions[0].request.body.decode()      # the prompt, before the field named it
        assert "/v1/keys/REDACTED-" in cas.interactions[3].request.uri         # the path, after the header named it
        play = subprocess.run([sys.executable, "-m", "spoolproxy", "playback", "--strict", "--report", "report.json",
                               "-c", "run.yaml", "--", sys.executable, "agent.py"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
    assert play.returncode == 0, play.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert [r["outcome"] for r in report["requests"]] == ["exact"] * 4
    assert pw not in play.stderr + json.dumps(report) and key not in play.stderr + json.dumps(report)


def test_wildcard_match():
    from spoolproxy.replayer.fingerprint import wildcard_match

    assert wildcard_match(b'{"q":"use REDACTED, REDACTED"}', b'{"q":"use pw1, pw2"}')
    assert wildcard_match(b"/v1/keys/REDACTED/usage", b"/v1/keys/abc/usage")
    assert not wildcard_match(b"/v1/keys/REDACTED/usage", b"/v1/keys//usage")        # a wildcard is never empty
    assert not wildcard_match(b'{"q":"use REDACTED!"}', b'{"q":"use it?"}')           # the rest must be identical
    assert wildcard_match(b"no wildcard", b"no wildcard") and not wildcard_match(b"a", b"b")
    assert not wildcard_match(b"REDACTED" * 50 + b"x", b"y" * 100_000)                 # linear, no backtracking
