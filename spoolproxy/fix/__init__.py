"""Fix: patch a recorded run, fork it live, diff it, verify the fix (docs/fix.md).

Pure core (no mitmproxy):

* :mod:`.patches`: the typed patch models, patch files, :class:`~.patches.PatchSet`;
* :mod:`.wire`: where each LLM wire format keeps prompt, messages, tools and parameters;
* :mod:`.apply`: applying request patches, previews (``fork --dry-run``), target checks;
* :mod:`.session`: a fork's decision for each request (cassette, live, patched, blocked ...);
* :mod:`.compare`: how two runs relate and where they part (``spoolproxy diff``);
* :mod:`.stats`: Wilson intervals and verdicts; :mod:`.trials`: judging one trial.

Proxy side: :mod:`.addon` (the mitmproxy addon carrying out fork decisions), :mod:`.runner`
(one proxy for many forks, the agent's command, the fork cassette), :mod:`.verify` (patched
and control trials, past good runs, the verification record).
"""
