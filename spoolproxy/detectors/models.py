"""Typed transcript and report models (pydantic).

A :class:`Transcript` is a cassette read as an agent run: one :class:`Step` per interaction
(in request-start order, ``index`` is the 0-based interaction index), each an LLM
:class:`ModelCall`, an :class:`McpCall` or a plain :class:`HttpCall`.  A :class:`Report` is
what :func:`spoolproxy.detectors.analyze` returns: the cassette's verdict and its findings,
each with verbatim :class:`Evidence`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Severity = Literal["info", "warn", "error", "critical"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warn": 1, "error": 2, "critical": 3}

#: normalised finish reasons; the provider's own value is kept in ``finish_reason_raw``
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "refusal", "pause", "error", "other"]


class ToolSpec(BaseModel):
    """A tool the request declared: ``name`` and its JSON Schema for the arguments (None if none given)."""

    name: str
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    model_config = {"populate_by_name": True}


class ToolCall(BaseModel):
    """A tool/function call the model asked for.

    ``arguments_raw`` is the argument text exactly as the provider sent it (for streams,
    the concatenated deltas); ``arguments`` the parsed JSON (None when it does not parse,
    then ``parse_error`` says why).  ``id`` is the provider's call id (Gemini, which has
    none, gets ``<name>#<n>`` where n counts calls in the response).
    """

    id: str | None = None
    name: str
    arguments_raw: str = ""
    arguments: Any = None
    parse_error: str | None = None


class Message(BaseModel):
    """One message of the conversation a request sends (the model's input).

    ``role``: system | user | assistant | tool.  ``tool_call_id`` / ``is_error`` are set on
    tool results; ``tool_calls`` on assistant turns that asked for tools.
    """

    role: str
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)  # string arguments are not parsed here
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    content_json: Any = None


class Usage(BaseModel):
    """Token counts as the provider reported them (None when not reported: a stream
    without its usage event is "tokens unknown", never 0).

    ``input_tokens`` include prompt-cache reads and writes (OpenAI's convention; Anthropic's
    separate counts are added in), which ``cache_read_tokens`` / ``cache_write_tokens``
    break out when the provider reports them.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None

    @property
    def reported(self) -> bool:
        """True when the provider reported any token count."""
        return self.input_tokens is not None or self.output_tokens is not None or self.total_tokens is not None

    @property
    def total(self) -> int:
        """The total as reported, else input + output (0 when nothing was reported: check
        :attr:`reported` before showing it)."""
        if self.total_tokens is not None:
            return self.total_tokens
        return (self.input_tokens or 0) + (self.output_tokens or 0)


class StreamInfo(BaseModel):
    """How the response arrived: ``is_stream``; ``terminal_seen`` when the provider's
    terminal event arrived (``[DONE]``, ``message_stop``, ``response.completed``, Gemini
    ``finishReason`` over SSE or the closing ``]`` of the JSON array, Ollama ``done: true``,
    Cohere ``message-end``, Bedrock ``messageStop``); ``finish_seen`` when a finish/stop
    reason arrived; ``complete`` when the stream's own content is whole (its terminal event,
    and for OpenAI Chat also a finish reason).  Completeness is decided from the content
    alone: a connection that broke, or a client that hung up, after the terminal event does
    not make a stream incomplete."""

    is_stream: bool = False
    format: str | None = None  # sse | ndjson | json-array | aws-eventstream
    events: int = 0
    terminal_seen: bool = False
    finish_seen: bool = False
    complete: bool = True


class ModelCall(BaseModel):
    """One LLM request and the (reassembled) message that came back.

    ``provider`` is the wire family guessed from path and body (openai, azure-openai,
    anthropic, gemini, ollama, cohere, bedrock, or the host for OpenAI-compatible servers);
    ``api`` the wire format (openai-chat, openai-responses, anthropic-messages,
    gemini-generateContent, ollama-chat, ollama-generate, cohere-chat, bedrock-converse).
    ``error`` holds the provider's error message for non-2xx or in-stream errors.
    ``structured_output`` is True when JSON output was asked for (a schema or a JSON mode).
    ``cost_usd`` is this call's cost (None: unknown model or no usage reported) and
    ``price_source`` where its price came from (``user``, ``local``, ``table <date>``,
    ``litellm``; see :mod:`.pricing`).
    """

    provider: str
    api: str
    model: str | None = None
    messages: list[Message] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int | None = None
    structured_output: bool = False
    #: the JSON Schema the request asked its answer to follow (OpenAI ``response_format``
    #: json_schema, Responses ``text.format``, Gemini ``responseSchema``/``responseJsonSchema``,
    #: Anthropic ``output_format``, Ollama ``format``, Cohere ``response_format``), else None
    response_schema: dict[str, Any] | None = None
    #: a tool the request forced (Anthropic ``tool_choice: {type: tool}``, OpenAI/Responses
    #: ``tool_choice`` naming a function, Gemini ``ANY`` with one allowed function): its call is
    #: the structured answer, validated against that tool's schema
    response_tool: str | None = None
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    refusal: str | None = None
    finish_reason: FinishReason | None = None
    finish_reason_raw: str | None = None
    usage: Usage = Field(default_factory=Usage)
    stream: StreamInfo = Field(default_factory=StreamInfo)
    error: str | None = None
    error_code: str | None = None
    cost_usd: float | None = None
    price_source: str | None = None


class McpCall(BaseModel):
    """An MCP JSON-RPC message over streamable HTTP (``initialize``, ``tools/list``,
    ``tools/call``, notifications).  ``is_error`` is ``result.isError`` or a JSON-RPC error."""

    method: str | None = None
    rpc_id: Any = None
    tool_name: str | None = None
    arguments: Any = None
    result_text: str = ""
    is_error: bool = False
    error: str | None = None
    tools: list[str] = Field(default_factory=list)


class HttpCall(BaseModel):
    """Any other interaction: method, URL, status (None on transport failure), content type."""

    method: str
    url: str
    host: str
    status: int | None = None
    content_type: str = ""
    body_size: int = 0


class ToolResult(BaseModel):
    """A tool result a request fed back to the model, linked to the call that asked for it.

    ``interaction`` is the LLM request that first carried it; ``call_interaction`` the
    response that made the call (None when no call matches); ``source_interaction`` the HTTP
    or MCP interaction whose response body is this result (None for local tools).
    """

    call_id: str | None = None
    name: str | None = None
    content: str = ""
    content_json: Any = None
    is_error: bool = False
    interaction: int
    call_interaction: int | None = None
    source_interaction: int | None = None


class Step(BaseModel):
    """One interaction of the run.  ``kind``: llm | mcp | http."""

    index: int
    kind: Literal["llm", "mcp", "http"]
    method: str
    url: str
    host: str
    status: int | None = None
    content_type: str = ""
    transport_error: str | None = None  # an upstream/transport failure (kind: message); never a client hang-up
    client_closed: bool = False  # the client hung up after the response headers (see adapters.common.client_closed)
    duration_ms: float | None = None
    date: str | None = None
    llm: ModelCall | None = None
    mcp: McpCall | None = None
    http: HttpCall | None = None
    new_tool_results: list[ToolResult] = Field(default_factory=list)
    tool_call_ref: tuple[int, str] | None = None  # (interaction, call id) this HTTP/MCP step served
    conversation: int | None = None  # LLM steps: which conversation thread (0, 1, ...) the request continues

    @property
    def ok(self) -> bool:
        """A usable response: a status below 400 and no transport failure, or a failure
        that came only after an LLM stream's content was complete."""
        if self.status is None or self.status >= 400:
            return False
        return self.transport_error is None or self.delivered_before_failure

    @property
    def delivered_before_failure(self) -> bool:
        """True when a transport failure hit an LLM stream whose content was already whole."""
        return (self.transport_error is not None and self.llm is not None and self.llm.stream.is_stream
                and self.llm.stream.complete)


class FinalAnswer(BaseModel):
    """The run's final assistant answer: the interaction and its text."""

    interaction: int
    text: str


class Transcript(BaseModel):
    """The whole run: steps, tool results linked to their calls, final answer, totals.

    Token totals add what the providers reported; ``calls_without_usage`` counts the answered
    LLM calls that reported none (their tokens are unknown, not 0).  ``cost_usd`` (USD) is
    None when any model call that reported tokens has no known price (its model is in
    ``unpriced_models``) or any answered call reported no usage: never a guess, never a
    silent undercount; ``price_sources`` lists where the prices came from (:mod:`.pricing`).
    """

    cassette: str | None = None
    steps: list[Step] = Field(default_factory=list)
    tool_results: list[ToolResult] = Field(default_factory=list)
    final_answer: FinalAnswer | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    calls_without_usage: int = 0  # answered LLM calls that reported no usage: the totals leave them out
    cost_usd: float | None = None
    price_table_date: str | None = None
    unpriced_models: list[str] = Field(default_factory=list)
    price_sources: list[str] = Field(default_factory=list)

    def llm_steps(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "llm"]


class Evidence(BaseModel):
    """A verbatim quote: ``quote`` is a substring of the field ``path`` of interaction
    ``interaction``, or of the cassette's metadata when ``interaction`` is None (the run
    itself: ``meta.exit_code``, ``meta.agent_end.stderr_tail``); see :mod:`.evidence`."""

    interaction: int | None
    path: str
    quote: str


class Finding(BaseModel):
    """One detected problem: ``kind`` (one of :data:`checks.KINDS`), ``severity``,
    the 0-based ``interactions`` it concerns, a one-line ``message`` and the evidence."""

    kind: str
    severity: Severity
    interactions: list[int]
    message: str
    evidence: list[Evidence] = Field(default_factory=list)


class CheckResult(BaseModel):
    """What one user check said about a run (see :mod:`spoolproxy.checks`).

    ``status``: ``pass``; ``fail`` (exit status non-zero, a Python check returned False or
    a message, or raised AssertionError); ``crashed`` (killed by a signal, could not start,
    or a Python check raised another exception); ``timeout`` (still running after its
    timeout, killed).  Anything but ``pass`` is a ``check_failed`` finding at ``severity``.
    ``message``: the check's reason (its output, trimmed); ``interactions``: the ones it
    named (a command may print ``{"reason": ..., "interactions": [...]}``); ``duration_ms``:
    wall time.
    """

    name: str
    status: Literal["pass", "fail", "crashed", "timeout"]
    severity: Severity = "error"
    message: str = ""
    interactions: list[int] = Field(default_factory=list)
    duration_ms: float = 0.0
    exit_code: int | None = None


class RunCost(BaseModel):
    """A run's cost: ``usd`` (None when a priced call is unknown), ``calls`` model calls that
    reported tokens, ``unpriced_models`` (models no price source knows), ``sources`` (where
    the prices came from) and the built-in table's date ``prices_as_of``."""

    usd: float | None = None
    calls: int = 0
    unpriced_models: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    prices_as_of: str | None = None


class Report(BaseModel):
    """A cassette's verdict (``fail`` when any finding is error or critical) and findings,
    plus the run's ``cost`` and the results of the user ``checks`` that applied."""

    cassette: str | None = None
    verdict: Literal["pass", "fail"] = "pass"
    findings: list[Finding] = Field(default_factory=list)
    cost: RunCost | None = None
    checks: list[CheckResult] = Field(default_factory=list)
