"""A cassette as OpenTelemetry GenAI spans (OTLP JSON), for any OTLP backend.

One trace per cassette (``ExportTraceServiceRequest`` in OTLP JSON: hex ids, int64 as
strings, enums as integers), laid out as the GenAI semantic conventions describe an
agent run:

* a root ``invoke_agent {name}`` span (INTERNAL) spanning the run: ``gen_ai.agent.name``
  (the ``agent`` tag when the cassette has one, else the cassette's stem), summed
  ``gen_ai.usage.*`` tokens, spoolproxy's verdict, status ERROR when the run failed, and
  one ``spoolproxy.finding`` event per finding (kind, severity, message, interactions);
* one ``{operation} {model}`` span (CLIENT) per model call: ``gen_ai.operation.name``
  (``chat``, ``generate_content``, ``text_completion``), ``gen_ai.provider.name`` (and the
  older ``gen_ai.system``), ``gen_ai.request.model``, ``gen_ai.response.model``,
  ``gen_ai.request.max_tokens``, ``gen_ai.usage.input_tokens`` / ``output_tokens``,
  ``gen_ai.response.finish_reasons``, ``server.address`` / ``server.port``,
  ``http.response.status_code``, ``error.type`` and status ERROR on a failed call;
* one ``execute_tool {name}`` span (INTERNAL) per tool call the model asked for:
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type``; status ERROR when
  its result signals failure (the detectors' judgement: HTTP error, HTML error page,
  ``is_error``, ``ok: false`` ...);
* one HTTP client span per other interaction (``http.request.method``, ``url.full``,
  ``http.response.status_code``; ``error.type`` the status or the transport failure's
  kind), under the tool call it served when known.

The root span also carries the recorded command's ``process.exit.code`` and how it ended
(``spoolproxy.agent_end``, JSON), so ``agent_crashed`` survives a round trip.

With ``capture_content`` the spans also carry the conversation as the conventions'
opt-in attributes, JSON-encoded strings as the official Python instrumentation writes
them: ``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.tool.definitions``,
``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``; the HTTP client spans then
carry the exchange (``spoolproxy.http.request.body`` / ``spoolproxy.http.response.body``,
decoded text, and the ``content-type``, ``idempotency-key``, ``mcp-session-id`` and
``date`` headers as ``http.request.header.*`` / ``http.response.header.*``).
``spoolproxy import`` reads such a file back into a cassette the detectors judge alike.  Span and trace ids are derived from the
cassette, so exporting the same cassette twice gives the same ids.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from typing import Any

from .. import __version__
from ..cassettes.model import Cassette
from ..detectors import analyze, build_transcript
from ..detectors.config import DetectConfig
from ..detectors.models import Message, ModelCall, Report, Step, ToolCall
from .otlp import encode_attributes

SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
KIND_INTERNAL, KIND_CLIENT = 1, 3
STATUS_ERROR = 2
OPERATIONS = {"gemini-generateContent": "generate_content", "ollama-generate": "text_completion"}
PROVIDERS = {"azure-openai": "azure.ai.openai", "gemini": "gcp.gemini", "bedrock": "aws.bedrock",
             "mistral": "mistral_ai", "xai": "x_ai"}


def export_otlp(cas: Cassette, *, capture_content: bool = False, config: DetectConfig | None = None,
                report: Report | None = None) -> dict[str, Any]:
    """The OTLP JSON document (a dict ready for ``json.dumps``) for ``cas``, which should
    already be redacted.  ``config``: detector settings for the verdict and tool judgements.
    Never raises on odd bodies (the transcript reader does not)."""
    from ..detectors.checks.base import Context
    from ..detectors.evidence import EvidenceBuilder

    cfg = config or DetectConfig()
    t = build_transcript(cas, cfg)
    report = report or analyze(cas, cfg, transcript=t)
    ctx = Context(cassette=cas, transcript=t, config=cfg, ev=EvidenceBuilder(cas, t))
    seed = _seed(cas)
    trace_id = hashlib.sha256(seed.encode()).hexdigest()[:32]
    times = _times(cas)
    root_id = _span_id(trace_id, "root")
    tags = cas.meta.extra.get("tags") if isinstance(cas.meta.extra.get("tags"), dict) else {}
    agent = str(tags.get("agent") or (cas.path.stem if cas.path else "spoolproxy-run"))
    spans: list[dict] = []
    tool_spans: dict[tuple[int, str], str] = {}
    results = {(r.call_interaction, r.call_id): r for r in t.tool_results if r.call_id}

    for s in t.steps:
        start, end = times[s.index]
        sid = _span_id(trace_id, f"i{s.index}")
        if s.llm is not None:
            spans.append(_model_span(trace_id, sid, root_id, s, s.llm, start, end, cas, capture_content))
            for n, tc in enumerate(s.llm.tool_calls):
                res = results.get((s.index, tc.id)) if tc.id else None
                if res is not None and res.source_interaction is not None:  # the HTTP/MCP call that ran it
                    t_start, t_end = times[res.source_interaction]
                elif res is not None:  # between the call and the request that fed the result back
                    t_end = times[res.interaction][0] - 1000
                    t_start = min(end, t_end)
                else:
                    t_start = t_end = end
                tid = _span_id(trace_id, f"i{s.index}-tool{n}")
                spans.append(_tool_span(trace_id, tid, root_id, tc, res, t_start, t_end, ctx, capture_content))
                if tc.id:
                    tool_spans[(s.index, tc.id)] = tid
        else:
            parent = tool_spans.get(s.tool_call_ref, root_id) if s.tool_call_ref else root_id
            spans.append(_http_span(trace_id, sid, parent, s, start, end, cas, capture_content))

    root_attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
                  "gen_ai.usage.input_tokens": t.input_tokens or None, "gen_ai.usage.output_tokens": t.output_tokens or None,
                  "spoolproxy.verdict": report.verdict, "spoolproxy.cassette": str(cas.path) if cas.path else None,
                  "process.command_args": list(cas.meta.command) if cas.meta.command else None,
                  "process.exit.code": cas.meta.exit_code, "spoolproxy.agent_end": _agent_end(cas, capture_content)}
    t0 = min((a for a, _ in times), default=_base(cas))
    t1 = max((b for _, b in times), default=t0)
    events = [{"timeUnixNano": str(times[f.interactions[0]][0] if f.interactions else t0), "name": "spoolproxy.finding",
               "attributes": encode_attributes({"spoolproxy.finding.kind": f.kind, "spoolproxy.finding.severity": f.severity,
                                                "spoolproxy.finding.message": f.message,
                                                "spoolproxy.finding.interactions": list(f.interactions)})}
              for f in report.findings]
    failing = [f for f in report.findings if f.severity in ("error", "critical")]
    root = _span(trace_id, root_id, "", f"invoke_agent {agent}", KIND_INTERNAL, t0, t1, root_attrs,
                 error=f"{len(failing)} error findings: {', '.join(sorted({f.kind for f in failing}))}" if failing else None)
    if events:
        root["events"] = events
    resource = {"service.name": agent, "telemetry.sdk.name": "spoolproxy", "telemetry.sdk.version": __version__}
    resource.update({f"spoolproxy.tag.{k}": str(v) for k, v in tags.items()})
    return {"resourceSpans": [{
        "resource": {"attributes": encode_attributes(resource)},
        "scopeSpans": [{"scope": {"name": "spoolproxy", "version": __version__}, "spans": [root, *spans],
                        "schemaUrl": SCHEMA_URL}],
    }]}


# -- spans --------------------------------------------------------------------------
def _span(trace_id: str, span_id: str, parent: str, name: str, kind: int, start: int, end: int,
          attrs: dict[str, Any], error: str | None = None) -> dict:
    d: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}
    if parent:
        d["parentSpanId"] = parent
    d.update({"name": name, "kind": kind, "startTimeUnixNano": str(start), "endTimeUnixNano": str(max(start, end)),
              "attributes": encode_attributes(attrs), "status": {"code": STATUS_ERROR, "message": error} if error else {}})
    return d


def _model_span(trace_id: str, sid: str, parent: str, s: Step, call: ModelCall, start: int, end: int,
                cas: Cassette, content: bool) -> dict:
    req = cas.interactions[s.index].request
    body = req.json()
    op = OPERATIONS.get(call.api, "chat")
    req_model = body.get("model") if isinstance(body, dict) and isinstance(body.get("model"), str) else call.model
    provider = PROVIDERS.get(call.provider, call.provider)
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": op, "gen_ai.provider.name": provider, "gen_ai.system": provider,
        "gen_ai.request.model": req_model, "gen_ai.response.model": call.model,
        "gen_ai.request.max_tokens": call.max_tokens,
        **_request_params(body),
        "gen_ai.usage.input_tokens": call.usage.input_tokens, "gen_ai.usage.output_tokens": call.usage.output_tokens,
        "gen_ai.response.finish_reasons": [call.finish_reason_raw] if call.finish_reason_raw else None,
        "gen_ai.request.stream": True if call.stream.is_stream else None,
        "server.address": req.host or None, "server.port": req.url.port or (443 if req.url.scheme == "https" else 80),
        "http.response.status_code": s.status,
    }
    error = call.error or _step_error(s)
    if error:
        attrs["error.type"] = str(s.status) if s.status and s.status >= 400 else (call.error_code or "_OTHER")
    if content:
        attrs["gen_ai.input.messages"] = _dumps([_message_parts(m) for m in call.messages])
        out_parts: list[dict] = []
        if call.reasoning:
            out_parts.append({"type": "reasoning", "content": call.reasoning})
        if call.text:
            out_parts.append({"type": "text", "content": call.text})
        if call.refusal:  # a generic part (the conventions allow any type); import reads it back
            out_parts.append({"type": "refusal", "content": call.refusal})
        out_parts += [_call_part(tc) for tc in call.tool_calls]
        if out_parts:
            attrs["gen_ai.output.messages"] = _dumps([{"role": "assistant", "parts": out_parts,
                                                       "finish_reason": call.finish_reason_raw or call.finish_reason or "stop"}])
        if call.tools:
            attrs["gen_ai.tool.definitions"] = _dumps([{"type": "function", "name": ts.name,
                                                        **({"parameters": ts.schema_} if ts.schema_ else {})}
                                                       for ts in call.tools])
    return _span(trace_id, sid, parent, f"{op} {req_model or call.model or ''}".strip(), KIND_CLIENT, start, end, attrs, error)


def _tool_span(trace_id: str, sid: str, parent: str, tc: ToolCall, res, start: int, end: int, ctx, content: bool) -> dict:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tc.name,
                             "gen_ai.tool.call.id": tc.id, "gen_ai.tool.type": "function"}
    failure = ctx.tool_failure(res) if res is not None else None
    if failure:
        attrs["error.type"] = "tool_error"
    if content:
        attrs["gen_ai.tool.call.arguments"] = tc.arguments_raw if tc.arguments is None else _dumps(tc.arguments)
        if res is not None:
            attrs["gen_ai.tool.call.result"] = res.content
    return _span(trace_id, sid, parent, f"execute_tool {tc.name}", KIND_INTERNAL, start, end, attrs,
                 failure[0] if failure else None)


def _http_span(trace_id: str, sid: str, parent: str, s: Step, start: int, end: int, cas: Cassette,
               content: bool) -> dict:
    from urllib.parse import urlsplit

    u = urlsplit(s.url)
    it = cas.interactions[s.index]
    attrs: dict[str, Any] = {"http.request.method": s.method, "url.full": s.url, "server.address": u.hostname,
                             "server.port": u.port or (443 if u.scheme == "https" else 80),
                             "http.response.status_code": s.status}
    if s.mcp is not None and s.mcp.method:
        attrs["mcp.method.name"] = s.mcp.method
    error = _step_error(s)
    if error:
        attrs["error.type"] = str(s.status) if s.status and s.status >= 400 else it.error.kind if it.error else "_OTHER"
    if content:  # the exchange itself, so import can give the detectors the same request/response
        for name in _HEADERS:
            v = it.request.header(name)
            if v is not None:
                attrs[f"http.request.header.{name}"] = [v]
            v = it.response.header(name) if it.response is not None else None
            if v is not None:
                attrs[f"http.response.header.{name}"] = [v]
        attrs["spoolproxy.http.request.body"] = it.request.text
        if it.response is not None:
            attrs["spoolproxy.http.response.body"] = it.response.text
    name = f"{s.mcp.method} {s.mcp.tool_name or ''}".strip() if s.mcp is not None and s.mcp.method else s.method
    return _span(trace_id, sid, parent, name, KIND_CLIENT, start, end, attrs, error)


def _agent_end(cas: Cassette, content: bool) -> str | None:
    """How the recorded command ended (``meta.extra.agent_end``) as JSON; its stderr tail
    is program output, so it goes only with ``capture_content``."""
    end = cas.meta.extra.get("agent_end")
    if not isinstance(end, dict):
        return None
    end = {k: v for k, v in end.items() if content or k != "stderr_tail"}
    return _dumps(end) if end else None


#: headers the detectors read on plain HTTP traffic (content sniffing, MCP sessions,
#: server-side deduplication), exported as ``http.{request,response}.header.<name>``
_HEADERS = ("content-type", "idempotency-key", "mcp-session-id", "date")


#: request body fields -> ``gen_ai.request.*`` attributes (OpenAI, Anthropic, Ollama names)
_PARAMS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "seed": "seed",
           "frequency_penalty": "frequency_penalty", "presence_penalty": "presence_penalty",
           "stop": "stop_sequences", "stop_sequences": "stop_sequences"}


def _request_params(body: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(body, dict):
        return out
    for key, name in _PARAMS.items():
        v = body.get(key)
        if isinstance(v, str) and name == "stop_sequences":
            v = [v]
        if isinstance(v, (int, float)) and not isinstance(v, bool) or (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            out[f"gen_ai.request.{name}"] = v
    return out


def _step_error(s: Step) -> str | None:
    if s.transport_error:
        return s.transport_error
    if s.status is not None and s.status >= 400:
        return f"HTTP {s.status}"
    return None


# -- content ------------------------------------------------------------------------
def _message_parts(m: Message) -> dict:
    if m.role == "tool":
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": m.tool_call_id, "response": m.text}]}
    parts: list[dict] = [{"type": "text", "content": m.text}] if m.text or not m.tool_calls else []
    parts += [_call_part(tc) for tc in m.tool_calls]
    return {"role": m.role, "parts": parts}


def _call_part(tc: ToolCall) -> dict:
    args: Any = tc.arguments
    if args is None:
        try:
            args = json.loads(tc.arguments_raw) if tc.arguments_raw.strip() else {}
        except ValueError:
            args = tc.arguments_raw
    return {"type": "tool_call", "id": tc.id, "name": tc.name, "arguments": args}


def _dumps(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


# -- ids and times ------------------------------------------------------------------
def _seed(cas: Cassette) -> str:
    first = cas.interactions[0] if cas.interactions else None
    return "|".join([str(cas.path.name) if cas.path else "", str(cas.meta.recorded_at or ""), str(len(cas)),
                     first.request.uri if first else "", str(first.started_at or "") if first else ""])


def _span_id(trace_id: str, key: str) -> str:
    return hashlib.sha256(f"{trace_id}/{key}".encode()).hexdigest()[:16]


def _date(value: str | None) -> int | None:
    from email.utils import parsedate_to_datetime

    if not value:
        return None
    try:
        return _ns(parsedate_to_datetime(value))
    except (TypeError, ValueError):
        return None


def _base(cas: Cassette) -> int:
    t = cas.meta.recorded_at
    if t is None and cas.path is not None and cas.path.exists():
        t = datetime.fromtimestamp(cas.path.stat().st_mtime, timezone.utc)
    t = t or datetime.now(timezone.utc)
    return _ns(t)


def _ns(t: datetime) -> int:
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return (t - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) * 1000


def _times(cas: Cassette) -> list[tuple[int, int]]:
    """(start, end) in Unix ns per interaction: the recorded start, else the response's
    ``Date`` header (what the detectors fall back to as well), else 1 ms after the
    previous interaction; missing durations are 0."""
    out: list[tuple[int, int]] = []
    cursor = _base(cas)
    for it in cas.interactions:
        date = _date(it.response.header("date")) if it.started_at is None and it.response is not None else None
        start = _ns(it.started_at) if it.started_at is not None else date if date is not None else cursor
        end = start + int((it.duration_ms or 0) * 1e6)
        out.append((start, end))
        cursor = max(cursor, end) + 1_000_000
    return out
