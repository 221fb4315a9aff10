"""The hooks shared by addons that serve with :class:`~.addon.Playback` and record with an
optional :class:`~spoolproxy.proxy.recorder.Recorder` in one mitmproxy.

Two addons do that: the artifact run of ``spoolproxy test``
(:class:`spoolproxy.suite.engine.PlayAndRecord`) and the fork
(:class:`spoolproxy.fix.addon.ForkAddon`).  They differ only in how a request is decided
(their own ``request`` hook); the lifecycle and every other flow hook are this class's, in
the order that keeps both right: the recorder starts after playback and stops before it;
it sees response headers after playback marked a replayed stream as streamed (so chunk
boundaries are recorded); requests to the control endpoint are never recorded.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from .control import CONTROL_HOST

if TYPE_CHECKING:  # pragma: no cover
    from ..proxy.recorder import Recorder
    from .addon import Playback


async def call_hook(hook, *args) -> None:
    """Call a mitmproxy hook that may be sync or async."""
    res = hook(*args)
    if inspect.isawaitable(res):
        await res


class ServeAndRecord:
    """Base of a mitmproxy addon with a ``playback`` (:class:`~.addon.Playback`) and a
    ``recorder`` (a Recorder, or None between runs: nothing is recorded then).  Subclasses
    set both and define ``request``."""

    playback: "Playback"
    recorder: "Recorder | None"

    # -- lifecycle -------------------------------------------------------------------------
    def load(self, loader) -> None:
        self.playback.load(loader)
        if self.recorder is not None:
            self.recorder.load(loader)

    def configure(self, updated) -> None:
        self.playback.configure(updated)
        if self.recorder is not None:
            self.recorder.configure(updated)

    async def running(self) -> None:
        await call_hook(self.playback.running)
        if self.recorder is not None:
            await call_hook(self.recorder.running)

    async def done(self) -> None:
        if self.recorder is not None:
            await call_hook(self.recorder.done)
        await call_hook(self.playback.done)

    def server_connect(self, data) -> None:
        self.playback.server_connect(data)

    # -- per flow --------------------------------------------------------------------------
    def requestheaders(self, flow) -> None:
        if self.recorder is not None and flow.request.pretty_host != CONTROL_HOST:
            self.recorder.requestheaders(flow)

    def responseheaders(self, flow) -> None:
        self.playback.responseheaders(flow)
        if self.recorder is not None:
            self.recorder.responseheaders(flow)

    async def response(self, flow) -> None:
        if self.recorder is not None:
            await call_hook(self.recorder.response, flow)

    async def error(self, flow) -> None:
        if self.recorder is not None:
            await call_hook(self.recorder.error, flow)

    def websocket_message(self, flow) -> None:
        if self.recorder is not None:
            self.recorder.websocket_message(flow)

    async def websocket_end(self, flow) -> None:
        if self.recorder is not None:
            await call_hook(self.recorder.websocket_end, flow)


__all__ = ["ServeAndRecord", "call_hook"]
