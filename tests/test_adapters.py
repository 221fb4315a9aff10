"""Provider adapters: every corpus cassette parses (no crash), each API family in the
MANIFEST is recognised by path and body shape, streams reassemble to what the
non-streamed shape holds, and the families without corpus coverage of every shape
(Ollama NDJSON, Cohere v2, Azure, Bedrock) parse from their real wire formats."""

from __future__ import annotations

import csv
import json
from collections import Counter

import pytest

from spoolproxy.cassettes import load
from spoolproxy.detectors import analyze, build_transcript
from spoolproxy.detectors.adapters.registry import classify
from spoolproxy.detectors.adapters.sse import parse_json_array_stream, parse_sse

from .conftest import CORPUS, corpus_files
from .test_detect_wire import cassette, chat_sse, ix, tcall

FILES = corpus_files()
MANIFEST = CORPUS.parent / "MANIFEST.tsv"
FEATURE_API = {"openai-chat": "openai-chat", "openai-responses": "openai-responses",
               "anthropic-messages": "anthropic-messages", "gemini-generateContent": "gemini-generateContent",
               "gemini-streamGenerateContent": "gemini-generateContent", "bedrock-converse": "bedrock-converse",
               "bedrock-converse-stream": "bedrock-converse", "cohere-chat": "cohere-chat", "ollama-api": "ollama-generate"}


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_corpus_file_parses_and_analyzes(path):
    cas = load(path)
    t = build_transcript(cas)
    assert len(t.steps) == len(cas.interactions)
    report = analyze(cas, transcript=t)
    assert report.verdict in ("pass", "fail")
    for s in t.steps:
        if s.llm is not None and s.ok and s.llm.stream.is_stream and s.llm.stream.format == "sse":
            assert s.llm.stream.events > 0


def test_manifest_families_are_recognised(corpus_dir):
    rows = list(csv.DictReader(MANIFEST.open(encoding="utf-8"), delimiter="\t"))
    assert len(rows) == 121
    seen: Counter = Counter()
    for row in rows:
        t = build_transcript(load(CORPUS.parent / row["local_path"]))
        apis = {s.llm.api for s in t.steps if s.llm is not None}
        feats = row["features"].split(",")
        for feat, api in FEATURE_API.items():
            if feat in feats:
                assert api in apis, (row["local_path"], feat, apis)
                seen[feat] += 1
        if "mcp-streamable-http" in feats:
            assert any(s.kind == "mcp" for s in t.steps), row["local_path"]
            seen["mcp"] += 1
        providers = {s.llm.provider for s in t.steps if s.llm is not None}
        for name in ("groq", "openrouter", "together", "deepseek", "mistral", "azure-openai"):
            if row["provider"] == name:
                assert name in providers, (row["local_path"], providers)
    assert seen["openai-chat"] == 50 and seen["anthropic-messages"] == 27 and seen["mcp"] == 2


@pytest.mark.parametrize("family", ["openai_gpt_4o_completions", "openai_gpt_4o_responses",
                                    "anthropic_claude_sonnet_4_0", "google_gemini_2_5_flash"])
def test_stream_and_sync_recordings_reassemble_alike(corpus_dir, family):
    """mirascope recorded the same tool call streamed and not: the reassembled stream must
    hold the same tool calls (name + parsed arguments) and finish reason."""
    def first_turn(variant):
        t = build_transcript(load(corpus_dir / "mirascope" / f"test_call_with_tools__{family}__{variant}.yaml"))
        return next(s.llm for s in t.steps if s.llm is not None)

    stream, sync = first_turn("stream"), first_turn("sync")
    assert stream.stream.is_stream and stream.stream.complete and not sync.stream.is_stream
    assert [(tc.name, tc.arguments) for tc in stream.tool_calls] == [(tc.name, tc.arguments) for tc in sync.tool_calls]
    assert stream.tool_calls and all(tc.parse_error is None for tc in stream.tool_calls)
    assert stream.finish_reason == sync.finish_reason == "tool_calls"
    assert stream.text.strip() == sync.text.strip()  # both empty, or Claude's identical preamble


def test_responses_stream_deltas_match_the_final_response_object(corpus_dir):
    """A Responses stream carries both: the deltas and, in response.completed, the
    non-streamed response object.  Reassembling without the terminal event gives the same."""
    checked = 0
    for path in sorted(corpus_dir.rglob("*.yaml")):
        cas = load(path)
        for it in cas.interactions:
            if it.response is None or not it.request.uri.endswith("/responses") or b"response.completed" not in it.response.body:
                continue
            full = classify(it)[1]
            cut = it.model_copy(deep=True)
            events = it.response.body.split(b"\n\n")
            cut.response.body = b"\n\n".join(e for e in events if b"response.completed" not in e)
            partial = classify(cut)[1]
            assert full.stream.complete and not partial.stream.complete
            assert partial.text == full.text, path.name
            assert [(t.name, t.arguments) for t in partial.tool_calls] == [(t.name, t.arguments) for t in full.tool_calls]
            checked += 1
    assert checked >= 5


def test_gemini_json_array_stream_and_a_cut_array(corpus_dir):
    cas = load(corpus_dir / "llm-gemini" / "test_gemini__test_prompt.yaml")
    call = build_transcript(cas).steps[0].llm
    assert call.stream.format == "json-array" and call.stream.complete and call.text
    body = cas.interactions[0].response.body
    objs, closed = parse_json_array_stream(body[: body.rfind(b"}") - 20])
    assert not closed and len(objs) >= 1


def test_bedrock_converse_stream_event_stream(corpus_dir):
    t = build_transcript(load(corpus_dir / "pydantic-ai" / "test_bedrock__test_bedrock_model_iter_stream.yaml"))
    first = t.steps[0].llm
    assert first.api == "bedrock-converse" and first.stream.format == "aws-eventstream" and first.stream.complete
    assert first.tool_calls and first.tool_calls[0].parse_error is None and first.finish_reason == "tool_calls"
    assert t.steps[-1].llm.text and t.steps[-1].llm.finish_reason == "stop"
    assert t.tool_results and t.tool_results[0].call_interaction == 0


def test_sse_parser_handles_comments_crlf_and_a_cut_event():
    events = parse_sse(b": ping\r\n\r\nevent: a\r\ndata: 1\r\ndata: 2\r\n\r\ndata: {\"x\"")
    assert [(e.event, e.data) for e in events] == [("a", "1\n2"), ("", '{"x"')]


def test_openai_compatible_and_azure_recognised_by_path():
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    for uri, provider in [("https://myres.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21", "azure-openai"),
                          ("https://api.groq.com/openai/v1/chat/completions", "groq"),
                          ("http://10.0.0.7:8000/v1/chat/completions", "openai-compatible"),  # vLLM / llama.cpp
                          ("http://localhost:11434/v1/chat/completions", "ollama")]:
        kind, call = classify(ix("POST", uri, body, resp=chat_sse("Hello!"), ctype="text/event-stream"))
        assert kind == "llm" and call.api == "openai-chat" and call.provider == provider and call.text == "Hello!"


def test_ollama_native_chat_ndjson_stream():
    lines = [{"model": "llama3.1", "message": {"role": "assistant", "content": "Hel"}, "done": False},
             {"model": "llama3.1", "message": {"role": "assistant", "content": "lo", "tool_calls": [
                 {"function": {"name": "get_time", "arguments": {"tz": "UTC"}}}]}, "done": False},
             {"model": "llama3.1", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
              "prompt_eval_count": 12, "eval_count": 5}]
    body = "\n".join(json.dumps(x) for x in lines) + "\n"
    req = json.dumps({"model": "llama3.1", "messages": [{"role": "user", "content": "time?"}],
                      "tools": [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]})
    kind, call = classify(ix("POST", "http://localhost:11434/api/chat", req, resp=body, ctype="application/x-ndjson"))
    assert kind == "llm" and call.api == "ollama-chat" and call.text == "Hello"
    assert call.tool_calls[0].arguments == {"tz": "UTC"} and call.finish_reason == "tool_calls"
    assert call.stream.complete and call.usage.input_tokens == 12 and call.usage.output_tokens == 5
    cut = classify(ix("POST", "http://localhost:11434/api/chat", req, resp="\n".join(body.splitlines()[:2])))[1]
    assert not cut.stream.complete


def test_cohere_v2_chat_json_and_stream():
    req = json.dumps({"model": "command-r-plus", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    resp = json.dumps({"id": "1", "finish_reason": "MAX_TOKENS", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "Hello"}]}, "usage": {"tokens": {"input_tokens": 3, "output_tokens": 9}}})
    call = classify(ix("POST", "https://api.cohere.com/v2/chat", req, resp=resp))[1]
    assert call.api == "cohere-chat" and call.text == "Hello" and call.finish_reason == "length"
    ev = [("message-start", {"type": "message-start", "id": "1"}),
          ("content-delta", {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": "Hi "}}}}),
          ("content-delta", {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": "there"}}}}),
          ("message-end", {"type": "message-end", "delta": {"finish_reason": "COMPLETE",
                                                             "usage": {"tokens": {"input_tokens": 3, "output_tokens": 2}}}})]
    sse = "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in ev)
    call = classify(ix("POST", "https://api.cohere.com/v2/chat", req, resp=sse, ctype="text/event-stream"))[1]
    assert call.text == "Hi there" and call.finish_reason == "stop" and call.stream.complete


def test_tool_call_arguments_raw_and_parsed():
    good, bad = tcall("c1", "f", {"a": 1}), tcall("c2", "f", '{"a": ')
    call = classify(ix("POST", "https://api.openai.com/v1/chat/completions",
                       json.dumps({"model": "m", "messages": [], "stream": True}),
                       resp=chat_sse(tool_calls=[good, bad], finish="tool_calls"), ctype="text/event-stream"))[1]
    assert call.tool_calls[0].arguments == {"a": 1} and call.tool_calls[0].arguments_raw == '{"a": 1}'
    assert call.tool_calls[1].arguments is None and call.tool_calls[1].parse_error and call.tool_calls[1].arguments_raw == '{"a": '


def test_non_llm_endpoints_are_plain_http(corpus_dir):
    t = build_transcript(load(corpus_dir / "pydantic-ai" / "test_anthropic__test_anthropic_count_tokens_error.yaml"))
    assert all(s.kind == "http" for s in t.steps)
    cas = cassette(ix("POST", "https://api.openai.com/v1/embeddings", json.dumps({"model": "e", "input": "x"}), resp="{}"))
    assert build_transcript(cas).steps[0].kind == "http"
