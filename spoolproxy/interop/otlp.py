"""OTLP JSON: reading spans and log records, and writing attributes.

OTLP JSON is the protobuf JSON mapping of ``ExportTraceServiceRequest`` /
``ExportLogsServiceRequest`` (``{"resourceSpans": [{"resource", "scopeSpans": [{"scope",
"spans": [...]}]}]}``), as the OpenTelemetry Collector's file exporter, the SDK's
OTLP JSON file exporter and OTLP/HTTP JSON carry it.  The reader is lenient where real
files differ: one document, a list of documents or JSON Lines (one request per line);
lowerCamelCase or snake_case keys; trace and span ids in hex (the OTLP JSON rule) or
base64 (protobuf's generic JSON mapping); int64 as strings or numbers; the event name
in ``eventName`` or the ``event.name`` attribute.  Attribute values (``AnyValue``:
``stringValue``, ``intValue``, ``doubleValue``, ``boolValue``, ``bytesValue``,
``arrayValue``, ``kvlistValue``) become plain Python values.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


def _get(d: dict, key: str, default: Any = None) -> Any:
    """``d[key]`` by its lowerCamelCase name or its snake_case twin."""
    if key in d:
        return d[key]
    return d.get(_SNAKE.sub("_", key).lower(), default)


def value(v: Any) -> Any:
    """A Python value from an OTLP ``AnyValue`` (dict with one ``*Value`` key)."""
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "boolValue", "doubleValue"):
        x = _get(v, key)
        if x is not None:
            return float(x) if key == "doubleValue" else x
    x = _get(v, "intValue")
    if x is not None:
        try:
            return int(x)
        except (TypeError, ValueError):
            return x
    x = _get(v, "arrayValue")
    if x is not None:
        return [value(i) for i in (_get(x, "values") or [])]
    x = _get(v, "kvlistValue")
    if x is not None:
        return attributes(_get(x, "values") or [])
    x = _get(v, "bytesValue")
    if x is not None:
        return x
    return None


def attributes(items: Any) -> dict[str, Any]:
    """``[{"key", "value": AnyValue}]`` -> ``{key: python value}``."""
    out: dict[str, Any] = {}
    for kv in items or []:
        if isinstance(kv, dict) and "key" in kv:
            out[str(kv["key"])] = value(kv.get("value"))
    return out


def hex_id(raw: Any) -> str:
    """A trace/span id as lower-case hex ('' when absent); base64 ids are converted."""
    if not raw:
        return ""
    s = str(raw)
    if re.fullmatch(r"[0-9a-fA-F]{16}|[0-9a-fA-F]{32}", s):
        return s.lower()
    try:
        return base64.b64decode(s, validate=True).hex()
    except (binascii.Error, ValueError):
        return s


def _nanos(raw: Any) -> int:
    try:
        return int(raw or 0)
    except (TypeError, ValueError):
        return 0


@dataclass
class SpanEvent:
    """An event recorded on a span (``name``, ``time_ns``, ``attributes``)."""

    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass
class Span:
    """One span: ids in hex, times in Unix nanoseconds, ``kind`` the OTLP enum (1 internal,
    2 server, 3 client), ``status_code`` 0 unset / 1 ok / 2 error, ``resource`` the
    resource attributes."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[SpanEvent] = field(default_factory=list)
    status_code: int = 0
    status_message: str = ""
    resource: dict[str, Any] = field(default_factory=dict)


@dataclass
class LogEvent:
    """A log record (an OpenTelemetry event when ``name`` is set), tied to a span by ids."""

    name: str
    trace_id: str
    span_id: str
    time_ns: int
    body: Any
    attributes: dict[str, Any]


def documents(text: str) -> Iterator[dict]:
    """The OTLP request objects in ``text`` (one document, a list, or JSON Lines).
    Raises ValueError when it is not JSON."""
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if doc is not None:
        for d in doc if isinstance(doc, list) else [doc]:
            if isinstance(d, dict):
                yield d
        return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                d = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"line {n}: not JSON ({exc.msg})") from None
            if isinstance(d, dict):
                yield d


def is_otlp(doc: Any) -> bool:
    """True for an OTLP JSON traces or logs request object."""
    return isinstance(doc, dict) and (_get(doc, "resourceSpans") is not None or _get(doc, "resourceLogs") is not None)


def spans(doc: dict) -> Iterator[Span]:
    """Every span of one ``ExportTraceServiceRequest`` document."""
    for rs in _get(doc, "resourceSpans") or []:
        res = attributes(_get(_get(rs, "resource") or {}, "attributes"))
        for ss in _get(rs, "scopeSpans") or _get(rs, "instrumentationLibrarySpans") or []:
            for s in _get(ss, "spans") or []:
                st = _get(s, "status") or {}
                code = _get(st, "code", 0)
                if isinstance(code, str):  # enum by name (protobuf's generic JSON mapping)
                    code = {"STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}.get(code, 0)
                kind = _get(s, "kind", 0)
                if isinstance(kind, str):
                    kind = {"SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3}.get(kind, 0)
                yield Span(
                    trace_id=hex_id(_get(s, "traceId")), span_id=hex_id(_get(s, "spanId")),
                    parent_id=hex_id(_get(s, "parentSpanId")), name=str(_get(s, "name") or ""), kind=int(kind or 0),
                    start_ns=_nanos(_get(s, "startTimeUnixNano")), end_ns=_nanos(_get(s, "endTimeUnixNano")),
                    attributes=attributes(_get(s, "attributes")),
                    events=[SpanEvent(str(_get(e, "name") or ""), _nanos(_get(e, "timeUnixNano")), attributes(_get(e, "attributes")))
                            for e in _get(s, "events") or []],
                    status_code=int(code or 0), status_message=str(_get(st, "message") or ""), resource=res,
                )


def log_events(doc: dict) -> Iterator[LogEvent]:
    """Every log record of one ``ExportLogsServiceRequest`` document."""
    for rl in _get(doc, "resourceLogs") or []:
        for sl in _get(rl, "scopeLogs") or []:
            for r in _get(sl, "logRecords") or []:
                attrs = attributes(_get(r, "attributes"))
                name = _get(r, "eventName") or attrs.get("event.name") or ""
                yield LogEvent(name=str(name), trace_id=hex_id(_get(r, "traceId")), span_id=hex_id(_get(r, "spanId")),
                               time_ns=_nanos(_get(r, "timeUnixNano") or _get(r, "observedTimeUnixNano")),
                               body=value(_get(r, "body")), attributes=attrs)


def any_value(v: Any) -> dict:
    """An OTLP ``AnyValue`` for a Python value (int64 as a string, per OTLP JSON)."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [any_value(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": [{"key": str(k), "value": any_value(x)} for k, x in v.items()]}}
    return {"stringValue": "" if v is None else str(v)}


def encode_attributes(attrs: dict[str, Any]) -> list[dict]:
    """``{key: value}`` -> OTLP ``[{"key", "value": AnyValue}]``, None values left out."""
    return [{"key": k, "value": any_value(v)} for k, v in attrs.items() if v is not None]
