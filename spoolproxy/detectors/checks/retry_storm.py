"""retry_storm: the same failing request re-sent ``retry_storm_min_retries`` (3) or more
times, or re-sent at all although it cannot succeed (400, 401, 403, 404, 422, or a 429
whose code is ``insufficient_quota``), or re-sent before its ``retry-after`` time.

"The same request" is the same method, URL and body bytes; a sequence ends at the first
success, or at a gap longer than ``retry_window_s`` (120 s, plus any ``retry-after``):
attempts minutes apart are separate test runs re-recorded into one cassette.  Timing comes from spoolproxy start times or, in vcrpy cassettes, the ``Date``
headers (1 s resolution, so one second of slack is allowed).  Ordinary SDK back-off
(two retries of a 502, one retry after ``retry-after``) is not a storm.

Public failures: langchain-ai/langchainjs#1929 and openai/openai-python PR 3507 (BR-05,
``insufficient_quota`` retried with back-off), BR-06 (ignoring ``retry-after``).
"""

from __future__ import annotations

from .base import NON_RETRYABLE_CODES, Context

KIND = "retry_storm"
NON_RETRYABLE_STATUS = {400, 401, 403, 404, 405, 413, 422}


def _failed(ctx: Context, i: int) -> bool:
    s = ctx.steps[i]
    return s.transport_error is not None or (s.status is not None and s.status >= 400)


def check(ctx: Context) -> list:
    groups: dict[tuple, list[int]] = {}
    for s in ctx.steps:
        req = ctx.cassette.interactions[s.index].request
        groups.setdefault((req.method, req.uri, req.body), []).append(s.index)
    out = []
    for idxs in groups.values():
        if len(idxs) < 2:
            continue
        for run in _runs(ctx, idxs):
            f = _storm(ctx, run)
            if f:
                out.append(f)
    return out


def _is_retry(ctx: Context, prev: int, i: int) -> bool:
    """``i`` re-sends ``prev``: ``prev`` failed and ``i`` came within the retry window
    (``retry_window_s``, stretched by a ``retry-after``); attempts further apart are separate
    runs recorded into one cassette."""
    if not _failed(ctx, prev):
        return False
    ta, tb = ctx.date(prev), ctx.date(i)
    if ta is None or tb is None:
        return True
    r = ctx.cassette.interactions[prev].response
    try:
        wait = float(r.header("retry-after") or 0) if r is not None else 0.0
    except ValueError:
        wait = 0.0
    return tb - ta <= ctx.config.retry_window_s + wait


def _runs(ctx: Context, idxs: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    cur: list[int] = []
    for i in idxs:
        if cur and _is_retry(ctx, cur[-1], i):
            cur.append(i)
        else:
            if len(cur) >= 2:
                runs.append(cur)
            cur = [i]
    if len(cur) >= 2:
        runs.append(cur)
    return runs


def _storm(ctx: Context, run: list[int]):
    first = ctx.steps[run[0]]
    retries = len(run) - 1
    code = first.llm.error_code if first.llm is not None else None
    reasons = []
    if retries >= ctx.config.retry_storm_min_retries:
        reasons.append(f"{retries} retries")
    if first.status in NON_RETRYABLE_STATUS or (code in NON_RETRYABLE_CODES):
        reasons.append(f"{first.status}{' ' + code if code else ''} cannot succeed on retry")
    early = None
    for a, b in zip(run, run[1:]):
        r = ctx.cassette.interactions[a].response
        ra = r.header("retry-after") if r is not None else None
        ta, tb = ctx.date(a), ctx.date(b)
        try:
            wait = float(ra) if ra is not None else None
        except ValueError:
            wait = None
        if wait is not None and ta is not None and tb is not None and (tb - ta) + 1 < wait:
            early = (a, ra, tb - ta)
            break
    if early:
        reasons.append(f"retried {early[2]:.0f}s after a retry-after of {early[1]}s")
    if not reasons:
        return None
    ev = [ctx.ev.quote(run[0], "response.status", str(first.status)) if first.status else None]
    if first.llm is not None and first.llm.error_code:
        ev.append(ctx.ev.quote(run[0], "response.body", first.llm.error_code))
    ev.append(ctx.ev.quote(run[-1], "response.status", str(ctx.steps[run[-1]].status)) if ctx.steps[run[-1]].status else None)
    if early:
        ev.append(ctx.ev.quote(early[0], "response.headers.retry-after", early[1]))
    msg = f"{first.method} {first.host} sent {len(run)} times after failures ({'; '.join(reasons)})"
    return ctx.finding(KIND, "error", run, msg, ev)
