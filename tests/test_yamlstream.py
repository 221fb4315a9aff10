"""Reading cassettes one interaction at a time (spoolproxy.cassettes.yamlstream): the same
cassette as a whole-document parse, for every layout; errors still name the right line."""

from __future__ import annotations

import io

import pytest
import yaml

from spoolproxy.cassettes import Cassette, Interaction, Request, Response, load, save
from spoolproxy.cassettes.format import from_document
from spoolproxy.cassettes.storage import CassetteLoader, dumps, parse_text
from spoolproxy.cassettes.yamlstream import NotStreamable, segments
from spoolproxy.errors import CassetteError

from .conftest import corpus_files


def _cassette(n: int) -> Cassette:
    its = []
    for i in range(n):
        body = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "q%d"}]}' % i
        sse = b"data: {\"a\": %d}\n\ndata: [DONE]\n\n" % i  # a literal block with an empty line
        its.append(Interaction(
            request=Request(method="POST", uri="https://api.openai.com/v1/chat/completions",
                            headers={"content-type": ["application/json"]}, body=body),
            response=Response(status=200, headers={"content-type": ["text/event-stream"]}, body=sse)))
    return Cassette(interactions=its)


def _whole(text: str) -> Cassette:
    return from_document(yaml.load(text, Loader=CassetteLoader))


def test_v1_splits_into_one_piece_per_interaction_and_reads_the_same():
    text = dumps(_cassette(5))
    kinds = [s.kind for s in segments(io.BytesIO(text.encode()))]
    assert kinds == ["top", "top", "interactions", "item", "item", "item", "item", "item", "top"]
    assert parse_text(text).model_dump() == _whole(text).model_dump()


def test_plain_vcrpy_layout_reads_the_same():
    text = dumps(_cassette(3), plain=True)
    assert [s.kind for s in segments(io.BytesIO(text.encode()))].count("item") == 3
    assert parse_text(text).model_dump() == _whole(text).model_dump()


@pytest.mark.parametrize("text", [
    # an indented interactions list (ruamel-style writers)
    "version: 1\ninteractions:\n  - request: {method: GET, uri: 'https://a.example/'}\n"
    "    response: {status: {code: 200, message: OK}, headers: {}, body: {string: hi}}\n",
    # an alias whose anchor sits in another interaction (PyYAML writes them for shared objects)
    "interactions:\n- request: {method: GET, uri: 'https://a.example/', headers: &h {x: [y]}}\n"
    "  response: {status: {code: 200, message: OK}, headers: {}, body: {string: a}}\n"
    "- request: {method: GET, uri: 'https://a.example/', headers: *h}\n"
    "  response: {status: {code: 200, message: OK}, headers: {}, body: {string: b}}\n",
    # an explicit document start and end
    "---\ninteractions: []\nversion: 1\n...\n",
])
def test_layouts_it_does_not_split_are_read_whole(text):
    assert parse_text(text).model_dump() == _whole(text).model_dump()


def test_a_top_level_sequence_is_not_split():
    with pytest.raises(NotStreamable):
        list(segments(io.BytesIO(b"- just\n- a list\n")))


def test_a_syntax_error_deep_in_a_file_names_its_line(tmp_path):
    lines = dumps(_cassette(40)).splitlines(keepends=True)
    bad = next(i for i, line in enumerate(lines) if i > len(lines) // 2 and line.startswith("  response:"))
    lines[bad] = "  response: {status: [\n"
    p = tmp_path / "bad.yaml"
    p.write_text("".join(lines))
    with pytest.raises(CassetteError) as exc:
        load(p)
    assert exc.value.line is not None and abs(exc.value.line - (bad + 1)) <= 2
    assert "invalid YAML" in str(exc.value)


def test_corpus_reads_the_same_streamed_and_whole():
    files = corpus_files()
    if not files:
        pytest.skip("shared corpus not found (set SPOOLPROXY_SHARED)")
    for f in files[::5]:
        text = f.read_text()
        assert parse_text(text, f).model_dump() == _whole(text).model_dump(), f


def test_cache_entries_are_written_and_read_one_interaction_at_a_time(tmp_path, monkeypatch):
    from spoolproxy.cassettes import cache

    monkeypatch.setenv("SPOOLPROXY_CACHE", str(tmp_path / "cache"))
    path = save(_cassette(2500), tmp_path / "big.yaml")
    assert path.stat().st_size >= cache.MIN_SIZE
    cold = load(path)
    (entry,) = (tmp_path / "cache").glob("*.json")
    pieces = cache.read_entry(entry)
    kinds = [k for k, _ in pieces]
    assert kinds.count("item") == 2500 and kinds[-1] == "top"  # end_of_cassette comes after the items
    assert load(path).model_dump() == cold.model_dump()
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])  # cut short: the YAML is read instead
    assert load(path).model_dump() == cold.model_dump()
