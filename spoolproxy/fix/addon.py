"""The fork addon: carries out a :class:`~.session.ForkSession`'s decisions in mitmproxy.

For each request, in the ``request`` hook:

1. the session decides (on the request as the agent sent it);
2. a patched LLM request gets its new body (``Content-Length`` set to the new length, any
   ``Transfer-Encoding`` dropped; ``Content-Encoding`` kept and re-applied by mitmproxy) and
   path;
3. the recorder (:class:`~spoolproxy.proxy.recorder.Recorder`) captures the request as it
   goes out, with the decision's facts for ``Interaction.extra`` (``fork: patched`` ...);
4. a ``routed`` request is pointed at its fixed server (after recording: the cassette keeps
   the original URL); an ``override`` or ``blocked`` request is answered here; a request
   served from the parent cassette is handed to the stock playback addon
   (:class:`~spoolproxy.replayer.addon.Playback`), which serves it exactly as
   ``spoolproxy playback`` does (recorded chunk boundaries through its loopback stream
   server); ``live`` and ``patched`` requests go upstream.

Responses are never touched, so live streams pass through chunk by chunk as in ``record``.
The session and recorder can be swapped between runs (:meth:`ForkAddon.attach`), so one
proxy serves many forks (``spoolproxy verify``).

With a :class:`~spoolproxy.guards.addon.GuardAddon` attached (live budgets and the circuit
breaker, ``fork --max-llm-calls`` ..., each verify trial), a model request about to go live
(``live`` or ``patched``) is shown to it first, after patching and before recording, as
``record`` does: once the breaker has tripped the request gets the provider-shaped refusal
instead of going upstream, and is recorded with it as ``fork: refused``.  Requests served from the parent never
reach the guard.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from mitmproxy import http

from ..proxy.recorder import EXTRA_META, Recorder
from ..replayer.addon import Playback, flow_request
from ..replayer.control import CONTROL_HOST
from ..replayer.pair import ServeAndRecord
from ..replayer.session import Decision, PlaybackConfig
from .session import LIVE_SOURCES, ForkDecision, ForkSession

#: flow.metadata key: the fork decision's source (cassette | live | patched | ...)
META = "spoolproxy.fork"


class _Decided:
    """What :class:`Playback` sees as its session (its ``config``, ``serve_failed``): the
    fork session already made the decision, which :meth:`ForkAddon.request` hands to
    :meth:`Playback.carry_out` with ``current`` set to it (``decide`` serves callers that
    go through :meth:`Playback.request` with ``pending`` set)."""

    def __init__(self) -> None:
        self.config = PlaybackConfig()
        self.pending: ForkDecision | None = None
        self.current: ForkDecision | None = None
        self.fork: ForkSession | None = None

    def decide(self, request) -> Decision:
        d, self.pending = self.pending, None
        assert d is not None and d.playback is not None
        self.current = d
        return d.playback

    def serve_failed(self, decision: Decision, reason: str) -> None:
        if self.fork is not None and self.current is not None:
            self.fork.serve_failed(self.current.seq, reason)


class ForkAddon(ServeAndRecord):
    """mitmproxy addon running one fork at a time (see the module docstring); the hooks
    other than ``request`` are :class:`~spoolproxy.replayer.pair.ServeAndRecord`'s.

    ``session`` / ``recorder`` may be None between runs: requests then get a 503 and
    nothing is recorded.  ``guard``: an optional GuardAddon for the current fork.
    """

    def __init__(self, session: ForkSession | None = None, recorder: Recorder | None = None, guard=None) -> None:
        self.shim = _Decided()
        self.playback = Playback(self.shim)  # type: ignore[arg-type]
        self.session = session
        self.recorder = recorder
        self.guard = guard
        self.shim.fork = session

    def attach(self, session: ForkSession | None, recorder: Recorder | None, guard=None) -> None:
        """Serve ``session``, record into ``recorder`` and guard live model requests with
        ``guard`` (a GuardAddon, or None) from now on (call on the proxy's loop)."""
        self.session, self.recorder, self.guard = session, recorder, guard
        self.shim.fork = session

    # -- per flow ----------------------------------------------------------------------------
    async def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.error is not None:
            return
        if self.session is None or flow.request.pretty_host == CONTROL_HOST:
            flow.response = http.Response.make(503, b"spoolproxy fork: no fork is running\n",
                                               {"content-type": "text/plain", "x-should-retry": "false"})
            return
        d = self.session.decide(flow_request(flow))
        flow.metadata[META] = d.source
        flow.metadata[EXTRA_META] = d.extra()
        req = flow.request
        if d.body is not None and req.stream:  # a big upload the recorder streams: cannot be rewritten
            flow.metadata[EXTRA_META] = {**d.extra(), "fork": "live", "fork_note": "streamed request body: not patched"}
        elif d.body is not None:
            req.headers.pop("transfer-encoding", None)
            req.content = d.body  # re-encodes for Content-Encoding and sets Content-Length
            req.headers["content-length"] = str(len(req.raw_content or b""))
        if d.path is not None:
            req.path = d.path
        if self.guard is not None and d.source in LIVE_SOURCES:
            self.guard.request(flow)  # a model request past a budget: refused here, never sent
            if flow.response is not None:
                flow.metadata[EXTRA_META] = {**flow.metadata[EXTRA_META], "fork": "refused"}
                self.session.refused(d.seq, "refused by the circuit breaker")
        if self.recorder is not None:
            self.recorder.request(flow)
        if flow.response is not None:
            return
        if d.route is not None:
            u = urlsplit(d.route)
            req.scheme = u.scheme
            req.host = u.hostname or req.host
            req.port = u.port or (443 if u.scheme == "https" else 80)
        if d.response is not None:
            status, headers, body = d.response
            flow.response = http.Response.make(status, body, headers)
        elif d.playback is not None:
            self.shim.current = d  # the decision is made: Playback only carries it out
            await self.playback.carry_out(flow, d.playback)
