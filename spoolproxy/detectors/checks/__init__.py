"""One module per detector; each exposes ``KIND`` and ``check(ctx) -> list[Finding]``.

:data:`DETECTORS` runs in this order; :data:`KINDS` is the closed list of finding kinds.
"""

from __future__ import annotations

from . import (agent_crashed, budget_exceeded, duplicate_side_effect, empty_output, html_error_page, http_error,
               invalid_tool_arguments, no_final_answer, refusal, retry_storm, schema_violation, self_contradiction,
               stream_incomplete, suspicious_tool_result, tls_rejected, tool_error_ignored, tool_loop, truncated_output,
               unknown_tool)

DETECTORS = (agent_crashed, http_error, retry_storm, tool_error_ignored, suspicious_tool_result, html_error_page,
             tool_loop, invalid_tool_arguments, schema_violation, unknown_tool, truncated_output, stream_incomplete,
             empty_output, refusal, duplicate_side_effect, self_contradiction, no_final_answer, budget_exceeded,
             tls_rejected)
KINDS: tuple[str, ...] = tuple(m.KIND for m in DETECTORS)
