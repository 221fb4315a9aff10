"""One module per detector; each exposes ``KIND`` and ``check(ctx) -> list[Finding]``.

:data:`DETECTORS` runs in this order; :data:`KINDS` is the closed list of finding kinds.
"""

from __future__ import annotations

from . import (budget_exceeded, duplicate_side_effect, empty_output, html_error_page, http_error, invalid_tool_arguments,
               no_final_answer, refusal, retry_storm, stream_incomplete, tls_rejected, tool_error_ignored, tool_loop,
               truncated_output, unknown_tool)

DETECTORS = (http_error, retry_storm, tool_error_ignored, html_error_page, tool_loop, invalid_tool_arguments,
             unknown_tool, truncated_output, stream_incomplete, empty_output, refusal, duplicate_side_effect,
             no_final_answer, budget_exceeded, tls_rejected)
KINDS: tuple[str, ...] = tuple(m.KIND for m in DETECTORS)
