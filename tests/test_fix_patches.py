"""Typed patches, their files, their application to each LLM wire format, target checks,
Wilson intervals and verdicts: the pure core of spoolproxy.fix (no proxy, no network)."""

from __future__ import annotations

import json

import pytest

from spoolproxy.cassettes.model import Cassette, Interaction, Request, Response
from spoolproxy.fix.apply import apply_patches, check_targets, first_target, merge_patch, preview, render_change
from spoolproxy.fix.patches import (ModelParamsPatch, PatchError, PatchSet, SystemPromptPatch, ToolResultPatch,
                                    load_patches, parse_patches, save_patches)
from spoolproxy.fix.stats import Arm, min_usable, verdict, wilson

TOOL_SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}


def bodies() -> dict[str, tuple[str, dict]]:
    """One request per wire format: (path, body) with a system prompt, a user message and a tool."""
    return {
        "openai-chat": ("/v1/chat/completions", {
            "model": "gpt-4o-mini", "messages": [{"role": "system", "content": "You help."},
                                                 {"role": "user", "content": "Where is ORD-1?"}],
            "tools": [{"type": "function", "function": {"name": "lookup_order", "description": "Find an order.",
                                                        "parameters": TOOL_SCHEMA}}]}),
        "openai-responses": ("/v1/responses", {
            "model": "gpt-4o-mini", "instructions": "You help.", "input": "Where is ORD-1?",
            "tools": [{"type": "function", "name": "lookup_order", "description": "Find an order.",
                       "parameters": TOOL_SCHEMA}]}),
        "anthropic-messages": ("/v1/messages", {
            "model": "claude-3-5-haiku-latest", "max_tokens": 100,
            "system": [{"type": "text", "text": "You help.", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "Where is ORD-1?"}],
            "tools": [{"name": "lookup_order", "description": "Find an order.", "input_schema": TOOL_SCHEMA}]}),
        "gemini-generateContent": ("/v1beta/models/gemini-2.0-flash:generateContent", {
            "systemInstruction": {"parts": [{"text": "You help."}]},
            "contents": [{"role": "user", "parts": [{"text": "Where is ORD-1?"}]}],
            "tools": [{"functionDeclarations": [{"name": "lookup_order", "description": "Find an order.",
                                                 "parameters": TOOL_SCHEMA}]}]}),
        "ollama-chat": ("/api/chat", {
            "model": "llama3.2", "messages": [{"role": "system", "content": "You help."},
                                              {"role": "user", "content": "Where is ORD-1?"}],
            "tools": [{"type": "function", "function": {"name": "lookup_order", "description": "Find an order.",
                                                        "parameters": TOOL_SCHEMA}}]}),
        "ollama-generate": ("/api/generate", {"model": "llama3.2", "system": "You help.", "prompt": "Where is ORD-1?"}),
    }


def patched(api: str, patches: list[dict]):
    path, body = bodies()[api]
    res = apply_patches(parse_patches(patches), "POST", path, json.dumps(body).encode())
    assert res.api == api
    return res, json.loads(res.body)


SYSTEM = {  # where each format keeps the system prompt, after patching
    "openai-chat": lambda b: b["messages"][0]["content"],
    "openai-responses": lambda b: b["instructions"],
    "anthropic-messages": lambda b: b["system"][0]["text"],
    "gemini-generateContent": lambda b: b["systemInstruction"]["parts"][0]["text"],
    "ollama-chat": lambda b: b["messages"][0]["content"],
    "ollama-generate": lambda b: b["system"],
}


@pytest.mark.parametrize("api", list(SYSTEM))
def test_system_prompt_ops_in_every_format(api):
    for op, text, want in (("append", "Be brief.", "You help.\nBe brief."), ("prepend", "Be brief.", "Be brief.\nYou help."),
                           ("replace", "New prompt.", "New prompt.")):
        res, body = patched(api, [{"kind": "system_prompt", "op": op, "text": text}])
        assert SYSTEM[api](body) == want, (api, op)
        assert res.changed == [0]
    _, body = patched(api, [{"kind": "system_prompt", "op": "substitute", "old": "You help.", "text": "You sell."}])
    assert SYSTEM[api](body) == "You sell."


def test_system_prompt_keeps_block_fields_and_is_idempotent():
    _, body = patched("anthropic-messages", [{"kind": "system_prompt", "op": "append", "text": "Be brief."}])
    assert body["system"] == [{"type": "text", "text": "You help.\nBe brief.", "cache_control": {"type": "ephemeral"}}]
    again = apply_patches(parse_patches({"kind": "system_prompt", "op": "append", "text": "Be brief."}),
                          "POST", "/v1/messages", json.dumps(body).encode())
    assert again.changed == [] and "already ends" in again.notes[0]  # the fix already in the code: no change


def test_system_prompt_created_when_missing_and_substitute_deletes_a_line():
    res = apply_patches(parse_patches({"kind": "system_prompt", "op": "append", "text": "Be brief."}), "POST",
                        "/v1/chat/completions", json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode())
    assert json.loads(res.body)["messages"][0] == {"role": "system", "content": "Be brief."}
    body = {"model": "m", "messages": [{"role": "system", "content": "One.\nDrop me.\nTwo."}]}
    res = apply_patches(parse_patches({"kind": "system_prompt", "op": "substitute", "old": "Drop me.", "text": ""}),
                        "POST", "/v1/chat/completions", json.dumps(body).encode())
    assert json.loads(res.body)["messages"][0]["content"] == "One.\nTwo."


def test_when_scopes_a_system_patch_to_one_agent():
    p = {"kind": "system_prompt", "op": "append", "text": "X.", "when": "You sell"}
    res, _ = patched("openai-chat", [p])
    assert False if res.changed else "does not contain 'You sell'" in res.notes[0]


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses", "anthropic-messages", "gemini-generateContent",
                                 "ollama-chat"])
def test_tool_description_and_schema_in_every_format(api):
    res, body = patched(api, [
        {"kind": "tool_description", "tool": "lookup_order", "text": "Ids look like ORD-nnnn.", "op": "append"},
        {"kind": "tool_schema", "tool": "lookup_order", "merge": {"properties": {"order_id": {"pattern": "^ORD-\\d+$"}}}}])
    assert res.changed == [0, 1]
    tool = {"openai-chat": lambda b: b["tools"][0]["function"], "ollama-chat": lambda b: b["tools"][0]["function"],
            "openai-responses": lambda b: b["tools"][0], "anthropic-messages": lambda b: b["tools"][0],
            "gemini-generateContent": lambda b: b["tools"][0]["functionDeclarations"][0]}[api](body)
    assert tool["description"] == "Find an order. Ids look like ORD-nnnn."
    schema = tool["input_schema" if api == "anthropic-messages" else "parameters"]
    assert schema["properties"]["order_id"] == {"type": "string", "pattern": "^ORD-\\d+$"}
    assert schema["required"] == ["order_id"]


def test_unknown_tool_is_explained():
    res, _ = patched("openai-chat", [{"kind": "tool_description", "tool": "lookup", "text": "x"}])
    assert res.changed == [] and "no tool named 'lookup' in this request (declared: lookup_order)" in res.notes[0]


@pytest.mark.parametrize("api,where", [
    ("openai-chat", lambda b: (b["model"], b["temperature"], b["max_tokens"], b["seed"])),
    ("openai-responses", lambda b: (b["model"], b["temperature"], b["max_output_tokens"], None)),
    ("anthropic-messages", lambda b: (b["model"], b["temperature"], b["max_tokens"], None)),
    ("gemini-generateContent", lambda b: (None, b["generationConfig"]["temperature"],
                                          b["generationConfig"]["maxOutputTokens"], b["generationConfig"]["seed"])),
    ("ollama-chat", lambda b: (b["model"], b["options"]["temperature"], b["options"]["num_predict"], b["options"]["seed"])),
])
def test_model_params_mapped_per_format(api, where):
    res, body = patched(api, [{"kind": "model_params", "model": "m2", "temperature": 0.2, "max_tokens": 64, "seed": 7}])
    model, temp, max_tokens, seed = where(body)
    assert (temp, max_tokens) == (0.2, 64)
    assert model in ("m2", None) and seed in (7, None)
    if api == "gemini-generateContent":
        assert res.path == "/v1beta/models/m2:generateContent"  # the Gemini model lives in the URL
    if api in ("openai-responses", "anthropic-messages"):
        assert "seed is not a parameter" in res.notes[0]


def test_messages_replace_and_insert():
    res, body = patched("openai-chat", [{"kind": "message", "op": "replace", "index": -1, "text": "Where is ORD-2?"},
                                        {"kind": "message", "op": "insert", "index": 1, "role": "user", "text": "Be kind."}])
    assert [m["content"] for m in body["messages"]] == ["You help.", "Be kind.", "Where is ORD-2?"]
    _, body = patched("gemini-generateContent", [{"kind": "message", "op": "insert", "index": -1, "role": "assistant",
                                                  "text": "Sure."}])
    assert body["contents"][-1] == {"role": "model", "parts": [{"text": "Sure."}]}
    res, _ = patched("openai-chat", [{"kind": "message", "op": "replace", "index": 5, "text": "x"}])
    assert "index 5 is out of range (this request has 2 messages)" in res.notes[0]
    tool_turn = {"model": "c", "max_tokens": 9, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "HTML page"}]}]}
    res = apply_patches(parse_patches({"kind": "message", "op": "replace", "index": 0, "text": '{"error": "down"}'}),
                        "POST", "/v1/messages", json.dumps(tool_turn).encode())
    assert json.loads(res.body)["messages"][0]["content"][0]["content"] == '{"error": "down"}'


def test_non_llm_requests_and_odd_bodies_pass_untouched():
    ps = parse_patches({"kind": "system_prompt", "op": "append", "text": "x"})
    for method, path, body in (("GET", "/v1/chat/completions", b""), ("POST", "/refunds", b'{"a": 1}'),
                               ("POST", "/v1/chat/completions", b"not json"), ("POST", "/v1/messages", b"[1, 2]")):
        res = apply_patches(ps, method, path, body)
        assert res.body == body and res.api is None and not res.changed


def test_patch_files_load_compose_and_round_trip(tmp_path):
    f = tmp_path / "fix.yaml"
    f.write_text("- kind: system_prompt\n  op: append\n  text: Be brief.\n"
                 "- kind: tool_result\n  host: shop.example\n  path: /orders*\n  status: 404\n  body: {error: none}\n")
    one = load_patches(f)
    g = tmp_path / "more.json"
    g.write_text(json.dumps({"patches": [{"kind": "model_params", "temperature": 0}]}))
    both = one + load_patches(g)
    assert [p.kind for p in both.patches] == ["system_prompt", "tool_result", "model_params"]
    assert both.source == [str(f), str(g)]
    assert both.describe()[1] == "2. tool result: * shop.example/orders* -> 404 (17 bytes)"
    save_patches(both, tmp_path / "all.yaml")
    assert load_patches(tmp_path / "all.yaml").patches == both.patches
    tr = both.tool_results[0]
    assert tr.matches("GET", "SHOP.example", "/orders?id=ORD-9") and not tr.matches("GET", "shop.example", "/refunds")
    assert tr.response_headers()["content-type"] == "application/json"


@pytest.mark.parametrize("doc,message", [
    ({"kind": "nope"}, "patch 1 has kind 'nope'; use one of system_prompt"),
    ({"op": "append"}, "patch 1 has no kind"),
    ({"kind": "system_prompt", "op": "append"}, "patch 1 (system_prompt) text: missing"),
    ({"kind": "system_prompt", "op": "substitute", "text": "x"}, "op substitute needs 'old'"),
    ({"kind": "model_params", "temprature": 1}, "temprature: unknown field (a model_params patch has: note, kind, model"),
    ({"kind": "model_params"}, "set at least one of model"),
    ({"kind": "tool_schema", "tool": "t", "schema": {"type": 5}}, "is not a valid JSON Schema"),
    ({"kind": "route", "host": "shop.example", "to": "ftp://x"}, "give an upstream base URL"),
    ({"kind": "message", "op": "insert", "index": 0, "text": "x"}, "op insert needs 'role'"),
])
def test_bad_patches_are_one_line_errors(doc, message):
    with pytest.raises(PatchError) as exc:
        parse_patches([doc], "fix.yaml")
    assert message in str(exc.value) and str(exc.value).startswith("fix.yaml: ") and "\n" not in str(exc.value)


def test_patch_file_errors_name_the_file(tmp_path):
    with pytest.raises(PatchError, match="patch file .*missing.yaml does not exist"):
        load_patches(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- kind: [unclosed\n")
    with pytest.raises(PatchError, match=r"bad.yaml:\d+: not valid YAML or JSON"):
        load_patches(bad)


def test_merge_patch_is_rfc7396():
    assert merge_patch({"a": 1, "b": {"c": 2, "d": 3}}, {"a": None, "b": {"c": 5}, "e": [1]}) == {"b": {"c": 5, "d": 3}, "e": [1]}


def _cassette() -> Cassette:
    def it(method, uri, body=b"", status=200, resp=b"{}"):
        return Interaction(request=Request(method=method, uri=uri, body=body), response=Response(status=status, body=resp))

    chat = json.dumps(bodies()["openai-chat"][1]).encode()
    return Cassette(interactions=[it("POST", "https://api.openai.com/v1/chat/completions", chat),
                                  it("GET", "http://shop.example/orders?id=ORD-1", resp=b'{"orders": []}'),
                                  it("POST", "https://api.openai.com/v1/chat/completions", chat)])


def test_check_targets_says_where_each_patch_applies():
    ps = parse_patches([{"kind": "system_prompt", "op": "append", "text": "x"},
                        {"kind": "tool_description", "tool": "nope", "text": "x"},
                        {"kind": "tool_result", "host": "shop.example", "path": "/orders*", "body": {"orders": [1]}},
                        {"kind": "tool_result", "method": "POST", "host": "shop.example", "path": "/refunds"},
                        {"kind": "route", "host": "shop.*", "to": "http://127.0.0.1:9"}])
    checks = check_targets(ps, _cassette())
    assert [(c.applies, c.interactions) for c in checks] == [(True, [0, 2]), (False, []), (True, [1]), (False, []), (True, [1])]
    assert checks[1].problem == "no tool named 'nope' in this request (declared: lookup_order)"
    assert "tool requests: GET shop.example/orders" in checks[3].problem
    assert first_target(ps, _cassette()) == 0
    assert first_target(PatchSet(patches=[ps.patches[2]]), _cassette()) == 1
    lines = preview(ps, _cassette(), 0)
    assert any(ln.startswith("first patched request: interaction 0, openai-chat POST api.openai.com/v1/chat/completions")
               for ln in lines)
    assert "interaction 1 recorded 200, 14 bytes; the fork serves 200, 15 bytes" in "\n".join(lines)


def test_render_change_is_a_field_diff():
    res, _ = patched("openai-chat", [{"kind": "system_prompt", "op": "append", "text": "Be brief."},
                                     {"kind": "model_params", "temperature": 0}])
    lines = render_change(res.before, res.after)
    assert lines[0] == "$.messages[0].content: text differs:" and "+Be brief." in lines[-2]
    assert lines[-1] == "$.temperature: added: 0.0"


def test_describe_is_one_line_per_kind():
    assert SystemPromptPatch(op="append", text="Never refund twice.").describe() == \
        "system prompt: append 'Never refund twice.'"
    assert ModelParamsPatch(temperature=0.0, extra={"top_k": 5}).describe() == "model params: temperature=0.0, top_k=5"
    assert ToolResultPatch(method="GET", host="h", path="/x", status=503, body="down").describe() == \
        "tool result: GET h/x -> 503 (4 bytes)"


# -- statistics -------------------------------------------------------------------------------
@pytest.mark.parametrize("k,n,lo,hi", [(0, 5, 0.0, 0.4345), (5, 5, 0.5655, 1.0), (3, 10, 0.1078, 0.6032),
                                       (8, 10, 0.4902, 0.9433), (1, 2, 0.0945, 0.9055), (0, 0, 0.0, 1.0)])
def test_wilson_bounds_match_known_values(k, n, lo, hi):
    # reference values: statsmodels proportion_confint(k, n, method="wilson"), R prop.test(correct=FALSE)
    got = wilson(k, n)
    assert got == pytest.approx((lo, hi), abs=5e-5)


def test_wilson_rejects_impossible_counts():
    with pytest.raises(ValueError):
        wilson(4, 3)


def arm(name, p=0, f=0, e=0, nr=0):
    return Arm(name=name, passed=p, failed=f, errored=e, not_run=nr)


@pytest.mark.parametrize("patched,control,regress,k,want,reason", [
    (arm("patched", 5), arm("control", 0, 5), ["passed"], 5, "VERIFIED", "57% > control upper bound 43%"),
    (arm("patched", 2), arm("control", 0, 2), [], 2, "VERIFIED", "every patched trial passed and every control failed"),
    (arm("patched", 4, 1), arm("control", 1, 4), [], 5, "LIKELY", "not significant"),
    (arm("patched", 5), arm("control", 0, 5), ["errored"], 5, "LIKELY", "1 past good run could not be checked"),
    (arm("patched", 1, 0, 4), arm("control", 0, 5), [], 5, "INCONCLUSIVE", "only 1 usable patched trial (need 3; 4 errored"),
    (arm("patched", 1, 0, 0, 4), arm("control", 0, 1, 0, 4), [], 5, "INCONCLUSIVE", "4 not run"),
    (arm("patched", 5), arm("control", 0, 5), ["passed", "failed"], 5, "REJECTED", "1 past good run now fails"),
    (arm("patched", 2, 3), arm("control", 3, 2), [], 5, "REJECTED", "no better than control: patched 40% vs control 60%"),
    (arm("patched", 5), None, [], 5, "VERIFIED", "(no control arm)"),
    (arm("patched", 2, 3), None, [], 5, "REJECTED", "without a control arm"),
    (arm("patched", 3, 1), None, [], 4, "LIKELY", "not significant"),
])
def test_each_verdict(patched, control, regress, k, want, reason):
    got, why = verdict(patched, control, regress, k)
    assert got == want and reason in why, why


def test_min_usable_and_arm_line():
    assert [min_usable(k) for k in (1, 2, 3, 5, 10)] == [2, 2, 2, 3, 5]
    assert arm("patched", 4, 1, 1).line() == "4/5 passed (80%, 95% CI 38%-96%), 1 errored"


def test_each_patch_renders_its_own_diff():
    ps = parse_patches([{"kind": "system_prompt", "op": "append", "text": "Be brief."},
                        {"kind": "model_params", "model": "gpt-4o"},
                        {"kind": "tool_result", "host": "shop.example", "path": "/orders*", "status": 404,
                         "body": {"error": "no such order"}}])
    path, body = bodies()["openai-chat"]
    raw = json.dumps(body).encode()
    assert ps.patches[0].diff("POST", path, raw)[-1] == "    +Be brief."
    assert ps.patches[1].diff("POST", path, raw) == ['$.model: recorded "gpt-4o-mini", patched "gpt-4o"']
    assert ps.patches[2].diff(200, b'{"orders": []}') == ["$.status: recorded 200, patched 404", "$.body.orders: removed: []",
                                                          '$.body.error: added: "no such order"']
    lines = preview(ps, _cassette(), 0)  # --dry-run: every patch with its own diff, then the first patched request
    assert "     $.status: recorded 200, patched 404" in lines
    assert '     $.model: recorded "gpt-4o-mini", patched "gpt-4o"' in lines
