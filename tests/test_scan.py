"""``spoolproxy scan``: secrets in cassettes, journals and side body files; exit 0/1/2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spoolproxy.cassettes import Cassette, Interaction, Redactor, Request, Response, save
from spoolproxy.cassettes.format import to_document
from spoolproxy.cassettes.journal import journal_path
from spoolproxy.cassettes.model import BodyRef

OPENAI_KEY = "sk-proj-" + "Ab3" * 16
ANTHROPIC_KEY = "sk-ant-api03-" + "Zq9" * 12
GITHUB_TOKEN = "ghp_" + "k7" * 18


def spool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=60)


def interaction(auth: str = "Bearer REDACTED", body: dict | None = None, answer: str = "ok") -> Interaction:
    req = Request(method="POST", uri="https://api.openai.com/v1/chat/completions",
                  headers={"authorization": [auth], "content-type": ["application/json"]},
                  body=json.dumps(body or {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}).encode())
    resp = Response(status=200, headers={"content-type": ["application/json"]},
                    body=json.dumps({"choices": [{"message": {"content": answer}}]}).encode())
    return Interaction(request=req, response=resp)


def test_clean_cassette_exits_0(tmp_path):
    cas = Redactor().cassette(Cassette(interactions=[interaction(f"Bearer {OPENAI_KEY}")]))
    save(cas, tmp_path / "clean.yaml")
    r = spool("scan", str(tmp_path / "clean.yaml"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and "no secrets in 1 file" in r.stderr


def test_hits_list_file_interaction_field_and_exit_1(tmp_path):
    leaky = Cassette(interactions=[
        interaction(),
        interaction(f"Bearer {OPENAI_KEY}"),
        interaction(body={"messages": [{"role": "user", "content": f"my key is {ANTHROPIC_KEY}"}]},
                    answer=f"token {GITHUB_TOKEN}"),
    ])
    path = save(leaky, tmp_path / "leaky.yaml")
    r = spool("scan", str(path))
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert f"{path}: interaction 1: request.headers.authorization: openai-key" in r.stdout
    assert any(l.startswith(f"{path}: interaction 2: request.body: anthropic-key") for l in lines)
    assert any(l.startswith(f"{path}: interaction 2: response.body: github-token") for l in lines)
    assert not any(": interaction 0:" in l for l in lines)
    for secret in (OPENAI_KEY, ANTHROPIC_KEY, GITHUB_TOKEN):
        assert secret not in r.stdout + r.stderr  # never printed
    assert "3 secret-shaped string(s) in 1 of 1 file(s)" in r.stderr


def test_directory_journal_and_side_files(tmp_path):
    d = tmp_path / "cassettes"
    clean = Redactor().cassette(Cassette(interactions=[interaction()]))
    save(clean, d / "ok.yaml")
    # a journal line written by something that forgot to redact
    doc = to_document(Cassette(interactions=[interaction(f"Bearer {OPENAI_KEY}")]))
    jp = journal_path(d / "crashed.yaml")
    jp.write_text(json.dumps({"meta": doc["spoolproxy"]}) + "\n"
                  + json.dumps({"seq": 0, "interaction": json.loads(json.dumps(_jsonable(doc["interactions"][0])))}) + "\n")
    # a side body file holding a key
    side = d / "big.yaml.bodies"
    side.mkdir()
    # a token on its own (glued to letters it would be indistinguishable from base64 text)
    (side / "0-response.bin").write_bytes(b"x" * 100 + b" " + GITHUB_TOKEN.encode() + b"\n" + b"y" * 100)
    big = interaction()
    big.response = big.response.model_copy(update={"body": b"", "body_ref": BodyRef(size=238, sha256="", file="big.yaml.bodies/0-response.bin")})
    save(Cassette(interactions=[big]), d / "big.yaml")
    r = spool("scan", str(d))
    assert r.returncode == 1, r.stderr
    assert f"{jp}: interaction 0: request.headers.authorization: openai-key" in r.stdout
    assert f"{side / '0-response.bin'}: body: github-token" in r.stdout
    assert "ok.yaml" not in r.stdout
    assert "of 4 file(s)" in r.stderr


def _jsonable(v):
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, bytes):
        return v.decode()
    return v


def test_side_file_referenced_by_an_explicit_cassette(tmp_path):
    """As a pre-commit hook only the cassette name may be passed: its side files are scanned too."""
    side = tmp_path / "run.yaml.bodies"
    side.mkdir()
    (side / "body.txt").write_bytes(OPENAI_KEY.encode())
    it = interaction()
    it.response = it.response.model_copy(update={"body": b"", "body_ref": BodyRef(size=48, sha256="", file="run.yaml.bodies/body.txt")})
    save(Cassette(interactions=[it]), tmp_path / "run.yaml")
    r = spool("scan", str(tmp_path / "run.yaml"))
    assert r.returncode == 1
    assert "interaction 0: response.body (run.yaml.bodies/body.txt): openai-key" in r.stdout


@pytest.mark.parametrize("content,problem", [
    ("interactions: [\n  - request: {", "invalid YAML"),
    ("version: 7\ninteractions: []\n", "unsupported cassette version"),
])
def test_unreadable_input_exits_2_with_one_line(tmp_path, content, problem):
    good = save(Redactor().cassette(Cassette(interactions=[interaction()])), tmp_path / "good.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    r = spool("scan", str(good), str(bad))
    assert r.returncode == 2
    [line] = r.stderr.splitlines()
    assert line.startswith(f"spoolproxy: error: {bad}") and problem in line
    assert "Traceback" not in r.stderr


def test_missing_path_exits_2(tmp_path):
    r = spool("scan", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2
    assert r.stderr.strip() == f"spoolproxy: error: {tmp_path / 'nope.yaml'}: no such file or directory; check the path"


def test_extra_pattern_option_and_config(tmp_path):
    save(Cassette(interactions=[interaction(body={"note": "internal-TOKEN-12345678"})]), tmp_path / "c.yaml")
    assert spool("scan", str(tmp_path / "c.yaml")).returncode == 0
    r = spool("scan", "--pattern", r"internal-TOKEN-\d{8}", str(tmp_path / "c.yaml"))
    assert r.returncode == 1 and "request.body: custom" in r.stdout
    (tmp_path / "spoolproxy.toml").write_text('[redact]\npatterns = ["internal-TOKEN-\\\\d{8}"]\n')
    assert spool("scan", "c.yaml", cwd=tmp_path).returncode == 1


def test_every_corpus_cassette_is_readable(corpus_dir):
    r = spool("scan", "-q", str(corpus_dir))
    assert r.returncode in (0, 1), r.stderr  # 2 would mean a corpus file could not be read
    assert "spoolproxy: error" not in r.stderr


def test_other_yaml_in_a_directory_is_scanned_as_text(tmp_path):
    save(Redactor().cassette(Cassette(interactions=[interaction()])), tmp_path / "run.yaml")
    (tmp_path / "ci.yml").write_text("jobs:\n  test:\n    steps: [checkout]\n")
    r = spool("scan", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    (tmp_path / "settings.json").write_text(json.dumps({"openai": OPENAI_KEY}))
    r = spool("scan", str(tmp_path))
    assert r.returncode == 1 and f"{tmp_path / 'settings.json'}: text: openai-key" in r.stdout
    # named explicitly, a file that is not a cassette is refused with the loader's one line
    # (a clean exit would claim a cassette was checked), unless asked to scan it as text
    for name in ("ci.yml", "settings.json"):
        r = spool("scan", str(tmp_path / name))
        assert r.returncode == 2 and r.stdout == ""
        [line] = r.stderr.splitlines()
        assert line == (f"spoolproxy: error: {tmp_path / name}: not a cassette: no 'interactions' key; "
                        "pass --text to scan it as plain text")
    assert spool("scan", "--text", str(tmp_path / "ci.yml")).returncode == 0
    r = spool("scan", "--text", str(tmp_path / "settings.json"))
    assert r.returncode == 1 and f"{tmp_path / 'settings.json'}: text: openai-key" in r.stdout
    assert "remove them from the other files by hand" in r.stderr  # export cannot rewrite a plain file


def test_unreadable_file_is_refused_unless_scanned_as_text(tmp_path):
    log = tmp_path / "agent.log"
    log.write_bytes(b"starting\nusing key " + OPENAI_KEY.encode() + b"\n\xff\xfe binary tail\n")
    r = spool("scan", str(log))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    [line] = r.stderr.splitlines()
    assert line.startswith(f"spoolproxy: error: {log}: ") and line.endswith("pass --text to scan it as plain text")
    r = spool("scan", "--text", str(log))
    assert r.returncode == 1 and f"{log}: text: openai-key" in r.stdout and OPENAI_KEY not in r.stdout
