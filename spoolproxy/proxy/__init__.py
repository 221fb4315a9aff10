"""The proxy: mitmproxy run in-process, and what record and playback share.

* :mod:`.runner`: :class:`~.runner.ProxyRunner`, a mitmproxy master on a background thread
  (forward proxy + one reverse proxy per ``--reverse`` upstream);
* :mod:`.ca`: the per-user CA and the CA bundle handed to programs;
* :mod:`.child`: the child-process environment and launcher (signals, exit status);
* :mod:`.upstream`: ``--connect-to``, ``--reverse`` and ``--upstream-ca`` handling;
* :mod:`.recorder`: the recording addon (journal first, cassette at the end);
* :mod:`.bodysink`: streamed-body capture (decoding, chunk offsets, spill/elide);
* :mod:`.failures`: mitmproxy error messages -> recorded failures;
* :mod:`.summary`: the run summary ``spoolproxy record`` prints.
"""
