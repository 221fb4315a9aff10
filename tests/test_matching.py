"""The matching engine without the proxy: fingerprints, matchers, index, diffs, suggestions."""

from __future__ import annotations

import json
import threading

import pytest

from spoolproxy.cassettes.model import Cassette, Interaction, Request, Response
from spoolproxy.errors import UsageError
from spoolproxy.replayer import matchers
from spoolproxy.replayer.diff import diff_json, suggest
from spoolproxy.replayer.fingerprint import Fingerprinter, MatchOptions, parse_json_path
from spoolproxy.replayer.index import Index

URL = "https://api.openai.com/v1/chat/completions"


def req(body, uri=URL, method="POST", headers=None) -> Request:
    raw = json.dumps(body).encode() if not isinstance(body, bytes) else body
    return Request(method=method, uri=uri, headers=headers or {"content-type": ["application/json"]}, body=raw)


def cassette(*pairs) -> Cassette:
    return Cassette(interactions=[Interaction(request=r, response=Response(status=200, body=b)) for r, b in pairs])


def test_json_fingerprint_ignores_key_order_and_whitespace():
    fp = Fingerprinter()
    a = fp.normalize(req(b'{"a": 1, "b": [1, 2]}'))
    b = fp.normalize(req(b'{"b":[1,2],"a":1}'))
    assert a.fingerprint == b.fingerprint and a.body_kind == "json"


def test_form_and_multipart_and_raw_bodies():
    fp = Fingerprinter()
    form = {"content-type": ["application/x-www-form-urlencoded"]}
    assert fp.normalize(req(b"a=1&b=2", headers=form)).key == fp.normalize(req(b"b=2&a=1", headers=form)).key
    mp = lambda bnd: req(  # noqa: E731
        f"--{bnd}\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n--{bnd}--\r\n".encode(),
        headers={"content-type": [f"multipart/form-data; boundary={bnd}"]},
    )
    assert fp.normalize(mp("AbC123")).key == fp.normalize(mp("zzz999")).key
    assert fp.normalize(req(b"\x00\x01raw")).key != fp.normalize(req(b"\x00\x02raw")).key


def test_query_order_insensitive_and_placeholders_are_wildcards():
    fp = Fingerprinter()
    key = "AIza" + "B" * 35
    rec = Request(method="GET", uri="https://g.example/v1?b=2&key=REDACTED-query-1a2b3c4d&a=1")
    live = Request(method="GET", uri=f"https://g.example/v1?a=1&key={key}&b=2")
    assert fp.normalize(rec).key == fp.normalize(live).key
    filtered = Request(method="GET", uri="https://g.example/v1?a=1&b=2")  # vcrpy filter_query_parameters
    assert fp.normalize(filtered).key == fp.normalize(live).key


def test_real_key_in_body_does_not_cause_a_miss():
    fp = Fingerprinter()
    secret = "sk-proj-" + "x" * 40
    rec = req({"api_key": "REDACTED-openai-key-deadbeef", "q": 1})
    live = req({"api_key": secret, "q": 1})
    assert fp.normalize(rec).fingerprint == fp.normalize(live).fingerprint


def test_ignore_json_path_and_normalize():
    a = req({"messages": [{"role": "user", "content": "hi at 2024-01-01T10:00:00Z"}], "metadata": {"request_id": "1"}})
    b = req({"messages": [{"role": "user", "content": "hi at 2026-12-01T07:00:00Z"}], "metadata": {"request_id": "2"}})
    plain = Fingerprinter()
    assert plain.normalize(a).fingerprint != plain.normalize(b).fingerprint
    fp = Fingerprinter(MatchOptions(ignore_json_paths=("$.metadata.request_id",), normalize=(r"\d{4}-\d{2}-\d{2}T[\d:]+Z",)))
    assert fp.normalize(a).fingerprint == fp.normalize(b).fingerprint
    star = Fingerprinter(MatchOptions(ignore_json_paths=("$.messages[*].content", "$.metadata")))
    assert star.normalize(a).fingerprint == star.normalize(b).fingerprint


@pytest.mark.parametrize("bad", ["metadata.id", "$.a[", "$"])
def test_bad_json_path_is_a_usage_error(bad):
    with pytest.raises(UsageError):
        parse_json_path(bad)


def test_bad_regex_is_a_usage_error():
    with pytest.raises(UsageError, match="--normalize"):
        Fingerprinter(MatchOptions(normalize=("(",)))


def test_matchers_say_what_differed():
    fp = Fingerprinter()
    r = fp.normalize(req({"a": 1}, uri=URL + "?x=1"))
    a = fp.normalize(req({"a": 2}, uri=URL.replace("openai", "other") + "?x=2", method="PUT"))
    lines = matchers.explain(r, a)
    assert any(ln.startswith("method: recorded 'POST'") for ln in lines)
    assert any(ln.startswith("host:") for ln in lines)
    assert any("x='1'→'2'" in ln for ln in lines)
    assert any(ln.startswith("body:") for ln in lines)
    assert matchers.explain(r, r) == []


def test_identical_requests_get_successive_responses_then_miss():
    r = req({"q": 1})
    idx = Index([cassette((r, b"first"), (r, b"second"))])
    assert [idx.lookup(r).entry.interaction.response.body for _ in range(2)] == [b"first", b"second"]
    third = idx.lookup(r)
    assert third.outcome == "miss" and third.nearest is not None
    assert "already served" in third.reasons[0] and "--allow-repeats" in third.reasons[0]
    rep = Index([cassette((r, b"first"), (r, b"second"))], allow_repeats=True)
    assert [rep.lookup(r).entry.interaction.response.body for _ in range(3)] == [b"first", b"second", b"second"]


def test_default_match_serves_stale_bodies_in_order_as_divergences():
    recorded = [req({"model": "m", "messages": [{"content": str(i)}]}) for i in range(3)]
    live = [req({"model": "m", "messages": [{"content": str(i)}], "stream_options": {"x": 1}}) for i in range(3)]
    idx = Index([cassette(*((r, f"r{i}".encode()) for i, r in enumerate(recorded)))])
    got = [idx.lookup(x) for x in live]
    assert [g.outcome for g in got] == ["divergence"] * 3
    assert [g.entry.index for g in got] == [0, 1, 2]
    assert got[0].changes[0].path == "$.stream_options" and got[0].changes[0].kind == "added"
    exact = Index([cassette(*((r, b"") for r in recorded))], match="exact")
    assert exact.lookup(live[0]).outcome == "miss"


def test_timestamp_miss_names_the_field_and_suggests_a_verified_flag():
    rec = req({"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Today is 2025-03-04 12:00:00. Hi"}]})
    live = req({"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Today is 2026-12-01 07:11:42. Hi"}]})
    got = Index([cassette((rec, b"ok"))], match="exact").lookup(live)
    assert got.outcome == "miss"
    assert [c.path for c in got.changes] == ["$.messages[1].content"]
    assert got.suggestions and got.suggestions[0].startswith("--normalize ")
    assert got.verified is True


def test_suggest_ignore_json_path_for_ids_and_widens_indices():
    changes = diff_json({"m": [{"id": "a"}, {"id": "b"}]}, {"m": [{"id": "c"}, {"id": "d"}]})
    assert suggest(changes) == ["--ignore-json-path $.m[*].id"]


def test_lookup_is_thread_safe_each_interaction_served_once():
    reqs = [req({"i": i % 4}) for i in range(32)]
    idx = Index([cassette(*((r, str(n).encode()) for n, r in enumerate(reqs)))])
    served, lock = [], threading.Lock()

    def worker(r):
        e = idx.lookup(r).entry
        with lock:
            served.append(e.seq)

    threads = [threading.Thread(target=worker, args=(r,)) for r in reqs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(served) == list(range(32))
    assert idx.unused() == []
