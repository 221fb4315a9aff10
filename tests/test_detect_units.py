"""Boundary tests for each detector, on small in-memory cassettes in the real provider
wire formats (see test_detect_wire)."""

from __future__ import annotations

import json

import pytest

from spoolproxy.detectors import DetectConfig, analyze
from spoolproxy.detectors.checks import KINDS
from spoolproxy.errors import SpoolError

from .test_detect_wire import (ANTHROPIC, GEMINI, OPENAI, agent_loop, anthropic_sse, cassette, chat_request, chat_response,
                               chat_sse, ix, llm, mcp_sse, tcall, tool)

USER = [{"role": "user", "content": "Please help."}]


def kinds(report, kind=None):
    fs = [f for f in report.findings if kind is None or f.kind == kind]
    return fs


def one(report, kind):
    fs = kinds(report, kind)
    assert len(fs) == 1, [(f.kind, f.severity, f.message) for f in report.findings]
    return fs[0]


def test_kinds_are_exactly_the_documented_ones():
    """KINDS, the docs/detect.md table and the README's list name the same kinds."""
    import re

    from .conftest import REPO

    doc = (REPO / "docs" / "detect.md").read_text()
    section = doc[doc.index("## Finding kinds"):]
    section = section[:section.index("\n## ", 5)]
    table = re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE)
    readme = (REPO / "README.md").read_text()
    listed = re.findall(r"`(\w+)`(?! ?\))", readme[readme.index("Kinds: "):readme.index("An error the agent recovered")])
    from spoolproxy.checks import KIND as USER_CHECK  # check_failed: a user check, not a built-in detector
    from spoolproxy.judge.service import OFF_TRACK  # off_track: the opt-in model judge (detect --judge)

    assert sorted([*KINDS, USER_CHECK, OFF_TRACK]) == sorted(table) == sorted(listed)
    assert {"agent_crashed", "http_error", "stream_incomplete", "budget_exceeded", "tls_rejected"} <= set(KINDS)


# -- tool_loop ------------------------------------------------------------------------
def test_two_identical_calls_are_not_a_loop_three_are():
    two = analyze(agent_loop("list_files", [{"p": "*.csv"}] * 2, ["[]"] * 2))
    assert not kinds(two, "tool_loop") and two.verdict == "pass"
    three = analyze(agent_loop("list_files", [{"p": "*.csv"}] * 3, ["[]"] * 3))
    f = one(three, "tool_loop")
    assert f.severity == "error" and f.interactions == [0, 1, 2] and "3 times" in f.message


def test_whitespace_and_key_order_do_not_hide_a_loop():
    args = ['{"a": 1, "b": 2}', '{"b":2,"a":1}', '{ "a" : 1 , "b" : 2 }']
    assert one(analyze(agent_loop("save", args, ["ok"] * 3)), "tool_loop")


def test_polling_with_changing_results_is_progress_not_a_loop():
    rep = analyze(agent_loop("status", [{"id": 1}] * 3, ['{"s":"queued"}', '{"s":"running"}', '{"s":"done"}']))
    assert not kinds(rep, "tool_loop")


def test_a_b_a_b_cycle_with_unchanged_results():
    args = [{"x": 1}, {"x": 2}, {"x": 1}, {"x": 2}]
    rep = analyze(agent_loop("flip", args, ["A", "B", "A", "B"]))
    assert "alternate" in one(rep, "tool_loop").message
    rep3 = analyze(agent_loop("flip", args[:3], ["A", "B", "A"]))
    assert not kinds(rep3, "tool_loop")


def test_separate_runs_in_one_cassette_are_separate_threads():
    a = agent_loop("lookup", [{"q": 1}], ["r"], answer="One.")
    b = agent_loop("lookup", [{"q": 1}], ["r"], answer="Two.")
    c = agent_loop("lookup", [{"q": 1}], ["r"], answer="Three.")
    rep = analyze(cassette(*a.interactions, *b.interactions, *c.interactions))
    assert not kinds(rep, "tool_loop")


# -- retry_storm / http_error ---------------------------------------------------------
def _err(code: str, msg: str = "nope") -> bytes:
    return json.dumps({"error": {"message": msg, "type": code, "param": None, "code": code}}).encode()


def test_two_sdk_retries_of_a_502_are_not_a_storm_three_are():
    attempts = lambda n: [llm(USER, _err("bad_gateway"), status=502, second=i) for i in range(n)]  # noqa: E731
    rep = analyze(cassette(*attempts(3)))
    assert not kinds(rep, "retry_storm")
    f = one(rep, "http_error")
    assert f.interactions == [0, 1, 2] and f.severity == "error"
    assert one(analyze(cassette(*attempts(4))), "retry_storm").interactions == [0, 1, 2, 3]


def test_retrying_a_request_that_cannot_succeed_is_a_storm():
    rep = analyze(cassette(llm(USER, _err("invalid_api_key"), status=401), llm(USER, _err("invalid_api_key"), status=401, second=1)))
    assert "cannot succeed" in one(rep, "retry_storm").message
    quota = [llm(USER, _err("insufficient_quota"), status=429, second=i) for i in range(2)]
    assert one(analyze(cassette(*quota)), "retry_storm")


def test_attempts_minutes_apart_are_separate_runs_not_retries():
    again = lambda second: llm(USER, _err("invalid_api_key"), status=401, second=second)  # noqa: E731
    assert kinds(analyze(cassette(again(0), again(30))), "retry_storm")
    from spoolproxy.cassettes import Cassette

    far = cassette(again(0), again(0))
    far.interactions[1].response.headers["Date"] = ["Tue, 01 Apr 2025 10:04:00 GMT"]
    assert not kinds(analyze(far), "retry_storm")
    assert kinds(analyze(far, {"retry_window_s": 600}), "retry_storm") and isinstance(far, Cassette)


def test_retry_before_retry_after_is_a_storm_after_it_is_not():
    early = analyze(cassette(llm(USER, _err("rate_limit_exceeded"), status=429, second=0, retry_after="10"),
                             llm(USER, chat_response("Hi."), second=2)))
    assert "retry-after" in one(early, "retry_storm").message
    late = analyze(cassette(llm(USER, _err("rate_limit_exceeded"), status=429, second=0, retry_after="2"),
                            llm(USER, chat_response("Hi."), second=3)))
    assert not kinds(late, "retry_storm")
    assert one(late, "http_error").severity == "warn" and late.verdict == "pass"


def test_http_error_severity_follows_recovery_and_expected_status():
    dead = analyze(cassette(llm(USER, _err("invalid_request_error"), status=400)))
    assert one(dead, "http_error").severity == "error" and dead.verdict == "fail"
    cfg = DetectConfig(expected_status=[400])
    provoked = analyze(cassette(llm(USER, _err("invalid_request_error"), status=400)), cfg)
    assert {f.severity for f in provoked.findings} == {"info"} and provoked.verdict == "pass"
    telemetry = analyze(cassette(ix("POST", "https://telemetry.example/v1/traces", "x", status=401, resp="{}"),
                                 llm(USER, chat_response("Hi."))))
    assert one(telemetry, "http_error").severity == "info"


def test_error_event_inside_a_200_stream_is_an_http_error_not_a_cut_stream():
    body = chat_sse("Hel", finish=None, done=False) + b'event: error\ndata: {"error": {"message": "overloaded", "code": "x"}}\n\n'
    rep = analyze(cassette(llm(USER, body, stream=True)))
    assert "overloaded" in one(rep, "http_error").message and not kinds(rep, "stream_incomplete")


# -- tool_error_ignored ---------------------------------------------------------------
def test_ok_false_then_claimed_success_is_ignored():
    rep = analyze(agent_loop("post", [{"c": "#x"}], ['{"ok":false,"error":"channel_not_found"}'], answer="Posted to #x."))
    f = one(rep, "tool_error_ignored")
    assert f.severity == "error" and any(e.quote == "channel_not_found" for e in f.evidence)


def test_answer_that_admits_the_failure_is_not_ignored():
    rep = analyze(agent_loop("post", [{"c": "#x"}], ['{"ok":false,"error":"channel_not_found"}'],
                             answer="I could not post: the channel does not exist."))
    assert not kinds(rep, "tool_error_ignored") and rep.verdict == "pass"


def test_later_successful_call_of_the_same_tool_is_recovery():
    rep = analyze(agent_loop("post", [{"c": "#x"}, {"c": "#general"}], ['{"ok":false,"error":"channel_not_found"}', '{"ok":true}'],
                             answer="Posted to #general."))
    assert not kinds(rep, "tool_error_ignored")


def test_tool_error_body_then_success_claim():
    rep = analyze(agent_loop("search", [{"q": "x"}], ['{"error":{"message":"backend down"}}'], answer="Here you go: 42.",
                             http_host="search.example"))
    f = one(rep, "tool_error_ignored")
    assert 1 in f.interactions and 2 in f.interactions and "backend down" in f.message
    traceback = analyze(agent_loop("run", [{"c": "ls"}], ["Traceback (most recent call last):\n  File \"x\", line 1\nKeyError: 'a'"],
                                   answer="All files listed."))
    assert "traceback" in one(traceback, "tool_error_ignored").message


def test_mcp_is_error_passed_on_and_mcp_sse_is_not_an_llm_stream():
    call = tcall("call_1", "close_ticket", {"id": "T-1"})
    tools = [tool("close_ticket")]
    msgs = USER + [{"role": "assistant", "content": None, "tool_calls": [call]},
                   {"role": "tool", "tool_call_id": "call_1", "content": "Cannot close T-1: locked by incident."}]
    rep = analyze(cassette(
        llm(USER, chat_response(tool_calls=[call]), tools),
        ix("POST", "https://mcp.example/mcp", json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                          "params": {"name": "close_ticket", "arguments": {"id": "T-1"}}}),
           resp=mcp_sse(2, {"content": [{"type": "text", "text": "Cannot close T-1: locked by incident."}], "isError": True}),
           ctype="text/event-stream"),
        llm(msgs, chat_response("Done: T-1 is closed."), tools)))
    f = one(rep, "tool_error_ignored")
    assert 1 in f.interactions and "isError" in f.message
    assert not kinds(rep, "stream_incomplete")


# -- html_error_page ------------------------------------------------------------------
def test_provider_html_page_and_tool_html_pages():
    page = "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>cloudflare</body></html>"
    req = json.dumps({"model": "claude-sonnet-4-20250514", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "x"}]})
    rep = analyze(cassette(ix("POST", ANTHROPIC, req, status=502, resp=page, ctype="text/html")))
    assert one(rep, "html_error_page").severity == "error" and "SSE" in one(rep, "html_error_page").message
    ordinary = "<html><head><title>Pelicans</title></head><body>Birds.</body></html>"
    fetch = analyze(agent_loop("fetch", [{"url": "u"}], [ordinary], answer="Pelicans are birds.", http_host="web.example"))
    assert not kinds(fetch, "html_error_page")
    bad = analyze(agent_loop("fetch", [{"url": "u"}], [page], answer="Booked.", http_host="web.example"))
    assert kinds(bad, "html_error_page")  # 200 page with error markers, fed to the model


# -- invalid_tool_arguments / unknown_tool -------------------------------------------------
SCHEMA = {"type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"}}, "required": ["sku"]}


@pytest.mark.parametrize("args,flagged", [('{"sku": "BP-0040"}', False), ('{"sku": "bp-40"}', True), ("{}", True),
                                          ("the price of BP-0040", True), ('{"sku": 40}', True)])
def test_invalid_tool_arguments_against_the_declared_schema(args, flagged):
    call = tcall("call_1", "price_lookup", args)
    rep = analyze(cassette(llm(USER, chat_response(tool_calls=[call]), [tool("price_lookup", SCHEMA)])))
    assert bool(kinds(rep, "invalid_tool_arguments")) is flagged


def test_truncated_arguments_are_truncation_not_malformation():
    call = tcall("call_1", "write_file", '{"path": "a.sh", "content": "#!/bin/sh\\necho')
    rep = analyze(cassette(llm(USER, chat_response(tool_calls=[call], finish="length"), [tool("write_file")])))
    assert one(rep, "truncated_output").severity == "error" and not kinds(rep, "invalid_tool_arguments")


def test_gemini_uppercase_schema_types_validate():
    req = json.dumps({"contents": [{"role": "user", "parts": [{"text": "trains"}]}],
                      "tools": [{"functionDeclarations": [{"name": "dep", "parameters": {
                          "type": "OBJECT", "properties": {"n": {"type": "INTEGER"}}, "required": ["n"]}}]}]})
    resp = lambda args: json.dumps({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "dep", "args": args}}]},  # noqa: E731
                                                    "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 5}})
    assert not kinds(analyze(cassette(ix("POST", GEMINI, req, resp=resp({"n": 3})))), "invalid_tool_arguments")
    assert kinds(analyze(cassette(ix("POST", GEMINI, req, resp=resp({"n": "three"})))), "invalid_tool_arguments")


def test_unknown_tool():
    call = tcall("call_1", "send_email", {"to": "a"})
    rep = analyze(cassette(llm(USER, chat_response(tool_calls=[call]), [tool("get_order")])))
    f = one(rep, "unknown_tool")
    assert "send_email" in f.message and f.evidence[0].quote == "send_email"
    ok = analyze(cassette(llm(USER, chat_response(tool_calls=[tcall("c", "get_order", {})]), [tool("get_order")])))
    assert not kinds(ok, "unknown_tool")


# -- truncated_output / stream_incomplete -------------------------------------------------
def test_anthropic_max_tokens_then_continuation_is_warn():
    req = json.dumps({"model": "claude-sonnet-4-20250514", "max_tokens": 20, "stream": True, "messages": [{"role": "user", "content": "x"}]})
    first = ix("POST", ANTHROPIC, req, resp=anthropic_sse("Once upon", stop="max_tokens"), ctype="text/event-stream")
    second = ix("POST", ANTHROPIC, req.replace('"max_tokens": 20', '"max_tokens": 400'), resp=anthropic_sse("Once upon a time."),
                ctype="text/event-stream")
    rep = analyze(cassette(first, second))
    assert one(rep, "truncated_output").severity == "warn" and rep.verdict == "pass"
    assert one(analyze(cassette(first)), "truncated_output").severity == "error"


def test_stream_incomplete_levels():
    cut = analyze(cassette(llm(USER, chat_sse("Half an ans", finish=None, done=False), stream=True)))
    assert one(cut, "stream_incomplete").severity == "error"
    no_done = analyze(cassette(llm(USER, chat_sse("A whole answer.", done=False), stream=True)))
    assert one(no_done, "stream_incomplete").severity == "warn"
    whole = analyze(cassette(llm(USER, chat_sse("A whole answer."), stream=True)))
    assert whole.findings == []
    req = json.dumps({"model": "claude-sonnet-4-20250514", "max_tokens": 100, "stream": True, "messages": [{"role": "user", "content": "x"}]})
    anth = analyze(cassette(ix("POST", ANTHROPIC, req, resp=anthropic_sse("Filing", tool=("tu_1", "create", '{"title": "Dis'),
                                                                         stop=None, message_stop=False), ctype="text/event-stream")))
    assert one(anth, "stream_incomplete").severity == "error" and "message_stop" in one(anth, "stream_incomplete").message


# -- empty_output / refusal / no_final_answer ---------------------------------------------
def test_empty_final_turn_but_not_an_empty_intermediate_turn():
    rep = analyze(cassette(llm(USER, chat_response(""))))
    assert one(rep, "empty_output").severity == "error" and one(rep, "no_final_answer")
    recovered = analyze(cassette(llm(USER, chat_response("")), llm(USER, chat_response("Here it is."), second=1)))
    assert not kinds(recovered, "empty_output") and recovered.verdict == "pass"


def test_refusal_final_is_error_followed_by_an_answer_is_warn():
    refused = chat_response(None, refusal="I'm sorry, I can't help with that.")
    rep = analyze(cassette(llm(USER, refused)))
    f = one(rep, "refusal")
    assert f.severity == "error" and f.evidence[0].quote == "I'm sorry, I can't help with that."
    assert not kinds(rep, "empty_output")
    later = analyze(cassette(llm(USER, refused), llm(USER + [{"role": "user", "content": "It is my own server."}],
                                                       chat_response("Here is the review."), second=1)))
    assert one(later, "refusal").severity == "warn"
    filtered = analyze(cassette(llm(USER, chat_response("", finish="content_filter"))))
    assert one(filtered, "refusal")


def test_no_final_answer_severity():
    call = tcall("call_1", "get_weather", {"city": "Paris"})
    stops_at_tool = analyze(cassette(llm(USER, chat_response(tool_calls=[call]), [tool("get_weather")])))
    f = one(stops_at_tool, "no_final_answer")
    assert f.severity == "warn" and "recording stops there" in f.message
    looping = analyze(agent_loop("get_weather", [{"city": "Paris"}] * 3, ["sunny"] * 3, answer=None))
    assert one(looping, "no_final_answer").severity == "error"
    output_tool = analyze(cassette(llm(USER, chat_response(tool_calls=[tcall("c", "final_result", {"a": 1})]), [tool("final_result")])))
    assert not kinds(output_tool, "no_final_answer")


# -- duplicate_side_effect ---------------------------------------------------------------
def _refund(key: str, status: int = 200, second: int = 0):
    return ix("POST", "https://pay.example/v1/refunds", '{"charge": "c1", "amount": 100}', status,
              '{"id": "rf_1", "status": "succeeded"}' if status < 400 else "upstream request timeout", second=second,
              req_headers={"content-type": ["application/json"], "Idempotency-Key": [key]})


def test_duplicate_side_effect():
    rep = analyze(cassette(_refund("k1", 504), _refund("k2", 200, 31)))
    assert one(rep, "duplicate_side_effect").severity == "error"
    assert not kinds(analyze(cassette(_refund("k1", 504), _refund("k1", 200, 31))), "duplicate_side_effect")
    assert not kinds(analyze(cassette(_refund("k1"))), "duplicate_side_effect")
    gets = cassette(ix("GET", "https://pay.example/v1/refunds/rf_1", resp="{}"), ix("GET", "https://pay.example/v1/refunds/rf_1", resp="{}"))
    assert not kinds(analyze(gets), "duplicate_side_effect")
    rejected = analyze(cassette(_refund("k1", 422), _refund("k2", 422, 1)))
    assert one(rejected, "duplicate_side_effect").severity == "warn"


def test_attempts_that_never_reached_a_server_are_not_side_effects():
    """SDK retries of a telemetry POST whose host did not resolve (or refused the
    connection) performed nothing; a POST sent and then cut may have taken effect."""
    from spoolproxy.cassettes.model import Failure

    def attempt(kind: str, during: str, second: int):
        it = _refund("k", second=second).model_copy(update={"response": None})
        return it.model_copy(update={"error": Failure(kind=kind, message=f"{kind} failure", during=during),
                                     "request": it.request.model_copy(update={"headers": {"content-type": ["application/json"]}})})

    for kind in ("dns", "refused", "tls"):
        never = analyze(cassette(*(attempt(kind, "connect", n) for n in range(3))))
        assert not kinds(never, "duplicate_side_effect"), kind
    once = cassette(attempt("dns", "connect", 0), attempt("dns", "connect", 1), _refund("k2", 200, 2))
    assert not kinds(analyze(once), "duplicate_side_effect")  # one attempt reached the server
    cut = analyze(cassette(attempt("reset", "request", 0), _refund("k2", 200, 31)))
    assert one(cut, "duplicate_side_effect").severity == "error"  # sent, outcome unknown, then sent again


# -- budget_exceeded / config -------------------------------------------------------------
def test_budget_exceeded_only_with_a_configured_limit():
    run = agent_loop("step", [{"n": i} for i in range(3)], ["a", "b", "c"])
    assert not kinds(analyze(run), "budget_exceeded")
    assert not kinds(analyze(run, {"max_tool_calls": 3}), "budget_exceeded")
    f = one(analyze(run, {"max_tool_calls": 2}), "budget_exceeded")
    assert f.interactions == [2] and f.severity == "error"
    assert one(analyze(run, {"max_llm_calls": 3}), "budget_exceeded").interactions == [3]
    assert one(analyze(run, {"max_tokens": 100}), "budget_exceeded")
    assert one(analyze(run, {"max_cost_usd": 0.00001}), "budget_exceeded")


def test_config_patterns_and_errors():
    run = agent_loop("lookup", [{"q": 1}], ["QUOTA EXCEEDED for today"], answer="The answer is 4.")
    assert not kinds(analyze(run), "tool_error_ignored")
    assert one(analyze(run, {"error_patterns": ["QUOTA EXCEEDED"]}), "tool_error_ignored")
    assert not analyze(run, {"error_patterns": ["QUOTA EXCEEDED"], "disable": ["tool_error_ignored"]}).findings
    with pytest.raises(SpoolError):
        analyze(run, {"loop_min_repeat": 3})
    with pytest.raises(SpoolError):
        analyze(run, {"error_patterns": ["("]})


def test_detect_config_from_toml(tmp_path):
    from spoolproxy.detectors import load_detect_config

    p = tmp_path / "spoolproxy.toml"
    p.write_text("[detect]\nmax_tool_calls = 4\nloop_min_repeats = 4\n")
    cfg = load_detect_config(p)
    assert cfg.max_tool_calls == 4 and cfg.loop_min_repeats == 4
    bad = tmp_path / "bad.toml"  # config files are cached per path: use a second one
    bad.write_text("[detect]\nmax_tool_calls = -1\n")
    with pytest.raises(SpoolError, match="max_tool_calls"):
        load_detect_config(bad)


def test_chat_request_builder_round_trip():
    body = json.loads(chat_request(USER, [tool("a")], stream=True))
    assert body["stream"] is True and body["tools"][0]["function"]["name"] == "a" and OPENAI.endswith("/chat/completions")


def test_transport_failure_without_response():
    from spoolproxy.cassettes import Failure, Interaction, Request

    from spoolproxy.cli.show import summary
    from spoolproxy.detectors import build_transcript

    dead = Interaction(request=Request(method="POST", uri=OPENAI, body=chat_request(USER)),
                       error=Failure(kind="reset", message="connection reset by peer", during="connect"))
    cas = cassette(dead, llm(USER, chat_response("Hi.")))
    rep = analyze(cas)
    f = one(rep, "http_error")
    assert f.severity == "warn" and "transport failure" in f.message
    assert f.evidence and f.evidence[0].path == "error.message"
    t = build_transcript(cas)
    assert t.steps[0].status is None and "reset" in summary(t.steps[0])
    cut = Interaction(request=Request(method="POST", uri=OPENAI, body=chat_request(USER, stream=True)),
                      response=llm(USER, chat_sse("Half", finish=None, done=False), stream=True).response,
                      error=Failure(kind="reset", message="stream cut", during="response"))
    assert one(analyze(cassette(cut)), "stream_incomplete").severity == "error"


@pytest.mark.parametrize("content,failed", [
    ("Traceback (most recent call last):\n  File \"t.py\", line 3\nKeyError: 'x'", True),
    ("Error: boom\n    at run (/app/tool.js:10:5)\n    at main (/app/index.js:3:1)\n", True),
    ("ValueError Exception: raised when an argument has the right type but a bad value.", False),
    ('{"results": [], "errors": []}', False),
    ('{"status": "error", "detail": "quota"}', True),
    ('{"success": false}', True),
    ('{"pipeline": {"status": "failed"}}', False),  # data about a failure is not a tool failure
])
def test_what_counts_as_a_failed_tool_result(content, failed):
    rep = analyze(agent_loop("tool", [{"a": 1}], [content], answer="All good: 42."))
    assert bool(kinds(rep, "tool_error_ignored")) is failed
