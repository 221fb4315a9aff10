"""Applying request patches to LLM requests, previewing them, and checking their targets.

* :func:`apply_patches` edits one HTTP request (method, path, decoded body bytes) and
  returns an :class:`Applied`: the new body (the original bytes when nothing changed), the
  new path (a Gemini model patch changes it), which patches changed something and, for the
  others, why not;
* :func:`render_change` is the readable field-level diff of a request before and after;
* :func:`model_requests` lists the LLM requests of a cassette a patch could apply to;
* :func:`check_targets` says, for each patch, whether its target exists in a run (the tool
  is declared, the prompt line is there, the glob matches a tool request ...): one
  :class:`TargetCheck` per patch.  ``spoolproxy fork --dry-run`` shows it, fork and verify
  refuse a patch that applies nowhere, and a patch proposer can validate its output with it.

Pure: no I/O, no proxy.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Sequence
from urllib.parse import urlsplit

from ..cassettes.model import Cassette, Interaction, parse_json
from ..replayer.diff import diff_json
from ..replayer.hostglob import host_label, host_labels, url_names
from .patches import (MessagePatch, ModelParamsPatch, PatchSet, RouteToolPatch, SystemPromptPatch,
                      ToolDescriptionPatch, ToolResultPatch, ToolSchemaPatch, check_schema)
from .wire import Wire, api_of, append_text, content_text, prepend_text, replace_text, substitute_text, wire_for


@dataclass
class Applied:
    """The result of :func:`apply_patches` on one request.

    ``api``: the wire format (None: not a patchable LLM request, nothing applied);
    ``body``: bytes to send; ``path``: URL path (with query) to send; ``changed``: 0-based
    indexes into the patch list of the patches that changed the request; ``notes``: one line
    per request patch that did not change it (or changed it only in part), saying why; ``before``/``after``: the parsed
    bodies (for diffs; None when not JSON).
    """

    api: str | None
    body: bytes
    path: str
    changed: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    before: Any = None
    after: Any = None

    @property
    def modified(self) -> bool:
        return bool(self.changed)


def apply_patches(patches: Sequence[Any] | PatchSet, method: str, path: str, body: bytes) -> Applied:
    """Apply the request patches of ``patches`` (tool patches are ignored here) to one
    request, in order.  ``path`` is the URL path with its query; ``body`` the decoded body.
    A body that is not a JSON object, or a request that is not an LLM API call, is returned
    unchanged (``api`` None).  Never raises for odd bodies."""
    items = list(patches.patches if isinstance(patches, PatchSet) else patches)
    doc = parse_json(body) if method.upper() in ("POST", "PUT") else None
    bare = path.split("?", 1)[0]
    api = api_of(bare, doc) if isinstance(doc, dict) else None
    result = Applied(api=api, body=body, path=path, before=doc)
    if api is None:
        return result
    w = wire_for(api)
    new = copy.deepcopy(doc)
    new_path = path
    for n, p in enumerate(items):
        if p.SCOPE != "request":
            continue
        try:
            changed, note, new_path = _edit(w, p, new, new_path)
        except (TypeError, KeyError, AttributeError, IndexError, ValueError) as exc:
            changed, note = False, f"could not apply to this {api} request: {exc}"
        if changed:
            result.changed.append(n)
        if note:
            result.notes.append(f"patch {n + 1} ({p.kind}): {note}")
    if result.changed:
        result.body = json.dumps(new, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        result.path = new_path
    result.after = new
    return result


def _edit(w: Wire, p: Any, body: dict, path: str) -> tuple[bool, str | None, str]:
    """Apply one patch in place: (changed, note when not applied, path)."""
    if isinstance(p, SystemPromptPatch):
        return (*_system(w, p, body), path)
    if isinstance(p, MessagePatch):
        return (*_message(w, p, body), path)
    if isinstance(p, (ToolDescriptionPatch, ToolSchemaPatch)):
        return (*_tool(w, p, body), path)
    if isinstance(p, ModelParamsPatch):
        return _params(w, p, body, path)
    return False, None, path


def _system(w: Wire, p: SystemPromptPatch, body: dict) -> tuple[bool, str | None]:
    existing = w.system_slot(body, create=False)
    if p.when is not None:
        current = content_text(existing[0][existing[1]]) if existing else ""
        if p.when not in current:
            return False, f"the system prompt does not contain {p.when!r} (when)"
    if p.op == "substitute":
        if existing is None:
            return False, "the request has no system prompt to substitute in"
        if substitute_text(existing, p.old or "", p.text):
            return True, None
        return False, f"the system prompt has no line {p.old!r}"
    slot = existing or w.system_slot(body, create=True)
    if p.op == "replace":
        done = replace_text(slot, p.text, w.make_part)
    elif p.op == "append":
        done = append_text(slot, p.text, p.separator, w.make_part)
    else:
        done = prepend_text(slot, p.text, p.separator, w.make_part)
    return done, None if done else f"the system prompt already {'ends' if p.op == 'append' else 'starts'} " \
                                   f"with this text" if p.op != "replace" else "the system prompt is already this text"


def _message(w: Wire, p: MessagePatch, body: dict) -> tuple[bool, str | None]:
    msgs = w.messages(body)
    if msgs is None:
        return False, f"{w.api} requests have no message list to edit"
    n = len(msgs)
    if p.op == "insert":
        at = p.index if p.index >= 0 else n + 1 + p.index
        if not 0 <= at <= n:
            return False, f"index {p.index} is out of range (this request has {n} messages)"
        if p.contains is not None and not (at < n and p.contains in _msg_text(w, msgs[at])):
            return False, f"message {p.index} does not contain {p.contains!r}"
        msgs.insert(at, w.new_message(p.role or "user", p.text))
        return True, None
    if not -n <= p.index < n:
        return False, f"index {p.index} is out of range (this request has {n} messages)"
    msg = msgs[p.index]
    if not isinstance(msg, dict):
        return False, f"message {p.index} is not an object"
    if p.contains is not None and p.contains not in _msg_text(w, msg):
        return False, f"message {p.index} does not contain {p.contains!r}"
    changed = replace_text(w.message_slot(msg), p.text, w.make_part)
    if p.role and msg.get("role") != p.role:
        w.set_role(msg, p.role)
        changed = True
    return changed, None if changed else f"message {p.index} already says this"


def _msg_text(w: Wire, msg: Any) -> str:
    if not isinstance(msg, dict):
        return ""
    holder, key = w.message_slot(msg)
    return content_text(holder.get(key))


def _tool(w: Wire, p: ToolDescriptionPatch | ToolSchemaPatch, body: dict) -> tuple[bool, str | None]:
    tools = w.tools(body)
    entry = next((t for t in tools if t.name == p.tool), None)
    if entry is None:
        names = ", ".join(t.name for t in tools) or "none"
        return False, f"no tool named {p.tool!r} in this request (declared: {names})"
    h = entry.holder
    if isinstance(p, ToolDescriptionPatch):
        old = h.get(entry.desc_key) or ""
        new = p.text if p.op == "replace" else (old + " " + p.text if old and not old.endswith(p.text) else old or p.text)
        if new == old:
            return False, f"tool {p.tool}'s description already says this"
        h[entry.desc_key] = new
        return True, None
    old_schema = h.get(entry.schema_key)
    new_schema = copy.deepcopy(p.schema_) if p.schema_ is not None else merge_patch(copy.deepcopy(old_schema or {}), p.merge)
    if p.merge is not None:
        check_schema(new_schema, p.tool)
    if new_schema == old_schema:
        return False, f"tool {p.tool}'s schema is already this"
    h[entry.schema_key] = new_schema
    return True, None


def _params(w: Wire, p: ModelParamsPatch, body: dict, path: str) -> tuple[bool, str | None, str]:
    before = (copy.deepcopy(body), path)
    notes = []
    for name, value in p.params().items():
        if name == "model":
            path = w.set_model(body, path, value)
            continue
        keys = w.param_path(name, body)
        if keys is None:
            notes.append(f"{name} is not a parameter of {w.api} requests; left out")
            continue
        holder = body
        for k in keys[:-1]:
            holder = holder.setdefault(k, {})
        holder[keys[-1]] = value
    if p.extra:
        merge_patch(body, p.extra)
    changed = (body, path) != before
    note = "; ".join(notes) if notes else (None if changed else "the request already has these parameters")
    return changed, note, path


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: ``patch`` merged into ``target`` (in place when both are
    objects); returns the result."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = merge_patch(target.get(k), v)
    return target


def render_change(before: Any, after: Any, *, limit: int = 30) -> list[str]:
    """The field-level diff of a request body before and after patching (``$.messages[0].
    content: text differs`` with a line diff), at most ``limit`` changes."""
    lines: list[str] = []
    for change in diff_json(before, after, limit=limit):
        lines += change.render()
    return [ln.replace("only in actual", "added").replace("only in recorded", "removed")
            .replace(", actual ", ", patched ") for ln in lines]


# -- runs -----------------------------------------------------------------------------------
def request_target(it: Interaction) -> tuple[str, str, str]:
    """(method, ``host[:port]``, path with query) of an interaction's request; the host
    lower-case with its port when not the scheme's default, as every display shows it."""
    u = urlsplit(it.request.uri)
    return it.request.method.upper(), host_label(it.request.uri), u.path + (f"?{u.query}" if u.query else "")


def model_requests(cassette: Cassette, start: int = 0) -> list[int]:
    """Indexes (from ``start``) of the interactions that are patchable LLM requests."""
    out = []
    for i, it in enumerate(cassette.interactions[start:], start):
        method, _host, path = request_target(it)
        doc = parse_json(it.request.body) if method in ("POST", "PUT") else None
        if isinstance(doc, dict) and api_of(path.split("?", 1)[0], doc) is not None:
            out.append(i)
    return out


@dataclass
class TargetCheck:
    """Whether one patch finds its target in a run.

    ``applies``: True when it changes at least one LLM request (request patches) or matches
    at least one request (tool patches); ``interactions``: where it applies (0-based);
    ``problem``: why not (one line), else None.
    """

    patch: int
    kind: str
    applies: bool
    interactions: list[int] = field(default_factory=list)
    problem: str | None = None


def check_targets(patches: PatchSet, cassette: Cassette, start: int = 0) -> list[TargetCheck]:
    """For each patch of ``patches``, whether its target exists in ``cassette`` from
    interaction ``start`` on (see :class:`TargetCheck`)."""
    llm = model_requests(cassette, start)
    out = []
    for n, p in enumerate(patches.patches):
        if isinstance(p, ToolResultPatch):
            hits = [i for i, it in enumerate(cassette.interactions) if i >= start and i not in llm
                    and p.matches(it.request.method, url_names(it.request.uri), request_target(it)[2])]
            problem = None if hits else f"matches no tool request of the run from interaction {start} on " \
                                        f"({_tool_requests(cassette, start, llm)})"
            out.append(TargetCheck(n, p.kind, bool(hits), hits, problem))
            continue
        if isinstance(p, RouteToolPatch):
            hits = [i for i, it in enumerate(cassette.interactions) if i >= start and p.matches_host(url_names(it.request.uri))]
            problem = None if hits else (f"host {p.host!r} matches no request of the run from interaction {start} on "
                                         f"(hosts: {host_labels(it.request.uri for it in cassette.interactions[start:])})")
            out.append(TargetCheck(n, p.kind, bool(hits), hits, problem))
            continue
        hits, notes = [], []
        for i in llm:
            it = cassette.interactions[i]
            method, _host, path = request_target(it)
            res = apply_patches([p], method, path, it.request.body)
            if res.changed:
                hits.append(i)
            else:
                notes += [ln.split(": ", 1)[1] for ln in res.notes]
        if not llm:
            problem = f"the run has no LLM request from interaction {start} on"
        elif not hits:
            problem = notes[0] if notes else "changes no LLM request of the run"
        else:
            problem = None
        out.append(TargetCheck(n, p.kind, bool(hits), hits, problem))
    return out


def _tool_requests(cassette: Cassette, start: int, llm: list[int], limit: int = 4) -> str:
    seen = []
    for i, it in enumerate(cassette.interactions[start:], start):
        if i in llm:
            continue
        m, h, p = request_target(it)
        label = f"{m} {h}{p.split('?', 1)[0]}"
        if label not in seen:
            seen.append(label)
    if not seen:
        return "it has none"
    more = f", +{len(seen) - limit} more" if len(seen) > limit else ""
    return "tool requests: " + ", ".join(seen[:limit]) + more


def first_target(patches: PatchSet, cassette: Cassette) -> int | None:
    """The first interaction any patch applies to (the default fork point), or None."""
    hits = [min(c.interactions) for c in check_targets(patches, cassette) if c.interactions]
    return min(hits) if hits else None


def preview(patches: PatchSet, cassette: Cassette, at: int) -> list[str]:
    """What ``fork --dry-run`` prints: where each patch applies from interaction ``at`` on,
    and the field-level diff of the first LLM request the patches change."""
    lines = []
    checks = check_targets(patches, cassette, at)
    for c in checks:
        p = patches.patches[c.patch]
        where = (f"-> interaction{'s' if len(c.interactions) > 1 else ''} {_span(c.interactions)}" if c.applies
                 else f"-> NOT APPLIED: {c.problem}")
        lines.append(f"{c.patch + 1}. {p.describe()}  {where}")
        if isinstance(p, ToolResultPatch) and c.interactions:
            rec = cassette.interactions[c.interactions[0]].response
            recorded = f"{rec.status}, {len(rec.body)} bytes" if rec is not None else "no response"
            lines.append(f"   interaction {c.interactions[0]} recorded {recorded}; the fork serves {p.status}, "
                         f"{len(p.response_body())} bytes")
            lines += ["     " + ln for ln in p.diff(rec.status if rec else None, rec.body if rec else b"")]
        elif p.SCOPE == "request" and c.interactions and len(patches.request_patches) > 1:
            it = cassette.interactions[c.interactions[0]]
            method, _host, path = request_target(it)
            lines += ["     " + ln for ln in p.diff(method, path, it.request.body)]
    for i in model_requests(cassette, at):
        it = cassette.interactions[i]
        method, host, path = request_target(it)
        res = apply_patches(patches, method, path, it.request.body)
        if res.changed:
            lines.append(f"first patched request: interaction {i}, {res.api} {method} {host}{res.path}")
            lines += ["  " + ln for ln in render_change(res.before, res.after)]
            break
    else:
        lines.append("no LLM request is changed from interaction "
                     f"{at} on" + (" (tool patches only)" if patches.request_patches == [] else ""))
    return lines


def _span(items: list[int], limit: int = 8) -> str:
    shown = ", ".join(str(i) for i in items[:limit])
    return shown + (f" (+{len(items) - limit} more)" if len(items) > limit else "")
