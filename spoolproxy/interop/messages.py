"""OpenAI-style message logs -> cassettes.

The shape many agent frameworks, fine-tuning sets and benchmark trajectories use: a
conversation is a list of OpenAI Chat messages (``role`` system | user | assistant | tool,
assistant ``tool_calls`` ``[{id, type: function, function: {name, arguments}}]``, tool
messages with ``tool_call_id``).  Accepted files:

* JSON Lines, one run per line: ``{"messages": [...], "tools": [...], "model": "..."}``
  (``traj``, ``trajectory`` or ``conversation`` instead of ``messages`` also work, as in
  tau-bench style trajectories); other scalar fields of the line (``task_id``,
  ``reward`` ...) are kept in the provenance;
* JSON Lines where every line is one message: the file is one run;
* a JSON file holding one such object, a list of them, or a bare list of messages.

Anthropic content blocks (``tool_use`` in assistant turns, ``tool_result`` in user turns)
are turned into the OpenAI shape first.  Each assistant message becomes one Chat
Completions interaction (request: the messages before it), each tool message one tool
interaction (see :mod:`.synth`).  A tool message marked ``is_error: true`` or
``status: "error"`` (LangChain's ``ToolMessage``) becomes a 500 tool answer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from ..cassettes.model import Cassette, CassetteMeta
from ..errors import CassetteError
from .run import ImportedRun
from .synth import RunBuilder, arguments_text, content_text

FORMAT = "messages"
RUN_KEYS = ("messages", "traj", "trajectory", "conversation")
ID_KEYS = ("id", "run_id", "task_id", "instance_id", "trajectory_id", "session_id", "conversation_id")
_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}


def looks_like(doc: Any) -> bool:
    """True for a parsed JSON value (or first JSONL line) of a message log."""
    if isinstance(doc, dict):
        return run_messages(doc) is not None or is_message(doc)
    if isinstance(doc, list) and doc:
        return all(is_message(m) for m in doc[:5]) or all(isinstance(d, dict) and run_messages(d) is not None for d in doc[:5])
    return False


def is_message(d: Any) -> bool:
    return isinstance(d, dict) and d.get("role") in _ROLES and ("content" in d or "tool_calls" in d)


def run_messages(d: dict) -> list | None:
    """The message list of a run object, or None."""
    for key in RUN_KEYS:
        v = d.get(key)
        if isinstance(v, list) and (not v or is_message(v[0]) or isinstance(v[0], dict) and "role" in v[0]):
            return v
    return None


def read(path: Path, data: bytes) -> list[ImportedRun]:
    """Read a message log (see module docstring).  Raises CassetteError naming the file
    (and line) for JSON that is not a message log."""
    runs = []
    for where, obj in _objects(path, data):
        if isinstance(obj, list):
            obj = {"messages": obj}
        msgs = run_messages(obj)
        if msgs is None:
            raise CassetteError(where, "no 'messages' list of OpenAI-style messages; is this a message log?")
        runs.append(_run(path, where, obj, msgs))
    if not runs:
        raise CassetteError(path, "holds no message log runs (empty file)")
    return runs


def _objects(path: Path, data: bytes) -> Iterator[tuple[str, Any]]:
    text = data.decode("utf-8-sig", "replace")
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    else:
        if isinstance(doc, dict):
            yield str(path), doc
        elif isinstance(doc, list) and doc and all(is_message(m) for m in doc):
            yield str(path), doc
        elif isinstance(doc, list):
            for i, d in enumerate(doc):
                yield f"{path}[{i}]", d
        return
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    parsed = []
    for n, ln in lines:
        try:
            parsed.append((n, json.loads(ln)))
        except ValueError as exc:
            raise CassetteError(path, f"not JSON ({exc.msg}); a message log holds one JSON object per line",
                                line=n) from None
    if parsed and all(is_message(d) for _, d in parsed):
        yield str(path), [d for _, d in parsed]  # one message per line: one run
        return
    for n, d in parsed:
        yield f"{path}:{n}", d


def _run(path: Path, where: str, obj: dict, msgs: list) -> ImportedRun:
    b = RunBuilder(obj.get("base_url") or "https://api.openai.com/v1")
    tools = obj.get("tools") if isinstance(obj.get("tools"), list) else None
    replay(b, msgs, model=obj.get("model"), tools=tools)
    inferred = b.infer_tools()
    if not any(it.extra.get("synthesized") == "chat-completion" for it in b.interactions):
        raise CassetteError(where, "has no assistant message, so there is no model call to import")
    fields = {k: v for k, v in obj.items()
              if k not in RUN_KEYS and k not in ("tools", "base_url") and isinstance(v, (str, int, float, bool))
              and len(str(v)) <= 200}
    source = {"format": FORMAT, "file": path.name}
    if where != str(path):
        source["record"] = where[len(str(path)):].lstrip(":")
    if fields:
        source["fields"] = fields
    if inferred:
        source["tools_inferred"] = True
    rid = next((str(obj[k]) for k in ID_KEYS if isinstance(obj.get(k), (str, int))), None)
    name = path.stem if where == str(path) else f"{path.stem}-{_slug(rid) if rid else source['record'].strip('[]')}"
    return ImportedRun(Cassette(interactions=b.interactions, meta=CassetteMeta(extra={"imported_from": source})), name)


def replay(b: RunBuilder, messages: list, *, model: str | None = None, tools: list | None = None) -> None:
    """Append to ``b`` the interactions a run with these ``messages`` made: one model call
    per assistant message (sent everything before it), one tool call per tool message."""
    history: list[dict] = []
    calls: dict[str, tuple[str, Any]] = {}
    for m in normalise(messages):
        role = m.get("role")
        if role == "assistant":
            answer = {k: v for k, v in m.items() if k not in ("usage", "finish_reason", "model")}
            usage = m.get("usage") if isinstance(m.get("usage"), dict) else None
            b.model_call(list(history), answer, model=m.get("model") or model, tools=tools, usage=_usage(usage),
                         finish_reason=m.get("finish_reason"))
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") or {}
                calls[str(tc.get("id"))] = (fn.get("name") or "tool", fn.get("arguments"))
            m = answer
        elif role in ("tool", "function"):
            is_error = bool(m.pop("is_error", False)) or m.get("status") == "error"
            m.pop("status", None)
            name, args = calls.get(str(m.get("tool_call_id")), (m.get("name") or "tool", None))
            b.tool_call(name, args, content_text(m.get("content")), call_id=m.get("tool_call_id"), is_error=is_error)
        history.append(m)


def normalise(messages: list) -> list[dict]:
    """OpenAI Chat messages from OpenAI- or Anthropic-shaped ones (copies; tool-call
    arguments as JSON text; ``tool_result`` blocks become tool messages)."""
    out: list[dict] = []
    for raw in messages:
        if not isinstance(raw, dict) or "role" not in raw:
            continue
        m = dict(raw)
        content = m.get("content")
        if isinstance(content, list) and any(isinstance(p, dict) and p.get("type") in ("tool_use", "tool_result")
                                             for p in content):
            out.extend(_from_blocks(m, content))
            continue
        if m.get("tool_calls"):
            m["tool_calls"] = [_call(tc) for tc in m["tool_calls"] if isinstance(tc, dict)]
        out.append(m)
    return out


def _call(tc: dict) -> dict:
    fn = tc.get("function") if isinstance(tc.get("function"), dict) else {"name": tc.get("name"), "arguments": tc.get("arguments")}
    return {"id": tc.get("id"), "type": "function",
            "function": {"name": fn.get("name") or "", "arguments": arguments_text(fn.get("arguments"))}}


def _from_blocks(m: dict, blocks: list) -> list[dict]:
    text = content_text([p for p in blocks if isinstance(p, dict) and p.get("type") == "text"])
    if m["role"] == "assistant":
        calls = [{"id": p.get("id"), "type": "function",
                  "function": {"name": p.get("name") or "", "arguments": arguments_text(p.get("input"))}}
                 for p in blocks if isinstance(p, dict) and p.get("type") == "tool_use"]
        return [{"role": "assistant", "content": text or None, "tool_calls": calls}]
    out = [{"role": "tool", "tool_call_id": p.get("tool_use_id"), "content": content_text(p.get("content")),
            "is_error": bool(p.get("is_error"))}
           for p in blocks if isinstance(p, dict) and p.get("type") == "tool_result"]
    if text:
        out.append({"role": m["role"], "content": text})
    return out


def _usage(u: dict | None) -> dict[str, int] | None:
    if not u:
        return None
    p = u.get("prompt_tokens", u.get("input_tokens"))
    c = u.get("completion_tokens", u.get("output_tokens"))
    return {"prompt_tokens": int(p or 0), "completion_tokens": int(c or 0)} if p is not None or c is not None else None


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")[:60] or "run"
