"""Boundaries of the issue-9 detectors on small cassettes in the providers' wire formats
(built by ``tests/test_detect_wire.py``): what just triggers, what just does not."""

from __future__ import annotations

import json

from spoolproxy.detectors import analyze
from spoolproxy.detectors.checks.suspicious_tool_result import _closes, _drift, _shape

from .test_detect_wire import (OPENAI, cassette, chat_request, chat_response, ix, llm, mcp_sse, tcall, tool)


def kinds(report, kind):
    return [f for f in report.findings if f.kind == kind]


def loop(calls_and_results, answer, tools, user="Please help.", first_finish=None, http=None):
    """Chat turns: each (call, result) pair is one turn whose call's result comes back in the
    next request; ``http[n]`` (an interaction) is inserted after turn n; then ``answer``."""
    msgs = [{"role": "user", "content": user}]
    out = []
    for n, (call, result) in enumerate(calls_and_results):
        finish = first_finish if n == 0 and first_finish else None
        out.append(llm(list(msgs), chat_response(tool_calls=[call], finish=finish), tools, second=2 * n))
        if http and n in http:
            out.append(http[n])
        msgs += [{"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": call["id"], "content": result}]
    if answer is not None:
        out.append(llm(list(msgs), chat_response(answer), tools, second=2 * len(calls_and_results)))
    return cassette(*out)


# -- truncated_output: the cut call executed ------------------------------------------------
def test_a_cut_call_executed_through_mcp_is_an_error_even_without_its_result_coming_back():
    call = tcall("call_1", "run_shell", '{"cmd": "rm -rf build/ && make rel')
    cas = cassette(
        llm([{"role": "user", "content": "rebuild"}], chat_response(tool_calls=[call], finish="length"), [tool("run_shell")]),
        ix("POST", "https://mcp.example/mcp", json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                                          "params": {"name": "run_shell", "arguments": {"cmd": "rm -rf build/"}}}),
           resp=mcp_sse(3, {"content": [{"type": "text", "text": "ok"}]}), ctype="text/event-stream"))
    (f,) = kinds(analyze(cas), "truncated_output")
    assert f.severity == "error" and "executed the cut call (interaction 1)" in f.message


def test_a_cut_call_not_executed_then_a_good_answer_is_a_warning():
    cut = tcall("call_1", "save", '{"text": "abc')
    whole = tcall("call_2", "save", '{"text": "abcdef"}')
    msgs = [{"role": "user", "content": "save it"}]
    cas = cassette(llm(msgs, chat_response(tool_calls=[cut], finish="length"), [tool("save")]),
                   llm(msgs, chat_response(tool_calls=[whole]), [tool("save")], second=1),
                   llm(msgs + [{"role": "assistant", "content": None, "tool_calls": [whole]},
                               {"role": "tool", "tool_call_id": "call_2", "content": "saved"}],
                       chat_response("Saved."), [tool("save")], second=2))
    (f,) = kinds(analyze(cas), "truncated_output")
    assert f.severity == "warn" and "executed" not in f.message


# -- html_error_page: HTML where JSON was expected ------------------------------------------
PAGE = "<!doctype html><html><head><title>Acme Portal</title></head><body>Welcome back! Please choose a plan.</body></html>"


def _html_run(req_headers, body=b"", fed=PAGE, answer="All good.", method="GET"):
    call = tcall("call_1", "get_account", {"id": "A-1"})
    http = {0: ix(method, "https://api.acme.example/v2/accounts/A-1", body, resp=PAGE, ctype="text/html",
                  req_headers=req_headers)}
    return cassette(*loop([(call, fed)], answer, [tool("get_account")], http=http).interactions)


def test_html_to_a_json_accepting_request_is_flagged_whatever_the_page_says():
    r = analyze(_html_run({"accept": ["application/json"]}))
    (f,) = kinds(r, "html_error_page")
    assert f.severity == "error" and "Accept: application/json" in f.message and "'Acme Portal'" in f.message


def test_html_to_a_json_body_request_is_flagged():
    r = analyze(_html_run({"content-type": ["application/json"]}, body=b'{"id": "A-1"}', method="POST"))
    (f,) = kinds(r, "html_error_page")
    assert "a JSON request body" in f.message


def test_html_the_tool_stripped_to_text_is_still_fed():
    r = analyze(_html_run({"accept": ["application/json"]}, fed="Acme Portal\nWelcome back! Please choose a plan."))
    assert kinds(r, "html_error_page")


def test_html_that_never_reached_the_model_and_an_ordinary_page_are_fine():
    assert not kinds(analyze(_html_run({"accept": ["application/json"]}, fed='{"error": "bad response"}')),
                     "html_error_page")
    assert not kinds(analyze(_html_run({"accept": ["text/html,*/*"]})), "html_error_page")


def test_html_the_answer_admits_is_a_warning():
    r = analyze(_html_run({"accept": ["application/json"]}, answer="Sorry, the account service returned a web page."))
    (f,) = kinds(r, "html_error_page")
    assert f.severity == "warn"


# -- suspicious_tool_result -----------------------------------------------------------------
def test_truncation_is_told_apart_from_malformed_json():
    assert _closes('{"rows": [{"a": 1}, {"a": 2')
    assert _closes('[{"name": "Ana"}, {"na')
    assert not _closes('{"rows": ]')  # malformed, not cut
    assert not _closes('{"a": 1}')    # whole


def test_shape_drift_needs_a_key_every_earlier_result_had_or_a_changed_type():
    a, b = _shape({"id": 1, "price": 2.0, "note": None}), _shape({"id": 2, "price": 3.0})
    assert _drift([a, b], _shape({"id": 3, "price": 4.5, "extra": True})) is None  # a new key is fine
    assert "missing price" in _drift([a, b], _shape({"id": 3}))
    assert "price: number -> string" in _drift([a, b], _shape({"id": 3, "price": "4.50"}))
    assert _drift([a], _shape({"id": 3, "price": 1, "note": "x"})) is None  # null before: any type now


def test_specifics_found_in_the_results_are_supported():
    call = tcall("call_1", "search", {"q": "laptops"})
    fine = loop([(call, "[]"), (tcall("call_2", "search", {"q": "notebooks"}), '[{"sku": "NB-14", "price": 1299}]')],
                "The NB-14 costs $1,299.00.", [tool("search")])
    assert not kinds(analyze(fine), "suspicious_tool_result")
    made_up = loop([(call, "[]")], "The best one is the ZX-900 at $1,499.", [tool("search")])
    (f,) = kinds(analyze(made_up), "suspicious_tool_result")
    assert "ZX-900" in f.message and "$1,499" in f.message


# -- schema_violation ----------------------------------------------------------------------
SCHEMA = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}


def _structured(answer, finish=None, **rf):
    body = chat_request([{"role": "user", "content": "sum it"}],
                        response_format=rf or {"type": "json_schema", "json_schema": {"name": "S", "schema": SCHEMA}})
    return cassette(ix("POST", OPENAI, body, resp=chat_response(answer, finish=finish)))


def test_schema_violation_boundaries():
    assert not kinds(analyze(_structured('{"total": 12.5}')), "schema_violation")
    assert not kinds(analyze(_structured('```json\n{"total": 3}\n```')), "schema_violation")
    (f,) = kinds(analyze(_structured('{"total": "12.5"}')), "schema_violation")
    assert "at $.total" in f.message and f.evidence[0].quote == '"total": "12.5"'
    assert not kinds(analyze(_structured('{"total": ', finish="length")), "schema_violation")  # truncated_output's
    assert kinds(analyze(_structured("twelve", type="json_object")), "schema_violation")
    assert not kinds(analyze(_structured('{"anything": 1}', type="json_object")), "schema_violation")


def test_an_output_tool_answer_is_checked_as_the_answer_not_as_tool_arguments():
    spec = tool("final_result", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    call = tcall("call_1", "final_result", {"town": "Oslo"})
    cas = cassette(llm([{"role": "user", "content": "where?"}], chat_response(tool_calls=[call]), [spec]))
    r = analyze(cas)
    (f,) = kinds(r, "schema_violation")
    assert "final_result tool answer" in f.message and not kinds(r, "invalid_tool_arguments")


# -- self_contradiction --------------------------------------------------------------------
def test_self_contradiction_boundaries():
    tools = [tool("create_invoice"), tool("void_invoice"), tool("get_invoice"), tool("cancel_invoice")]
    make = tcall("call_1", "create_invoice", {"customer": "C-7", "amount": 120})
    undo = tcall("call_2", "void_invoice", {"invoice_id": "inv_0042"})
    made = '{"invoice_id": "inv_0042", "status": "open"}'
    (f,) = kinds(analyze(loop([(make, made), (undo, '{"ok": true}')], "Invoice sent.", tools)), "self_contradiction")
    assert f.severity == "error" and "inv_0042" in f.message
    told = analyze(loop([(make, made), (undo, '{"ok": true}')], "I created the invoice and voided it again.", tools))
    assert kinds(told, "self_contradiction")[0].severity == "warn"
    failed = analyze(loop([(make, made), (undo, '{"ok": false, "error": "locked"}')], "Invoice sent.", tools))
    assert kinds(failed, "self_contradiction")[0].severity == "warn"
    asked = loop([(make, made), (undo, '{"ok": true}')], "Done.", tools, user="Create a test invoice and void it after.")
    assert not kinds(analyze(asked), "self_contradiction")
    read = tcall("call_1", "get_invoice", {"invoice_id": "inv_0042"})
    cancel = tcall("call_2", "cancel_invoice", {"invoice_id": "inv_0042"})
    assert not kinds(analyze(loop([(read, made), (cancel, "{}")], "Done.", tools)), "self_contradiction")


def test_put_then_delete_and_a_status_patch_over_http():
    call = tcall("call_1", "api", {})
    put = ix("PUT", "https://crm.example/v1/contacts/ana-ruiz", '{"name": "Ana"}', resp='{"ok": true}')
    delete = ix("DELETE", "https://crm.example/v1/contacts/ana-ruiz", resp="", status=204)
    cas = cassette(*loop([(call, '{"ok": true}')], "Contact saved.", [tool("api")], http={0: put}).interactions[:2], delete,
                   *loop([(call, '{"ok": true}')], "Contact saved.", [tool("api")]).interactions[1:])
    (f,) = kinds(analyze(cas), "self_contradiction")
    assert "PUT" in f.message and "DELETE" in f.message
    post = ix("POST", "https://shop.example/orders", '{"sku": "X"}', resp='{"order_id": "o-9"}', status=201)
    patch = ix("PATCH", "https://shop.example/orders/o-9", '{"status": "cancelled"}', resp='{"ok": true}')
    cas2 = cassette(*loop([(call, '{"order_id": "o-9"}')], "Ordered.", [tool("api")], http={0: post}).interactions[:2],
                    patch, *loop([(call, '{"order_id": "o-9"}')], "Ordered.", [tool("api")]).interactions[1:])
    (g,) = kinds(analyze(cas2), "self_contradiction")
    assert "PATCH" in g.message
