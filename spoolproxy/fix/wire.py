"""Where each LLM wire format keeps what request patches edit: the system prompt, the
conversation, the tools, the model and the sampling parameters.

One :class:`Wire` per API, named as the detectors name them (``ModelCall.api``):

=========================  ===================================================================
``openai-chat``            OpenAI Chat Completions and every OpenAI-compatible server: the
                           first ``system``/``developer`` message, ``messages``, ``tools[].function``
``openai-responses``       OpenAI Responses: ``instructions`` (or a ``system``/``developer``
                           input item), ``input``, ``tools[]`` of type ``function``
``anthropic-messages``     Anthropic Messages: ``system`` (string or text blocks), ``messages``,
                           ``tools[].input_schema``
``gemini-generateContent`` Gemini: ``systemInstruction.parts``, ``contents``,
                           ``tools[].functionDeclarations``, ``generationConfig``; the model is
                           in the URL path (``/models/M:generateContent``)
``ollama-chat``            Ollama ``/api/chat``: as Chat Completions, sampling in ``options``
``ollama-generate``        Ollama ``/api/generate``: ``system``, ``prompt``, ``options``
=========================  ===================================================================

A *content* value is a string (or None) or a list of parts, each part a dict whose text is
under ``"text"``; the helpers :func:`append_text`, :func:`prepend_text`,
:func:`substitute_text` and :func:`replace_text` edit either shape in place and return
whether anything changed.  Everything here is pure: dicts in, dicts edited.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from ..detectors.adapters import anthropic, gemini, ollama, openai_chat, openai_responses

#: (holder, key): ``holder[key]`` is a content value (see the module docstring)
Slot = tuple[Any, Any]


def api_of(path: str, body: Any) -> str | None:
    """The wire format of an LLM request (``openai-chat`` ...), from its URL path and parsed
    JSON body, or None when it is not an LLM request spoolproxy can patch (Bedrock and
    Cohere requests are recognised by the detectors but not patched)."""
    if gemini.matches(path, body):
        return "gemini-generateContent"
    if anthropic.matches(path, body):
        return "anthropic-messages"
    if openai_responses.matches(path, body):
        return "openai-responses"
    if openai_chat.matches(path, body):
        return "openai-chat"
    if ollama.matches(path, body):
        return "ollama-generate" if path.endswith("/api/generate") else "ollama-chat"
    return None


# -- content values -----------------------------------------------------------------------
def content_text(value: Any) -> str:
    """The text of a content value (parts joined with newlines)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _text_parts(value: list) -> list[dict]:
    return [p for p in value if isinstance(p, dict) and isinstance(p.get("text"), str)]


def append_text(slot: Slot, text: str, sep: str, make_part: Callable[[str], dict]) -> bool:
    """``content + sep + text`` (to the last text part of a list); no change when the
    content already ends with ``text``.  Returns True when it changed."""
    holder, key = slot
    value = holder.get(key) if isinstance(holder, dict) else holder[key]
    if isinstance(value, list):
        parts = _text_parts(value)
        if not parts:
            value.append(make_part(text))
            return True
        last = parts[-1]
        if last["text"].endswith(text):
            return False
        last["text"] = last["text"] + sep + text if last["text"] else text
        return True
    old = value if isinstance(value, str) else ""
    if old.endswith(text) and old:
        return False
    holder[key] = old + sep + text if old else text
    return True


def prepend_text(slot: Slot, text: str, sep: str, make_part: Callable[[str], dict]) -> bool:
    """``text + sep + content`` (to the first text part); no change when it already starts with ``text``."""
    holder, key = slot
    value = holder.get(key) if isinstance(holder, dict) else holder[key]
    if isinstance(value, list):
        parts = _text_parts(value)
        if not parts:
            value.insert(0, make_part(text))
            return True
        first = parts[0]
        if first["text"].startswith(text):
            return False
        first["text"] = text + sep + first["text"] if first["text"] else text
        return True
    old = value if isinstance(value, str) else ""
    if old.startswith(text) and old:
        return False
    holder[key] = text + sep + old if old else text
    return True


def substitute_text(slot: Slot, old: str, new: str) -> bool:
    """Replace every occurrence of ``old`` by ``new``; an empty ``new`` where ``old`` is a
    whole line removes the line with its line break.  Returns True when it changed."""
    holder, key = slot
    value = holder.get(key) if isinstance(holder, dict) else holder[key]
    targets: list[tuple[Any, Any]] = []
    if isinstance(value, list):
        targets = [(p, "text") for p in _text_parts(value)]
    elif isinstance(value, str):
        targets = [(holder, key)]
    changed = False
    for h, k in targets:
        s = h[k]
        if old not in s:
            continue
        if new == "":
            s2 = re.sub(rf"(^|\n){re.escape(old)}(\n|$)", lambda m: m.group(1) if m.group(2) else "", s)
            s2 = s2.replace(old, "") if s2 == s else s2
        else:
            s2 = s.replace(old, new)
        if s2 != s:
            h[k] = s2
            changed = True
    return changed


def replace_text(slot: Slot, text: str, make_part: Callable[[str], dict]) -> bool:
    """Set the content to ``text``: a string stays a string; in a list of parts the first
    text part keeps its other fields (e.g. ``cache_control``), the other text parts go."""
    holder, key = slot
    value = holder.get(key) if isinstance(holder, dict) else holder[key]
    if isinstance(value, list):
        parts = _text_parts(value)
        if not parts:
            value.insert(0, make_part(text))
            return True
        if len(parts) == 1 and parts[0]["text"] == text:
            return False
        parts[0]["text"] = text
        value[:] = [p for p in value if p is parts[0] or p not in parts[1:]]
        return True
    if value == text:
        return False
    holder[key] = text
    return True


# -- tools ------------------------------------------------------------------------------
@dataclass
class ToolEntry:
    """A declared tool: ``holder[desc_key]`` is its description, ``holder[schema_key]`` its
    argument JSON Schema."""

    name: str
    holder: dict
    desc_key: str = "description"
    schema_key: str = "parameters"


# -- the formats ----------------------------------------------------------------------------
class Wire:
    """Accessors for one wire format (see the module docstring).  ``params`` maps a
    portable parameter name to the key path holding it in the body."""

    api = ""
    params: dict[str, tuple[str, ...]] = {}

    def make_part(self, text: str) -> dict:
        """A new text part for a list content."""
        return {"type": "text", "text": text}

    def system_slot(self, body: dict, create: bool) -> Slot | None:
        """Where the system prompt is (created empty when ``create`` and there is none)."""
        raise NotImplementedError

    def messages(self, body: dict) -> list | None:
        """The request's native conversation list (edited in place), or None."""
        msgs = body.get("messages")
        return msgs if isinstance(msgs, list) else None

    def new_message(self, role: str, text: str) -> dict:
        return {"role": role, "content": text}

    def message_slot(self, msg: dict) -> Slot:
        """Where a message's text (or a tool result's content) is."""
        return (msg, "content")

    def set_role(self, msg: dict, role: str) -> None:
        msg["role"] = role

    def tools(self, body: dict) -> list[ToolEntry]:
        out = []
        for t in body.get("tools") or []:
            fn = t.get("function") if isinstance(t, dict) and isinstance(t.get("function"), dict) else None
            if fn is not None and isinstance(fn.get("name"), str):
                out.append(ToolEntry(fn["name"], fn))
        for fn in body.get("functions") or []:
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                out.append(ToolEntry(fn["name"], fn))
        return out

    def set_model(self, body: dict, path: str, model: str) -> str:
        """Set the model; returns the (possibly new) URL path."""
        body["model"] = model
        return path

    def param_path(self, name: str, body: dict) -> tuple[str, ...] | None:
        return self.params.get(name)


def _first_with_role(msgs: list, roles: tuple[str, ...]) -> dict | None:
    return next((m for m in msgs if isinstance(m, dict) and m.get("role") in roles), None)


class OpenAIChat(Wire):
    api = "openai-chat"
    params = {"temperature": ("temperature",), "top_p": ("top_p",), "max_tokens": ("max_tokens",),
              "seed": ("seed",), "stop": ("stop",)}

    def system_slot(self, body, create):
        msgs = body.setdefault("messages", []) if create else (body.get("messages") or [])
        m = _first_with_role(msgs, ("system", "developer"))
        if m is None:
            if not create:
                return None
            m = {"role": "system", "content": ""}
            msgs.insert(0, m)
        return (m, "content")

    def param_path(self, name, body):
        if name == "max_tokens" and "max_completion_tokens" in body:
            return ("max_completion_tokens",)
        return self.params.get(name)


class OllamaChat(OpenAIChat):
    api = "ollama-chat"
    params = {"temperature": ("options", "temperature"), "top_p": ("options", "top_p"),
              "max_tokens": ("options", "num_predict"), "seed": ("options", "seed"), "stop": ("options", "stop")}

    def param_path(self, name, body):
        return self.params.get(name)


class OllamaGenerate(OllamaChat):
    api = "ollama-generate"

    def system_slot(self, body, create):
        if "system" not in body and not create:
            return None
        body.setdefault("system", "")
        return (body, "system")

    def messages(self, body):
        return None

    def tools(self, body):
        return []


class OpenAIResponses(Wire):
    api = "openai-responses"
    params = {"temperature": ("temperature",), "top_p": ("top_p",), "max_tokens": ("max_output_tokens",)}

    def make_part(self, text):
        return {"type": "input_text", "text": text}

    def system_slot(self, body, create):
        if isinstance(body.get("instructions"), str):
            return (body, "instructions")
        items = body.get("input")
        if isinstance(items, list):
            m = _first_with_role(items, ("system", "developer"))
            if m is not None:
                return (m, "content")
        if not create:
            return None
        body["instructions"] = ""
        return (body, "instructions")

    def messages(self, body):
        items = body.get("input")
        if isinstance(items, str):
            body["input"] = items = [{"role": "user", "content": items}]
        return items if isinstance(items, list) else None

    def message_slot(self, msg):
        if "content" not in msg and "output" in msg:  # function_call_output
            return (msg, "output")
        return (msg, "content")

    def tools(self, body):
        return [ToolEntry(t["name"], t) for t in body.get("tools") or []
                if isinstance(t, dict) and t.get("type", "function") == "function" and isinstance(t.get("name"), str)]


class AnthropicMessages(Wire):
    api = "anthropic-messages"
    params = {"temperature": ("temperature",), "top_p": ("top_p",), "max_tokens": ("max_tokens",),
              "stop": ("stop_sequences",)}

    def system_slot(self, body, create):
        if body.get("system") is None and not create:
            return None
        if body.get("system") is None:
            body["system"] = ""
        return (body, "system")

    def message_slot(self, msg):
        content = msg.get("content")
        if isinstance(content, list) and not _text_parts(content):
            block = next((b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"), None)
            if block is not None:
                return (block, "content")
        return (msg, "content")

    def tools(self, body):
        return [ToolEntry(t["name"], t, "description", "input_schema") for t in body.get("tools") or []
                if isinstance(t, dict) and isinstance(t.get("name"), str)]


_GEMINI_MODEL = re.compile(r"(/models/)([^/:]+)(:)")


class Gemini(Wire):
    api = "gemini-generateContent"

    def make_part(self, text):
        return {"text": text}

    def _config_key(self, body: dict) -> str:
        return "generation_config" if "generation_config" in body and "generationConfig" not in body else "generationConfig"

    def param_path(self, name, body):
        key = self._config_key(body)
        snake = key == "generation_config"
        names = {"temperature": "temperature", "top_p": "top_p" if snake else "topP",
                 "max_tokens": "max_output_tokens" if snake else "maxOutputTokens", "seed": "seed",
                 "stop": "stop_sequences" if snake else "stopSequences"}
        return (key, names[name]) if name in names else None

    def system_slot(self, body, create):
        key = "system_instruction" if "system_instruction" in body and "systemInstruction" not in body else "systemInstruction"
        si = body.get(key)
        if isinstance(si, str):
            return (body, key)
        if not isinstance(si, dict):
            if not create:
                return None
            si = body[key] = {"parts": []}
        si.setdefault("parts", [])
        return (si, "parts")

    def messages(self, body):
        c = body.get("contents")
        return c if isinstance(c, list) else None

    def new_message(self, role, text):
        return {"role": "model" if role == "assistant" else role, "parts": [{"text": text}]}

    def message_slot(self, msg):
        msg.setdefault("parts", [])
        return (msg, "parts")

    def set_role(self, msg, role):
        msg["role"] = "model" if role == "assistant" else role

    def tools(self, body):
        out = []
        for t in body.get("tools") or []:
            if not isinstance(t, dict):
                continue
            for d in t.get("functionDeclarations") or t.get("function_declarations") or []:
                if isinstance(d, dict) and isinstance(d.get("name"), str):
                    key = "parametersJsonSchema" if "parametersJsonSchema" in d else "parameters"
                    out.append(ToolEntry(d["name"], d, "description", key))
        return out

    def set_model(self, body, path, model):
        return _GEMINI_MODEL.sub(lambda m: m.group(1) + model + m.group(3), path, count=1)


WIRES: dict[str, Wire] = {w.api: w for w in (OpenAIChat(), OpenAIResponses(), AnthropicMessages(), Gemini(),
                                            OllamaChat(), OllamaGenerate())}


def wire_for(api: str) -> Wire:
    """The :class:`Wire` of an API name (KeyError for an unknown one)."""
    return WIRES[api]


def model_of(api: str, path: str, body: dict) -> str | None:
    """The model a request names (Gemini: from the URL path)."""
    if api == "gemini-generateContent":
        m = _GEMINI_MODEL.search(path)
        return m.group(2) if m else None
    v = body.get("model")
    return v if isinstance(v, str) else None
