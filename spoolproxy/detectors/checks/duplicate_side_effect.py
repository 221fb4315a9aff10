"""duplicate_side_effect: an identical non-idempotent request (POST/PUT/PATCH/DELETE,
same URL and body bytes) to a non-LLM, non-MCP host sent 2+ times in one run.  Hosts
that served an LLM call in the cassette and read-only LLM endpoints (embeddings, token
counting, Ollama ``/api/show``) are not side effects.  Requests
that share one ``Idempotency-Key`` header value are deduplicated by the server and not
flagged; a fresh key per attempt does not help.  An attempt that never reached a server
(it failed while connecting: DNS lookup, connection refused, TLS handshake, connect
timeout) performed nothing and is not counted: SDK retries of a telemetry POST whose host
did not resolve are not duplicate side effects.

Severity: error when at least two attempts may have taken effect (2xx without an
``ok: false``/``error`` body, or a 5xx/timeout whose outcome is unknown) and one
succeeded; warn otherwise (every attempt was rejected).

Public failures: stripe/ai#402, crewAIInc/crewAI#5802 (BR-16, a refund sent twice after a
gateway timeout).
"""

from __future__ import annotations

import re

from ...cassettes.model import parse_json
from .base import Context, _json_failure

KIND = "duplicate_side_effect"
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
#: read-only LLM API endpoints that use POST (embeddings, token counting, Ollama model info)
LLM_PATHS = re.compile(r"/(embeddings|count_tokens|countTokens|api/show|api/embed|api/embeddings|batchEmbedContents|embedContent)\b")


def check(ctx: Context) -> list:
    groups: dict[tuple, list[int]] = {}
    llm_hosts = {s.host for s in ctx.steps if s.kind == "llm"}
    for s in ctx.steps:
        if s.kind != "http" or s.method not in UNSAFE or s.host in llm_hosts or LLM_PATHS.search(s.url):
            continue
        it = ctx.cassette.interactions[s.index]
        if _never_sent(it):
            continue  # the request never reached a server: no side effect to duplicate
        req = it.request
        groups.setdefault((req.method, req.uri, req.body), []).append(s.index)
    out = []
    for (method, uri, _), idxs in groups.items():
        if len(idxs) < 2:
            continue
        keys = {ctx.cassette.interactions[i].request.header("idempotency-key") for i in idxs}
        if len(keys) == 1 and None not in keys:
            continue
        effective = [i for i in idxs if _may_have_effect(ctx, i)]
        ok = [i for i in effective if (ctx.steps[i].status or 0) < 400 and ctx.steps[i].status is not None]
        sev = "error" if len(effective) >= 2 and ok else "warn"
        statuses = ", ".join(str(ctx.steps[i].status or ctx.steps[i].transport_error) for i in idxs)
        ev = [ctx.ev.quote(idxs[0], "request.uri", uri), ctx.ev.field(idxs[1], "request.body", max_len=120)]
        ev.append(ctx.ev.field(ok[-1], "response.body", max_len=120) if ok else None)
        out.append(ctx.finding(KIND, sev, idxs, f"identical {method} {uri} sent {len(idxs)} times (statuses {statuses})", ev))
    return out


def _never_sent(it) -> bool:
    """True when the request failed before reaching any server: no response and a failure
    during ``connect`` (DNS lookup, connection refused, TLS handshake, connect timeout).
    A failure after the request went out (``request``/``response``) may have taken effect."""
    return it.response is None and it.error is not None and it.error.during == "connect"


def _may_have_effect(ctx: Context, i: int) -> bool:
    s = ctx.steps[i]
    if s.transport_error is not None or s.status is None or s.status >= 500:
        return True
    if s.status >= 400:
        return False
    r = ctx.cassette.interactions[i].response
    return _json_failure(parse_json(r.body) if r is not None else None) is None
