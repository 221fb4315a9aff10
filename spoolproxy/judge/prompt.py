"""The judge's prompts and the JSON Schemas of its answers, each with a version.

``diagnose-1`` (:data:`PROMPT_VERSION`): the compacted run (:mod:`.compact`) with the
deterministic findings as hints; the answer is :func:`diagnosis_schema`.  ``fix-1``
(:data:`FIX_PROMPT_VERSION`): the diagnosis, the run's system prompt and tools and the same
compacted run; the answer is :func:`fix_schema`.  A prompt version is part of the cache
key: changing a prompt's text must change its version.  Pure.
"""

from __future__ import annotations

import json
from typing import Any

from .taxonomy import DEFINITIONS, LABELS

PROMPT_VERSION = "diagnose-1"
FIX_PROMPT_VERSION = "fix-1"


def diagnosis_schema() -> dict[str, Any]:
    """JSON Schema of a diagnosis answer (every key required, no others: OpenAI's strict
    structured-output subset)."""
    quote = {"type": "object", "additionalProperties": False, "required": ["interaction", "field", "quote"],
             "properties": {"interaction": {"type": "integer"}, "field": {"type": "string"},
                            "quote": {"type": "string"}}}
    return {"type": "object", "additionalProperties": False,
            "required": ["evidence", "failing_interaction", "label", "root_cause", "confidence"],
            "properties": {
                "evidence": {"type": "array", "items": quote, "maxItems": 4},
                "failing_interaction": {"type": ["integer", "null"]},
                "label": {"type": "string", "enum": list(LABELS)},
                "root_cause": {"type": "string"},
                "confidence": {"type": "number"}}}


SYSTEM = """You judge recorded runs of AI agents. You read one run: the model calls the agent made \
(the messages each request added, the model's answers and tool calls) and the tool or HTTP requests \
it made (their answers). Decide whether the run failed, at which interaction, and why.

Labels:
{labels}

Rules:
- Check the final answer against the tool data it was given: an answer that states something the \
data does not say, or says otherwise (another order, a stale or ignored value, an invented result), \
is unsupported_claim even when no request failed.
- A tool error or an HTML error page taken as success is tool_error_mishandled; an error the agent \
told the user about, or recovered from by retrying or by another tool, is not a failure.
- failing_interaction is the first interaction where the run went wrong: the tool request that \
answered wrongly or the model call that made the wrong call or claim; for a loop, its first repeat; \
null for no_failure.
- Evidence: 1 to 3 quotes copied character for character from fields shown in the run, each with \
the interaction number and the field name of its [N field] label. Quote only text you see; never \
paraphrase; keep each quote short (under 150 characters). A verdict without a verbatim quote is \
discarded.
- root_cause: one sentence.
- confidence: 0 to 1.

Answer with one JSON object and nothing else:
{{"evidence": [{{"interaction": 3, "field": "response.body", "quote": "..."}}], \
"failing_interaction": 3, "label": "...", "root_cause": "...", "confidence": 0.8}}"""


def _labels() -> str:
    return "\n".join(f"- {name}: {DEFINITIONS[name]}" for name in LABELS)


def diagnose_messages(run_text: str) -> list[dict[str, str]]:
    """The diagnosis prompt as chat messages (``system``, ``user``) for the compacted run."""
    return [{"role": "system", "content": SYSTEM.format(labels=_labels())},
            {"role": "user", "content": run_text + "\n\nJudge this run. Answer with the JSON object only."}]


def fix_schema() -> dict[str, Any]:
    """JSON Schema of a fix answer: 1-3 proposals, each a flat patch (``kind`` and the
    fields of that kind; unused fields may be empty) with a rationale."""
    patch = {"type": "object", "required": ["kind"],
             "properties": {
                 "kind": {"type": "string", "enum": ["system_prompt", "tool_description", "tool_schema",
                                                     "model_params", "message", "tool_result"]},
                 "op": {"type": "string"}, "text": {"type": "string"}, "old": {"type": "string"},
                 "tool": {"type": "string"}, "merge": {"type": "object"},
                 "index": {"type": "integer"}, "role": {"type": "string"},
                 "temperature": {"type": "number"}, "max_tokens": {"type": "integer"},
                 "method": {"type": "string"}, "host": {"type": "string"}, "path": {"type": "string"},
                 "status": {"type": "integer"}, "body": {}}}
    item = {"type": "object", "required": ["patch", "rationale", "expected_effect"],
            "properties": {"patch": patch, "rationale": {"type": "string"}, "expected_effect": {"type": "string"}}}
    return {"type": "object", "required": ["proposals"],
            "properties": {"proposals": {"type": "array", "items": item, "minItems": 1, "maxItems": 3}}}


FIX_SYSTEM = """You propose fixes for a failing AI agent run, as typed patches a test harness \
applies to the agent's model requests and reruns. Propose 1 to 3 patches, best first.

Patch kinds (JSON objects):
- {{"kind": "system_prompt", "op": "append", "text": "<one general rule>"}} (op may also be \
"substitute" with "old": "<an existing line>" and "text": "<its replacement>")
- {{"kind": "tool_description", "tool": "<a declared tool>", "op": "append", "text": "<a clarification>"}}
- {{"kind": "tool_schema", "tool": "<a declared tool>", "merge": {{<JSON merge patch of its argument schema>}}}}
- {{"kind": "model_params", "temperature": 0, "max_tokens": 2048}}
- {{"kind": "tool_result", "method": "GET", "host": "<tool host>", "path": "<path glob>", "status": 404, \
"body": {{...}}}}: a counterfactual answer of a tool, to test a hypothesis (not a fix to ship)

Rules:
- A patch must target something that exists in this run (a declared tool, an existing prompt line, \
a tool host that was called).
- Keep it small: a rule of one or two sentences; never rewrite the whole prompt.
- Make it general: never copy this run's data (ids, amounts, names, e-mail addresses, dates) into a \
patch; a fix that only works for this run is useless.
- rationale: why it addresses the root cause; expected_effect: what the rerun should do differently.

Answer with one JSON object and nothing else:
{{"proposals": [{{"patch": {{"kind": "system_prompt", "op": "append", "text": "..."}}, \
"rationale": "...", "expected_effect": "..."}}]}}"""


def fix_messages(diagnosis: dict[str, Any], context: str, run_text: str) -> list[dict[str, str]]:
    """The fix prompt as chat messages: the diagnosis (label, interaction, root cause,
    evidence), ``context`` (the system prompt and the declared tools) and the compacted run."""
    diag = json.dumps(diagnosis, ensure_ascii=False, indent=1)
    return [{"role": "system", "content": FIX_SYSTEM.format()},
            {"role": "user", "content": f"DIAGNOSIS:\n{diag}\n\n{context}\n\n{run_text}\n\n"
                                        "Propose the patches. Answer with the JSON object only."}]
