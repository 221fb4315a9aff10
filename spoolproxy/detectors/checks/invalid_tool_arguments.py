"""invalid_tool_arguments: tool-call arguments that are not valid JSON, or that violate
the JSON Schema the request declared for the tool (checked with the ``jsonschema``
library; the draft comes from ``$schema``, default 2020-12; Gemini's upper-case OpenAPI
type names are lower-cased first; validators are cached per schema).

Not reported when the output was cut (``finish_reason: length`` or an incomplete stream):
that is ``truncated_output`` / ``stream_incomplete``; nor for a forced or configured output
tool, whose arguments are the run's structured answer (``schema_violation``).  A schema that is itself invalid is
skipped.  Severity: error.

Public failures: langchain-ai/langchain#10433 and #27602 (BR-09, a sentence instead of a
JSON object).
"""

from __future__ import annotations

from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, UnknownType
from referencing.exceptions import Unresolvable

from ..evidence import clip
from ..transcript import is_output_tool
from .base import Context

KIND = "invalid_tool_arguments"
_VALIDATORS: dict[str, Any] = {}


def _lower_types(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {}
        for k, v in schema.items():
            if k == "type" and isinstance(v, str):
                out[k] = v.lower()
            elif k == "nullable":
                continue
            else:
                out[k] = _lower_types(v)
        return out
    if isinstance(schema, list):
        return [_lower_types(x) for x in schema]
    return schema


_BY_ID: dict[int, tuple[dict, Any]] = {}
_RESULTS: dict[tuple[int, str], Any] = {}


def validator_for(schema: dict) -> Any:
    """A cached jsonschema validator for ``schema`` (None when the schema is invalid);
    cached by identity (ToolSpecs are shared across a run's requests) and by content
    (``repr``: a request's response schema is a new dict in every transcript)."""
    hit = _BY_ID.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    key = repr(schema)
    v = _VALIDATORS.get(key, _MISSING)
    if v is _MISSING:
        s = _lower_types(schema)
        cls = jsonschema.validators.validator_for(s, default=jsonschema.Draft202012Validator)
        # check_schema (a metaschema validation) costs ~5 ms per schema; a broken schema
        # instead fails when it is used, and first_error() then skips it
        v = cls(s) if isinstance(s, dict) else None
        if len(_VALIDATORS) >= 4096:
            _VALIDATORS.clear()
            _RESULTS.clear()  # results are keyed by validator identity
        _VALIDATORS[key] = v
    if len(_BY_ID) >= 4096:
        _BY_ID.clear()
        _RESULTS.clear()
    _BY_ID[id(schema)] = (schema, v)
    return v


_MISSING = object()


def _error_for(validator: Any, schema: dict, raw: str, instance: Any) -> Any:
    """``first_error`` cached by (validator, argument text): a validator lives in the caches
    above until they are cleared, and then the results are cleared too."""
    key = (id(validator), raw)
    if key in _RESULTS:
        return _RESULTS[key]
    err = first_error(validator, instance)
    if len(_RESULTS) > 65_536:
        _RESULTS.clear()
    _RESULTS[key] = err
    return err


def first_error(validator: Any, instance: Any) -> Any:
    """The first validation error, or None (also when the schema itself is broken)."""
    try:
        return next(iter(validator.iter_errors(instance)), None)
    except (SchemaError, UnknownType, Unresolvable, TypeError, ValueError, KeyError, AttributeError, RecursionError):
        return None


def check(ctx: Context) -> list:
    out = []
    patterns = tuple(ctx.config.output_tools)
    for s in ctx.steps:
        call = s.llm
        if call is None or not call.tool_calls or not s.ok:
            continue
        if call.finish_reason == "length" or (call.stream.is_stream and not call.stream.complete):
            continue
        schemas = {t.name: t.schema_ for t in call.tools}
        for n, tc in enumerate(call.tool_calls):
            if tc.name == call.response_tool or is_output_tool(tc.name, patterns):
                continue  # the structured answer itself: schema_violation checks it
            path = f"message.tool_calls/{n}/arguments_raw"
            if tc.parse_error is not None:
                out.append(ctx.finding(KIND, "error", [s.index], f"{tc.name} arguments are not valid JSON ({tc.parse_error})",
                                       [ctx.ev.quote(s.index, path, tc.arguments_raw)]))
                continue
            schema = schemas.get(tc.name)
            if not schema:
                continue
            v = validator_for(schema)
            if v is None:
                continue
            err = _error_for(v, schema, tc.arguments_raw, tc.arguments)
            if err is not None:
                where = "/".join(str(p) for p in err.absolute_path) or "(root)"
                out.append(ctx.finding(KIND, "error", [s.index], f"{tc.name} arguments violate the declared schema at {where}: "
                                       f"{clip(err.message, 160)}", [ctx.ev.quote(s.index, path, tc.arguments_raw)]))
    return out
