"""Checking fix proposals: a model's patches are kept only if they can be tested and are fixes.

:func:`validate` takes the proposals of a fix answer (``{"patch", "rationale",
"expected_effect"}`` each) and keeps one only if

1. **it parses** into a patch of ``fork`` (:func:`spoolproxy.fix.patches.parse_patches`)
   of an allowed kind (:data:`ALLOWED`; ``route`` needs a server nobody named, ``message``
   edits the user's own words, so neither is proposed);
2. **its target exists in the run**: a dry run against the recorded requests
   (:func:`spoolproxy.fix.apply.check_targets`) changes an LLM request (the tool is
   declared, the prompt line is there) or, for a ``tool_result``, matches a tool request;
3. **it is small**: at most :data:`MAX_TEXT` characters of text in at most
   :data:`MAX_LINES` lines, at most :data:`MAX_PATCH` characters of JSON in all, no
   ``replace`` of the whole system prompt, no whole replacement tool schema;
4. **it does not copy this run's data** (:func:`run_literals`): ids, numbers of 2+
   digits, e-mail addresses and names from the task, the tool calls' arguments and the
   tool results, except those the system prompt or tool declarations already hold and the
   HTTP statuses the run saw.  ``tool_result`` patches are counterfactuals: they are kept
   (``test_only``) without this check, since they describe this run's tool on purpose;
5. it says something: a text of at least 3 words that is not a placeholder copied from
   the prompt (``...``, ``<one general rule>``), and a rationale of at least 3 words;
6. it is not a duplicate of a kept one.

At most :data:`MAX_KEPT` are kept, ranked in the model's order.  Pure.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..cassettes.model import Cassette
from ..detectors.models import Transcript
from ..errors import SpoolError
from ..fix.apply import check_targets
from ..fix.patches import PatchSet, parse_patches
from .models import Proposal

ALLOWED = ("system_prompt", "tool_description", "tool_schema", "model_params", "tool_result")
MAX_TEXT = 400
MAX_LINES = 4
MAX_PATCH = 900
MAX_KEPT = 3
_FIELDS = {
    "system_prompt": ("op", "text", "old", "when"),
    "tool_description": ("tool", "text", "op"),
    "tool_schema": ("tool", "merge"),
    "model_params": ("model", "temperature", "top_p", "max_tokens", "seed", "stop"),
    "tool_result": ("method", "host", "path", "status", "body", "headers", "content_type"),
}
_ID = re.compile(r"\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+\b|\b\d{2,}(?:[.,]\d+)?\b")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")


def _clean(patch: Any) -> Any:
    """A flat patch as the fix schema allows it, reduced to the fields of its kind (empty
    strings, nulls and fields of other kinds dropped)."""
    if not isinstance(patch, dict):
        return patch
    kind = patch.get("kind")
    keep = _FIELDS.get(kind) if isinstance(kind, str) else None
    out: dict[str, Any] = {"kind": kind}
    for k, v in patch.items():
        if k == "kind" or v is None or v == "" or v == {} or v == []:
            continue
        if keep is not None and k not in keep:
            continue
        out[k] = v
    return out


def _is_data(s: str) -> bool:
    """Does a JSON string value look like a record's data (a name, an id, an address)?"""
    s = s.strip()
    if not 3 <= len(s) <= 80:
        return False
    if any(c.isdigit() for c in s) or "@" in s:
        return True
    words = s.split()
    if sum(1 for w in words if w[:1].isupper()) >= 2:
        return True
    return any(c.isupper() for c in s[1:]) and " " not in s  # CamelCase brand: ParcelCo


def _leaves(doc: Any, out: set[str], depth: int = 0) -> None:
    if depth > 12:
        return
    if isinstance(doc, str):
        if _is_data(doc):
            out.add(doc.strip())
    elif isinstance(doc, dict):
        for v in doc.values():
            _leaves(v, out, depth + 1)
    elif isinstance(doc, list):
        for v in doc[:200]:
            _leaves(v, out, depth + 1)


def run_literals(cassette: Cassette, transcript: Transcript) -> set[str]:
    """This run's data a fix must not hard-code (see the module docstring)."""
    from ..cassettes.model import parse_json

    texts: list[str] = []
    found: set[str] = set()
    general: list[str] = []
    statuses = {str(s.status) for s in transcript.steps if s.status is not None}
    for s in transcript.steps:
        if s.llm is not None:
            for m in s.llm.messages:
                if m.role in ("system", "developer"):
                    general.append(m.text)
                elif m.role in ("user", "tool"):
                    texts.append(m.text)
                    if m.content_json is not None:
                        _leaves(m.content_json, found)
                    else:
                        doc = parse_json(m.text.encode("utf-8", "replace")) if m.text[:1] in "{[" else None
                        _leaves(doc, found)
            for tl in s.llm.tools:
                general.append(tl.name + " " + json.dumps(tl.schema_ or {}))
            for tc in s.llm.tool_calls:
                texts.append(tc.arguments_raw)
                _leaves(tc.arguments, found)
        else:
            it = cassette.interactions[s.index]
            texts.append(it.request.uri)
            if it.response is not None and it.response.body:
                body = it.response.text[:50_000]
                texts.append(body)
                _leaves(parse_json(it.response.body), found)
    for t in texts:
        found.update(m.group(0) for m in _ID.finditer(t))
        found.update(m.group(0) for m in _EMAIL.finditer(t))
    known = "\n".join(general)
    return {x for x in found if x not in known and x not in statuses and len(x) >= 2}


def _text_of(p: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in p.items() if k not in ("kind", "op", "old", "tool")}, ensure_ascii=False)


def leaked(patch: dict[str, Any], literals: set[str]) -> list[str]:
    """The run literals a patch mapping copies (sorted; case-insensitive for names)."""
    text = _text_of(patch)
    low = text.lower()
    out = []
    for lit in literals:
        if lit.isdigit() or _ID.fullmatch(lit):
            if re.search(rf"(?<![\w-]){re.escape(lit)}(?![\w-])", text):
                out.append(lit)
        elif lit.lower() in low:
            out.append(lit)
    return sorted(out)


_PLACEHOLDER = re.compile(r"<[^<>]{1,40}>|\.\.\.|…")


def _says_something(text: str) -> bool:
    """At least 3 words once placeholders (``...``, ``<a rule>``) are taken out."""
    return len(re.findall(r"[^\W\d_]{2,}", _PLACEHOLDER.sub(" ", text))) >= 3


def check_one(raw: Any, cassette: Cassette, literals: set[str]) -> tuple[dict[str, Any] | None, list[str], bool]:
    """(clean patch mapping or None, problems, test_only) for one proposed patch."""
    patch = _clean(raw)
    if not isinstance(patch, dict):
        return None, ["the patch is not an object"], False
    kind = patch.get("kind")
    if kind not in ALLOWED:
        return None, [f"kind {kind!r} is not proposed automatically (allowed: {', '.join(ALLOWED)})"], False
    try:
        ps: PatchSet = parse_patches(patch, "proposal")
    except SpoolError as exc:
        return None, [f"does not parse: {str(exc).removeprefix('proposal: ')}"], False
    p = ps.patches[0]
    problems: list[str] = []
    dumped = ps.dump()[0]
    test_only = kind == "tool_result"
    target = check_targets(ps, cassette)[0]
    if not target.applies:
        problems.append(f"its target is not in the run: {target.problem}")
    text = getattr(p, "text", "") or ""
    if len(text) > MAX_TEXT or text.count("\n") >= MAX_LINES:
        problems.append(f"too big: {len(text)} characters in {text.count(chr(10)) + 1} lines "
                        f"(at most {MAX_TEXT} in {MAX_LINES})")
    if len(json.dumps(dumped, ensure_ascii=False)) > MAX_PATCH:
        problems.append(f"too big: more than {MAX_PATCH} characters of patch")
    if kind == "system_prompt" and getattr(p, "op", None) == "replace":
        problems.append("replaces the whole system prompt (append a rule or substitute a line instead)")
    if kind == "tool_schema" and getattr(p, "schema_", None) is not None:
        problems.append("replaces the whole tool schema (use merge)")
    if kind in ("system_prompt", "tool_description") and not _says_something(text):
        problems.append(f"says nothing: {text[:40]!r} is a placeholder, not a rule (at least 3 words)")
    if not test_only:
        copied = leaked(dumped, literals)
        if copied:
            problems.append("copies this run's data: " + ", ".join(repr(c) for c in copied[:5])
                            + " (a fix must be general)")
    return dumped, problems, test_only


def validate(answer: dict[str, Any], cassette: Cassette, transcript: Transcript) -> list[Proposal]:
    """The proposals of a fix ``answer``, each kept or dropped with its problems (see the
    module docstring); kept ones get ranks 1..3 in the model's order."""
    items = answer.get("proposals") if isinstance(answer, dict) else None
    if not isinstance(items, list):
        items = [answer] if isinstance(answer, dict) and "patch" in answer else []
    literals = run_literals(cassette, transcript)
    out: list[Proposal] = []
    kept_dumps: list[str] = []
    for item in items[:6]:
        item = item if isinstance(item, dict) else {"patch": item}
        raw = item.get("patch", item if "kind" in item else None)
        dumped, problems, test_only = check_one(raw, cassette, literals)
        prop = Proposal(patch=dumped if dumped is not None else (raw if isinstance(raw, dict) else {"raw": raw}),
                        rationale=str(item.get("rationale") or "")[:600],
                        expected_effect=str(item.get("expected_effect") or "")[:600], test_only=test_only)
        key = json.dumps(dumped, sort_keys=True) if dumped is not None else None
        if not _says_something(prop.rationale):
            problems.append("no rationale: say why the patch addresses the root cause (at least 3 words)")
        if not problems and key in kept_dumps:
            problems.append(f"duplicate of proposal {kept_dumps.index(key) + 1}")
        if not problems and len(kept_dumps) >= MAX_KEPT:
            problems.append(f"more than {MAX_KEPT} proposals")
        prop.problems = problems
        if not problems and key is not None:
            kept_dumps.append(key)
            prop.kept, prop.rank = True, len(kept_dumps)
        out.append(prop)
    return out
