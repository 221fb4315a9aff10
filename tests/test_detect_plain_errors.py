"""tool_error_ignored on tool results that are plain-text error reports (``Error: 500
internal``, ``Internal Server Error`` ...), in every tool-result wire format the adapters
read: OpenAI Chat ``tool`` messages, Responses API ``function_call_output``, Anthropic
``tool_result`` blocks, MCP ``tools/call`` text content, and an imported message log.
Healthy results that merely talk about errors stay clean."""

from __future__ import annotations

import json

import pytest

from spoolproxy.detectors import analyze
from spoolproxy.interop import import_file

from .test_detect_wire import ANTHROPIC, agent_loop, cassette, chat_response, ix, llm, mcp_sse, tcall, tool

RESPONSES = "https://api.openai.com/v1/responses"
QUESTION = "What is the weather in Oz?"
ANSWER = "It is sunny in Oz."

ERRORS = ["Error: 500 internal", "ERROR: upstream weather service unreachable", "Exception: KeyError('Oz')",
          "Internal Server Error", "502 Bad Gateway", "HTTP/1.1 503 Service Unavailable\nretry later",
          "Error executing tool get_weather: connection reset", "An error occurred while fetching the forecast.",
          "[ERROR] forecast backend timed out after 30 s", "Fatal error: out of memory",
          "Traceback (most recent call last):\n  File \"tool.py\", line 3, in run\nKeyError: 'Oz'",
          # whole one-line results: an exception's text, "... failed", "Failed to ...: <error>"
          "Request failed with status code 503", "TimeoutError: The read operation timed out",
          "ConnectionError: HTTPSConnectionPool(host='weather.example', port=443): Max retries exceeded",
          "Failed to fetch weather: 502 Bad Gateway", "Tool execution failed: KeyError('city')", "fetch failed"]
HEALTHY = ["Error handling in Python: use try/except and log the exception.",
           "1. Error handling best practices - docs.python.org\n2. Exceptions tutorial",
           "TypeError: Cannot read properties of undefined - Stack Overflow\nAnswer: check the object first.",
           "Internal Server Error: what it means and how to fix it (MDN)",
           "No errors found. 0 errors, 2 warnings.", "500 - 20 = 480", "500",
           "Sunny, 24 °C. The error margin of the forecast is 1 °C.",
           "Exception handling in Java is covered in chapter 7.", "Gateway timeout settings: proxy_read_timeout 60s",
           "TypeError: Cannot read properties of undefined - Stack Overflow https://stackoverflow.com/q/1",
           "ValueError handling in Python: a guide", "KeyError is raised when a key is missing",
           "Failed to beat the record: the team finished second", "The request failed? No, it went through.",
           "Request failed validation can be avoided with a schema"]


def _tool_error(rep):
    return [f for f in rep.findings if f.kind == "tool_error_ignored"]


# -- the four wire formats ------------------------------------------------------------
def chat_run(result: str, answer: str = ANSWER):
    return agent_loop("get_weather", [{"city": "Oz"}], [result], answer=answer)


def responses_run(result: str, answer: str = ANSWER):
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
            "arguments": json.dumps({"city": "Oz"}), "status": "completed"}
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]
    first = {"model": "gpt-4o-mini", "input": [{"role": "user", "content": QUESTION}], "tools": tools}
    second = {"model": "gpt-4o-mini", "tools": tools, "input": [
        {"role": "user", "content": QUESTION}, call, {"type": "function_call_output", "call_id": "call_1", "output": result}]}

    def resp(n, output):
        return json.dumps({"id": f"resp_{n}", "object": "response", "status": "completed", "model": "gpt-4o-mini",
                           "output": output, "usage": {"input_tokens": 20, "output_tokens": 5, "total_tokens": 25}})

    text = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": answer, "annotations": []}]}
    return cassette(ix("POST", RESPONSES, json.dumps(first), resp=resp(1, [call])),
                    ix("POST", RESPONSES, json.dumps(second), resp=resp(2, [text]), second=1))


def anthropic_run(result: str, answer: str = ANSWER):
    tools = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}]
    use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oz"}}
    user = {"role": "user", "content": QUESTION}

    def req(messages):
        return json.dumps({"model": "claude-sonnet-4-20250514", "max_tokens": 100, "tools": tools, "messages": messages})

    def resp(n, content, stop):
        return json.dumps({"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-20250514",
                           "content": content, "stop_reason": stop, "usage": {"input_tokens": 20, "output_tokens": 5}})

    fed = [user, {"role": "assistant", "content": [use]},
           {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}]}]
    return cassette(ix("POST", ANTHROPIC, req([user]), resp=resp(1, [use], "tool_use")),
                    ix("POST", ANTHROPIC, req(fed), resp=resp(2, [{"type": "text", "text": answer}], "end_turn"), second=1))


def mcp_run(result: str, answer: str = ANSWER):
    call = tcall("call_1", "get_weather", {"city": "Oz"})
    tools = [tool("get_weather")]
    user = [{"role": "user", "content": QUESTION}]
    fed = user + [{"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": "call_1", "content": result}]
    rpc = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_weather", "arguments": {"city": "Oz"}}}
    return cassette(llm(user, chat_response(tool_calls=[call]), tools),
                    ix("POST", "https://mcp.example/mcp", json.dumps(rpc),
                       resp=mcp_sse(2, {"content": [{"type": "text", "text": result}], "isError": False}),
                       ctype="text/event-stream", second=1),
                    llm(fed, chat_response(answer), tools, second=2))


FORMATS = {"openai-chat": chat_run, "openai-responses": responses_run, "anthropic": anthropic_run, "mcp": mcp_run}


@pytest.mark.parametrize("fmt", FORMATS)
def test_plain_text_error_ignored_is_flagged_in_every_format(fmt):
    for text in ERRORS:
        rep = analyze(FORMATS[fmt](text))
        [f] = _tool_error(rep)
        assert f.severity == "error" and "get_weather" in f.message, (fmt, text)
        assert rep.verdict == "fail"


@pytest.mark.parametrize("fmt", FORMATS)
def test_healthy_results_that_mention_errors_stay_clean(fmt):
    for text in HEALTHY:
        rep = analyze(FORMATS[fmt](text))
        assert rep.findings == [] and rep.verdict == "pass", (fmt, text, [(f.kind, f.message) for f in rep.findings])


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_answer_that_admits_the_error_is_not_flagged(fmt):
    assert _tool_error(analyze(FORMATS[fmt]("Error: 500 internal")))
    told = FORMATS[fmt]("Error: 500 internal", answer="The weather service is down right now (Error: 500 internal).")
    assert not _tool_error(analyze(told))


def test_imported_message_log_with_a_plain_text_tool_error(tmp_path):
    """The trial's case: a message log whose tool result is "Error: 500 internal",
    followed by an answer that ignores it, passed with no finding."""
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oz\"}"}}
    log = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": None, "tool_calls": [call]},
           {"role": "tool", "tool_call_id": "call_1", "content": "Error: 500 internal"},
           {"role": "assistant", "content": ANSWER}]
    p = tmp_path / "log.jsonl"
    p.write_text("".join(json.dumps(m) + "\n" for m in log))
    [run] = import_file(p)
    rep = analyze(run.cassette)
    assert rep.verdict == "fail" and [f.kind for f in rep.findings] == ["tool_error_ignored"]
    assert '"Error: 500 internal"' in rep.findings[0].message
