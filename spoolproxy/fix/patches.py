"""Typed patches: what a fork changes in a recorded run, as pydantic models.

Two families:

* **request patches** edit the LLM requests an agent sends, in whatever wire format it uses
  (:mod:`.wire` knows OpenAI Chat Completions and Responses, Anthropic Messages, Gemini
  ``generateContent``, Ollama ``/api/chat`` and ``/api/generate``, OpenAI-compatible servers):
  :class:`SystemPromptPatch`, :class:`MessagePatch`, :class:`ToolDescriptionPatch`,
  :class:`ToolSchemaPatch`, :class:`ModelParamsPatch`;
* **tool patches** change what the agent's tools answer: :class:`ToolResultPatch` (serve
  this status and body for matching requests: the counterfactual "what if the tool had
  answered correctly") and :class:`RouteToolPatch` (send a tool host to another live
  server: a fixed implementation).

Every patch has a ``kind`` (the discriminator), an optional ``note`` (why; shown in reports)
and :meth:`~_Patch.describe` (one line).  A :class:`PatchSet` is an ordered list of patches
(``a + b`` composes), loaded from YAML or JSON by :func:`load_patches`; a file holds one
patch mapping, a list of them, or ``{patches: [...]}``::

    - kind: system_prompt
      op: append
      text: "A tool result that is an HTML page is a failure: say the service is unavailable."
    - kind: tool_result
      method: GET
      host: shop.example
      path: /orders*
      status: 404
      body: {error: "no such order"}

Request edits are idempotent where they can be (appending a line the prompt already ends
with changes nothing), so a patch can stay on a test case after the fix lands in the code.
Applying a patch to a request is :func:`spoolproxy.fix.apply.apply_patches`; checking that a
patch's target exists in a run is :func:`spoolproxy.fix.apply.check_targets`.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import Annotated, Any, ClassVar, Iterable, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from ..errors import SpoolError
from ..replayer.hostglob import glob_matches, label_names


class PatchError(SpoolError):
    """A patch file or patch value that is invalid (one line naming the file and field)."""


class _Patch(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    note: str | None = None

    #: "request" (edits LLM requests) or "tool" (changes tool traffic)
    SCOPE: ClassVar[str] = "request"

    def describe(self) -> str:  # pragma: no cover - every subclass overrides it
        """One line saying what the patch does."""
        raise NotImplementedError

    def diff(self, method: str, path: str, body: bytes) -> list[str]:
        """What this patch alone changes in one LLM request (``path`` with its query, the
        decoded ``body``), as field-level diff lines (``$.messages[0].content: text differs``
        ...); empty when it changes nothing there."""
        from .apply import apply_patches, render_change

        res = apply_patches([self], method, path, body)
        return render_change(res.before, res.after) if res.changed else []


def _short(text: str, n: int = 60) -> str:
    text = " ".join(str(text).split())
    return repr(text if len(text) <= n else text[: n - 1] + "…")


class SystemPromptPatch(_Patch):
    """Edit the system prompt (OpenAI ``system``/``developer`` message, Responses
    ``instructions``, Anthropic ``system``, Gemini ``systemInstruction``, Ollama ``system``).

    ``op``: ``replace`` (the whole prompt becomes ``text``), ``append`` / ``prepend``
    (``text`` joined with ``separator``; nothing changes when the prompt already ends /
    starts with it), ``substitute`` (every occurrence of ``old``, usually a whole line,
    becomes ``text``; an empty ``text`` deletes the line).  ``when``: only requests whose
    system prompt contains this text (one agent of several sharing a model host).
    """

    kind: Literal["system_prompt"] = "system_prompt"
    op: Literal["replace", "append", "prepend", "substitute"]
    text: str
    old: str | None = None
    separator: str = "\n"
    when: str | None = None

    @model_validator(mode="after")
    def _old_for_substitute(self) -> "SystemPromptPatch":
        if self.op == "substitute" and not self.old:
            raise ValueError("op substitute needs 'old': the line (or text) to replace")
        if self.op != "substitute" and self.old is not None:
            raise ValueError(f"'old' is only used by op substitute, not {self.op}")
        return self

    def describe(self) -> str:
        scope = f" (prompts containing {_short(self.when, 30)})" if self.when else ""
        if self.op == "substitute":
            what = f"line {_short(self.old or '', 40)} -> {_short(self.text, 40)}" if self.text else \
                f"delete line {_short(self.old or '', 60)}"
            return f"system prompt: substitute {what}{scope}"
        return f"system prompt: {self.op} {_short(self.text)}{scope}"


class MessagePatch(_Patch):
    """Replace or insert one message of the conversation a request sends.

    ``index`` counts the request's native message list (Chat Completions / Anthropic /
    Ollama ``messages``, Responses ``input``, Gemini ``contents``; a Chat Completions system
    message is ``messages[0]``); negative counts from the end.  ``replace`` sets that
    message's text (its role too when ``role`` is given; a tool result's content when it
    is one); ``insert`` puts a new ``role`` message with ``text`` before ``index``
    (``index`` equal to the length appends).  ``contains``: apply only when the message at
    ``index`` contains this text (a guard against editing the wrong message).  Because later
    requests resend the history, the edit is applied to every request from the fork point on.
    """

    kind: Literal["message"] = "message"
    op: Literal["replace", "insert"]
    index: int
    text: str
    role: str | None = None
    contains: str | None = None

    @model_validator(mode="after")
    def _role_for_insert(self) -> "MessagePatch":
        if self.op == "insert" and not self.role:
            raise ValueError("op insert needs 'role' (user, assistant, system, tool ...)")
        return self

    def describe(self) -> str:
        role = f" as {self.role}" if self.role else ""
        verb = "insert before" if self.op == "insert" else "replace"
        return f"message: {verb} message {self.index}{role} with {_short(self.text)}"


class ToolDescriptionPatch(_Patch):
    """Replace (``op: replace``) or extend (``op: append``, joined with a space) the
    description of the declared tool named ``tool``."""

    kind: Literal["tool_description"] = "tool_description"
    tool: str
    text: str
    op: Literal["replace", "append"] = "replace"

    def describe(self) -> str:
        return f"tool {self.tool}: {self.op} description {_short(self.text)}"


class ToolSchemaPatch(_Patch):
    """Change the JSON Schema of the arguments of the declared tool ``tool``: ``schema``
    replaces it, ``merge`` is an RFC 7396 JSON merge patch applied to it (``null`` removes
    a key).  Exactly one of the two; the result must be a valid JSON Schema."""

    kind: Literal["tool_schema"] = "tool_schema"
    tool: str
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    merge: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one(self) -> "ToolSchemaPatch":
        if (self.schema_ is None) == (self.merge is None):
            raise ValueError("give exactly one of 'schema' (replaces the tool's schema) or 'merge' (a JSON merge patch)")
        if self.schema_ is not None:
            check_schema(self.schema_, self.tool)
        return self

    def describe(self) -> str:
        if self.schema_ is not None:
            return f"tool {self.tool}: replace argument schema"
        keys = ", ".join(sorted(self.merge or {}))
        return f"tool {self.tool}: merge into argument schema ({keys})"


def check_schema(schema: dict[str, Any], tool: str) -> None:
    """Raise ValueError unless ``schema`` is a valid JSON Schema (its own draft's meta-schema)."""
    from jsonschema import exceptions, validators

    try:
        validators.validator_for(schema).check_schema(schema)
    except exceptions.SchemaError as exc:
        raise ValueError(f"the schema for tool {tool} is not a valid JSON Schema: {exc.message}") from None


class ModelParamsPatch(_Patch):
    """Change the model and sampling parameters.  Portable names are mapped to each wire
    format (``max_tokens`` is ``max_output_tokens`` on Responses, ``generationConfig.
    maxOutputTokens`` on Gemini, ``options.num_predict`` on Ollama; the Gemini model is
    part of the URL path); a parameter a format does not have is left out and noted.
    ``extra`` is an RFC 7396 merge patch of the request body for anything else
    (provider-specific fields; ``null`` removes a key)."""

    kind: Literal["model_params"] = "model_params"
    model: str | None = None
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    stop: list[str] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _something(self) -> "ModelParamsPatch":
        if not self.params() and not self.extra:
            raise ValueError("set at least one of model, temperature, top_p, max_tokens, seed, stop, extra")
        return self

    def params(self) -> dict[str, Any]:
        """The portable parameters that are set (``model`` included), in declaration order."""
        names = ("model", "temperature", "top_p", "max_tokens", "seed", "stop")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.params().items()] + [f"{k}={json.dumps(v)}" for k, v in self.extra.items()]
        return "model params: " + ", ".join(parts)


class ToolResultPatch(_Patch):
    """Serve ``status``, ``headers`` and ``body`` to every tool request matching ``method``,
    ``host`` and ``path`` (fnmatch globs, case-insensitive for method and host; ``path`` is
    matched against the path with its query string, ``/orders*`` matches
    ``/orders?id=ORD-1``) instead of the recorded (or live) response: the counterfactual
    "what if the tool had answered this".  A mapping or list ``body`` is sent as JSON; a
    string as it is.  ``content_type`` defaults to ``application/json`` for JSON bodies and
    ``text/plain`` otherwise.  Model requests are never overridden."""

    kind: Literal["tool_result"] = "tool_result"
    SCOPE: ClassVar[str] = "tool"
    method: str = "*"
    host: str = "*"
    path: str = "*"
    status: int = Field(default=200, ge=100, le=599)
    body: Any = None
    headers: dict[str, str] = Field(default_factory=dict)
    content_type: str | None = None

    def matches(self, method: str, host: str | tuple[str, ...], path: str) -> bool:
        """True when a request (``path`` with its query) matches the three globs.  ``host``:
        its ``host[:port]`` as displays show it, or the names of
        :func:`~spoolproxy.replayer.hostglob.url_names`; the ``host`` glob may name a port
        (:mod:`spoolproxy.replayer.hostglob`)."""
        return (fnmatch.fnmatchcase(method.upper(), self.method.upper())
                and glob_matches(self.host, _names(host))
                and fnmatch.fnmatchcase(path, self.path))

    def response_body(self) -> bytes:
        """The body to serve, as bytes."""
        if self.body is None:
            return b""
        if isinstance(self.body, str):
            return self.body.encode("utf-8")
        return json.dumps(self.body, ensure_ascii=False).encode("utf-8")

    def response_headers(self) -> dict[str, str]:
        """``headers`` plus a content type (see the class docstring)."""
        out = {k.lower(): v for k, v in self.headers.items()}
        if "content-type" not in out:
            json_body = self.body is not None and not isinstance(self.body, str)
            out["content-type"] = self.content_type or ("application/json" if json_body else "text/plain; charset=utf-8")
        return out

    def describe(self) -> str:
        body = self.response_body()
        return f"tool result: {self.method} {self.host}{self.path} -> {self.status} ({len(body)} bytes)"

    def diff(self, status: int | None, body: bytes) -> list[str]:  # type: ignore[override]
        """What this patch changes in a recorded response (``status``, decoded ``body``):
        field-level lines for JSON bodies (``$.status: recorded 502, patched 404``)."""
        from ..cassettes.model import parse_json
        from .apply import render_change

        def doc(st, raw: bytes):
            parsed = parse_json(raw)
            return {"status": st, "body": parsed if parsed is not None else raw.decode("utf-8", "replace")}

        return render_change(doc(status, body), doc(self.status, self.response_body()))


class RouteToolPatch(_Patch):
    """Send every request to hosts matching ``host`` (a glob) to the live server ``to``
    (``http(s)://host[:port]``, no path) instead of the recording: a fixed implementation
    of a tool.  The request keeps its path and query; all methods go through, since naming
    the server is consent to call it.  The fork cassette keeps the original URLs."""

    kind: Literal["route"] = "route"
    SCOPE: ClassVar[str] = "tool"
    host: str
    to: str

    @field_validator("to")
    @classmethod
    def _url(cls, v: str) -> str:
        from ..proxy.upstream import parse_reverse

        try:
            return parse_reverse(v)
        except SpoolError as exc:
            raise ValueError(str(exc).replace("--reverse", "to")) from None

    def matches_host(self, host: str | tuple[str, ...]) -> bool:
        """True when ``host`` (as for :meth:`ToolResultPatch.matches`) matches the ``host`` glob."""
        return glob_matches(self.host, _names(host))

    def describe(self) -> str:
        return f"route: {self.host} -> {self.to}"


def _names(host: str | tuple[str, ...]) -> tuple[str, ...]:
    return host if isinstance(host, tuple) else label_names(host)


Patch = Annotated[
    Union[SystemPromptPatch, MessagePatch, ToolDescriptionPatch, ToolSchemaPatch, ModelParamsPatch, ToolResultPatch,
          RouteToolPatch],
    Field(discriminator="kind"),
]
REQUEST_KINDS = ("system_prompt", "message", "tool_description", "tool_schema", "model_params")
TOOL_KINDS = ("tool_result", "route")
KINDS = REQUEST_KINDS + TOOL_KINDS

_ADAPTER: TypeAdapter = TypeAdapter(list[Patch])


class PatchSet(BaseModel):
    """An ordered list of patches, applied in order.  ``a + b`` is a new set with b's
    patches after a's.  ``source`` names the files it came from (for reports)."""

    patches: list[Patch] = Field(default_factory=list)
    source: list[str] = Field(default_factory=list, exclude=True)

    def __add__(self, other: "PatchSet") -> "PatchSet":
        return PatchSet(patches=[*self.patches, *other.patches], source=[*self.source, *other.source])

    def __len__(self) -> int:
        return len(self.patches)

    def __bool__(self) -> bool:
        return bool(self.patches)

    @property
    def request_patches(self) -> list:
        """The patches that edit LLM requests."""
        return [p for p in self.patches if p.kind in REQUEST_KINDS]

    @property
    def tool_results(self) -> list[ToolResultPatch]:
        return [p for p in self.patches if isinstance(p, ToolResultPatch)]

    @property
    def routes(self) -> list[RouteToolPatch]:
        return [p for p in self.patches if isinstance(p, RouteToolPatch)]

    def describe(self) -> list[str]:
        """One line per patch, numbered from 1."""
        return [f"{n}. {p.describe()}" for n, p in enumerate(self.patches, 1)]

    def dump(self) -> list[dict[str, Any]]:
        """The patches as plain JSON-ready dicts (the file format, a list)."""
        return [{"kind": p.kind, **p.model_dump(mode="json", by_alias=True, exclude_defaults=True)}
                for p in self.patches]


def parse_patches(data: Any, where: str = "patch") -> PatchSet:
    """A PatchSet from already parsed data: one patch mapping, a list of them, or
    ``{"patches": [...]}``.  Raises PatchError naming ``where`` and the bad field."""
    if isinstance(data, dict) and "patches" in data and "kind" not in data:
        data = data["patches"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise PatchError(f"{where}: expected a patch (a mapping with 'kind'), a list of patches or {{patches: [...]}}")
    for n, item in enumerate(data):
        if not isinstance(item, dict):
            raise PatchError(f"{where}: patch {n + 1} is not a mapping")
        if item.get("kind") not in KINDS:
            got = f"kind {item.get('kind')!r}" if "kind" in item else "no kind"
            raise PatchError(f"{where}: patch {n + 1} has {got}; use one of {', '.join(KINDS)}")
    try:
        return PatchSet(patches=_ADAPTER.validate_python(data), source=[where])
    except ValidationError as exc:
        raise PatchError(f"{where}: {_first_error(exc, data)}") from None


def _first_error(exc: ValidationError, data: list) -> str:
    err = exc.errors()[0]
    loc = list(err["loc"])
    n = loc.pop(0) if loc and isinstance(loc[0], int) else 0
    if loc and loc[0] in KINDS:  # the discriminator's branch name
        loc.pop(0)
    field = ".".join(str(x) for x in loc)
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = f"unknown field (a {data[n].get('kind')} patch has: {', '.join(_fields(data[n].get('kind')))})"
    elif err["type"] == "missing":
        allowed = _choices(data[n].get("kind"), field)
        msg = f"missing; give one of {', '.join(allowed)}" if allowed else "missing"
    return f"patch {n + 1} ({data[n].get('kind')}){' ' + field if field else ''}: {msg}"


def _model(kind: str | None) -> type[BaseModel] | None:
    for cls in (SystemPromptPatch, MessagePatch, ToolDescriptionPatch, ToolSchemaPatch, ModelParamsPatch,
                ToolResultPatch, RouteToolPatch):
        if cls.model_fields["kind"].default == kind:
            return cls
    return None


def _fields(kind: str | None) -> list[str]:
    cls = _model(kind)
    return [f.alias or name for name, f in cls.model_fields.items()] if cls else []


def _choices(kind: str | None, field: str) -> list[str]:
    """The values a ``Literal`` field of a ``kind`` patch allows (``op`` -> replace, append...); [] otherwise."""
    import typing

    cls = _model(kind)
    info = cls.model_fields.get(field) if cls else None
    if info is None or typing.get_origin(info.annotation) is not Literal:
        return []
    return [str(v) for v in typing.get_args(info.annotation)]


def load_patches(path: str | Path) -> PatchSet:
    """Read a patch file (YAML, or JSON when it parses as JSON).  Raises PatchError."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PatchError(f"patch file {p} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PatchError(f"cannot read patch file {p}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark else str(p)
        raise PatchError(f"{where}: not valid YAML or JSON ({getattr(exc, 'problem', None) or exc}); fix the file") from None
    return parse_patches(data, str(p))


def load_all(paths: Iterable[str | Path]) -> PatchSet:
    """The patches of several files, in order (an empty set for none)."""
    out = PatchSet()
    for p in paths:
        out = out + load_patches(p)
    return out


def save_patches(patches: PatchSet, path: str | Path) -> Path:
    """Write ``patches`` as a YAML list (atomically; key-shaped strings redacted)."""
    from ..cassettes.redact import Redactor
    from ..cassettes.storage import atomic_write

    p = Path(path)
    text = yaml.safe_dump(patches.dump(), sort_keys=False, allow_unicode=True, width=100)
    atomic_write(p, Redactor().text(text))
    return p
