"""The five failure classes of issue 9 (item 4), on real recordings: agents built on the
real openai / anthropic SDKs (and httpx for Gemini and Ollama) run against a scripted model
in each provider's wire format, plain and streamed, with tools served as HTTP APIs, all
through the in-process recording proxy.  Each class is checked with several providers and
wordings, and with a near miss that must stay quiet.

The held-out inputs, written after these detectors were frozen, are in
``tests/test_failure_classes_holdout.py``.
"""

from __future__ import annotations

import json

import pytest

from spoolproxy.cassettes import load
from spoolproxy.detectors import analyze, build_transcript
from spoolproxy.detectors.evidence import EvidenceBuilder
from tests.fakes.agents import GEMINI, Tool, add_tool, run_agent
from tests.fakes.provider import Reply, json_reply
from tests.fakes.scripted import ScriptedModel, Turn

from .test_proxy_support import recording, spool_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("spool_home")

#: (wire format, streamed): every format the scripted model speaks, both ways where it streams
FORMATS = [("openai-chat", False), ("openai-chat", True), ("anthropic", False), ("anthropic", True),
           ("gemini", False), ("gemini", True), ("openai-responses", False), ("openai-responses", True),
           ("ollama", False), ("ollama", True)]
IDS = [f"{a}-{'stream' if s else 'json'}" for a, s in FORMATS]


def record(tmp_path, fake, api, stream, turns, prompt, tools, replies, **kw):
    """Run the scripted agent once and return (answer, cassette, report)."""
    ScriptedModel(turns).install(fake)
    for name, reply in replies.items():
        add_tool(fake, name, reply)
    path = tmp_path / f"{api}-{stream}.yaml"
    with recording(path, fake=fake, connect_to=[f"generativelanguage.googleapis.com:443:127.0.0.1:{fake.port}"]) as s:
        answer = run_agent(api, s, fake, prompt, tools, stream=stream, **kw)
    cas = load(path)
    t = build_transcript(cas)
    report = analyze(cas, transcript=t)
    ev = EvidenceBuilder(cas, t)
    for f in report.findings:
        for e in f.evidence:
            field = ev.resolve(e.interaction, e.path)
            assert field is not None and e.quote in field, (f.kind, e)
    return answer, cas, report


def found(report, kind):
    return [f for f in report.findings if f.kind == kind]


def html(title: str, body: str = "") -> bytes:
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body><h1>{title}</h1><p>{body}</p></body></html>\n").encode()


# -- 1. a cut tool call that the agent executed -----------------------------------------------
WRITE = Tool("write_file", {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                            "required": ["path", "content"]})
CUT_SCRIPT = '{"path": "rotate.sh", "content": "#!/bin/sh\\nfor f in /var/log/app/*.log; do\\n  gzip -9 \\"$f'


@pytest.mark.parametrize("api,stream", FORMATS, ids=IDS)
def test_cut_tool_call_executed_is_an_error(tmp_path, fake_provider, api, stream):
    turns = [Turn(calls=[("write_file", CUT_SCRIPT)], finish="length"), Turn(text="Done: rotate.sh is in place.")]
    answer, cas, report = record(tmp_path, fake_provider, api, stream, turns, "Write a log rotation script to rotate.sh",
                                 [WRITE], {"write_file": json_reply(200, {"ok": True, "bytes": 71})})
    assert answer == "Done: rotate.sh is in place."
    (f,) = found(report, "truncated_output")
    assert f.severity == "error" and "executed the cut call" in f.message and "write_file" in f.message
    assert report.verdict == "fail"
    assert not found(report, "invalid_tool_arguments")


@pytest.mark.parametrize("api,stream", [("openai-chat", True), ("anthropic", False), ("gemini", False)],
                         ids=["openai-chat-stream", "anthropic-json", "gemini-json"])
def test_a_cut_call_whose_arguments_still_parse_is_an_error_too(tmp_path, fake_provider, api, stream):
    """The limit fell right after a closing brace: the arguments parse, but the model was cut
    (the query lost its WHERE clause) and the agent ran it."""
    sql = Tool("run_sql", {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})
    turns = [Turn(calls=[("run_sql", '{"query": "DELETE FROM sessions"}')], finish="length"),
             Turn(text="Old sessions are cleaned up.")]
    _, _, report = record(tmp_path, fake_provider, api, stream, turns, "Remove sessions older than 30 days", [sql],
                          {"run_sql": json_reply(200, {"rows_affected": 48213})})
    (f,) = found(report, "truncated_output")
    assert f.severity == "error" and "executed the cut call" in f.message


def test_a_cut_text_answer_the_agent_recovered_from_is_a_warning(tmp_path, fake_provider):
    turns = [Turn(text="The three causes are: first, the", finish="length"),
             Turn(calls=[("write_file", '{"path": "notes.md", "content": "short"}')]), Turn(text="Saved.")]
    tools = [WRITE]
    # the agent stops at the first text answer: run the continuation as a second conversation
    ScriptedModel(turns).install(fake_provider)
    add_tool(fake_provider, "write_file", json_reply(200, {"ok": True}))
    path = tmp_path / "two.yaml"
    with recording(path, fake=fake_provider) as s:
        run_agent("openai-chat", s, fake_provider, "Why did the deploy fail?", tools)
        run_agent("openai-chat", s, fake_provider, "Save a short note", tools)
    report = analyze(load(path))
    (f,) = found(report, "truncated_output")
    assert f.severity == "warn" and "executed" not in f.message


# -- 2. HTML where JSON was expected, fed to the model ---------------------------------------
HTML_CASES = {
    "maintenance-200-accept-json": (Tool("get_invoice", {"type": "object", "properties": {"id": {"type": "string"}}},
                                         method="GET", headers={"Accept": "application/json"}),
                                    Reply(200, [("content-type", "text/html; charset=utf-8")],
                                          html("Scheduled maintenance", "We'll be back shortly."))),
    "login-wall-json-body": (Tool("create_ticket", {"type": "object", "properties": {"title": {"type": "string"}}}),
                             Reply(200, [("content-type", "text/html")], html("Sign in to Helpdesk", "Username Password"))),
    "waf-challenge-403": (Tool("lookup_customer", {"type": "object", "properties": {"email": {"type": "string"}}},
                               method="GET", headers={"Accept": "application/json, */*;q=0.5"}),
                          Reply(403, [("content-type", "text/html")], html("Just a moment...", "Checking your browser"))),
}


@pytest.mark.parametrize("case", list(HTML_CASES))
@pytest.mark.parametrize("api,stream", [("openai-chat", False), ("anthropic", True), ("gemini", False)],
                         ids=["openai-chat-json", "anthropic-stream", "gemini-json"])
def test_html_to_a_json_request_fed_to_the_model(tmp_path, fake_provider, api, stream, case):
    tool, page = HTML_CASES[case]
    turns = [Turn(calls=[(tool.name, '{"id": "INV-2291", "title": "Printer jam", "email": "ana@example.org"}')]),
             Turn(text="All set: the record is updated and everything looks normal.")]
    _, _, report = record(tmp_path, fake_provider, api, stream, turns, "Handle the request", [tool], {tool.name: page})
    (f,) = found(report, "html_error_page")
    assert f.severity == "error" and "where JSON was expected" in f.message and "fed to the model" in f.message
    assert report.verdict == "fail"


def test_soft_404_on_an_api_whose_other_answers_are_json(tmp_path, fake_provider):
    """No Accept header, a GET: the API's earlier JSON answers say it speaks JSON."""
    tool = Tool("get_order", {"type": "object", "properties": {"id": {"type": "string"}}}, method="GET")
    pages = [json_reply(200, {"id": "1001", "status": "shipped"}),
             Reply(200, [("content-type", "text/html")], html("Page not found", "The page you requested does not exist."))]
    turns = [Turn(calls=[("get_order", '{"id": "1001"}')]), Turn(calls=[("get_order", '{"id": "1002"}')]),
             Turn(text="Order 1001 shipped; order 1002 is on its way too.")]
    _, _, report = record(tmp_path, fake_provider, "openai-chat", True, turns, "Status of 1001 and 1002?", [tool],
                          {"get_order": pages})
    (f,) = found(report, "html_error_page")
    assert f.severity == "error" and "not-found page" in f.message and "other responses of" in f.message


def test_an_ordinary_web_page_a_fetch_tool_reads_is_fine(tmp_path, fake_provider):
    tool = Tool("fetch_url", {"type": "object", "properties": {"url": {"type": "string"}}}, method="GET")
    page = Reply(200, [("content-type", "text/html")], html("Release notes 4.2", "Faster builds and a new cache."))
    turns = [Turn(calls=[("fetch_url", '{"url": "https://example.org/notes"}')]), Turn(text="4.2 brings faster builds.")]
    _, _, report = record(tmp_path, fake_provider, "anthropic", False, turns, "What is new in 4.2?", [tool],
                          {"fetch_url": page})
    assert not found(report, "html_error_page") and report.verdict == "pass"


# -- 3. suspicious tool results --------------------------------------------------------------
SEARCH = Tool("search_orders", {"type": "object", "properties": {"customer": {"type": "string"}}})


@pytest.mark.parametrize("api,stream", [("openai-chat", False), ("anthropic", True), ("openai-responses", False),
                                        ("ollama", True)], ids=["openai-chat", "anthropic-stream", "responses", "ollama"])
def test_an_empty_result_then_a_specific_answer(tmp_path, fake_provider, api, stream):
    turns = [Turn(calls=[("search_orders", '{"customer": "Ines Duarte"}')]),
             Turn(text="Ines's last order, ORD-77310, shipped on 2025-03-02 and cost $84.10.")]
    _, _, report = record(tmp_path, fake_provider, api, stream, turns, "What did Ines Duarte order last?", [SEARCH],
                          {"search_orders": json_reply(200, {"orders": [], "next": None})})
    (f,) = found(report, "suspicious_tool_result")
    assert f.severity == "error" and "empty result" in f.message and "ORD-77310" in f.message


def test_an_empty_result_the_answer_admits_is_fine(tmp_path, fake_provider):
    turns = [Turn(calls=[("search_orders", '{"customer": "Ines Duarte"}')]),
             Turn(text="I couldn't find any orders for Ines Duarte.")]
    _, _, report = record(tmp_path, fake_provider, "openai-chat", False, turns, "What did Ines Duarte order last?",
                          [SEARCH], {"search_orders": json_reply(200, [])})
    assert not found(report, "suspicious_tool_result") and report.verdict == "pass"


def test_a_truncated_result_then_numbers_it_never_had(tmp_path, fake_provider):
    tool = Tool("quarterly_report", {"type": "object", "properties": {"quarter": {"type": "string"}}})
    cut = Reply(200, [("content-type", "application/json")],
                b'{"quarter": "Q3", "rows": [{"region": "EMEA", "revenue": 120400}, {"region": "APA')
    turns = [Turn(calls=[("quarterly_report", '{"quarter": "Q3"}')]),
             Turn(text="Q3 revenue: EMEA 120,400 and APAC 98,250, so 218,650 in total.")]
    _, _, report = record(tmp_path, fake_provider, "gemini", False, turns, "Q3 revenue by region?", [tool],
                          {"quarterly_report": cut})
    (f,) = found(report, "suspicious_tool_result")
    assert "truncated JSON" in f.message and "98,250" in f.message and "120,400" not in f.message


def test_a_result_whose_shape_drifted(tmp_path, fake_provider):
    tool = Tool("get_price", {"type": "object", "properties": {"sku": {"type": "string"}}}, method="GET")
    replies = [json_reply(200, {"sku": "A-1", "price": 12.5, "currency": "EUR"}),
               json_reply(200, {"sku": "B-2", "amount_cents": None})]
    turns = [Turn(calls=[("get_price", '{"sku": "A-1"}')]), Turn(calls=[("get_price", '{"sku": "B-2"}')]),
             Turn(text="A-1 is 12.50 EUR and B-2 is 14.90 EUR.")]
    _, _, report = record(tmp_path, fake_provider, "anthropic", False, turns, "Prices of A-1 and B-2?", [tool],
                          {"get_price": replies})
    (f,) = found(report, "suspicious_tool_result")
    assert "drifted" in f.message and "missing currency, price" in f.message and "14.90" in f.message


# -- 4. schema violations --------------------------------------------------------------------
SCAN = {"type": "object", "properties": {"findings": {"type": "array", "items": {
    "type": "object", "properties": {"host": {"type": "string"}, "port": {"type": "integer"},
                                     "risk": {"type": "string", "enum": ["low", "medium", "high"]}},
    "required": ["host", "port", "risk"]}}}, "required": ["findings"]}
BAD = json.dumps({"findings": [{"host": "10.0.0.5", "port": 9200, "risk": "high"},
                               {"host": "10.0.0.7", "port": "6379", "risk": "critical"}]})


def test_openai_json_schema_answer_with_a_wrong_type(tmp_path, fake_provider):
    rf = {"type": "json_schema", "json_schema": {"name": "Scan", "schema": SCAN, "strict": True}}
    _, _, report = record(tmp_path, fake_provider, "openai-chat", True, [Turn(text=BAD)], "Review the scan", [],
                          {}, request_extra={"response_format": rf})
    (f,) = found(report, "schema_violation")
    assert f.severity == "error" and "$.findings[1].port" in f.message
    assert f.evidence and f.evidence[0].quote == '"port": "6379"'


def test_responses_text_format_missing_key(tmp_path, fake_provider):
    fmt = {"text": {"format": {"type": "json_schema", "name": "Scan", "schema": SCAN, "strict": True}}}
    _, _, report = record(tmp_path, fake_provider, "openai-responses", False, [Turn(text='{"hosts": []}')],
                          "Review the scan", [], {}, request_extra=fmt)
    (f,) = found(report, "schema_violation")
    assert "at $:" in f.message and "'findings' is a required property" in f.message


def test_gemini_response_schema_enum(tmp_path, fake_provider):
    gen = {"generationConfig": {"responseMimeType": "application/json", "responseSchema": {
        "type": "OBJECT", "properties": {"risk": {"type": "STRING", "enum": ["LOW", "HIGH"]}}, "required": ["risk"]}}}
    _, _, report = record(tmp_path, fake_provider, "gemini", True, [Turn(text='{"risk": "MEDIUM"}')], "Rate it", [], {},
                          request_extra=gen)
    (f,) = found(report, "schema_violation")
    assert "$.risk" in f.message and "'MEDIUM' is not one of" in f.message


def test_anthropic_forced_tool_output(tmp_path, fake_provider):
    tool = Tool("record_summary", {"type": "object", "properties": {"title": {"type": "string"}, "score": {"type": "number"}},
                                   "required": ["title", "score"]})
    turns = [Turn(calls=[("record_summary", '{"title": "Outage review"}')])]
    _, _, report = record(tmp_path, fake_provider, "anthropic", False, turns, "Summarise", [tool],
                          {"record_summary": json_reply(200, {"ok": True})}, max_turns=1,
                          request_extra={"tool_choice": {"type": "tool", "name": "record_summary"}})
    (f,) = found(report, "schema_violation")
    assert "record_summary tool answer" in f.message and "'score' is a required property" in f.message
    assert not found(report, "invalid_tool_arguments")


def test_ollama_format_schema_answered_in_prose(tmp_path, fake_provider):
    _, _, report = record(tmp_path, fake_provider, "ollama", False, [Turn(text="The risk is high, patch port 9200.")],
                          "Rate it", [], {}, request_extra={"format": SCAN})
    (f,) = found(report, "schema_violation")
    assert "is not JSON" in f.message


def test_a_valid_structured_answer_is_fine(tmp_path, fake_provider):
    good = json.dumps({"findings": [{"host": "10.0.0.5", "port": 9200, "risk": "high"}]})
    rf = {"type": "json_schema", "json_schema": {"name": "Scan", "schema": SCAN, "strict": True}}
    _, _, report = record(tmp_path, fake_provider, "openai-chat", False, [Turn(text=f"```json\n{good}\n```")],
                          "Review the scan", [], {}, request_extra={"response_format": rf})
    assert not found(report, "schema_violation") and report.verdict == "pass"


# -- 5. self-contradiction -------------------------------------------------------------------
def test_create_then_delete_the_same_event(tmp_path, fake_provider):
    tools = [Tool("create_calendar_event", {"type": "object", "properties": {"title": {"type": "string"}}}),
             Tool("delete_calendar_event", {"type": "object", "properties": {"event_id": {"type": "string"}}})]
    turns = [Turn(calls=[("create_calendar_event", '{"title": "1:1 with Priya", "start": "2025-05-02T10:00"}')]),
             Turn(calls=[("delete_calendar_event", '{"event_id": "evt_93f2ab"}')]),
             Turn(text="Your 1:1 with Priya is on the calendar for Friday 10:00.")]
    _, _, report = record(tmp_path, fake_provider, "openai-chat", True, turns, "Put a 1:1 with Priya on Friday at 10",
                          tools, {"create_calendar_event": json_reply(200, {"id": "evt_93f2ab", "status": "confirmed"}),
                                  "delete_calendar_event": json_reply(200, {"deleted": True})})
    (f,) = found(report, "self_contradiction")
    assert f.severity == "error" and "evt_93f2ab" in f.message and "delete_calendar_event" in f.message


def test_book_then_cancel_over_http(tmp_path, fake_provider):
    """The same story at the HTTP level: POST /bookings -> 201 + Location, then DELETE of it."""
    tools = [Tool("book_room", {"type": "object", "properties": {"room": {"type": "string"}}}, path="/tools/bookings"),
             Tool("cancel_booking", {"type": "object", "properties": {"booking_id": {"type": "string"}}},
                  method="DELETE", path="/tools/bookings/{booking_id}")]
    fake_provider.add_route("POST", "/tools/bookings", lambda req: Reply(
        201, [("content-type", "application/json"), ("location", "/tools/bookings/bk-5512")],
        json.dumps({"booking_id": "bk-5512", "room": "Atlas"}).encode()))
    fake_provider.add_route("DELETE", "/tools/bookings/bk-5512", lambda req: Reply(204, [], b""))
    turns = [Turn(calls=[("book_room", '{"room": "Atlas", "slot": "14:00"}')]),
             Turn(calls=[("cancel_booking", '{"booking_id": "bk-5512"}')]),
             Turn(text="Room Atlas is booked for 14:00.")]
    _, _, report = record(tmp_path, fake_provider, "anthropic", True, turns, "Book Atlas for 14:00", tools, {})
    (f,) = found(report, "self_contradiction")  # one story, told once (not again for its HTTP requests)
    assert f.severity == "error" and "book_room" in f.message and "cancel_booking" in f.message and "bk-5512" in f.message


def test_post_then_delete_through_a_generic_http_tool(tmp_path, fake_provider):
    """Tool names say nothing here; the requests do: POST /tickets -> 201 {id}, DELETE /tickets/<id>."""
    tool = Tool("http_request", {"type": "object", "properties": {"method": {"type": "string"}, "path": {"type": "string"},
                                                                  "body": {"type": "object"}}}, method="ARGS")
    fake_provider.add_route("POST", "/api/tickets", lambda req: Reply(
        201, [("content-type", "application/json")], json.dumps({"id": 5512, "state": "open"}).encode()))
    fake_provider.add_route("DELETE", "/api/tickets/5512", lambda req: Reply(204, [], b""))
    turns = [Turn(calls=[("http_request", '{"method": "POST", "path": "/api/tickets", "body": {"title": "VPN down"}}')]),
             Turn(calls=[("http_request", '{"method": "DELETE", "path": "/api/tickets/5512"}')]),
             Turn(text="I opened a ticket about the VPN outage.")]
    _, _, report = record(tmp_path, fake_provider, "openai-responses", True, turns, "Open a ticket: the VPN is down", [tool], {})
    (f,) = found(report, "self_contradiction")
    assert f.severity == "error" and "POST" in f.message and "DELETE" in f.message and "/api/tickets/5512" in f.message


def test_an_undo_the_user_asked_for_is_fine(tmp_path, fake_provider):
    tools = [Tool("book_room", {"type": "object", "properties": {"room": {"type": "string"}}}),
             Tool("cancel_booking", {"type": "object", "properties": {"booking_id": {"type": "string"}}})]
    turns = [Turn(calls=[("book_room", '{"room": "Atlas"}')]), Turn(calls=[("cancel_booking", '{"booking_id": "bk-1"}')]),
             Turn(text="Booked and then released Atlas as you asked.")]
    _, _, report = record(tmp_path, fake_provider, "openai-chat", False, turns,
                          "Book Atlas to test the flow, then cancel it again", tools,
                          {"book_room": json_reply(200, {"booking_id": "bk-1"}), "cancel_booking": json_reply(200, {"ok": True})})
    assert not found(report, "self_contradiction") and report.verdict == "pass"


def test_start_then_stop_is_a_workflow_not_a_contradiction(tmp_path, fake_provider):
    tools = [Tool("start_build", {"type": "object"}), Tool("stop_build", {"type": "object"})]
    turns = [Turn(calls=[("start_build", '{"job": "web-4411"}')]), Turn(calls=[("stop_build", '{"job": "web-4411"}')]),
             Turn(text="The build ran its smoke stage and is stopped now.")]
    _, _, report = record(tmp_path, fake_provider, "gemini", False, turns, "Run the web smoke build", tools,
                          {"start_build": json_reply(200, {"job": "web-4411"}), "stop_build": json_reply(200, {"ok": True})})
    assert not found(report, "self_contradiction")
