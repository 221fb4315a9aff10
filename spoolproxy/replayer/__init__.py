"""Playback: serve cassettes through the proxy so an unmodified program re-runs offline.

Pure core (no mitmproxy): :mod:`.fingerprint` (request normalisation, body fingerprints),
:mod:`.matchers` (one function per request aspect, vcrpy style), :mod:`.index` (O(1)
look-ups, recorded-order queues), :mod:`.diff` (field-level body diffs and flag
suggestions), :mod:`.report` (outcomes and the summary line), :mod:`.session` (record modes,
``--live`` routing, cassette loading), :mod:`.miss` (the explained error response).

Proxy side: :mod:`.addon` (the mitmproxy addon), :mod:`.streamer` (loopback replay server
for chunked streams), :mod:`.live` (records live traffic through the recording addon),
:mod:`.control` (switch cassettes in a running proxy).  User documentation: docs/playback.md.
"""
