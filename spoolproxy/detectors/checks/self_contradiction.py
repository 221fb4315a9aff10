"""self_contradiction: the agent undoes its own side effect on the same resource without
being asked to: it creates then deletes, books then cancels, adds then removes, opens then
closes, subscribes then unsubscribes.

Two forms, each needing the *same resource*:

* **tool calls**: a call whose name's verb makes a lasting side effect (``create``, ``add``,
  ``book``, ``reserve``, ``schedule``, ``place``, ``submit``, ``issue``, ``subscribe``,
  ``publish``, ``invite``, ``grant``, ``register``, ``deploy``, ...: :data:`PAIRS`) and a later
  call whose verb undoes that one (``delete``/``remove``, ``cancel``/``void``, ``unsubscribe``,
  ``unpublish``, ``revoke``, ``deregister``...), where the undo call's arguments carry an id the
  first call used or got back, or the two names share their object and the arguments are the
  same (``book_flight`` / ``cancel_flight``).  Toggles that workflows use on purpose
  (start/stop, open/close, lock/unlock, enable/disable) and temporary files are not pairs;
* **HTTP**: a successful ``POST``/``PUT`` that created a resource (the id in its response body
  or ``Location`` header, or the last path segment of a ``PUT``) and a later ``DELETE`` of that
  resource's URL, or a ``POST``/``PATCH`` to ``.../<id>/cancel`` (``/void``, ``/revoke``...) or
  setting its ``status`` to cancelled.

Not reported when a user message of the run asks for the undo (``cancel``, ``delete``,
``remove``, ``undo``, ``revert``, ``roll back``...), or the first step failed.  Severity: error;
warn when the final answer tells the user about the undo, or the undo itself failed.

Public failures: faultspool's ``self_contradiction`` (create->delete, book->cancel on the
same arguments); Significant-Gravitas/AutoGPT#3672 and crewAIInc/crewAI#1386 (agents that
create then delete their own work while looping).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from ...cassettes.model import parse_json
from ..adapters.common import split_uri
from .base import Context, _json_failure

KIND = "self_contradiction"
_GONE = {"delete", "remove", "destroy", "drop", "erase", "purge", "discard", "undo", "rollback", "revert"}
#: verbs that make a lasting side effect -> the verbs that undo it.  Toggles a workflow uses on
#: purpose (start/stop, open/close, lock/unlock, enable/disable) and temporary files
#: (write/delete) are deliberately not pairs.
_UNMAKE = {*_GONE, "cancel", "void", "revoke", "withdraw", "retract"}
PAIRS: dict[str, set[str]] = {
    "create": _UNMAKE, "add": _UNMAKE, "insert": _GONE, "upload": _GONE, "post": _UNMAKE, "new": _UNMAKE,
    "book": {"cancel", "void", "unbook", "release", *_GONE}, "reserve": {"cancel", "release", "void", *_GONE},
    "schedule": {"cancel", "unschedule", *_GONE}, "place": {"cancel", "void", "withdraw", *_GONE},
    "submit": {"cancel", "withdraw", "retract", *_GONE}, "order": {"cancel", "void", *_GONE},
    "issue": {"void", "cancel", "revoke", *_GONE}, "refund": {"cancel", "void", "reverse"},
    "subscribe": {"unsubscribe", "cancel"}, "publish": {"unpublish", "retract", *_GONE},
    "invite": {"uninvite", "revoke", "cancel"}, "grant": {"revoke"}, "register": {"deregister", "unregister", *_GONE},
    "follow": {"unfollow"}, "assign": {"unassign"}, "provision": {"deprovision", "terminate", *_GONE},
    "deploy": {"undeploy", "rollback", "revert", *_GONE}, "launch": {"terminate", *_GONE}, "hold": {"release", "cancel"},
    "send": {"recall", "unsend", "retract"}, "approve": {"revoke", "unapprove"}, "merge": {"revert"},
}
MAKE = set(PAIRS)
UNDO = set().union(*PAIRS.values())
#: a user message asking for an undo (then the undo is no contradiction)
ASKED = re.compile(r"\b(cancel\w*|delet\w*|remov\w*|undo|revert\w*|roll ?back|unsubscrib\w*|clos(e|ing)|disabl\w*|"
                   r"void|revok\w*|withdraw\w*|retract\w*|releas\w*|terminat\w*|destroy\w*|clean ?up|tear ?down|"
                   r"drop\w*|purg\w*|eras\w*|discard\w*|unbook|deactivat\w*|stop\w*)\b", re.IGNORECASE)
TOLD = re.compile(r"\b(cancel+ed|cancel+ing|deleted|removed|undid|undone|reverted|rolled back|unsubscribed|closed|"
                  r"disabled|voided|revoked|withdrew|released|terminated|destroyed|dropped|discarded)\b", re.IGNORECASE)
_UNDO_PATH = re.compile(r"/(cancel|void|revoke|close|withdraw|release|deactivate|disable|unsubscribe|undo)/?$", re.IGNORECASE)
_ID_KEYS = re.compile(r"(^|_)(id|uuid|ref|reference|number|code|key|slug|handle)$|Id$", re.IGNORECASE)


def check(ctx: Context) -> list:
    tool_pairs = list(_tool_pairs(ctx))
    # the HTTP requests that carried a paired tool call are the same story: told once
    carried = {i for *_, sources in tool_pairs for i in sources}
    pairs = [p[:4] for p in tool_pairs] + [p for p in _http_pairs(ctx) if p[0][0] not in carried]
    if not pairs or _asked(ctx):
        return []
    fa = ctx.transcript.final_answer
    told = fa is not None and bool(TOLD.search(fa.text))
    out = []
    for first, undo, resource, ev in pairs:
        failed_undo = _failed(ctx, undo)
        sev = "warn" if told or failed_undo else "error"
        note = "; the final answer tells the user" if told else "; the undo failed" if failed_undo else ""
        out.append(ctx.finding(KIND, sev, [first[0], undo[0]],
                               f"the agent undid its own {first[1]} with {undo[1]} on the same resource ({resource}) "
                               f"without being asked to{note}", ev))
    return out


# -- tool calls -----------------------------------------------------------------------------
def _words(name: str) -> list[str]:
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", name.lower()) if w]


_READ = {"get", "list", "fetch", "read", "search", "find", "lookup", "look", "check", "show", "view", "describe",
         "query", "count", "status", "info", "details", "validate", "preview", "estimate", "quote", "track"}


@functools.lru_cache(maxsize=4096)
def _verb_object(name: str) -> tuple[str | None, frozenset[str]]:
    """(verb, object word stems) of a tool name (``book_flight`` -> (book, {flight})); None
    for reads (``get_order``)."""
    words = _words(name)
    if any(w in _READ for w in words):
        return None, frozenset()
    for n, w in enumerate(words):
        if w in MAKE or w in UNDO:
            rest = words[:n] + words[n + 1:]
            return w, frozenset(_stem(x) for x in rest if x not in ("a", "an", "the", "my", "new"))
    return None, frozenset()


def _stem(w: str) -> str:
    for suf in ("ings", "ing", "ions", "ion", "ments", "ment", "s"):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: -len(suf)]
    return w


def _ids(value: Any, out: set[str], key: str = "") -> set[str]:
    """Id-looking scalar values in a JSON value: values of id-like keys, and strings that look
    like ids (letters and digits with a separator, or 4+ digits)."""
    if isinstance(value, dict):
        for k, v in value.items():
            _ids(v, out, str(k))
    elif isinstance(value, list):
        for v in value[:50]:
            _ids(v, out, key)
    elif isinstance(value, (str, int)) and not isinstance(value, bool):
        s = str(value).strip()
        if 2 <= len(s) <= 80 and (_ID_KEYS.search(key) or re.fullmatch(r"(?=.*\d)[A-Za-z0-9]+([-_:.][A-Za-z0-9]+)+|\d{4,}", s)):
            out.add(s)
    return out


def _tool_pairs(ctx: Context):
    results = None
    makes, undos = [], []  # (interaction, call, verb, object words, ids used, result)
    for s in ctx.steps:
        if s.llm is None:
            continue
        for tc in s.llm.tool_calls:
            verb, obj = _verb_object(tc.name)
            if verb is None:
                continue
            if results is None:
                results = {(r.call_interaction, r.call_id): r for r in ctx.transcript.tool_results if r.call_id}
            row = (s.index, tc, verb, obj, _ids(tc.arguments, set()), results.get((s.index, tc.id)))
            (makes if verb in MAKE else undos).append(row)
    if not makes or not undos:
        return
    by_id: dict[str, list] = {}
    by_args: dict[str, list] = {}
    for row in undos:
        for v in row[4]:
            by_id.setdefault(v, []).append(row)
        by_args.setdefault(json.dumps(row[1].arguments, sort_keys=True, default=str), []).append(row)
    for i, tc, verb, obj, used, res in makes:
        if res is not None and ctx.tool_failure(res) is not None:
            continue
        got = _ids(res.content_json if res.content_json is not None else parse_json(res.content.encode()), set()) if res else set()
        cands = {id(r): r for v in (got | used) for r in by_id.get(v, [])}
        cands.update({id(r): r for r in by_args.get(json.dumps(tc.arguments, sort_keys=True, default=str), [])})
        for j, tc2, verb2, obj2, used2, res2 in sorted(cands.values(), key=lambda r: r[0]):
            if verb2 not in PAIRS[verb] or j <= i:
                continue
            same_thing = bool((obj | {_stem(verb)}) & obj2)  # book_flight / cancel_booking
            # an id the first call brought into being, or (same kind of thing) one it was given
            shared = (used2 & (got - used)) | ((used2 & used) if same_thing else set())
            if not shared and not (same_thing and tc.arguments and tc2.arguments == tc.arguments):
                continue
            resource = ", ".join(sorted(shared)[:2]) if shared else json.dumps(tc.arguments)[:60]
            ev = [ctx.ev.quote(i, f"message.tool_calls/{_pos(ctx, i, tc)}/name", tc.name),
                  ctx.ev.quote(j, f"message.tool_calls/{_pos(ctx, j, tc2)}/name", tc2.name)]
            sources = {x.source_interaction for x in (res, res2) if x is not None and x.source_interaction is not None}
            yield (i, f"{tc.name} call"), (j, f"{tc2.name}", res2), resource, ev, sources
            break


def _pos(ctx: Context, i: int, tc) -> int:
    for n, x in enumerate(ctx.steps[i].llm.tool_calls):
        if x is tc:
            return n
    return 0


# -- HTTP -----------------------------------------------------------------------------------
def _http_pairs(ctx: Context):
    llm_hosts = {s.host for s in ctx.steps if s.kind == "llm"}
    steps = [s for s in ctx.steps if s.kind == "http" and s.status is not None and s.host not in llm_hosts]
    undo = {s.index: t for s in steps for t in [_undo_target(ctx, s)] if t is not None}
    if not undo:
        return  # nothing undone: no need to look at what was made
    made: dict[str, int] = {}  # resource URL (no query) -> interaction that made it
    for s in steps:
        it = ctx.cassette.interactions[s.index]
        url = it.request.uri.split("?", 1)[0].rstrip("/")
        target = undo.get(s.index)
        if target is None:
            if s.method in ("POST", "PUT") and 200 <= s.status < 300 and _json_failure(ctx.body_json(s.index)) is None:
                for res_url in _made_urls(ctx, s.index, url):
                    made.setdefault(res_url, s.index)
            continue
        if target not in made:
            continue
        i = made.pop(target)
        ev = [ctx.ev.quote(i, "request.method", ctx.steps[i].method), ctx.ev.quote(s.index, "request.uri", it.request.uri)]
        yield (i, f"{ctx.steps[i].method} {_short(ctx.steps[i].url)}"), (s.index, f"{s.method} {_short(it.request.uri)}", None), \
            _short(target), ev


_CANCEL_BODY = re.compile(rb"cancel|delet|void|revok|clos", re.IGNORECASE)


def _undo_target(ctx: Context, s) -> str | None:
    """The resource URL an HTTP request undoes (DELETE it, POST/PATCH ``.../cancel``, PATCH/PUT
    ``status: cancelled``), else None."""
    url = s.url.split("?", 1)[0].rstrip("/")
    if s.method == "DELETE":
        return url
    if s.method in ("POST", "PATCH", "PUT"):
        m = _UNDO_PATH.search(url)
        if m:
            return url[: m.start()]
        body = ctx.cassette.interactions[s.index].request.body
        if s.method in ("PATCH", "PUT") and _CANCEL_BODY.search(body[:4096]) and _cancels(body):
            return url
    return None


def _made_urls(ctx: Context, i: int, url: str) -> list[str]:
    """URLs of the resource a successful POST/PUT made: ``Location``, ``url``/``href`` in the
    body, ``<url>/<id>`` for the id in the body; a PUT makes ``url`` itself."""
    it = ctx.cassette.interactions[i]
    out = [url] if it.request.method == "PUT" else []
    loc = it.response.header("location") if it.response is not None else None
    if loc:
        host, path = split_uri(url)
        out.append(loc.rstrip("/") if "://" in loc else url.split("://", 1)[0] + "://" + host + loc.rstrip("/"))
    doc = ctx.body_json(i)
    # the resource's fields: at the top, or one level down ({"data": {...}}, {"subscription": {...}})
    layers = [doc] + [v for v in doc.values() if isinstance(v, dict)] if isinstance(doc, dict) else []
    for inner in layers:
        for key in ("url", "href", "self"):
            if isinstance(inner.get(key), str) and "://" in inner[key]:
                out.append(inner[key].rstrip("/"))
        for key, v in inner.items():
            if isinstance(v, (str, int)) and not isinstance(v, bool) and _ID_KEYS.search(str(key)):
                out.append(f"{url}/{v}")
    return out


def _cancels(body: bytes) -> bool:
    doc = parse_json(body)
    if not isinstance(doc, dict):
        return False
    v = doc.get("status") or doc.get("state")
    return isinstance(v, str) and v.lower() in ("cancelled", "canceled", "deleted", "void", "voided", "revoked", "closed")


def _short(url: str) -> str:
    host, path = split_uri(url)
    return f"{host}{path}"


# -- shared ---------------------------------------------------------------------------------
def _asked(ctx: Context) -> bool:
    """True when a user message of the run asks for an undo."""
    seen: set[int] = set()
    for s in ctx.steps:
        if s.llm is None:
            continue
        for m in s.llm.messages:
            if m.role == "user" and id(m) not in seen:
                seen.add(id(m))
                if ASKED.search(m.text):
                    return True
    return False


def _failed(ctx: Context, undo) -> bool:
    j, _, res = undo
    if res is not None:
        return ctx.tool_failure(res) is not None
    s = ctx.steps[j]
    return s.status is None or s.status >= 400
