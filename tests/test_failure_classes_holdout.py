"""Held-out inputs for the five failure classes of issue 9 (item 4).

Written after the detectors were committed (59bebdc) and not used to tune them: other tool
names and wordings, other page kinds and content types, other providers and framings than
``tests/test_failure_classes.py``.  Each story is a real recording (the scripted model in the
provider's wire format, agents on the real openai/anthropic SDKs or httpx, tools as HTTP
APIs, the in-process recording proxy).  The first run's misses are listed in the issue-9
note together with what changed because of them.
"""

from __future__ import annotations

import json

import pytest

from tests.fakes.agents import Tool
from tests.fakes.provider import Reply, json_reply
from tests.fakes.scripted import Turn

from .test_failure_classes import found, html, record
from .test_proxy_support import spool_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("spool_home")


def T(name, props=None, **kw):
    return Tool(name, {"type": "object", "properties": {p: {"type": "string"} for p in (props or [])}}, **kw)


# -- 1. cut tool calls that ran ---------------------------------------------------------------
CUT = [
    ("openai-responses", True, T("apply_patch", ["patch"]),
     '{"patch": "--- a/app.py\\n+++ b/app.py\\n@@ -10,7 +10,7 @@\\n-    retries = 3\\n+    retr'),
    ("ollama", False, T("send_email", ["to", "body"]),
     '{"to": "board@example.org", "body": "Dear board, the Q3 numbers show a loss of'),
    ("gemini", True, T("create_jira_ticket", ["summary", "description"]),
     '{"summary": "Checkout fails for EU cards", "description": "Steps: 1. add item 2. pay with'),
    ("anthropic", True, T("update_config", ["key", "value"]), '{"key": "max_connections", "value": "5'),
]


@pytest.mark.parametrize("api,stream,tool,args", CUT, ids=[c[2].name for c in CUT])
def test_holdout_cut_call_executed(tmp_path, fake_provider, api, stream, tool, args):
    turns = [Turn(text="Working on it." if api == "anthropic" else None, calls=[(tool.name, args)], finish="length"),
             Turn(text="Finished, everything went through.")]
    _, _, report = record(tmp_path, fake_provider, api, stream, turns, "Please take care of it.", [tool],
                          {tool.name: json_reply(200, {"status": "done"})})
    (f,) = found(report, "truncated_output")
    assert f.severity == "error" and "executed the cut call" in f.message


# -- 2. HTML where JSON was expected ----------------------------------------------------------
SQUID = Reply(504, [("content-type", "text/html"), ("server", "squid/5.7")],
              html("ERROR: The requested URL could not be retrieved", "Connection to 10.2.0.4 failed. Squid."))
OKTA = Reply(200, [("content-type", "text/html; charset=UTF-8")],
             b"<!DOCTYPE html><html><head><meta http-equiv='refresh' content='0;url=https://id.example.org/authorize'>"
             b"<title>Redirecting...</title></head><body>You are being redirected to your identity provider."
             b"</body></html>")
AKAMAI = Reply(403, [("content-type", "text/html")],
               html("Access Denied", "You don't have permission to access this server. Reference #18.4f2c1b17"))
OOPS = Reply(200, [("content-type", "text/html")], html("Oops!", "We can't find that page. Try the search box."))
HTML = [
    ("openai-responses", False, T("submit_expense", ["amount"]), SQUID, "POST with a JSON body, a Squid 504 page"),
    ("anthropic", False, T("list_projects", ["team"], method="GET", headers={"Accept": "application/vnd.api+json"}), OKTA,
     "a 200 SSO redirect page to a JSON:API request"),
    ("ollama", True, T("get_shipment", ["tracking"], method="GET", headers={"accept": "application/json"}), AKAMAI,
     "an Akamai access-denied page"),
]


@pytest.mark.parametrize("api,stream,tool,page,what", HTML, ids=[h[4] for h in HTML])
def test_holdout_html_where_json_was_expected(tmp_path, fake_provider, api, stream, tool, page, what):
    turns = [Turn(calls=[(tool.name, '{"amount": "42.10", "team": "infra", "tracking": "1Z999"}')]),
             Turn(text="Done. Everything is in order.")]
    _, _, report = record(tmp_path, fake_provider, api, stream, turns, "Go ahead.", [tool], {tool.name: page})
    (f,) = found(report, "html_error_page")
    assert f.severity == "error"


def test_holdout_soft_404_after_json_answers_on_gemini(tmp_path, fake_provider):
    tool = T("get_article", ["slug"], method="GET")
    turns = [Turn(calls=[("get_article", '{"slug": "pricing"}')]), Turn(calls=[("get_article", '{"slug": "refunds"}')]),
             Turn(text="Pricing starts at 9 EUR and refunds are accepted within 30 days.")]
    _, _, report = record(tmp_path, fake_provider, "gemini", True, turns, "Summarise pricing and refunds", [tool],
                          {"get_article": [json_reply(200, {"slug": "pricing", "body": "From 9 EUR"}), OOPS]})
    (f,) = found(report, "html_error_page")
    assert f.severity == "error"


def test_holdout_marketing_page_read_as_html_is_fine(tmp_path, fake_provider):
    tool = T("read_page", ["url"], method="GET", headers={"Accept": "text/html,application/xhtml+xml"})
    page = Reply(200, [("content-type", "text/html")], html("Acme Widgets - Home", "Widgets for every workshop."))
    turns = [Turn(calls=[("read_page", '{"url": "https://acme.example"}')]), Turn(text="Acme sells workshop widgets.")]
    _, _, report = record(tmp_path, fake_provider, "openai-chat", True, turns, "What does Acme sell?", [tool],
                          {"read_page": page})
    assert not found(report, "html_error_page") and report.verdict == "pass"


# -- 3. suspicious tool results ---------------------------------------------------------------
SUSPICIOUS = [
    ("openai-chat", True, T("get_balance", ["account"]), Reply(200, [("content-type", "application/json")], b""),
     "Your balance is 2,340.55 EUR as of 2025-06-01.", "empty body"),
    ("anthropic", False, T("fetch_account", ["holder"]), json_reply(200, {"data": None, "meta": {}}),
     "The account number is DE44500105175407324931.", "data null"),
    ("gemini", False, T("list_attendees", ["event"]),
     Reply(200, [("content-type", "text/plain")], b"Attendees:\n- Mara Lind (mara@lind.example)\n- Tom Okafor (...)\n[truncated]"),
     "Attendees: mara@lind.example, tom.okafor@example.com and rui@example.net.", "text with a truncation marker"),
]


@pytest.mark.parametrize("api,stream,tool,reply,answer,what", SUSPICIOUS, ids=[x[5] for x in SUSPICIOUS])
def test_holdout_suspicious_result_then_made_up_specifics(tmp_path, fake_provider, api, stream, tool, reply, answer, what):
    turns = [Turn(calls=[(tool.name, '{"account": "main", "holder": "J. Weber", "event": "kickoff"}')]), Turn(text=answer)]
    _, _, report = record(tmp_path, fake_provider, api, stream, turns, "Tell me.", [tool], {tool.name: reply})
    (f,) = found(report, "suspicious_tool_result")
    assert f.severity == "error"


def test_holdout_type_drift_then_a_number_it_never_saw(tmp_path, fake_provider):
    tool = T("check_stock", ["sku"], method="GET")
    replies = [json_reply(200, {"sku": "K-1", "stock": 14, "warehouse": "Lyon"}),
               json_reply(200, {"sku": "K-2", "stock": "unknown", "warehouse": "Lyon"})]
    turns = [Turn(calls=[("check_stock", '{"sku": "K-1"}')]), Turn(calls=[("check_stock", '{"sku": "K-2"}')]),
             Turn(text="K-1 has 14 units in Lyon; K-2 has 312 units.")]
    _, _, report = record(tmp_path, fake_provider, "openai-responses", True, turns, "Stock of K-1 and K-2?", [tool],
                          {"check_stock": replies})
    (f,) = found(report, "suspicious_tool_result")
    assert "stock" in f.message and "312" in f.message


def test_holdout_empty_result_honestly_reported_is_fine(tmp_path, fake_provider):
    tool = T("search_incidents", ["service"])
    turns = [Turn(calls=[("search_incidents", '{"service": "billing"}')]),
             Turn(text="There are no open incidents for billing right now (checked incident INC-5520 range).")]
    _, _, report = record(tmp_path, fake_provider, "ollama", True, turns, "Any billing incidents since INC-5520?", [tool],
                          {"search_incidents": json_reply(200, {"incidents": []})})
    assert not found(report, "suspicious_tool_result")


# -- 4. schema violations ---------------------------------------------------------------------
LIST = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
        "required": ["tags"], "additionalProperties": False}


def test_holdout_openai_min_items(tmp_path, fake_provider):
    rf = {"type": "json_schema", "json_schema": {"name": "Tags", "schema": LIST}}
    _, _, report = record(tmp_path, fake_provider, "openai-chat", False, [Turn(text='{"tags": []}')], "Tag it", [], {},
                          request_extra={"response_format": rf})
    (f,) = found(report, "schema_violation")
    assert "$.tags" in f.message


def test_holdout_gemini_json_schema_extra_key(tmp_path, fake_provider):
    gen = {"generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": LIST}}
    _, _, report = record(tmp_path, fake_provider, "gemini", False, [Turn(text='{"tags": ["a"], "confidence": 0.9}')],
                          "Tag it", [], {}, request_extra=gen)
    (f,) = found(report, "schema_violation")
    assert "confidence" in f.message


def test_holdout_anthropic_output_format_stream(tmp_path, fake_provider):
    of = {"output_format": {"type": "json_schema", "schema": LIST}}
    _, _, report = record(tmp_path, fake_provider, "anthropic", True, [Turn(text='{"labels": ["x"]}')], "Tag it", [], {},
                          request_extra={"extra_body": of})
    (f,) = found(report, "schema_violation")
    assert "'tags' is a required property" in f.message


def test_holdout_ollama_enum_stream(tmp_path, fake_provider):
    schema = {"type": "object", "properties": {"sentiment": {"enum": ["positive", "negative", "neutral"]}},
              "required": ["sentiment"]}
    _, _, report = record(tmp_path, fake_provider, "ollama", True, [Turn(text='{"sentiment": "mixed"}')], "Rate it", [],
                          {}, request_extra={"format": schema})
    (f,) = found(report, "schema_violation")
    assert "$.sentiment" in f.message


def test_holdout_responses_json_behind_a_preamble(tmp_path, fake_provider):
    fmt = {"text": {"format": {"type": "json_schema", "name": "Tags", "schema": LIST}}}
    _, _, report = record(tmp_path, fake_provider, "openai-responses", True,
                          [Turn(text='Sure! Here is the JSON you asked for: {"tags": ["ops"]}')], "Tag it", [], {},
                          request_extra=fmt)
    (f,) = found(report, "schema_violation")
    assert "not JSON" in f.message


def test_holdout_valid_json_object_mode_is_fine(tmp_path, fake_provider):
    _, _, report = record(tmp_path, fake_provider, "openai-chat", True, [Turn(text='{"ok": true, "n": 3}')], "Reply in JSON",
                          [], {}, request_extra={"response_format": {"type": "json_object"}})
    assert not found(report, "schema_violation") and report.verdict == "pass"


# -- 5. self-contradiction --------------------------------------------------------------------
def test_holdout_add_then_remove_group_member(tmp_path, fake_provider):
    tools = [T("add_user_to_group", ["user_id", "group"]), T("remove_user_from_group", ["user_id", "group"])]
    turns = [Turn(calls=[("add_user_to_group", '{"user_id": "u-4410", "group": "oncall"}')]),
             Turn(calls=[("remove_user_from_group", '{"user_id": "u-4410", "group": "oncall"}')]),
             Turn(text="u-4410 is now part of the on-call group.")]
    _, _, report = record(tmp_path, fake_provider, "anthropic", False, turns, "Add u-4410 to on-call", tools,
                          {"add_user_to_group": json_reply(200, {"ok": True}), "remove_user_from_group": json_reply(200, {"ok": True})})
    (f,) = found(report, "self_contradiction")
    assert f.severity == "error"


def test_holdout_schedule_then_cancel_camel_case(tmp_path, fake_provider):
    tools = [T("scheduleMeeting", ["title"]), T("cancelMeeting", ["id"])]
    turns = [Turn(calls=[("scheduleMeeting", '{"title": "Design review", "when": "Tue 15:00"}')]),
             Turn(calls=[("cancelMeeting", '{"id": "m_88c1"}')]), Turn(text="The design review is set for Tuesday 15:00.")]
    _, _, report = record(tmp_path, fake_provider, "ollama", False, turns, "Set up the design review", tools,
                          {"scheduleMeeting": json_reply(200, {"meetingId": "m_88c1"}), "cancelMeeting": json_reply(200, {})})
    (f,) = found(report, "self_contradiction")
    assert "m_88c1" in f.message


def test_holdout_subscription_cancel_endpoint_over_http(tmp_path, fake_provider):
    tool = Tool("call_api", {"type": "object", "properties": {"method": {"type": "string"}, "path": {"type": "string"}}},
                method="ARGS")
    fake_provider.add_route("POST", "/v1/subscriptions", lambda req: Reply(
        200, [("content-type", "application/json")], json.dumps({"subscription": {"id": "sub_1Qx", "plan": "pro"}}).encode()))
    fake_provider.add_route("POST", "/v1/subscriptions/sub_1Qx/cancel", lambda req: json_reply(200, {"status": "canceled"}))
    turns = [Turn(calls=[("call_api", '{"method": "POST", "path": "/v1/subscriptions", "body": {"plan": "pro"}}')]),
             Turn(calls=[("call_api", '{"method": "POST", "path": "/v1/subscriptions/sub_1Qx/cancel"}')]),
             Turn(text="You're on the Pro plan now.")]
    _, _, report = record(tmp_path, fake_provider, "openai-chat", True, turns, "Upgrade me to Pro", [tool], {})
    (f,) = found(report, "self_contradiction")
    assert "cancel" in f.message


def test_holdout_cleanup_the_user_asked_for_and_a_different_seat_are_fine(tmp_path, fake_provider):
    tools = [T("create_draft", ["subject"]), T("delete_draft", ["draft_id"]), T("reserve_seat", ["seat"]),
             T("release_seat", ["seat"])]
    turns = [Turn(calls=[("create_draft", '{"subject": "Hi"}')]), Turn(calls=[("delete_draft", '{"draft_id": "d-77"}')]),
             Turn(text="Drafted and cleaned up.")]
    _, _, report = record(tmp_path, fake_provider, "openai-chat", False, turns, "Try a draft and clean up any drafts you make",
                          tools, {"create_draft": json_reply(200, {"draft_id": "d-77"}), "delete_draft": json_reply(200, {})})
    assert not found(report, "self_contradiction")
    turns2 = [Turn(calls=[("reserve_seat", '{"seat": "14C"}')]), Turn(calls=[("release_seat", '{"seat": "22A"}')]),
              Turn(text="You are in 14C; 22A is free again.")]
    _, _, report2 = record(tmp_path / "b" if (tmp_path / "b").mkdir() is None else tmp_path, fake_provider, "gemini", False,
                           turns2, "Move me from 22A to 14C", tools,
                           {"reserve_seat": json_reply(200, {"seat": "14C"}), "release_seat": json_reply(200, {})})
    assert not found(report2, "self_contradiction")
