"""Playback: serve cassettes through the proxy so an unmodified program re-runs offline.

Pure core (no mitmproxy): :mod:`.fingerprint` (request normalisation, body fingerprints),
:mod:`.rules` (built-in volatile-field rules for popular SDKs), :mod:`.matchers` (one
function per request aspect, vcrpy style), :mod:`.index` (O(1) look-ups, recorded-order
queues, the drift-safe fallback), :mod:`.diff` (bounded field-level JSON diffs and flag
suggestions), :mod:`.bodydiff` (multipart and raw bodies), :mod:`.excerpt` (length + hash
views of long values), :mod:`.explain` (explanations on a background thread),
:mod:`.report` (outcomes and the summary line), :mod:`.session` (record modes, ``--live``
routing, cassette loading, segments), :mod:`.miss` (the explained error response),
:mod:`.encoding` (``--encode-as-recorded``), :mod:`.vcrview` (pytest-recording's ``vcr``
fixture under ``pytest --spoolproxy``).

Proxy side: :mod:`.addon` (the mitmproxy addon), :mod:`.streamer` (loopback replay server
for chunked streams), :mod:`.live` (records live traffic through the recording addon),
:mod:`.control` (switch cassettes in a running proxy).  User documentation: docs/playback.md.
"""
