"""html_error_page: an HTML document arrived where JSON/SSE/text data was expected.

* a provider (LLM) endpoint answered with HTML (Cloudflare 502/503 page, challenge page,
  gateway error), whatever the status;
* an HTTP/MCP tool's HTML error page (4xx/5xx status, or an error/challenge page marker in
  a 200 body) was fed back to the model as a tool result.

A tool that fetches ordinary web pages (200, no error markers) is not flagged.
Severity: ``error``; ``warn`` when the run recovered (a later LLM call succeeded after a
provider page; the answer admits the tool failure or a later call of the tool worked).

Public failures: letta-ai/letta-code#290 and Significant-Gravitas/AutoGPT#944 (BR-04,
Cloudflare HTML as the provider reply), dograh-hq/dograh#715 (BR-03, nginx 503 page
given to the model).
"""

from __future__ import annotations

from .base import Context

KIND = "html_error_page"


def check(ctx: Context) -> list:
    out = []
    fa = ctx.transcript.final_answer
    fed = {r.source_interaction: r for r in ctx.transcript.tool_results if r.source_interaction is not None}
    pages = [i for i in fed if ctx.is_html(i)]
    last_ok: dict[str | None, int] = {}
    if pages:
        for r2 in ctx.transcript.tool_results:
            if ctx.tool_failure(r2) is None:
                last_ok[r2.name] = max(last_ok.get(r2.name, -1), r2.interaction)
    for s in ctx.steps:
        i = s.index
        if not ctx.is_html(i):
            continue
        ev = [ctx.ev.quote(i, "response.headers.content-type", ctx.cassette.interactions[i].response.header("content-type")),
              ctx.ev.quote(i, "response.body", _title(ctx.body_text(i))) or ctx.ev.field(i, "response.body", max_len=120)]
        if s.kind == "llm":
            sev = "warn" if ctx.recovered_later(i) else "error"
            out.append(ctx.finding(KIND, sev, [i], f"provider {s.host} answered {s.status} with an HTML page instead of "
                                   f"{'an SSE stream' if s.llm and s.llm.stream.is_stream else 'JSON'}", ev))
        elif i in fed and ctx.is_error_page(i):
            r = fed[i]
            recovered = fa is not None and (ctx.acknowledges(fa.text) or last_ok.get(r.name, -1) > r.interaction)
            out.append(ctx.finding(KIND, "warn" if recovered else "error", [i, r.interaction],
                                   f"tool {r.name or s.host} got an HTML error page ({s.status}) and it was fed to the model as data", ev))
    return out


def _title(text: str) -> str | None:
    lo = text.lower()
    a = lo.find("<title>")
    if a < 0:
        return None
    b = lo.find("</title>", a)
    return text[a:b + 8] if b > a else None
