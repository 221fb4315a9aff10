"""html_error_page: an HTML document arrived where data was expected and went on.

* a provider (LLM) endpoint answered with HTML (Cloudflare 502/503 page, challenge page,
  gateway error, a login wall in front of a self-hosted model), whatever the status;
* a tool or MCP request that **expected JSON** got an HTML document, at any status
  including 200 (a maintenance page, a login wall or SSO redirect page, a WAF or CDN
  challenge, a soft 404, a proxy's error page), and that page was fed to the model as the
  tool's result.  A request expects JSON when it sent ``Accept: application/json`` (or a
  ``+json`` type) without ``text/html``, sent a JSON body, or went to an API (same host and
  first path segment) whose other responses in the run are JSON;
* any tool's HTML *error* page (4xx/5xx, or error / challenge / maintenance / login markers
  in its ``<title>``, Cloudflare and nginx signatures) fed to the model.

"Fed to the model": the tool result a later request carries is the page (linked by the
transcript), or holds its ``<title>`` text or a stretch of its visible text (tools that
strip tags or cut the page).  A tool that fetches ordinary web pages (no JSON expected, no
error markers) is not flagged.

Severity: ``error``; ``warn`` when the run recovered (a later LLM call succeeded after a
provider page; the answer admits the tool failure or a later call of the tool worked).

Public failures: letta-ai/letta-code#290 and Significant-Gravitas/AutoGPT#944 (BR-04,
Cloudflare HTML as the provider reply), dograh-hq/dograh#715 (BR-03, nginx 503 page given to
the model), crashlab's ``suspicious_tool_result`` (HTML where JSON was expected).
"""

from __future__ import annotations

import re

from ...cassettes.model import parse_json
from ..adapters.common import split_uri
from ..evidence import clip
from .base import Context

KIND = "html_error_page"
_TAGS = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.IGNORECASE | re.DOTALL)
_KINDS = (("maintenance page", r"maintenance|be right back|temporarily unavailable|down for"),
          ("login page", r"sign[ -]?in|log[ -]?in|single sign-on|\bsso\b|authenticat"),
          ("bot challenge", r"just a moment|attention required|captcha|are you (a )?human|checking your browser|"
                            r"security check|request (was )?(blocked|rejected)|access denied"),
          ("not-found page", r"not found|\b404\b|doesn.t exist|does not exist"),
          ("gateway error page", r"bad gateway|gateway time-?out|\b50[234]\b|proxy error|upstream"))


def check(ctx: Context) -> list:
    out = []
    fa = ctx.transcript.final_answer
    fed = {r.source_interaction: r for r in ctx.transcript.tool_results if r.source_interaction is not None}
    pages = [s.index for s in ctx.steps if ctx.is_html(s.index)]
    if not pages:
        return []
    last_ok: dict[str | None, int] = {}
    for r2 in ctx.transcript.tool_results:
        if ctx.tool_failure(r2) is None:
            last_ok[r2.name] = max(last_ok.get(r2.name, -1), r2.interaction)
    for i in pages:
        s = ctx.steps[i]
        title = _title(ctx.body_text(i))
        ev = [ctx.ev.quote(i, "response.headers.content-type", ctx.cassette.interactions[i].response.header("content-type")),
              ctx.ev.quote(i, "response.body", title) or ctx.ev.field(i, "response.body", max_len=120)]
        if s.kind == "llm":
            sev = "warn" if ctx.recovered_later(i) else "error"
            out.append(ctx.finding(KIND, sev, [i], f"provider {s.host} answered {s.status} with an HTML page instead of "
                                   f"{'an SSE stream' if s.llm and s.llm.stream.is_stream else 'JSON'}", ev))
            continue
        r = fed.get(i) or _fed_by_snippet(ctx, i, title)
        if r is None:
            continue
        why = expects_json(ctx, i)
        if why is None and not ctx.is_error_page(i):
            continue  # an ordinary web page a fetch tool read
        recovered = fa is not None and (ctx.acknowledges(fa.text) or last_ok.get(r.name, -1) > r.interaction)
        kind = page_kind(ctx.body_text(i)[:4000], title)
        expected = f" where JSON was expected ({why})" if why else ""
        msg = (f"tool {r.name or s.host} got an HTML {kind} ({s.status}){expected} and it was fed to the model as data"
               + (f": {clip(_inner(title), 80)!r}" if title else ""))
        ev.append(ctx.ev.quote(r.interaction, "request.body", _inner(title)) if title else None)
        out.append(ctx.finding(KIND, "warn" if recovered else "error", [i, r.interaction], msg, ev))
    return out


def expects_json(ctx: Context, i: int) -> str | None:
    """Why request ``i`` expected a JSON answer, or None: its ``Accept`` header, a JSON request
    body, or other JSON responses from the same API (host and first path segment)."""
    it = ctx.cassette.interactions[i]
    accept = (it.request.header("accept") or "").lower()
    if "json" in accept and "text/html" not in accept:
        return f"Accept: {clip(accept, 60)}"
    if ctx.steps[i].kind == "mcp":
        return "an MCP JSON-RPC request"
    body = it.request.body
    if body and ("json" in (it.request.header("content-type") or "").lower() or parse_json(body) is not None):
        return "a JSON request body"
    host, path = split_uri(it.request.uri)
    api = path.strip("/").split("/", 1)[0]
    for s in ctx.steps:
        if s.index == i or s.host != host or s.kind == "llm" or not s.status or s.status >= 400:
            continue
        other = split_uri(s.url)[1].strip("/").split("/", 1)[0]
        if other == api and ("json" in s.content_type or (not s.content_type and ctx.body_json(s.index) is not None)):
            return f"other responses of {host}/{api} are JSON"
    return None


def page_kind(text: str, title: str | None) -> str:
    """What an HTML page is, from its title first, then its text."""
    for where in (title or "", text):
        for name, pattern in _KINDS:
            if re.search(pattern, where, re.IGNORECASE):
                return name
    return "page"


def _fed_by_snippet(ctx: Context, i: int, title: str | None):
    """The tool result, in one of the next two LLM requests after ``i``, that holds the page's
    title text or a stretch of its visible text (a tool that stripped tags or cut the page)."""
    text = ctx.body_text(i)
    needles = []
    inner = _inner(title) if title else ""
    if len(inner) >= 6:
        needles.append(inner)
    visible = " ".join(_TAGS.sub(" ", text[:20000]).split())
    if len(visible) >= 40:
        needles.append(visible[:60])
    if not needles:
        return None
    seen = 0
    for s in ctx.steps[i + 1:]:
        if s.llm is None:
            continue
        seen += 1
        for r in s.new_tool_results:
            content = " ".join(r.content.split())
            if any(n in content for n in needles):
                return r
        if seen == 2:
            break
    return None


def _inner(title: str | None) -> str:
    return re.sub(r"</?title>", "", title or "", flags=re.IGNORECASE).strip()


def _title(text: str) -> str | None:
    lo = text.lower()
    a = lo.find("<title>")
    if a < 0:
        return None
    b = lo.find("</title>", a)
    return text[a:b + 8] if b > a else None
