"""Annotating a case: a reviewer's verdict (status), assertions and matching settings.

:func:`apply_change` is the pure core of ``spoolproxy annotate`` and of the MCP server's
``annotate`` tool: it takes a :class:`~.model.Case` and a :class:`CaseChange` and returns the
new, validated case (the caller saves it).  Assertion texts and matching settings are
added to the case's (never duplicated) unless ``clear_assertions`` / ``clear_match_options``
reset them first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from .model import Assertions, Case


@dataclass(frozen=True)
class CaseChange:
    """What to change on a case; empty fields change nothing.

    ``status``: pending | confirmed | rejected; ``contains`` / ``matches`` / ``tools`` /
    ``max_llm_calls`` / ``max_tool_calls``: assertions (final answer contains each text, matches the
    regex, each tool called, at most N LLM / tool calls); ``live``: host globs sent upstream (``routing.live``);
    ``match``: exact | default; ``normalize`` / ``ignore_json_paths`` / ``match_headers``:
    added to ``match_options``.
    """

    status: str | None = None
    contains: tuple[str, ...] = ()
    matches: str | None = None
    tools: tuple[str, ...] = ()
    max_llm_calls: int | None = None
    max_tool_calls: int | None = None
    live: tuple[str, ...] = ()
    match: str | None = None
    normalize: tuple[str, ...] = ()
    ignore_json_paths: tuple[str, ...] = ()
    match_headers: tuple[str, ...] = ()
    clear_match_options: bool = False
    clear_assertions: bool = False

    def is_empty(self) -> bool:
        """True when the change would leave every case as it is."""
        return not (self.status or self.contains or self.matches or self.tools or self.max_llm_calls is not None
                    or self.max_tool_calls is not None
                    or self.live or self.match or self.clear_assertions or self.normalize or self.ignore_json_paths
                    or self.match_headers or self.clear_match_options)


def apply_change(case: Case, change: CaseChange, path: str | Path = "case") -> Case:
    """The case with ``change`` applied (``case`` itself is not modified).

    Raises UsageError (one line naming ``path`` and the field) when the result is not a
    valid case, e.g. an invalid regex in ``matches`` or ``normalize``.
    """
    from pydantic import ValidationError

    from .model import validation_message

    a = Assertions() if change.clear_assertions else case.assertions.model_copy(deep=True)
    a.final_answer_contains = [*a.final_answer_contains,
                               *(t for t in dict.fromkeys(change.contains) if t not in a.final_answer_contains)]
    a.tools_called = [*a.tools_called, *(t for t in dict.fromkeys(change.tools) if t not in a.tools_called)]
    if change.matches is not None:
        a.final_answer_matches = change.matches
    if change.max_llm_calls is not None:
        a.max_llm_calls = change.max_llm_calls
    if change.max_tool_calls is not None:
        a.max_tool_calls = change.max_tool_calls
    update: dict = {"assertions": a.model_dump()}
    if change.status:
        update["status"] = change.status
    if change.match:
        update["match"] = change.match
    if change.normalize or change.ignore_json_paths or change.match_headers or change.clear_match_options:
        m = {"normalize": [], "ignore_json_paths": [], "match_headers": []} if change.clear_match_options \
            else case.match_options.model_dump()
        for key, values in (("normalize", change.normalize), ("ignore_json_paths", change.ignore_json_paths),
                            ("match_headers", change.match_headers)):
            m[key] = [*m[key], *(v for v in dict.fromkeys(values) if v not in m[key])]
        update["match_options"] = m
    if change.live:
        update["routing"] = case.routing.model_copy(update={"live": list(change.live)}).model_dump()
    try:
        return Case.model_validate({**case.model_dump(), **update})
    except ValidationError as exc:
        raise UsageError(validation_message(path, exc)) from None


def describe_assertions(a: Assertions) -> str:
    """The case's extra assertions in words (``contains 'refund', calls create_refund``); ``""`` when none."""
    parts = [f"contains {t!r}" for t in a.final_answer_contains]
    if a.final_answer_matches:
        parts.append(f"matches /{a.final_answer_matches}/")
    parts += [f"calls {t}" for t in a.tools_called]
    if a.max_llm_calls is not None:
        parts.append(f"<= {a.max_llm_calls} LLM calls")
    if a.max_tool_calls is not None:
        parts.append(f"<= {a.max_tool_calls} tool calls")
    return ", ".join(parts)
