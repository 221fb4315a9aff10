"""schema_violation: a model answer that breaks the JSON Schema its request asked for.

The schema comes from the request (``ModelCall.response_schema``): OpenAI Chat
``response_format: {type: json_schema}`` (and vLLM's ``guided_json``), Responses
``text.format``, Gemini ``responseSchema`` / ``responseJsonSchema``, Anthropic
``output_format``, Ollama ``format``, Cohere ``response_format.json_schema``.  A forced tool
(``response_tool``: Anthropic ``tool_choice: {type: tool}``, an OpenAI ``tool_choice``
naming a function, Gemini ``ANY`` with one allowed function) or a configured output tool
(``output_tools``, e.g. pydantic-ai's ``final_result``) makes that call's arguments the
answer, checked against the tool's declared schema (``invalid_tool_arguments`` leaves those
calls to this check).  A JSON mode without a schema (``json_object``, ``format: "json"``,
``responseMimeType: application/json``) only has to be JSON.

Checked on every model turn that finished (not cut at the token limit, refused or failed:
those have their own kinds).  The answer text is parsed as JSON (one surrounding Markdown
code fence is tolerated) and validated with ``jsonschema`` (draft from ``$schema``, default
2020-12; Gemini's upper-case types lower-cased).  The message names the failing JSON path
(``$.findings[2].risk``) and the validator's reason; the evidence quotes the offending value
where it appears verbatim.  Severity: error.

Public failures: openai/openai-python#1733 and ollama/ollama#7788 (structured output that
does not follow the schema on local servers), langchain-ai/langchain#27602 (a forced tool
answering outside its schema).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..evidence import clip
from ..transcript import is_output_tool
from .base import Context
from .invalid_tool_arguments import _error_for, validator_for

KIND = "schema_violation"
_FENCE = re.compile(r"^\s*```[\w-]*\s*\n(.*)\n\s*```\s*$", re.DOTALL)


def json_path(parts) -> str:
    """``$.a[2].b`` for a jsonschema ``absolute_path`` deque."""
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if re.fullmatch(r"[A-Za-z_]\w*", str(p)) else f"[{json.dumps(p)}]")
    return out


def parse_answer(text: str) -> tuple[Any, str | None]:
    """(document, None) when ``text`` is JSON (inside one Markdown fence at most), else
    (None, the parser's reason)."""
    try:
        return json.loads(text), None
    except ValueError as exc:
        m = _FENCE.match(text)
        if m:
            try:
                return json.loads(m.group(1)), None
            except ValueError:
                pass
        return None, str(exc)


def check(ctx: Context) -> list:
    out = []
    patterns = tuple(ctx.config.output_tools)
    for s in ctx.steps:
        call = s.llm
        if call is None or not (call.tool_calls or call.response_schema or call.structured_output):
            continue
        if not s.ok or call.error or call.refusal:
            continue
        if call.finish_reason in ("length", "content_filter", "refusal", "error", "pause"):
            continue
        if call.stream.is_stream and not call.stream.complete:
            continue
        answered_by_tool = False
        for n, tc in enumerate(call.tool_calls):
            if tc.name != call.response_tool and not is_output_tool(tc.name, patterns):
                continue
            answered_by_tool = True
            schema = next((t.schema_ for t in call.tools if t.name == tc.name), None)
            f = _check_value(ctx, s.index, f"message.tool_calls/{n}/arguments_raw", tc.arguments_raw, tc.arguments,
                             tc.parse_error, schema, f"the {tc.name} tool answer")
            if f is not None:
                out.append(f)
        if answered_by_tool or call.tool_calls or not (call.response_schema or call.structured_output):
            continue
        if not call.text.strip():
            continue  # empty_output's business
        doc, err = parse_answer(call.text)
        f = _check_value(ctx, s.index, "message.text", call.text, doc, err, call.response_schema, "the answer")
        if f is not None:
            out.append(f)
    return out


def _check_value(ctx: Context, i: int, path: str, raw: str, doc: Any, parse_error: str | None,
                 schema: dict | None, what: str):
    if parse_error is not None:
        return ctx.finding(KIND, "error", [i], f"{what} is not JSON ({clip(parse_error, 120)}) although the request asked "
                           "for JSON", [ctx.ev.quote(i, path, raw[:200].strip() or raw[:200])])
    if not schema:
        return None
    v = validator_for(schema)
    if v is None:
        return None
    err = _error_for(v, schema, raw, doc)  # cached per (schema, answer text): runs repeat answers
    if err is None:
        return None
    where = json_path(err.absolute_path)
    return ctx.finding(KIND, "error", [i], f"{what} violates the requested JSON Schema at {where}: {clip(err.message, 160)}",
                       [_value_evidence(ctx, i, path, raw, err) or ctx.ev.quote(i, path, raw[:200].strip())])


def _value_evidence(ctx: Context, i: int, path: str, raw: str, err):
    """A verbatim quote of the failing value (or its key) in the answer, when one is found."""
    cands = []
    if err.absolute_path:
        key = err.absolute_path[-1]
        value = err.instance
        for rendering in (json.dumps(value, ensure_ascii=False), json.dumps(value, ensure_ascii=False, separators=(",", ":"))):
            if isinstance(key, str):
                cands += [f'"{key}": {rendering}', f'"{key}":{rendering}']
            cands.append(rendering)
        if isinstance(key, str):
            cands.append(f'"{key}"')
    elif isinstance(err.instance, dict) and err.validator == "required":
        cands.append(raw.strip()[:120])
    for c in cands:
        if c and len(c) <= 200 and c in raw:
            e = ctx.ev.quote(i, path, c)
            if e is not None:
                return e
    return None
