"""``spoolproxy import`` and ``export --format otel`` on files the real tools wrote.

The samples in ``tests/data/interop/`` were written by real mitmproxy (HAR through
``mitmproxy.addons.savehar``, flow files through its ``save`` addon), the OpenTelemetry
SDK's OTLP JSON exporter with the official openai instrumentation (both the current
attribute conventions and the older event conventions) and an agent's own message log;
``make_samples.py`` beside them regenerates them (and ``test_interop_live.py`` does so
at test time).  Each holds a failing run (order 1002: the tool's 502 HTML page fed to the
model) and a clean one (order 1003).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spoolproxy.cassettes import Redactor, load
from spoolproxy.detectors import analyze
from spoolproxy.errors import CassetteError
from spoolproxy.interop import import_file, sniff
from spoolproxy.interop.otel_export import export_otlp

DATA = Path(__file__).parent / "data" / "interop"
KEY = "sk-proj-" + "k" * 40


def spool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def runs_of(name: str, **kw):
    return import_file(DATA / name, **kw)


def kinds(cas) -> set[str]:
    return {f.kind for f in analyze(cas).findings if f.severity in ("error", "critical")}


def is_failing(run) -> bool:
    return "1002" in json.dumps([it.request.text + (it.response.text if it.response else "") for it in run.cassette.interactions])


@pytest.mark.parametrize("name,fmt", [
    ("agent-1002.har", "har"), ("agent-1002.flows", "mitmproxy"), ("agent-messages.jsonl", "messages"),
    ("agent-otlp.jsonl", "otel"), ("agent-otlp-events.jsonl", "otel"),
])
def test_sniffs_each_format(name, fmt):
    assert sniff(DATA / name, (DATA / name).read_bytes()) == fmt


@pytest.mark.parametrize("failing,clean", [("agent-1002.har", "agent-1003.har"), ("agent-1002.flows", "agent-1003.flows")])
def test_har_and_flow_files_import_as_recorded_http(failing, clean):
    [bad], [good] = runs_of(failing), runs_of(clean)
    cas = bad.cassette
    assert [it.request.method for it in cas.interactions] == ["POST", "GET", "POST"]
    assert cas.interactions[0].request.uri == "https://api.openai.com/v1/chat/completions"
    tool = cas.interactions[1]
    assert tool.response.status == 502 and b"502 Bad Gateway" in tool.response.body
    sse = cas.interactions[2].response
    assert sse.content_type == "text/event-stream" and sse.body.rstrip().endswith(b"data: [DONE]")
    assert all(it.started_at and it.duration_ms is not None for it in cas.interactions)
    # HAR/flows keep decoded bodies and no stale encoding header
    assert not any(it.response.header("content-encoding") for it in cas.interactions)
    # the bearer token is a placeholder, the provenance is marked
    assert cas.interactions[0].request.header("authorization").startswith("Bearer REDACTED-authorization-")
    assert cas.meta.extra["imported_from"]["format"] in ("har", "mitmproxy")
    assert analyze(cas).verdict == "fail" and "html_error_page" in kinds(cas)
    assert analyze(good.cassette).verdict == "pass"


@pytest.mark.parametrize("name", ["agent-messages.jsonl", "agent-otlp.jsonl", "agent-otlp-events.jsonl"])
def test_message_logs_and_spans_synthesise_a_transcript_detect_reads(name):
    runs = runs_of(name)
    assert len(runs) == 2
    bad = next(r for r in runs if is_failing(r))
    good = next(r for r in runs if not is_failing(r))
    assert kinds(bad.cassette) == {"html_error_page", "tool_error_ignored"}
    assert analyze(good.cassette).verdict == "pass"
    # model call, tool call with its result, model call: as the agent made them
    its = bad.cassette.interactions
    assert [it.extra["synthesized"] for it in its] == ["chat-completion", "tool-result", "chat-completion"]
    assert its[1].request.uri.startswith("http://tools.invalid/lookup_order?call=call_")
    assert its[1].request.json() == {"order_id": "1002"}
    assert its[1].response.content_type == "text/html"
    answer = its[2].response.json()["choices"][0]["message"]["content"]
    assert answer.startswith("The tool said: <html>")
    src = bad.cassette.meta.extra["imported_from"]
    assert src["file"] == name and src["format"] in ("messages", "otel")


def test_otel_reads_both_conventions_into_the_same_conversation():
    latest = next(r for r in runs_of("agent-otlp.jsonl") if is_failing(r)).cassette
    events = next(r for r in runs_of("agent-otlp-events.jsonl") if is_failing(r)).cassette
    assert latest.meta.extra["imported_from"]["conventions"] == ["attributes"]
    assert events.meta.extra["imported_from"]["conventions"] == ["events"]
    assert latest.meta.extra["imported_from"]["agent"] == "support-agent"
    for cas in (latest, events):
        req = cas.interactions[2].request.json()
        assert [m["role"] for m in req["messages"]] == ["system", "user", "assistant", "tool"]
        resp = cas.interactions[0].response.json()
        assert resp["usage"]["prompt_tokens"] > 0 and resp["choices"][0]["finish_reason"] == "tool_calls"


def test_otel_split_by_file_keeps_one_cassette():
    [run] = runs_of("agent-otlp.jsonl", split="file")
    assert len(run.cassette) == 6


def test_spans_without_message_content_are_refused_with_a_hint(tmp_path):
    doc = json.loads((DATA / "agent-otlp.jsonl").read_text().splitlines()[0])
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                s["attributes"] = [a for a in s["attributes"] if "messages" not in a["key"]]
    p = tmp_path / "nocontent.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(CassetteError, match="no message content.*CAPTURE_MESSAGE_CONTENT"):
        import_file(p)


def test_anthropic_blocks_and_tool_errors_in_message_logs(tmp_path):
    line = {"task_id": "t-7", "reward": 0.0, "messages": [
        {"role": "user", "content": "refund order 9"},
        {"role": "assistant", "content": [{"type": "text", "text": "Refunding."},
                                          {"type": "tool_use", "id": "tu_1", "name": "refund", "input": {"order": 9}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "is_error": True,
                                      "content": [{"type": "text", "text": "payment service unavailable"}]}]},
        {"role": "assistant", "content": "Done, your refund is on its way."}]}
    p = tmp_path / "traj.jsonl"
    p.write_text(json.dumps(line) + "\n")
    [run] = import_file(p)
    cas = run.cassette
    assert run.name == "traj"  # one run in the file: named after the file
    assert cas.meta.extra["imported_from"]["fields"] == {"task_id": "t-7", "reward": 0.0}
    assert cas.meta.extra["imported_from"]["tools_inferred"] is True
    tool = cas.interactions[1]
    assert tool.response.status == 500 and tool.request.json() == {"order": 9}
    assert "tool_error_ignored" in kinds(cas)


def test_secrets_in_imported_files_never_reach_the_cassette(tmp_path):
    har = json.loads((DATA / "agent-1002.har").read_text())
    entry = har["log"]["entries"][0]
    entry["request"]["headers"].append({"name": "x-api-key", "value": KEY})
    entry["request"]["url"] += f"?api_key={KEY}"
    har["log"]["entries"][1]["_webSocketMessages"] = [{"type": "send", "time": 1.0, "opcode": 1, "data": f"auth {KEY}"}]
    src = tmp_path / "leaky.har"
    src.write_text(json.dumps(har))
    msgs = tmp_path / "leaky.jsonl"
    msgs.write_text(json.dumps({"messages": [{"role": "user", "content": f"my key is {KEY}"},
                                             {"role": "assistant", "content": "ok"}]}) + "\n")
    out = tmp_path / "out"
    r = spool("import", str(src), str(msgs), "-o", str(out))
    assert r.returncode == 0, r.stderr
    written = [p.read_text() for p in out.glob("*.yaml")]
    assert len(written) == 2 and all(KEY not in t for t in written)
    assert "websocket_messages" in written[0] + written[1]


def test_cli_import_then_detect_and_existing_cassettes_are_kept(tmp_path):
    out = tmp_path / "cassettes"
    r = spool("import", str(DATA / "agent-1002.har"), str(DATA / "agent-messages.jsonl"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "wrote 3 cassettes" in r.stderr
    det = spool("detect", str(out), "--json")
    verdicts = {Path(d["cassette"]).name: d["verdict"] for d in map(json.loads, det.stdout.splitlines())}
    assert verdicts == {"agent-1002.yaml": "fail", "agent-messages-order-1002.yaml": "fail",
                        "agent-messages-order-1003.yaml": "pass"}
    before = (out / "agent-1002.yaml").read_bytes()
    again = spool("import", str(DATA / "agent-1002.har"), "-o", str(out))
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "exists; pass --force" in again.stderr and (out / "agent-1002.yaml").read_bytes() == before
    assert spool("import", str(DATA / "agent-1002.har"), "-o", str(out), "--force").returncode == 0


@pytest.mark.parametrize("content,expect", [
    (b"", "is empty"),
    (b"hello, world\n", "is not a HAR, a mitmproxy flow file, a message log"),
    (b'{"log": {"entries": [{"request": {}}]}}', "entry 0: malformed HAR entry"),
    (b'{"messages": [{"role": "user", "content": "hi"}]}\n', "no assistant message"),
    (b'{"messages": []}\n{not json\n', ":2: not JSON"),
    (b"123:garbage", "not a mitmproxy flow file"),
    (b'{"resourceSpans": []}', "no run to import"),
])
def test_bad_input_is_one_line_error(tmp_path, content, expect):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    r = spool("import", str(p), "-o", str(tmp_path / "out"))
    assert r.returncode == 2
    assert r.stderr.startswith("spoolproxy: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert expect in r.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_forced_format_and_unknown_format(tmp_path):
    r = spool("import", str(DATA / "agent-messages.jsonl"), "--format", "har", "-o", str(tmp_path / "o"))
    assert r.returncode == 2 and "not a HAR file" in r.stderr
    r = spool("import", str(DATA / "agent-messages.jsonl"), "--format", "pcap", "-o", str(tmp_path / "o"))
    assert r.returncode == 2 and "--format 'pcap' is not one of" in r.stderr


# -- export --format otel ---------------------------------------------------------------
def _spans(doc: dict) -> list[dict]:
    return doc["resourceSpans"][0]["scopeSpans"][0]["spans"]


def _attrs(span: dict) -> dict:
    from spoolproxy.interop.otlp import attributes

    return attributes(span["attributes"])


def test_export_otel_has_genai_spans_under_one_root(tmp_path):
    [run] = runs_of("agent-1002.har")
    doc = export_otlp(run.cassette, capture_content=False)
    spans = _spans(doc)
    root = spans[0]
    assert root["name"] == "invoke_agent agent-1002" or root["name"].startswith("invoke_agent ")
    assert "parentSpanId" not in root and all(s.get("parentSpanId") for s in spans[1:])
    assert {s["traceId"] for s in spans} == {root["traceId"]} and len(root["traceId"]) == 32
    assert root["status"]["code"] == 2 and [e["name"] for e in root["events"]].count("spoolproxy.finding") >= 1
    names = [s["name"] for s in spans[1:]]
    assert names == ["chat gpt-4o-mini", "execute_tool lookup_order", "GET", "chat gpt-4o-mini"]
    chat = _attrs(spans[1])
    assert chat["gen_ai.operation.name"] == "chat" and chat["gen_ai.provider.name"] == "openai"
    assert chat["gen_ai.request.model"] == "gpt-4o-mini" and chat["gen_ai.usage.input_tokens"] > 0
    assert chat["gen_ai.response.finish_reasons"] == ["tool_calls"] and chat["server.address"] == "api.openai.com"
    assert not any(k in chat for k in ("gen_ai.input.messages", "gen_ai.output.messages"))  # content is opt-in
    tool = spans[2]
    assert _attrs(tool)["gen_ai.tool.name"] == "lookup_order" and tool["status"]["code"] == 2
    assert spans[3]["parentSpanId"] == tool["spanId"]  # the HTTP call that served the tool call
    assert export_otlp(run.cassette) == doc  # stable ids: the same cassette gives the same trace


def test_export_otel_is_valid_otlp_json_for_the_official_codec():
    codec = pytest.importorskip("opentelemetry.proto_json.collector.trace.v1.trace_service",
                                reason="opentelemetry-proto-json (dev extra) checks the OTLP JSON encoding")
    [run] = runs_of("agent-1002.flows")
    doc = export_otlp(run.cassette, capture_content=True)
    req = codec.ExportTraceServiceRequest.from_dict(json.loads(json.dumps(doc)))
    spans = req.resource_spans[0].scope_spans[0].spans
    assert len(spans) == 5 and all(len(s.trace_id) == 16 and len(s.span_id) == 8 for s in spans)


@pytest.mark.parametrize("name", ["agent-1002.har", "agent-1003.flows"])
def test_export_otel_then_import_round_trips_the_verdict(tmp_path, name):
    r = spool("import", str(DATA / name), "-o", str(tmp_path / "in"))
    assert r.returncode == 0, r.stderr
    src = next((tmp_path / "in").glob("*.yaml"))
    otel = tmp_path / "run.otlp.json"
    r = spool("export", str(src), "--format", "otel", "--capture-content", "-o", str(otel))
    assert r.returncode == 0 and "OTLP JSON, with message content" in r.stderr, r.stderr
    msgs = _attrs(_spans(json.loads(otel.read_text()))[1])["gen_ai.input.messages"]
    assert json.loads(msgs)[0]["role"] == "system"
    r = spool("import", str(otel), "-o", str(tmp_path / "back"))
    assert r.returncode == 0, r.stderr
    [back] = list((tmp_path / "back").glob("*.yaml"))
    original, again = load(src), load(back)
    assert analyze(again).verdict == analyze(original).verdict
    assert kinds(again) >= kinds(original)


REPO_CASSETTES = sorted((Path(__file__).resolve().parents[1] / "cassettes").glob("*.yaml"))


def _findings(cas) -> list[tuple[str, str]]:
    return sorted((f.kind, f.severity) for f in analyze(cas).findings)


@pytest.mark.parametrize("src", REPO_CASSETTES, ids=lambda p: p.name)
def test_repo_cassettes_round_trip_through_otel_with_the_same_findings(tmp_path, src):
    """Export each example cassette as OTLP with content, import it back with the CLI:
    every finding (kind and severity) is the same, and the error statuses of the HTTP
    traffic (stock-check's 502 among them) are kept."""
    otel = tmp_path / "run.otlp.json"
    r = spool("export", str(src), "--format", "otel", "--capture-content", "-o", str(otel))
    assert r.returncode == 0, r.stderr
    r = spool("import", str(otel), "-o", str(tmp_path / "back"))
    assert r.returncode == 0, r.stderr
    [back] = list((tmp_path / "back").glob("*.yaml"))
    original, again = load(src), load(back)
    assert _findings(again) == _findings(original)
    assert again.meta.exit_code == original.meta.exit_code
    def failed(cas):  # error statuses in order (tools answered without HTTP add interactions, not errors)
        return [it.response.status for it in cas.interactions if it.response is not None and it.response.status >= 400]

    assert failed(again) == failed(original)


def _tool_trace(child_attrs: list[dict]) -> dict:
    """A third-party trace: a chat span that asked for get_weather, the execute_tool span
    with an HTTP client span under it (``child_attrs``), and the chat span fed its result."""
    def sv(k, v):
        return {"key": k, "value": {"stringValue": v}}

    page = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"
    call = {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Oz"}}]}
    user = {"role": "user", "parts": [{"type": "text", "content": "weather in Oz?"}]}
    fed = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": page}]}
    answer = {"role": "assistant", "parts": [{"type": "text", "content": "It is sunny in Oz."}], "finish_reason": "stop"}
    trace = "0" * 31 + "7"

    def span(n, name, attrs, parent="", kind=1, status=None):
        d = {"traceId": trace, "spanId": f"{n:016x}", "name": name, "kind": kind, "startTimeUnixNano": str(n * 1000),
             "endTimeUnixNano": str(n * 1000 + 500), "attributes": attrs}
        if parent:
            d["parentSpanId"] = parent
        if status:
            d["status"] = status
        return d

    spans = [span(1, "chat m", [sv("gen_ai.operation.name", "chat"), sv("gen_ai.request.model", "m"),
                                sv("gen_ai.input.messages", json.dumps([user])), sv("gen_ai.output.messages", json.dumps([call]))], kind=3),
             span(2, "execute_tool get_weather", [sv("gen_ai.operation.name", "execute_tool"), sv("gen_ai.tool.name", "get_weather"),
                                                  sv("gen_ai.tool.call.id", "c1"), sv("error.type", "ToolError")],
                  status={"code": 2, "message": "tool failed"}),
             span(3, "GET", child_attrs, parent=f"{2:016x}", kind=3),
             span(4, "chat m", [sv("gen_ai.operation.name", "chat"), sv("gen_ai.request.model", "m"),
                                sv("gen_ai.input.messages", json.dumps([user, call, fed])),
                                sv("gen_ai.output.messages", json.dumps([answer]))], kind=3)]
    return {"resourceSpans": [{"resource": {"attributes": [sv("service.name", "agent")]}, "scopeSpans": [{"spans": spans}]}]}


def test_otel_tool_span_takes_the_status_of_the_http_span_under_it(tmp_path):
    """An instrumented HTTP client under execute_tool (no exchange bodies) lends its status:
    the tool's 502 is imported as 502, not as the generic 500 of a failed span."""
    p = tmp_path / "t.json"
    p.write_text(json.dumps(_tool_trace([{"key": "http.request.method", "value": {"stringValue": "GET"}},
                                         {"key": "url.full", "value": {"stringValue": "http://127.0.0.1:18801/weather/Oz"}},
                                         {"key": "http.response.status_code", "value": {"intValue": "502"}}])))
    [run] = import_file(p)
    tool = next(it for it in run.cassette.interactions if it.extra.get("synthesized") == "tool-result")
    assert tool.response.status == 502
    assert len(run.cassette.interactions) == 3  # a span without its exchange is not made an interaction
    assert ("html_error_page", "error") in _findings(run.cassette)
    p.write_text(json.dumps(_tool_trace([{"key": "http.request.method", "value": {"stringValue": "GET"}}])))
    [run] = import_file(p)  # no status anywhere: the failed span still reads as a failed tool
    tool = next(it for it in run.cassette.interactions if it.extra.get("synthesized") == "tool-result")
    assert tool.response.status == 500


def test_export_otel_rejects_capture_content_for_other_formats(tmp_path):
    r = spool("export", str(DATA / "agent-1002.har"), "--capture-content")
    assert r.returncode == 2 and r.stderr == "spoolproxy: error: --capture-content applies to --format otel only\n"


def test_redactor_applies_to_otel_export(tmp_path):
    msgs = tmp_path / "k.jsonl"
    msgs.write_text(json.dumps({"messages": [{"role": "user", "content": f"key {KEY}"},
                                             {"role": "assistant", "content": "noted"}]}) + "\n")
    [run] = import_file(msgs, redactor=Redactor())
    text = json.dumps(export_otlp(run.cassette, capture_content=True))
    assert KEY not in text and "REDACTED-openai-key-" in text


# -- format corners -----------------------------------------------------------------------
def test_har_corners_devtools_write(tmp_path):
    """What Chromium/Charles/Proxyman HARs carry that mitmproxy's do not: HTTP/2 pseudo
    headers, a form body as params only, a base64 body, a gzip header on decoded text,
    a failed request (status 0 + ``_error``), WebSocket frames."""
    import base64

    entries = [
        {"startedDateTime": "2026-01-02T10:00:00.000Z", "time": 12.5,
         "request": {"method": "POST", "url": "https://auth.example.com/token", "httpVersion": "h2",
                     "headers": [{"name": ":authority", "value": "auth.example.com"}, {"name": "content-type",
                                 "value": "application/x-www-form-urlencoded"}],
                     "postData": {"mimeType": "application/x-www-form-urlencoded",
                                  "params": [{"name": "grant_type", "value": "client_credentials"},
                                             {"name": "client_secret", "value": "s3cr3t-value-123"}]}},
         "response": {"status": 200, "statusText": "", "headers": [{"name": "content-encoding", "value": "gzip"},
                                                                   {"name": "content-type", "value": "application/json"}],
                      "content": {"size": 11, "mimeType": "application/json", "text": '{"ok":true}'}}},
        {"startedDateTime": "2026-01-02T10:00:01.000Z", "time": 3,
         "request": {"method": "GET", "url": "https://cdn.example.com/logo.png", "headers": []},
         "response": {"status": 200, "headers": [], "content": {"size": 4, "mimeType": "image/png",
                                                                "encoding": "base64",
                                                                "text": base64.b64encode(b"\x89PNG").decode()}}},
        {"startedDateTime": "2026-01-02T10:00:02.000Z", "time": 1, "_error": "net::ERR_CONNECTION_REFUSED",
         "request": {"method": "GET", "url": "http://localhost:9/health", "headers": []},
         "response": {"status": 0, "headers": [], "content": {}}},
        {"startedDateTime": "2026-01-02T10:00:03.000Z", "time": 5, "_resourceType": "websocket",
         "request": {"method": "GET", "url": "wss://rt.example.com/v1/realtime", "headers": []},
         "response": {"status": 101, "headers": [], "content": {"size": 0, "text": ""}},
         "_webSocketMessages": [{"type": "send", "time": 1.5, "opcode": 1, "data": "hi"},
                                {"type": "receive", "time": 1.6, "opcode": 1, "data": "hello"}]},
    ]
    p = tmp_path / "devtools.har"
    p.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "WebInspector", "version": "537.36"},
                                     "entries": list(reversed(entries))}}))
    [run] = import_file(p)
    a, b, c, d = run.cassette.interactions
    assert a.request.header(":authority") is None and a.request.body.startswith(b"grant_type=client_credentials&")
    assert b"s3cr3t" not in a.request.body  # the form secret went through the Redactor
    assert a.response.body == b'{"ok":true}' and a.response.header("content-encoding") is None
    assert b.response.body == b"\x89PNG"
    assert c.response is None and c.error.kind == "refused" and c.error.during == "connect"
    assert d.response.status == 101 and [m["from"] for m in d.extra["websocket_messages"]] == ["client", "server"]
    assert run.cassette.meta.extra["imported_from"]["creator"] == "WebInspector 537.36"
    assert str(run.cassette.meta.recorded_at).startswith("2026-01-02 10:00:00")


def test_flow_file_websocket_and_error_flows_written_by_mitmproxy(tmp_path):
    from mitmproxy import io as mio
    from mitmproxy.test import tflow

    p = tmp_path / "dump.flows"
    with open(p, "wb") as fh:
        w = mio.FlowWriter(fh)
        w.add(tflow.twebsocketflow())
        w.add(tflow.tflow(err=True))
        w.add(tflow.ttcpflow())
    [run] = import_file(p)
    ws, failed = run.cassette.interactions
    assert ws.response.status == 101
    assert [(m["from"], m["type"]) for m in ws.extra["websocket_messages"]] == [
        ("client", "binary"), ("client", "text"), ("server", "text")]
    assert failed.error is not None and failed.response is None
    assert run.notes == ("skipped 1 non-HTTP flows (TCP/UDP/DNS)",)


def test_otel_older_shapes_openllmetry_and_span_events(tmp_path):
    import base64

    def span(attrs, events=(), sid="AQIDBAUGBwg="):  # base64 ids, as protobuf's generic JSON mapping writes them
        return {"trace_id": "AAECAwQFBgcICQoLDA0ODw==", "span_id": sid, "name": "openai.chat", "start_time_unix_nano": 10,
                "end_time_unix_nano": 20, "attributes": [{"key": k, "value": {"string_value": v} if isinstance(v, str)
                                                          else {"int_value": str(v)}} for k, v in attrs.items()],
                "events": list(events)}

    llmetry = span({"gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o", "llm.request.type": "chat",
                    "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "weather in Paris?",
                    "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.finish_reason": "tool_calls",
                    "gen_ai.completion.0.tool_calls.0.id": "c1", "gen_ai.completion.0.tool_calls.0.name": "weather",
                    "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}',
                    "gen_ai.usage.prompt_tokens": 9, "gen_ai.usage.completion_tokens": 4})
    events = span({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}, sid="AQIDBAUGBwk=", events=[
        {"name": "gen_ai.content.prompt", "time_unix_nano": 30, "attributes": [{"key": "gen_ai.prompt", "value": {
            "string_value": json.dumps([{"role": "user", "content": "weather in Paris?"}, {"role": "assistant", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"}])}}]},
        {"name": "gen_ai.content.completion", "time_unix_nano": 31, "attributes": [{"key": "gen_ai.completion", "value": {
            "string_value": json.dumps([{"role": "assistant", "content": "It is sunny.", "finish_reason": "stop"}])}}]}])
    events["start_time_unix_nano"] = 40
    doc = {"resource_spans": [{"resource": {"attributes": []}, "scope_spans": [{"spans": [llmetry, events]}]}]}
    p = tmp_path / "old.json"
    p.write_text(json.dumps(doc))
    [run] = import_file(p)
    cas = run.cassette
    assert cas.meta.extra["imported_from"]["conventions"] == ["openllmetry", "span-events"]
    assert [it.extra["synthesized"] for it in cas.interactions] == ["chat-completion", "tool-result", "chat-completion"]
    first = cas.interactions[0].response.json()
    assert first["usage"] == {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
    assert first["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "weather"
    assert cas.interactions[1].response.body == b"sunny"
    assert analyze(cas).verdict == "pass"
    assert base64.b64decode("AAECAwQFBgcICQoLDA0ODw==").hex() in json.dumps(cas.meta.extra)


def test_otel_failed_model_call_becomes_an_http_error(tmp_path):
    attrs = [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
             {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
             {"key": "error.type", "value": {"stringValue": "RateLimitError"}},
             {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(
                 [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])}}]
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1", "name": "chat gpt-4o", "kind": 3,
        "startTimeUnixNano": "1", "endTimeUnixNano": "2", "attributes": attrs,
        "status": {"code": 2, "message": "Rate limit reached for gpt-4o"}}]}]}]}
    p = tmp_path / "err.json"
    p.write_text(json.dumps(doc))
    [run] = import_file(p)
    resp = run.cassette.interactions[0].response
    assert resp.status == 429 and resp.json()["error"]["message"] == "Rate limit reached for gpt-4o"


def test_corpus_round_trips_through_otel_with_the_same_findings(corpus_dir, tmp_path):
    """Every real recording of ../shared/corpus that holds a model call: export as OTLP
    (with content), import back, and the detectors reach the same verdict with the same
    error-level finding kinds."""
    from spoolproxy.cassettes import load as load_cassette

    checked, differ = 0, []
    for f in sorted(corpus_dir.rglob("*.yaml")):
        cas = load_cassette(f)
        if not any(s.kind == "llm" for s in __import__("spoolproxy.detectors", fromlist=["x"]).build_transcript(cas).steps):
            continue
        p = tmp_path / f"{f.stem}.json"
        p.write_text(json.dumps(export_otlp(cas, capture_content=True)))
        [back] = import_file(p, split="file")
        before, after = analyze(cas), analyze(back.cassette)
        checked += 1
        if (before.verdict, kinds(cas)) != (after.verdict, kinds(back.cassette)):
            differ.append((f.name, before.verdict, after.verdict, sorted(kinds(cas)), sorted(kinds(back.cassette))))
    assert checked >= 100
    assert differ == []


def test_export_to_a_fifo_writes_through_and_keeps_the_fifo(tmp_path):
    """``-o /dev/null`` or a named pipe: the atomic rename must not replace the special file."""
    import os
    import stat
    import threading

    [run] = runs_of("agent-1003.har")
    from spoolproxy.cassettes import save as save_cassette

    src = tmp_path / "run.yaml"
    save_cassette(run.cassette, src)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    r = spool("export", str(src), "--format", "otel", "-o", str(fifo))
    reader.join(30)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(got[0])["resourceSpans"]
