"""``[playback]`` in spoolproxy.toml drives the same options as the command line, and the
suggested ``--normalize`` flag fixes a timestamp-in-the-prompt miss in one step."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from spoolproxy.cassettes import save
from spoolproxy.cassettes.model import Cassette, Interaction, Request, Response

CHILD = r'''
import datetime, httpx, sys
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
body = {"model": "m", "messages": [{"role": "system", "content": "Current time: " + now}, {"role": "user", "content": "hi"}]}
r = httpx.post("https://api.openai.com/v1/chat/completions", json=body, timeout=20)
print(r.status_code)
'''


def _cassette(tmp_path):
    body = {"model": "m", "messages": [{"role": "system", "content": "Current time: 2025-01-02T03:04:05Z"},
                                       {"role": "user", "content": "hi"}]}
    it = Interaction(
        request=Request(method="POST", uri="https://api.openai.com/v1/chat/completions",
                        headers={"content-type": ["application/json"]}, body=json.dumps(body).encode()),
        response=Response(status=200, headers={"content-type": ["application/json"]}, body=b'{"ok": true}'),
    )
    p = tmp_path / "ts.yaml"
    save(Cassette(interactions=[it]), p)
    return p


def spool(tmp_path, *args):
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    return subprocess.run([sys.executable, "-m", "spoolproxy", "playback", *args, "--", sys.executable, str(child)],
                          capture_output=True, text=True, timeout=90, cwd=tmp_path, env=dict(os.environ))


def test_suggested_flag_fixes_the_miss_and_config_table_applies_it(tmp_path):
    cas = _cassette(tmp_path)
    miss = spool(tmp_path, "-c", str(cas), "--match", "exact", "--strict")
    assert miss.returncode == 3 and miss.stdout.strip() == "400"
    assert "$.messages[0].content" in miss.stderr
    m = re.search(r"to match, add: (--normalize '([^']+)')", miss.stderr)
    assert m, miss.stderr
    fixed = spool(tmp_path, "-c", str(cas), "--match", "exact", "--strict", "--normalize", m.group(2))
    assert fixed.returncode == 0 and fixed.stdout.strip() == "200", fixed.stderr
    (tmp_path / "spoolproxy.toml").write_text(
        "[playback]\n" f"cassettes = [{json.dumps(str(cas))}]\nmatch = \"exact\"\nstrict = true\n"
        f"normalize = [{json.dumps(m.group(2))}]\nreport = \"out/report.json\"\n"
    )
    by_config = spool(tmp_path)
    assert by_config.returncode == 0 and by_config.stdout.strip() == "200", by_config.stderr
    assert json.loads((tmp_path / "out" / "report.json").read_text())["requests"][0]["outcome"] == "exact"


def test_unknown_config_key_is_one_line_exit_2(tmp_path):
    (tmp_path / "spoolproxy.toml").write_text("[playback]\nnormalise = ['x']\n")
    r = spool(tmp_path, "-c", str(_cassette(tmp_path)))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "[playback] normalise" in r.stderr
