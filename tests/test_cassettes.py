"""Cassette format v1: round trips, vcrpy compatibility, redaction, journal, bad input."""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone

import httpx
import pytest
import vcr
import yaml

from spoolproxy.cassettes import Cassette, Chunk, Interaction, Redactor, Request, Response, load, save
from spoolproxy.cassettes import vcrpy_serializer
from spoolproxy.cassettes.journal import Journal, journal_path, recover
from spoolproxy.cassettes.model import CassetteMeta
from spoolproxy.cassettes.secret_scan import scan_interaction
from spoolproxy.cassettes.storage import dumps, parse_text
from spoolproxy.errors import CassetteError

from .conftest import corpus_files

OPENAI_KEY = "sk-proj-" + "A1b2C3d4" * 6  # built at run time: no key-shaped literal in the repo


def _sse_interaction() -> Interaction:
    events = b"".join(
        b'data: {"choices":[{"delta":{"content":"' + w + b'"}}]}\n\n' for w in (b"Hel", b"lo")
    ) + b"data: [DONE]\n\n"
    return Interaction(
        request=Request(
            method="POST",
            uri="https://api.openai.com/v1/chat/completions",
            headers={"authorization": [f"Bearer {OPENAI_KEY}"], "content-type": ["application/json"]},
            body=json.dumps({"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode(),
        ),
        response=Response(
            status=200,
            reason="OK",
            headers={"content-type": ["text/event-stream"]},
            body=events,
            chunks=[Chunk(offset_ms=0.0, size=40), Chunk(offset_ms=12.5, size=len(events) - 40)],
        ),
        started_at=datetime(2026, 12, 1, tzinfo=timezone.utc),
        duration_ms=20.0,
    )


def test_v1_round_trip_is_byte_exact(tmp_path):
    it = _sse_interaction()
    cas = Redactor().cassette(Cassette(interactions=[it], meta=CassetteMeta(command=["python", "agent.py"], cwd=".")))
    path = save(cas, tmp_path / "run.yaml")
    text = path.read_text()
    assert OPENAI_KEY not in text
    assert "parsed_body:" in text and "body_style: spaced" in text  # JSON as a YAML structure
    assert "\n        data: [DONE]\n" in text  # SSE events one per line in a literal block
    back = load(path)
    assert back.source_format == "spoolproxy"
    assert back.interactions[0].request.body == cas.interactions[0].request.body
    assert back.interactions[0].response.body == it.response.body
    assert [c.size for c in back.interactions[0].response.chunks] == [40, len(it.response.body) - 40]
    assert back.meta.command == ["python", "agent.py"]


def test_vcrpy_reads_v1_in_process_through_the_serializer(tmp_path):
    body = b'{"id":"x","object":"list","data":[]}'
    cas = Cassette(
        interactions=[
            Interaction(
                request=Request(method="GET", uri="http://127.0.0.1:9/v1/models", headers={}),
                response=Response(status=200, reason="OK", headers={"content-type": ["application/json"]}, body=body),
            )
        ]
    )
    path = save(cas, tmp_path / "models.yaml")
    my_vcr = vcr.VCR(record_mode="none")
    my_vcr.register_serializer("spoolproxy", vcrpy_serializer)
    with my_vcr.use_cassette(str(path), serializer="spoolproxy"):
        r = httpx.get("http://127.0.0.1:9/v1/models")
    assert r.status_code == 200 and r.content == body


def test_export_plain_layout_loads_with_stock_vcrpy(tmp_path):
    cas = Cassette(interactions=[_sse_interaction()])
    text = dumps(cas, plain=True)
    doc = yaml.safe_load(text)
    assert "spoolproxy" not in doc and "parsed_body" not in text
    reqs, resps = vcr.serialize.deserialize(text, vcr.serializers.yamlserializer)[:2]
    assert reqs[0].uri.endswith("/v1/chat/completions")
    assert resps[0]["body"]["string"].endswith(b"data: [DONE]\n\n")


def test_gzip_and_binary_bodies(tmp_path):
    raw = '{"ok": true}'
    doc = {
        "version": 1,
        "interactions": [
            {
                "request": {"method": "GET", "uri": "https://x.example/a", "headers": {}, "body": None},
                "response": {
                    "status": {"code": 200, "message": "OK"},
                    "headers": {"Content-Encoding": ["gzip"], "Content-Type": ["application/json"]},
                    "body": {"string": gzip.compress(raw.encode())},
                },
            },
            {
                "request": {"method": "GET", "uri": "https://x.example/b", "headers": {}, "body": None},
                "response": {
                    "status": {"code": 200, "message": "OK"},
                    "headers": {"Content-Encoding": ["gzip"]},
                    "body": {"string": raw},  # header left on a decoded body
                },
            },
        ],
    }
    cas = parse_text(yaml.safe_dump(doc))
    for it in cas.interactions:
        assert it.response.body == raw.encode()
        assert it.response.header("content-encoding") is None
    binary = Cassette(interactions=[cas.interactions[0].model_copy(deep=True)])
    binary.interactions[0].response.body = b"\xff\xfe\x00bin"
    path = save(binary, tmp_path / "bin.yaml")
    assert "!!binary" in path.read_text()
    assert load(path).interactions[0].response.body == b"\xff\xfe\x00bin"


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:60])
def test_corpus_loads_and_round_trips(path):
    cas = load(path)
    again = parse_text(dumps(cas), path)
    assert len(again) == len(cas) > 0
    for a, b in zip(cas.interactions, again.interactions):
        assert a.request.body == b.request.body
        assert a.request.headers == b.request.headers
        assert (a.response and a.response.body) == (b.response and b.response.body)


def test_redaction_headers_query_and_bodies():
    red = Redactor(extra_headers=["x-custom-secret"], extra_patterns=[r"tenant=(\w+)"])
    google = "AIza" + "Sy" + "B" * 33
    req = Request(
        method="POST",
        uri=f"https://generativelanguage.googleapis.com/v1beta/models/g:generateContent?key={google}&alt=sse",
        headers={"x-api-key": ["plainsecret"], "X-Custom-Secret": ["abc"], "Authorization": [f"Bearer {OPENAI_KEY}"]},
        body=f'{{"note": "my key is {OPENAI_KEY}", "q": "tenant=acme"}}'.encode(),
    )
    out = red.request(req)
    flat = out.model_dump_json()
    assert OPENAI_KEY not in flat and google not in flat and "plainsecret" not in flat and "acme" not in flat
    assert out.headers["Authorization"][0].startswith("Bearer REDACTED-")
    assert out.headers == red.request(req).headers  # stable placeholders
    assert json.loads(out.body)["q"].startswith("tenant=REDACTED-custom-")
    assert list(scan_interaction(0, Interaction(request=out))) == []
    hits = list(scan_interaction(3, Interaction(request=req)))
    assert {h.field for h in hits} >= {"request.body", "request.uri", "request.headers.Authorization"}
    assert all(h.interaction == 3 for h in hits)


def test_journal_recovers_all_completed_interactions(tmp_path):
    target = tmp_path / "run.yaml"
    j = Journal(target, CassetteMeta(command=["agent"]), Redactor())
    j.append(1, _sse_interaction())
    j.append(0, _sse_interaction().model_copy(update={"request": Request(method="GET", uri="https://a.example/")}))
    j._fh.write('{"seq": 2, "interaction": {"requ')  # torn in-flight write
    j.close(remove=False)  # as a SIGKILL would leave it (the lock goes with the process)
    assert journal_path(target).stat().st_mode & 0o777 == 0o600
    assert OPENAI_KEY not in journal_path(target).read_text()
    cas = recover(target)
    assert cas is not None and [i.request.method for i in cas.interactions] == ["GET", "POST"]
    assert load(target).meta.command == ["agent"]
    assert not journal_path(target).exists()


@pytest.mark.parametrize(
    "content, needle",
    [
        ("interactions: [\n  - request: {", "invalid YAML"),
        ("foo: bar\n", "no 'interactions'"),
        ("version: 7\ninteractions: []\n", "unsupported cassette version 7"),
        (b"\x89PNG\r\n\x1a\n\x00\x00garbage", "not"),
        ("- just\n- a list\n", "top level"),
        ("interactions:\n- request: {method: GET}\n", "interaction 0"),
    ],
)
def test_corrupt_cassettes_raise_one_line_errors(tmp_path, content, needle):
    p = tmp_path / "bad.yaml"
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(CassetteError) as exc:
        load(p)
    msg = str(exc.value)
    assert needle in msg and str(p) in msg and "\n" not in msg


def test_parsed_document_cache_gives_the_same_cassette(tmp_path, monkeypatch):
    from spoolproxy.cassettes import cache

    monkeypatch.setenv("SPOOLPROXY_CACHE", str(tmp_path / "cache"))
    big = _sse_interaction()
    cas = Cassette(interactions=[big.model_copy(update={"duration_ms": float(i)}) for i in range(1500)])
    cas.interactions[0] = cas.interactions[0].model_copy(
        update={"response": big.response.model_copy(update={"body": b"\xff\x00 binary", "chunks": None})}
    )
    path = save(cas, tmp_path / "big.yaml")
    assert path.stat().st_size >= cache.MIN_SIZE
    cold = load(path)
    entries = list((tmp_path / "cache").glob("*.json"))
    assert len(entries) == 1
    warm = load(path)
    assert warm.model_dump() == cold.model_dump()
    assert warm.interactions[0].response.body == b"\xff\x00 binary"
    entries[0].write_text("{ torn")  # a damaged entry is ignored, never an error
    assert load(path).model_dump() == cold.model_dump()
    monkeypatch.setenv("SPOOLPROXY_CACHE", "off")
    assert cache.cache_dir() is None and len(load(path)) == 1500


def test_journal_is_exclusive_while_recording_and_damage_is_reported(tmp_path):
    target = tmp_path / "busy.yaml"
    j = Journal(target, CassetteMeta(), Redactor())
    j.append(0, _sse_interaction())
    from spoolproxy.cassettes.journal import is_locked

    assert is_locked(journal_path(target))
    with pytest.raises(CassetteError, match="another spoolproxy process"):
        Journal(target, CassetteMeta(), Redactor())
    with pytest.raises(CassetteError, match="being recorded right now"):
        recover(target)
    j.append(1, _sse_interaction())
    j.append(2, _sse_interaction())
    j.close(remove=False)
    assert not is_locked(journal_path(target))
    lines = journal_path(target).read_text().splitlines()
    lines[2] = lines[2][: len(lines[2]) // 2]  # a damaged line in the middle, not the torn last one
    journal_path(target).write_text("\n".join(lines) + "\n")
    cas = recover(target)
    assert len(cas) == 2 and cas.meta.extra["damaged_journal_lines"] == [3]
    assert journal_path(target).with_name(journal_path(target).name + ".damaged").exists()


def test_a_cassette_cut_short_is_refused(tmp_path):
    cas = Cassette(interactions=[_sse_interaction(), _sse_interaction()])
    path = save(cas, tmp_path / "whole.yaml")
    text = path.read_text()
    assert text.rstrip().removesuffix("...").rstrip().endswith("end_of_cassette: 2")
    assert len(load(path)) == 2
    for cut in (len(text) // 3, text.index("data: [DONE]", len(text) // 2), text.index("end_of_cassette")):
        bad = tmp_path / f"cut{cut}.yaml"
        bad.write_text(text[:cut])
        with pytest.raises(CassetteError) as exc:
            load(bad)
        assert "\n" not in str(exc.value)
        assert any(w in str(exc.value) for w in ("truncated", "cut short", "invalid YAML", "interaction"))
    plain = yaml.safe_load(dumps(cas, plain=True))  # plain vcrpy files carry no count: accepted as they are
    assert "end_of_cassette" not in plain


def test_redaction_by_header_name_field_and_echoed_value():
    red = Redactor()
    token = "glpat-" + "Zq9" * 7
    client_secret = "cs_" + "k7" * 10
    it = Interaction(
        request=Request(
            method="POST",
            uri=f"https://auth.example/oauth/token?client_secret={client_secret}&X-Amz-Signature=ab12cd34ef56&page=2",
            headers={"private-token": [token], "x-functions-key": ["fk12345678"], "Idempotency-Key": ["idem-123456"],
                     "x-ratelimit-limit-tokens": ["1000"]},
            body=f"grant_type=client_credentials&client_secret={client_secret}&password=hunter22".encode(),
        ),
        response=Response(
            status=200,
            headers={"content-type": ["application/json"]},
            body=json.dumps({"access_token": "at_9x8y7z6w5v", "echo": token, "token": "Hello",
                             "signature": "EqQBCkgIARABGAIiQ"}).encode(),
        ),
    )
    out = red.interaction(it)
    flat = out.model_dump_json()
    for secret in (token, client_secret, "fk12345678", "hunter22", "at_9x8y7z6w5v", "ab12cd34ef56"):
        assert secret not in flat, secret
    # data that only looks like a credential name stays: idempotency keys, token counters,
    # logprob tokens and Anthropic thinking signatures are needed for matching and replay
    assert out.request.headers["Idempotency-Key"] == ["idem-123456"]
    assert out.request.headers["x-ratelimit-limit-tokens"] == ["1000"]
    body = json.loads(out.response.body)
    assert body["token"] == "Hello" and body["signature"] == "EqQBCkgIARABGAIiQ"
    assert body["echo"] == out.request.headers["private-token"][0]  # the echo gets the same placeholder
    assert list(scan_interaction(0, out)) == []
    kinds = {h.field for h in scan_interaction(0, it)}
    assert {"request.body", "response.body", "request.headers.private-token"} <= kinds


def test_loading_a_crashed_recording_points_at_recover(tmp_path):
    target = tmp_path / "crashed.yaml"
    j = Journal(target, CassetteMeta(), Redactor())
    j.append(0, _sse_interaction())
    j.close(remove=False)
    with pytest.raises(CassetteError, match="spoolproxy recover"):
        load(target)


def test_document_cache_evicts_oldest_entries(tmp_path):
    import os as _os

    from spoolproxy.cassettes import cache

    d = tmp_path / "c"
    d.mkdir()
    for i in range(4):
        f = d / f"{i}.json"
        f.write_bytes(b"x" * 100)
        _os.utime(f, (1000 + i, 1000 + i))
    cache._evict(d, budget=250)
    assert sorted(p.name for p in d.glob("*.json")) == ["2.json", "3.json"]
