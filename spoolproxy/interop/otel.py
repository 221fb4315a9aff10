"""OpenTelemetry GenAI spans (OTLP JSON) -> cassettes.

Reads traces written with the OpenTelemetry GenAI semantic conventions (the official
``opentelemetry-instrumentation-openai-v2``, OpenLLMetry, agent frameworks, a Collector's
file exporter) and synthesises the run's interactions (see :mod:`.synth`):

* an **inference span** (``gen_ai.operation.name`` ``chat`` | ``text_completion`` |
  ``generate_content``) is one Chat Completions interaction: request model, parameters
  and ``gen_ai.tool.definitions``; response model and id, ``gen_ai.usage.input_tokens`` /
  ``output_tokens`` (or the older ``prompt_tokens``/``completion_tokens``), the first of
  ``gen_ai.response.finish_reasons``; ``server.address`` picks the URL; span status
  ERROR / ``error.type`` becomes an HTTP error answer (``error.type`` ``429``,
  ``RateLimitError`` -> 429 ...) or a transport failure (timeouts, connection errors);
* an **execute_tool span** (``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.call.arguments`` / ``.result``) is one tool interaction whose status is the
  ``http.response.status_code`` of the span or of the HTTP client span under it (a 502
  stays 502), else 500 when the span failed (not when spoolproxy exported it: that
  ERROR is the detectors' judgement of the result, which they make again), else 200;
  without such spans, each tool
  result the next inference span was fed becomes the tool interaction instead;
* an **HTTP client span that carries its exchange** (``spoolproxy.http.request.body``, as
  ``spoolproxy export --format otel --capture-content`` writes) is that HTTP interaction
  again, and stands for the execute_tool span above it; other HTTP spans only lend their
  status;
* the recorded command's ``process.exit.code`` and ``spoolproxy.agent_end`` (on any span,
  the root in spoolproxy's export) become the cassette's exit code and end.

Message content is taken from, in this order: the span attributes ``gen_ai.input.messages``
/ ``gen_ai.output.messages`` / ``gen_ai.system_instructions`` (semconv 1.37+, as a JSON
string or structured); a ``gen_ai.client.inference.operation.details`` event carrying
them; the older per-message events (semconv <= 1.36: ``gen_ai.system.message``,
``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``,
``gen_ai.choice``), as log records or span events; the ``gen_ai.content.prompt`` /
``gen_ai.content.completion`` span events; OpenLLMetry's indexed ``gen_ai.prompt.N.*`` /
``gen_ai.completion.N.*`` attributes.  A run without any message content is skipped with
a note: detectors need the conversation (turn content capture on, e.g.
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).

Runs: ``split="trace"`` makes one cassette per trace, ``"file"`` one per file; ``"auto"``
(the default) splits by trace when a trace holds two or more GenAI spans (an agent run
under a root span), else keeps the file as one run (instrumentations that trace each
model call as its own trace).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..cassettes.model import Cassette, CassetteMeta, Failure
from ..errors import CassetteError
from . import otlp
from .run import ImportedRun
from .synth import RunBuilder, arguments_text, content_text

FORMAT = "otel"
INFERENCE_OPS = {"chat", "text_completion", "generate_content"}
LEGACY_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
PROVIDER_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com", "groq": "api.groq.com/openai",
                  "deepseek": "api.deepseek.com", "mistral_ai": "api.mistral.ai", "x_ai": "api.x.ai",
                  "perplexity": "api.perplexity.ai", "gcp.gemini": "generativelanguage.googleapis.com/v1beta/openai"}
_STATUS_BY_ERROR = (("ratelimit", 429), ("authentication", 401), ("permissiondenied", 403), ("notfound", 404),
                    ("badrequest", 400), ("unprocessable", 422), ("conflict", 409), ("overloaded", 529))


def looks_like(doc: Any) -> bool:
    """True for an OTLP JSON traces/logs request object."""
    return otlp.is_otlp(doc)


def read(path: Path, data: bytes, split: str = "auto") -> list[ImportedRun]:
    """Read an OTLP JSON file (traces, optionally with logs) into runs.  Raises
    CassetteError naming the file when it holds no GenAI model call with message content."""
    spans: list[otlp.Span] = []
    logs: list[otlp.LogEvent] = []
    try:
        for doc in otlp.documents(data.decode("utf-8-sig", "replace")):
            spans.extend(otlp.spans(doc))
            logs.extend(otlp.log_events(doc))
    except ValueError as exc:
        raise CassetteError(path, f"not OTLP JSON: {exc}") from None
    events: dict[str, list[tuple[int, str, Any]]] = {}
    for ev in logs:
        if ev.span_id:
            events.setdefault(ev.span_id, []).append((ev.time_ns, ev.name, ev.body if ev.body is not None else ev.attributes))
    runs, notes = [], []
    groups = _groups(spans, split)
    for key, group in groups:
        run, note = _run(path, key if len(groups) > 1 else None, group, events)
        if note:
            notes.append(note)
        if run is not None:
            runs.append(run)
    if not runs:
        why = notes[0] if notes else "no spans"
        raise CassetteError(path, f"no run to import: {why}")
    if notes:
        runs[0].notes = tuple(notes)
    return runs


def _op(s: otlp.Span) -> str:
    op = s.attributes.get("gen_ai.operation.name")
    if op:
        return str(op)
    if s.attributes.get("llm.request.type") == "chat" or (s.attributes.get("gen_ai.system") and s.attributes.get("gen_ai.request.model")):
        return "chat"  # OpenLLMetry and pre-1.27 spans
    return ""


def _groups(spans: list[otlp.Span], split: str) -> list[tuple[str, list[otlp.Span]]]:
    by_trace: dict[str, list[otlp.Span]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    genai = {t: sum(1 for s in ss if _op(s) in INFERENCE_OPS or _op(s) == "execute_tool") for t, ss in by_trace.items()}
    if split == "trace" or (split == "auto" and any(n >= 2 for n in genai.values())):
        return [(t, ss) for t, ss in by_trace.items() if genai[t]]
    return [("", spans)]


def _run(path: Path, trace: str | None, spans: list[otlp.Span], events: dict) -> tuple[ImportedRun | None, str | None]:
    spans = sorted(spans, key=lambda s: (s.start_ns, _op(s) in INFERENCE_OPS))  # a tool before the call it fed
    steps = [s for s in spans if _op(s) in INFERENCE_OPS or _op(s) == "execute_tool" or _exchange(s)]
    http_children: dict[str, list[otlp.Span]] = {}  # span id -> the HTTP client spans under it
    for s in spans:
        if s.parent_id and (s.attributes.get("http.request.method") or s.attributes.get("http.response.status_code") is not None):
            http_children.setdefault(s.parent_id, []).append(s)
    calls = [(s, _content(s, events.get(s.span_id, []))) for s in steps if _op(s) in INFERENCE_OPS]
    where = f"trace {trace}" if trace else "the file"
    if not calls:
        return None, f"{where} has no GenAI inference span"
    if not any(c[1][0] or c[1][1] for c in calls):
        return None, (f"the spans of {where} carry no message content: export again with content capture on "
                      "(`spoolproxy export --format otel --capture-content`; for other instrumentations, "
                      "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)")
    content = {s.span_id: c for s, c in calls}
    known_calls: dict[str, tuple[str, Any]] = {}  # tool call id -> (name, arguments)
    results: dict[str, str] = {}  # tool call id -> the result the model was fed
    for messages, answer, _, _ in content.values():
        for m in [*(messages or []), answer or {}]:
            for tc in m.get("tool_calls") or []:
                known_calls.setdefault(str(tc.get("id")), (tc["function"]["name"], tc["function"]["arguments"]))
            if m.get("role") == "tool":
                results.setdefault(str(m.get("tool_call_id")), content_text(m.get("content")))
    spanned = {str(s.attributes.get("gen_ai.tool.call.id")) for s in steps if _op(s) == "execute_tool"}
    b = RunBuilder()
    seen_results: set[str] = set(spanned)
    shapes: set[str] = set()
    for s in steps:
        a = s.attributes
        if _exchange(s):
            _http_call(b, s)
            continue
        if _op(s) == "execute_tool":
            kids = http_children.get(s.span_id, [])
            if any(_exchange(k) for k in kids):
                continue  # the HTTP exchange that ran the tool is imported as it was
            cid = str(a.get("gen_ai.tool.call.id"))
            failed = s.status_code == 2 or bool(a.get("error.type"))
            if failed and s.resource.get("telemetry.sdk.name") == "spoolproxy":
                failed = False  # spoolproxy's export: the detectors' judgement of the exported result, made again on import
            result = a.get("gen_ai.tool.call.result", results.get(cid))
            if result is None and failed:
                result = s.status_message or str(a.get("error.type") or "tool failed")
            args = a.get("gen_ai.tool.call.arguments", known_calls.get(cid, (None, None))[1])
            status = _int(a.get("http.response.status_code"))
            if status is None:  # the status of the HTTP call under the tool span that served its result
                status = next((c for k in reversed(kids) if (c := _int(k.attributes.get("http.response.status_code")))), None)
            b.tool_call(str(a.get("gen_ai.tool.name") or "tool"), args, result, call_id=a.get("gen_ai.tool.call.id"),
                        is_error=failed, status=status, started_at=_t(s.start_ns), duration_ms=_ms(s))
            continue
        messages, answer, finish, shape = content[s.span_id]
        shapes.add(shape)
        for m in messages or []:
            cid = str(m.get("tool_call_id"))
            if m.get("role") == "tool" and cid not in seen_results:  # a result no execute_tool span covers
                seen_results.add(cid)
                name, args = known_calls.get(cid, (m.get("name") or "tool", None))
                b.tool_call(name, args, m.get("content"), call_id=m.get("tool_call_id"))
        host = a.get("server.address") or PROVIDER_HOSTS.get(str(a.get("gen_ai.provider.name") or a.get("gen_ai.system") or ""), "api.openai.com")
        port = a.get("server.port")
        base = f"https://{host}{':' + str(port) if port and port != 443 else ''}" + ("" if "/" in str(host) else "/v1")
        b.model_call(
            messages or [], answer, model=a.get("gen_ai.request.model"), tools=_tools(a.get("gen_ai.tool.definitions")),
            params=_params(a),
            finish_reason=finish or _first(a.get("gen_ai.response.finish_reasons")), usage=_usage(a),
            response_id=a.get("gen_ai.response.id"), response_model=a.get("gen_ai.response.model"),
            error=_error(s, answer is not None) if s.status_code == 2 or a.get("error.type") else None,
            started_at=_t(s.start_ns), duration_ms=_ms(s), base_url=base)
    source: dict[str, Any] = {"format": FORMAT, "file": path.name, "conventions": sorted(shapes - {""})}
    if b.infer_tools():
        source["tools_inferred"] = True
    traces = {s.trace_id for s in spans}
    if len(traces) == 1:
        source["trace_id"] = traces.pop()
    res = spans[0].resource
    if res.get("service.name"):
        source["service"] = res["service.name"]
    agent = next((s.attributes["gen_ai.agent.name"] for s in spans if s.attributes.get("gen_ai.agent.name")), None)
    if agent:
        source["agent"] = agent
    extra: dict[str, Any] = {"imported_from": source}
    end = next((_json(s.attributes["spoolproxy.agent_end"]) for s in spans if s.attributes.get("spoolproxy.agent_end")), None)
    if isinstance(end, dict):
        extra["agent_end"] = end
    code = next((c for s in spans if (c := _int(s.attributes.get("process.exit.code"))) is not None), None)
    meta = CassetteMeta(recorded_at=_t(spans[0].start_ns), exit_code=code, extra=extra)
    name = f"{path.stem}-{trace[:12]}" if trace else path.stem
    return ImportedRun(Cassette(interactions=b.interactions, meta=meta), name), None


# -- HTTP exchanges -------------------------------------------------------------------
def _exchange(s: otlp.Span) -> bool:
    """An HTTP client span that carries its exchange (spoolproxy's export with content)."""
    return bool(s.attributes.get("http.request.method")) and isinstance(s.attributes.get("spoolproxy.http.request.body"), str)


def _http_call(b: RunBuilder, s: otlp.Span) -> None:
    a = s.attributes
    status = _int(a.get("http.response.status_code"))
    etype = str(a.get("error.type") or "")
    failure = None
    if status is None or etype in _FAILURE_KINDS:  # no response, or a body cut after the headers
        failure = Failure(kind=etype if etype in _FAILURE_KINDS else "other", message=s.status_message,
                          during="connect" if status is None else "response")
    url = str(a.get("url.full") or f"http://{a.get('server.address') or 'unknown.invalid'}/")
    b.http_call(str(a["http.request.method"]), url, status=status, request_body=a["spoolproxy.http.request.body"],
                response_body=a.get("spoolproxy.http.response.body"),
                request_headers=_headers(a, "http.request.header."), response_headers=_headers(a, "http.response.header."),
                failure=failure, started_at=_t(s.start_ns), duration_ms=_ms(s))


_FAILURE_KINDS = {"refused", "dns", "timeout", "reset", "tls", "protocol", "other"}


def _headers(a: dict, prefix: str) -> dict[str, str]:
    """``http.request.header.<name>`` attributes (string arrays, per the conventions) -> headers."""
    out = {}
    for k, v in a.items():
        if k.startswith(prefix):
            v = v[0] if isinstance(v, list) and v else v
            if isinstance(v, str):
                out[k[len(prefix):]] = v
    return out


def _int(v: Any) -> int | None:
    """An integer attribute (OTLP JSON writes int64 as a string), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


# -- message content ------------------------------------------------------------------
def _content(s: otlp.Span, logs: list) -> tuple[list[dict] | None, dict | None, str | None, str]:
    """``(input messages, answer, finish reason, shape)`` of an inference span, messages
    in OpenAI Chat shape (None when the span carries none)."""
    a = s.attributes
    evs = sorted(logs + [(e.time_ns, e.name, e.attributes) for e in s.events], key=lambda e: e[0])
    for attrs in [a] + [body for _, name, body in evs if name == DETAILS_EVENT and isinstance(body, dict)]:
        inp, out = _json(attrs.get("gen_ai.input.messages")), _json(attrs.get("gen_ai.output.messages"))
        if inp is not None or out is not None:
            msgs = _instructions(_json(attrs.get("gen_ai.system_instructions"))) + from_parts(inp or [])
            answer, finish = _answer(from_parts(out or []), out)
            return msgs, answer, finish, "attributes" if attrs is a else "details-event"
    legacy = [(name, body) for _, name, body in evs if name in LEGACY_ROLES or name == "gen_ai.choice"]
    if legacy:
        msgs, answer, finish = [], None, None
        for name, body in legacy:
            body = _event_body(body)
            if name == "gen_ai.choice":
                if answer is None and int(body.get("index") or 0) == 0:
                    answer = _legacy_message("assistant", body.get("message") or {})
                    finish = body.get("finish_reason")
            else:
                msgs.append(_legacy_message(LEGACY_ROLES[name], body))
        return msgs, answer, finish, "events"
    prompt = next((_json(e[2].get("gen_ai.prompt")) for e in evs if e[1] == "gen_ai.content.prompt"), None)
    completion = next((_json(e[2].get("gen_ai.completion")) for e in evs if e[1] == "gen_ai.content.completion"), None)
    if prompt is not None or completion is not None:
        answer, finish = _answer([m for m in completion or [] if isinstance(m, dict)], None)
        return [m for m in prompt or [] if isinstance(m, dict)], answer, finish, "span-events"
    if any(k.startswith("gen_ai.prompt.") for k in a):
        done = _indexed(a, "gen_ai.completion.")
        answer = done[0] if done else None
        finish = answer.pop("finish_reason", None) if answer else None
        return _indexed(a, "gen_ai.prompt."), answer, finish, "openllmetry"
    return None, None, None, ""


def from_parts(messages: list) -> list[dict]:
    """Semconv ``gen_ai.input.messages``/``output.messages`` (``role`` + typed ``parts``:
    text, tool_call, tool_call_response, reasoning, and spoolproxy's ``refusal`` generic part)
    -> OpenAI Chat messages.  A message with
    several tool responses becomes one tool message each."""
    out: list[dict] = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        parts = [p for p in m.get("parts") or [] if isinstance(p, dict)]
        texts = [str(p.get("content") or "") for p in parts if p.get("type") == "text"]
        texts += [""] if not texts and any(p.get("type") == "refusal" for p in parts) else []
        calls = [{"id": p.get("id"), "type": "function",
                  "function": {"name": p.get("name") or "", "arguments": arguments_text(p.get("arguments"))}}
                 for p in parts if p.get("type") == "tool_call"]
        responses = [p for p in parts if p.get("type") == "tool_call_response"]
        role = str(m.get("role") or "user")
        for p in responses:
            r = p.get("response", p.get("result"))
            out.append({"role": "tool", "tool_call_id": p.get("id"),
                        "content": r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)})
        if texts or calls or not responses:
            msg: dict[str, Any] = {"role": role, "content": "".join(texts) if texts or not calls else None}
            if calls:
                msg["tool_calls"] = calls
            reasoning = "".join(str(p.get("content") or "") for p in parts if p.get("type") == "reasoning")
            if reasoning:
                msg["reasoning_content"] = reasoning
            refusal = "".join(str(p.get("content") or "") for p in parts if p.get("type") == "refusal")
            if refusal:
                msg["refusal"] = refusal
            out.append(msg)
    return out


def _answer(msgs: list[dict], raw: Any) -> tuple[dict | None, str | None]:
    if not msgs:
        return None, None
    finish = raw[0].get("finish_reason") if isinstance(raw, list) and raw and isinstance(raw[0], dict) else None
    answer = dict(msgs[0])
    finish = finish or answer.pop("finish_reason", None)
    answer["role"] = "assistant"
    return answer, finish


def _instructions(parts: Any) -> list[dict]:
    if not parts:
        return []
    if isinstance(parts, str):
        return [{"role": "system", "content": parts}]
    return [{"role": "system", "content": content_text(parts)}]


def _event_body(body: Any) -> dict:
    if isinstance(body, dict) and isinstance(body.get("gen_ai.event.content"), str):
        return _json(body["gen_ai.event.content"]) or {}
    return body if isinstance(body, dict) else {"content": body}


def _legacy_message(role: str, body: dict) -> dict:
    msg: dict[str, Any] = {"role": body.get("role") or role, "content": content_text(body.get("content"))}
    calls = [c for c in body.get("tool_calls") or [] if isinstance(c, dict)]
    if calls:
        msg["tool_calls"] = [{"id": c.get("id"), "type": "function",
                              "function": {"name": (c.get("function") or {}).get("name") or "",
                                           "arguments": arguments_text((c.get("function") or {}).get("arguments"))}}
                             for c in calls]
        msg["content"] = msg["content"] or None
    if role == "tool":
        msg["tool_call_id"] = body.get("id")
    return msg


def _indexed(a: dict, prefix: str) -> list[dict]:
    """OpenLLMetry's flattened messages: ``<prefix>N.role``, ``.content``,
    ``.tool_call_id``, ``.finish_reason``, ``.tool_calls.M.{id,name,arguments}``."""
    msgs: dict[int, dict] = {}
    for k, v in a.items():
        if not k.startswith(prefix):
            continue
        head, _, rest = k[len(prefix):].partition(".")
        if not head.isdigit():
            continue
        m = msgs.setdefault(int(head), {})
        if rest.startswith("tool_calls."):
            j, _, field = rest[len("tool_calls."):].partition(".")
            if j.isdigit():
                calls = m.setdefault("tool_calls", {})
                calls.setdefault(int(j), {})[field] = v
        elif rest in ("role", "content", "tool_call_id", "finish_reason"):
            m[rest] = v
    out = []
    for i in sorted(msgs):
        m = msgs[i]
        calls = m.pop("tool_calls", None)
        if calls:
            m["tool_calls"] = [{"id": c.get("id"), "type": "function",
                                "function": {"name": c.get("name") or "", "arguments": arguments_text(c.get("arguments"))}}
                               for _, c in sorted(calls.items())]
        m.setdefault("role", "user")
        out.append(m)
    return out


# -- span attributes ------------------------------------------------------------------
def _json(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return None
    return v


def _tools(v: Any) -> list[dict] | None:
    defs = _json(v)
    if not isinstance(defs, list):
        return None
    out = []
    for d in defs:
        if isinstance(d, dict):
            fn = d.get("function") if isinstance(d.get("function"), dict) else d
            out.append({"type": "function", "function": {k: fn[k] for k in ("name", "description", "parameters") if k in fn}})
    return out or None


def _params(a: dict) -> dict[str, Any]:
    """Request parameters from ``gen_ai.request.*`` in Chat Completions' names."""
    names = {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
             "seed": "seed", "frequency_penalty": "frequency_penalty", "presence_penalty": "presence_penalty",
             "stop_sequences": "stop"}
    return {body: a[f"gen_ai.request.{attr}"] for attr, body in names.items() if a.get(f"gen_ai.request.{attr}") is not None}


def _usage(a: dict) -> dict[str, int] | None:
    p = a.get("gen_ai.usage.input_tokens", a.get("gen_ai.usage.prompt_tokens"))
    c = a.get("gen_ai.usage.output_tokens", a.get("gen_ai.usage.completion_tokens"))
    if p is None and c is None:
        return None
    return {"prompt_tokens": int(p or 0), "completion_tokens": int(c or 0)}


def _first(v: Any) -> str | None:
    if isinstance(v, list) and v:
        return str(v[0])
    return str(v) if isinstance(v, str) else None


def _error(s: otlp.Span, answered: bool = False) -> tuple[int, str, str] | Failure:
    """How a failed inference span failed: ``(status, type, message)`` or a Failure
    (``answered``: the span also carries output, so the error came with a response)."""
    etype = str(s.attributes.get("error.type") or "error")
    msg = s.status_message or etype
    low = etype.lower().replace("_", "")
    if answered:
        return 200, etype, msg
    if etype.isdigit() and 100 <= int(etype) < 600:
        return int(etype), etype, msg
    if "timeout" in low:
        return Failure(kind="timeout", message=msg, during="request")
    if "connection" in low:
        return Failure(kind="other", message=msg, during="connect")
    status = next((code for word, code in _STATUS_BY_ERROR if word in low), 500)
    return status, etype, msg


def _t(ns: int) -> datetime | None:
    return datetime.fromtimestamp(ns / 1e9, timezone.utc) if ns else None


def _ms(s: otlp.Span) -> float | None:
    return round((s.end_ns - s.start_ns) / 1e6, 3) if s.start_ns and s.end_ns >= s.start_ns else None
