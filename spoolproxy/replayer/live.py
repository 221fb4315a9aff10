"""Recording the requests playback sends upstream (``--live`` hosts, ``new_episodes``, ``once``/``all``).

:class:`LiveRecorder` composes the recording addon (:class:`~spoolproxy.proxy.recorder.Recorder`):
it passes a flow on only when the playback addon (earlier in the chain) decided ``live``,
so replayed flows are never recorded.  The recorder journals into a sibling file
``<cassette stem>.live.yaml``; :meth:`LiveRecorder.finish` then writes the cassette
atomically as the original interactions (minus those of ``--live`` hosts, which the new
recording replaces) followed by the new ones, and removes the sibling.  In mode ``all`` (or
``once`` on a new cassette) the new interactions replace the file's content.
"""

from __future__ import annotations

import fnmatch
import inspect
from pathlib import Path
from typing import Iterable

from ..cassettes import load, save
from ..cassettes.model import Cassette
from ..cassettes.redact import Redactor
from .addon import META


async def _maybe(result):
    """Await ``result`` when a recorder hook returned a coroutine (hooks may be sync or async)."""
    if inspect.isawaitable(result):
        return await result
    return result


class LiveRecorder:
    """mitmproxy addon: records live flows into ``target`` (see the module docstring).

    ``replace_all``: the new recording replaces the cassette (record modes ``all``/new ``once``).
    ``live_globs``: hosts whose old interactions the new recording replaces.
    Raises CassetteError from :meth:`finish` when the cassette cannot be written.
    """

    def __init__(self, target: str | Path, *, replace_all: bool, live_globs: Iterable[str] = (), redactor: Redactor | None = None, meta=None) -> None:
        from ..proxy.recorder import Recorder

        self.target = Path(target)
        self.replace_all = replace_all
        self.live_globs = tuple(g.lower() for g in live_globs)
        tmp = self.target.with_name(f"{self.target.stem}.live{self.target.suffix or '.yaml'}")
        self.recorder = Recorder(tmp, redactor=redactor, meta=meta)

    def _live(self, flow) -> bool:
        return flow.metadata.get(META) == "live"

    # -- hooks passed on -------------------------------------------------------------------
    def load(self, loader) -> None:
        self.recorder.load(loader)

    def configure(self, updated) -> None:
        self.recorder.configure(updated)

    async def running(self) -> None:
        await _maybe(self.recorder.running())

    async def request(self, flow) -> None:
        if self._live(flow):
            await _maybe(self.recorder.requestheaders(flow))
            await _maybe(self.recorder.request(flow))

    async def responseheaders(self, flow) -> None:
        if self._live(flow):
            await _maybe(self.recorder.responseheaders(flow))

    async def response(self, flow) -> None:
        if self._live(flow):
            await _maybe(self.recorder.response(flow))

    async def error(self, flow) -> None:
        if self._live(flow):
            await _maybe(self.recorder.error(flow))

    async def websocket_message(self, flow) -> None:
        if self._live(flow):
            await _maybe(self.recorder.websocket_message(flow))

    async def websocket_end(self, flow) -> None:
        if self._live(flow):
            await _maybe(self.recorder.websocket_end(flow))

    async def done(self) -> None:
        await _maybe(self.recorder.done())

    # -- the end ---------------------------------------------------------------------------
    def finish(self, exit_code: int | None = None, extra: dict | None = None) -> tuple[Path, int]:
        """Merge the live recording into the cassette; returns (path, new interactions).
        ``extra``: run-level facts for ``meta.extra`` (a guard's budget and stop)."""
        new = self.recorder.finish(exit_code=exit_code, extra=extra)
        tmp = self.recorder.path
        if self.replace_all or not self.target.exists():
            merged = Cassette(interactions=new.interactions, meta=new.meta)
        else:
            old = load(self.target)
            keep = [
                it for it in old.interactions
                if not any(fnmatch.fnmatchcase(it.request.host.lower(), g) for g in self.live_globs)
            ]
            merged = Cassette(interactions=[*keep, *new.interactions], meta=old.meta, source_format=old.source_format)
            if old.source_format != "spoolproxy":
                merged.meta.recorder = merged.meta.recorder or "spoolproxy"
        if extra and merged.meta is not new.meta:
            merged.meta.extra.update(new.meta.extra)
        if new.interactions or self.replace_all:
            save(merged, self.target)
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        return self.target, len(new.interactions)
