"""Fix: patch a recorded run, fork it live, diff it, verify the fix.

Pure core (no mitmproxy): :mod:`.patches` (the typed patch models and patch files),
:mod:`.wire` (where each LLM wire format keeps prompt, messages, tools and parameters),
:mod:`.apply` (applying request patches, previews, target checks).
"""
