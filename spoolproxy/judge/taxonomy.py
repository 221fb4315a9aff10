"""The failure labels a diagnosis may give, and how a label is read from a model's answer.

Labels (lower-case, one word each; the model may answer in any case, with spaces or
hyphens, or with a listed synonym, see :func:`normalize_label`):

==========================  =================================================================
``tool_error_mishandled``   a tool failed (error status, error body, HTML page, ``isError``)
                            and the agent went on as if it had not, or retried it wrongly
``bad_tool_arguments``      the agent called the right tool with wrong, malformed or cut
                            arguments (a wrong id or amount, invalid JSON, truncated call)
``wrong_tool_selection``    the agent called a tool that does not fit the task or does not exist
``step_repetition``         the agent repeated the same call without progress (a loop)
``task_spec_violation``     the agent did not do what the task or its instructions asked
                            (no answer, an empty answer, a refusal of a legitimate task,
                            a broken output format)
``unsupported_claim``       the answer states something the data it was given does not
                            support or contradicts (a hallucinated result, a stale value,
                            another record's data, data ignored)
``external_failure``        the provider or the network failed (rate limit, quota, 5xx,
                            a cut stream) and the agent could not finish
``no_failure``              the run did what was asked
``unknown``                 no supported verdict (also what an answer without valid evidence
                            becomes)
==========================  =================================================================
"""

from __future__ import annotations

import re

FAILURE_LABELS: tuple[str, ...] = (
    "tool_error_mishandled", "bad_tool_arguments", "wrong_tool_selection", "step_repetition",
    "task_spec_violation", "unsupported_claim", "external_failure",
)
LABELS: tuple[str, ...] = (*FAILURE_LABELS, "no_failure", "unknown")

#: one line per label, as the prompt shows it to the model
DEFINITIONS: dict[str, str] = {
    "tool_error_mishandled": "a tool failed (error status or body, HTML error page, isError, ok:false) and the "
                             "agent carried on as if it had succeeded, or retried it in a harmful way",
    "bad_tool_arguments": "the right tool was called with wrong, malformed, cut-off or invented arguments "
                          "(a wrong id, a wrong amount, invalid JSON)",
    "wrong_tool_selection": "a tool was called that does not exist or does not fit the request",
    "step_repetition": "the same call was repeated again and again without progress (a loop)",
    "task_spec_violation": "the agent did not do what the user or its instructions asked (no answer, an empty "
                           "answer, a refusal of a legitimate request, a broken output format)",
    "unsupported_claim": "the answer states something the data the agent received does not support or "
                         "contradicts (a hallucinated result, a stale value, another record's data, data ignored)",
    "external_failure": "the model provider or the network failed (rate limit, quota, 5xx, gateway page, cut "
                        "stream) and the run could not finish",
    "no_failure": "the run did what was asked; the answer is supported by the data",
    "unknown": "you cannot tell",
}

_SYNONYMS = {
    "hallucinated_result": "unsupported_claim", "hallucination": "unsupported_claim",
    "unsupported_claim_hallucinated_result": "unsupported_claim", "contradiction": "unsupported_claim",
    "loop": "step_repetition", "tool_loop": "step_repetition", "repetition": "step_repetition",
    "tool_error": "tool_error_mishandled", "tool_error_ignored": "tool_error_mishandled",
    "bad_arguments": "bad_tool_arguments", "invalid_tool_arguments": "bad_tool_arguments",
    "wrong_tool": "wrong_tool_selection", "unknown_tool": "wrong_tool_selection",
    "task_specification_violation": "task_spec_violation", "spec_violation": "task_spec_violation",
    "external": "external_failure", "provider_error": "external_failure",
    "none": "no_failure", "ok": "no_failure", "pass": "no_failure", "success": "no_failure",
    "no_error": "no_failure",
}


def normalize_label(raw: object) -> str | None:
    """The label ``raw`` names (``"TOOL_ERROR_MISHANDLED"``, ``"tool error mishandled"``,
    ``"hallucinated result"`` ...), or None when it names none of :data:`LABELS`."""
    if not isinstance(raw, str):
        return None
    key = re.sub(r"[^a-z0-9]+", "_", raw.strip().lower()).strip("_")
    if key in LABELS:
        return key
    return _SYNONYMS.get(key)
