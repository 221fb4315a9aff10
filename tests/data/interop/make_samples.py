"""Make the import samples in this directory with the real tools that write each format.

    python tests/data/interop/make_samples.py [OUT_DIR]      # default: this directory

A small support agent (the real ``openai`` SDK, one tool ``lookup_order`` served over
HTTP by a local shop) runs twice against the local fake provider of ``tests/fakes``:
order 1002, whose shop answers an nginx/Cloudflare ``502 Bad Gateway`` HTML page that the
agent feeds to the model (a failing run), and order 1003, answered with JSON (a clean
run).  The second model call of each run is streamed (SSE).  What writes each file:

* ``agent-1002.har``, ``agent-1003.har`` and ``agent-1002.flows``, ``agent-1003.flows``
  (one proxy session per run): real mitmproxy, run in-process by spoolproxy's
  :class:`~spoolproxy.proxy.runner.ProxyRunner` with mitmproxy's own default addons
  (``hardump`` is ``mitmproxy.addons.savehar``, ``save_stream_file`` is mitmproxy's
  ``save`` addon); the agent reaches ``https://api.openai.com`` through it
  (``--connect-to`` sends that to the fake provider);
* ``agent-otlp.jsonl``: the OpenTelemetry SDK's OTLP JSON file exporter, with spans from
  the official ``opentelemetry-instrumentation-openai-v2`` (semconv attributes,
  ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``, content ``span_only``)
  and ``opentelemetry-util-genai``'s ``invoke_agent`` / ``execute_tool`` spans;
* ``agent-otlp-events.jsonl``: the same with the instrumentation's default (older)
  conventions, message content as ``gen_ai.*.message`` / ``gen_ai.choice`` log events;
* ``agent-messages.jsonl``: the agent's own log, one line per run with its ``messages``
  and ``tools`` (the shape agent frameworks and benchmark trajectories write).

The API key is ``SAMPLE_API_KEY`` (default: a non-secret placeholder, so the committed
files hold nothing key-shaped; tests set a key-shaped one to check redaction).
Needs the ``dev`` extra (opentelemetry-sdk, -exporter-otlp-json-file,
-instrumentation-openai-v2).
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
TOOLS = [{"type": "function", "function": {
    "name": "lookup_order", "description": "Look up an order by its id",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}]
BAD_GATEWAY = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
               b"</center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n")


def run_agent(client, http, shop: str, order: str, log: Path | None, handler=None) -> str:
    """One agent run: ask the model about ``order``, call ``lookup_order`` through HTTP
    as often as the model asks, feed each body back verbatim, return the answer."""
    messages = [{"role": "system", "content": "You are a support agent. Use lookup_order."},
                {"role": "user", "content": order}]
    r = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
    msg = r.choices[0].message
    while msg.tool_calls:
        messages.append(msg.model_dump(exclude_none=True, exclude={"annotations", "refusal"}))
        for tc in msg.tool_calls:
            args = json.loads(tc.function.arguments)
            inv = handler.start_tool(tc.function.name, arguments=args, tool_call_id=tc.id) if handler else None
            body = http.get(f"{shop}/orders/{args['order_id']}").text
            if inv is not None:
                inv.tool_result = body
                inv.stop()
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": body})
        stream = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS, stream=True,
                                                stream_options={"include_usage": True})
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        msg = type(msg)(role="assistant", content=text)
    messages.append({"role": "assistant", "content": msg.content})
    if log is not None:
        with log.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"id": f"order-{order}", "model": "gpt-4o-mini", "tools": TOOLS, "messages": messages}) + "\n")
    return msg.content or ""


def _scenario(out: Path, mode: str) -> None:
    """Child process: one OpenTelemetry mode, both runs, through a recording mitmproxy."""
    import httpx
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.util.genai.handler import TelemetryHandler

    sys.path.insert(0, str(REPO))
    import openai

    from spoolproxy.proxy.runner import ProxyRunner
    from tests.fakes.provider import FakeProvider
    from tests.fakes.routes import Reply, json_reply

    otlp = out / ("agent-otlp.jsonl" if mode == "latest" else "agent-otlp-events.jsonl")
    otlp.unlink(missing_ok=True)
    with otlp.open("a", encoding="utf-8") as sink:
        tp = TracerProvider()
        tp.add_span_processor(SimpleSpanProcessor(FileSpanExporter(stream=sink)))
        lp = LoggerProvider()
        lp.add_log_record_processor(SimpleLogRecordProcessor(FileLogExporter(stream=sink)))
        OpenAIInstrumentor().instrument(tracer_provider=tp, logger_provider=lp)
        handler = TelemetryHandler(tracer_provider=tp, logger_provider=lp)
        log = out / "agent-messages.jsonl" if mode == "latest" else None
        if log is not None:
            log.unlink(missing_ok=True)
        with FakeProvider(gzip=False) as fake:
            fake.add_route("GET", "/orders/1002", lambda req: Reply(502, [("content-type", "text/html")], BAD_GATEWAY))
            fake.add_route("GET", "/orders/1003", lambda req: json_reply(200, {"order_id": "1003", "status": "shipped"}))
            for order in ("1002", "1003"):  # one proxy session, so one HAR and one flow file, per run
                options = {}
                if mode == "latest":
                    options = {"hardump": str(out / f"agent-{order}.har"), "save_stream_file": str(out / f"agent-{order}.flows")}
                    (out / f"agent-{order}.flows").unlink(missing_ok=True)
                runner = ProxyRunner([], connect_to=[f"api.openai.com:443:127.0.0.1:{fake.port}"],
                                     upstream_ca=fake.ca_pem_path, options=options)
                runner.start()
                try:
                    verify = ssl.create_default_context(cafile=str(runner.ca.bundle))
                    with httpx.Client(proxy=runner.proxy_url, verify=verify, timeout=20) as http:
                        client = openai.OpenAI(base_url="https://api.openai.com/v1", http_client=http, max_retries=0,
                                               api_key=os.environ.get("SAMPLE_API_KEY", "placeholder-not-a-key"))
                        agent = handler.start_invoke_local_agent("openai", request_model="gpt-4o-mini")
                        agent.agent_name = "support-agent"
                        run_agent(client, http, fake.http_url, order, log, handler)
                        agent.stop()
                finally:
                    runner.stop()
        tp.shutdown()
        lp.shutdown()


def make(out: Path) -> None:
    """Write every sample into ``out`` (one child process per OpenTelemetry mode, since
    the instrumentation reads its mode from the environment when it starts)."""
    out.mkdir(parents=True, exist_ok=True)
    for mode, env in (("latest", {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                                  "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only"}),
                      ("events", {"OTEL_SEMCONV_STABILITY_OPT_IN": "",
                                  "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})):
        subprocess.run([sys.executable, __file__, "--child", mode, str(out)], check=True, cwd=REPO,
                       env={**os.environ, **env, "OTEL_SDK_DISABLED": "false"}, timeout=120)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _scenario(Path(sys.argv[3]), sys.argv[2])
    else:
        make(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
