"""spoolproxy: a mitmproxy-based recording/playback proxy that turns AI agent failures
into offline regression tests.  Subpackages: ``proxy`` (mitmproxy addons, CA, child env),
``cassettes`` (format, storage, redaction), ``replayer`` (matching, playback),
``detectors`` (transcripts and analyzers)."""

__version__ = "0.1.0"
