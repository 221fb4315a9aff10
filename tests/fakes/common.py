"""Deterministic content shared by the fake wire formats.

Every answer is derived from the request alone, so the same request always gets the
same response (ids included): the answer text echoes the last user message, a tool call
passes that message as the first argument of the first declared tool, and the answer
after a tool result quotes the result.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

#: ``created`` / ``created_at`` value of every fake response (a fixed instant, 2025-04-16).
CREATED = 1744814716


def short_id(body: bytes | str, n: int = 24) -> str:
    """A stable alphanumeric id derived from *body* (hex, *n* characters)."""
    data = body.encode() if isinstance(body, str) else body
    return hashlib.sha256(data).hexdigest()[:n]


def text_of(content: Any) -> str:
    """The text of a message ``content``: a string, or the concatenated ``text`` of its
    parts (OpenAI ``{"type": "text"}``/``input_text`` parts, Anthropic text blocks,
    Anthropic ``tool_result`` blocks whose content is a string or text blocks)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    out.append(part["text"])
                elif part.get("type") == "tool_result":
                    out.append(text_of(part.get("content")))
        return "".join(out)
    return str(content)


def count_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: words and punctuation marks (>= 1)."""
    return max(1, len(re.findall(r"\w+|[^\w\s]", text)))


def pieces(text: str) -> list[str]:
    """Split *text* into stream deltas: each word with its leading space ("Echo:", " hi")."""
    parts = re.findall(r"\s*\S+", text)
    if not parts:
        return [text] if text else []
    parts[-1] += text[len("".join(parts)):]  # trailing whitespace, if any
    return parts


def json_pieces(arguments: str, size: int = 6) -> list[str]:
    """Split a JSON arguments string into fragments of *size* characters, as providers
    stream tool-call arguments (``'{"loc'``, ``'ation'``, ...)."""
    return [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]


def first_argument_name(schema: Any) -> str:
    """Name of the argument a fake tool call fills: the first ``required`` property of a
    JSON schema, else its first property, else ``"input"``."""
    if isinstance(schema, dict):
        required = schema.get("required") or []
        if required:
            return str(required[0])
        props = schema.get("properties") or {}
        if props:
            return str(next(iter(props)))
    return "input"


def tool_arguments(schema: Any, text: str) -> str:
    """JSON-encoded arguments of a fake tool call: ``{"<first arg>": text}``."""
    return json.dumps({first_argument_name(schema): text})
