"""``spoolproxy recover`` and ``spoolproxy export``: journals become cassettes; exported
cassettes load in stock vcrpy and replay through ``vcr.use_cassette`` + httpx."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import vcr
import vcr.serialize
import vcr.serializers.yamlserializer as yamlserializer

from spoolproxy.cassettes import Cassette, Interaction, Redactor, Request, Response, load, save
from spoolproxy.cassettes.journal import Journal, journal_path
from spoolproxy.cassettes.model import BodyRef, CassetteMeta, Chunk

KEY = "sk-proj-" + "Qw7" * 15
SSE = b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n'


def spool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=60)


def chat(n: int, *, stream: bool = False) -> Interaction:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"question {n}"}], "stream": stream}
    req = Request(method="POST", uri="https://api.openai.com/v1/chat/completions",
                  headers={"authorization": [f"Bearer {KEY}"], "content-type": ["application/json"]},
                  body=json.dumps(body).encode())
    if stream:
        resp = Response(status=200, reason="OK", headers={"content-type": ["text/event-stream; charset=utf-8"]},
                        body=SSE, chunks=[Chunk(offset_ms=0.0, size=46), Chunk(offset_ms=3.5, size=len(SSE) - 46)])
    else:
        resp = Response(status=200, reason="OK", headers={"content-type": ["application/json"]},
                        body=json.dumps({"id": f"chatcmpl-{n}", "choices": [{"message": {"content": f"answer {n}"}}]},
                                        separators=(",", ":")).encode())
    return Interaction(request=req, response=resp)


# -- recover ---------------------------------------------------------------------------


def crashed_recording(cassette: Path, n: int) -> Path:
    """A journal as a SIGKILLed recorder leaves it: n interactions, completed out of
    order, plus the torn line of the in-flight one; never closed."""
    j = Journal(cassette, CassetteMeta(recorder="spoolproxy test", command=["python", "agent.py"]), Redactor())
    for seq in reversed(range(n)):
        j.append(seq, chat(seq))
    j._fh.write(b'{"seq": 99, "interaction": {"request": {"meth')  # torn write
    j._fh.flush()
    fcntl.flock(j._fh.fileno(), fcntl.LOCK_UN)  # the kernel drops a dead recorder's lock
    return j.path


def test_recover_writes_cassette_in_request_order(tmp_path):
    cassette = tmp_path / "run.yaml"
    jp = crashed_recording(cassette, 3)
    r = spool("recover", str(cassette))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"spoolproxy recover: {cassette}: recovered 3 interactions from the journal"
    assert not jp.exists()
    cas = load(cassette)
    assert [i.request.json()["messages"][0]["content"] for i in cas.interactions] == [
        "question 0", "question 1", "question 2"]
    assert cas.meta.command == ["python", "agent.py"]
    assert KEY not in cassette.read_text()


def test_recover_a_directory_and_keep_previous_cassette(tmp_path):
    save(Cassette(interactions=[chat(7)]), tmp_path / "a.yaml")
    crashed_recording(tmp_path / "a.yaml", 2)
    crashed_recording(tmp_path / "sub" / "b.yaml", 1)
    r = spool("recover", str(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines == [
        f"spoolproxy recover: {tmp_path / 'a.yaml'}: recovered 2 interactions from the journal (previous file kept as a.yaml.orig)",
        f"spoolproxy recover: {tmp_path / 'sub' / 'b.yaml'}: recovered 1 interaction from the journal",
    ]
    assert len(load(tmp_path / "a.yaml")) == 2 and len(load(tmp_path / "a.yaml.orig")) == 1


def test_recover_accepts_the_journal_path(tmp_path):
    jp = crashed_recording(tmp_path / "run.yaml", 2)
    assert spool("recover", str(jp)).returncode == 0
    assert len(load(tmp_path / "run.yaml")) == 2


@pytest.mark.parametrize("make", ["nothing", "clean", "emptydir"])
def test_recover_without_journal_is_one_line(tmp_path, make):
    target = tmp_path / "run.yaml"
    if make == "clean":
        save(Cassette(interactions=[chat(1)]), target)
    if make == "emptydir":
        target = tmp_path
    r = spool("recover", str(target))
    [line] = r.stderr.splitlines()
    assert line.startswith(f"spoolproxy: error: {target}")
    if make == "nothing":  # a path that names nothing is bad input: exit 2 and what to check
        assert r.returncode == 2 and line.endswith("check the path (give the --cassette path of the interrupted "
                                                   "recording, its journal or a directory)"), line
    else:
        assert r.returncode == 1 and "nothing to recover" in line


# -- export ----------------------------------------------------------------------------


def v1_cassette(tmp_path: Path) -> Path:
    cas = Redactor().cassette(Cassette(interactions=[chat(1), chat(2, stream=True)],
                                       meta=CassetteMeta(recorder="test")))
    return save(cas, tmp_path / "v1.yaml")


def test_export_to_an_unwritable_output_names_the_path_not_a_cassette_option(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a directory")
    r = spool("export", str(v1_cassette(tmp_path)), "-o", str(blocker / "x.yaml"))
    assert r.returncode == 2
    [line] = r.stderr.splitlines()
    assert line == f"spoolproxy: error: cannot write {blocker / 'x.yaml'} ({blocker} is not a directory); " \
                   "choose a writable path"
    assert not (blocker / "x.yaml").exists()


def test_export_vcrpy_loads_in_stock_vcrpy(tmp_path):
    src = v1_cassette(tmp_path)
    assert "parsed_body" in src.read_text()
    out = tmp_path / "plain.yaml"
    r = spool("export", str(src), "--format", "vcrpy", "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "parsed_body" not in text and "spoolproxy" not in text
    requests, responses = vcr.serialize.deserialize(text, yamlserializer)
    assert [q.uri for q in requests] == ["https://api.openai.com/v1/chat/completions"] * 2
    assert json.loads(requests[0].body)["messages"][0]["content"] == "question 1"
    assert responses[1]["body"]["string"] == SSE
    assert json.loads(responses[0]["body"]["string"])["choices"][0]["message"]["content"] == "answer 1"


def test_export_vcrpy_replays_with_use_cassette_and_httpx(tmp_path):
    out = tmp_path / "plain.yaml"
    assert spool("export", str(v1_cassette(tmp_path)), "-o", str(out)).returncode == 0
    with vcr.use_cassette(str(out), record_mode="none", match_on=["method", "uri", "body"]):
        with httpx.Client() as client:
            first = client.post("https://api.openai.com/v1/chat/completions",
                                content=json.dumps({"model": "gpt-4o-mini", "messages": [
                                    {"role": "user", "content": "question 1"}], "stream": False}).encode())
            second = client.post("https://api.openai.com/v1/chat/completions",
                                 content=json.dumps({"model": "gpt-4o-mini", "messages": [
                                     {"role": "user", "content": "question 2"}], "stream": True}).encode())
    assert first.json()["choices"][0]["message"]["content"] == "answer 1"
    assert second.content == SSE


def test_export_vcrpy_inlines_side_bodies(tmp_path):
    side = tmp_path / "big.yaml.bodies"
    side.mkdir()
    payload = b"line\n" * 1000
    (side / "0.txt").write_bytes(payload)
    import hashlib

    it = chat(1)
    it.response = it.response.model_copy(update={"body": b"", "headers": {"content-type": ["text/plain"]},
                                                 "body_ref": BodyRef(size=len(payload), sha256=hashlib.sha256(payload).hexdigest(),
                                                                     file="big.yaml.bodies/0.txt")})
    save(Redactor().cassette(Cassette(interactions=[it])), tmp_path / "big.yaml")
    out = tmp_path / "out" / "plain.yaml"
    assert spool("export", str(tmp_path / "big.yaml"), "-o", str(out)).returncode == 0
    _, responses = vcr.serialize.deserialize(out.read_text(), yamlserializer)
    assert responses[0]["body"]["string"] == payload


def test_export_spoolproxy_normalises_corpus_cassette(corpus_dir, tmp_path):
    src = corpus_dir / "crewAI" / "test_handle_streaming_tool_calls.yaml"
    out = tmp_path / "norm.yaml"
    r = spool("export", str(src), "--format", "spoolproxy", "-o", str(out))
    assert r.returncode == 0, r.stderr
    before, after = load(src), load(out)
    assert before.source_format == "vcrpy" and after.source_format == "spoolproxy"
    assert [(i.request.uri, i.request.body, i.response.body) for i in before.interactions] == [
        (i.request.uri, i.request.body, i.response.body) for i in after.interactions]
    assert out.read_text().startswith("version: 1\nspoolproxy:")


def test_export_spoolproxy_redacts_a_leaky_vcrpy_cassette(tmp_path):
    leaky = tmp_path / "leaky.yaml"
    save(Cassette(interactions=[chat(1)]), leaky, plain=True)  # written without redaction
    assert KEY in leaky.read_text()
    out = tmp_path / "clean.yaml"
    assert spool("export", str(leaky), "--format", "spoolproxy", "-o", str(out)).returncode == 0
    assert KEY not in out.read_text() and "Bearer REDACTED-authorization-" in out.read_text()
    assert spool("scan", str(out)).returncode == 0


def test_export_to_stdout_and_bad_input(tmp_path):
    r = spool("export", str(v1_cassette(tmp_path)), "--format", "vcrpy")
    assert r.returncode == 0 and r.stdout.startswith("version: 1\ninteractions:")
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"\x00\x01garbage")
    r = spool("export", str(bad), "-o", str(tmp_path / "x.yaml"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "spoolproxy: error:" in r.stderr
    assert not (tmp_path / "x.yaml").exists()


def test_pytest_recording_replays_v1_with_the_documented_conftest(tmp_path):
    """docs/cassette-format.md: registering the serializer as "yaml" lets pytest-recording
    replay a spoolproxy cassette under its usual name."""
    save(Redactor().cassette(Cassette(interactions=[chat(1)])), tmp_path / "cassettes" / "test_agent" / "test_answer.yaml")
    (tmp_path / "conftest.py").write_text(
        "from spoolproxy.cassettes import vcrpy_serializer\n\n"
        "def pytest_recording_configure(config, vcr):\n"
        "    vcr.register_serializer('yaml', vcrpy_serializer)\n")
    (tmp_path / "test_agent.py").write_text(
        "import httpx, json, pytest\n\n"
        "@pytest.mark.vcr\n"
        "def test_answer():\n"
        "    r = httpx.post('https://api.openai.com/v1/chat/completions', json={})\n"
        "    assert r.json()['choices'][0]['message']['content'] == 'answer 1'\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--record-mode=none",
                        "-c", "/dev/null", "--rootdir", str(tmp_path), str(tmp_path / "test_agent.py")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout


def test_export_vcrpy_says_what_it_left_out(tmp_path):
    from spoolproxy.cassettes.model import Failure

    failed = Interaction(request=Request(method="GET", uri="http://localhost:9/down"),
                         error=Failure(kind="refused", message="connection refused"))
    save(Cassette(interactions=[chat(1), failed]), tmp_path / "mixed.yaml")
    r = spool("export", str(tmp_path / "mixed.yaml"), "-o", str(tmp_path / "plain.yaml"))
    assert r.returncode == 0, r.stderr
    assert "wrote 1 interactions" in r.stderr and "left out 1 without a response" in r.stderr
    requests, _ = vcr.serialize.deserialize((tmp_path / "plain.yaml").read_text(), yamlserializer)
    assert len(requests) == 1
