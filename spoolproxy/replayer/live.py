"""Recording the requests playback sends upstream (``--live`` hosts, ``new_episodes``, ``once``/``all``).

:class:`LiveRecorder` composes the recording addon (:class:`~spoolproxy.proxy.recorder.Recorder`):
it passes a flow on only when the playback addon (earlier in the chain) decided ``live``,
so replayed flows are never recorded.  The recorder journals into a sibling file
``<output stem>.partial.yaml``; :meth:`LiveRecorder.finish` then writes the output
atomically and removes the sibling.

With ``--live`` hosts the output is this run in wire order: the source cassette's
interactions (minus those of the live hosts, which the new recording replaces) and the new
ones merged by when their request started in this run (a replayed interaction gets the
time it was served as its ``started_at``; one not served stays after the interaction
before it), so a tool call never lands before the model turn that asked for it.  The
output is a new file beside the source (``<stem>.live.yaml``, :func:`live_output_path`)
unless the user asked to write back into the source: the recorded run is evidence (a
``spoolproxy test`` case may replay it) and is never replaced silently.
``new_episodes`` appends the new interactions to the cassette, as vcrpy does.  In mode
``all`` (or ``once`` on a new cassette) the new interactions replace the file's content.
"""

from __future__ import annotations

import inspect
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from ..cassettes import load, save
from ..cassettes.model import Cassette, Interaction
from ..cassettes.redact import Redactor
from .addon import META, SERVED
from .hostglob import any_matches


def live_output_path(source: str | Path) -> Path:
    """Where ``playback --live`` writes its run by default: ``<stem>.live.yaml`` beside
    ``source`` (``run.yaml`` -> ``run.live.yaml``)."""
    p = Path(source)
    return p.with_name(f"{p.stem}.live{p.suffix or '.yaml'}")


async def _maybe(result):
    """Await ``result`` when a recorder hook returned a coroutine (hooks may be sync or async)."""
    if inspect.isawaitable(result):
        return await result
    return result


class LiveRecorder:
    """mitmproxy addon: records live flows (see the module docstring).

    ``source``: the cassette played from (a file; it may not exist yet under ``once``);
    ``output``: where the result goes (default ``source`` itself; ``playback --live``
    passes :func:`live_output_path` unless told to write back).
    ``replace_all``: the new recording replaces the cassette (record modes ``all``/new ``once``).
    ``live_globs``: hosts (``host`` or ``host:port`` globs) whose old interactions the new
    recording replaces.  Raises CassetteError from :meth:`finish` when the output cannot
    be written.
    """

    def __init__(self, source: str | Path, *, replace_all: bool, live_globs: Iterable[str] = (),
                 redactor: Redactor | None = None, meta=None, output: str | Path | None = None) -> None:
        from ..proxy.recorder import Recorder

        self.source = Path(source)
        self.target = Path(output) if output is not None else self.source
        self.replace_all = replace_all
        self.live_globs = tuple(live_globs)
        tmp = self.target.with_name(f"{self.target.stem}.partial{self.target.suffix or '.yaml'}")
        self.recorder = Recorder(tmp, redactor=redactor, meta=meta)
        self.served_at: dict[tuple[str, int], float] = {}  # (cassette name, index) -> first served (epoch s)

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
        elif flow.metadata.get(SERVED) is not None:
            self.served_at.setdefault(tuple(flow.metadata[SERVED]), flow.request.timestamp_start)

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
        """Merge the live recording with the source into the output; returns (output path,
        new interactions).  ``extra``: run-level facts for ``meta.extra`` (a guard's budget
        and stop)."""
        new = self.recorder.finish(exit_code=exit_code, extra=extra)
        tmp = self.recorder.path
        if self.replace_all or not self.source.exists():
            merged = Cassette(interactions=new.interactions, meta=new.meta)
        else:
            old = load(self.source)
            keep = [it for it in old.interactions if not any_matches(self.live_globs, it.request.uri)]
            if self.live_globs:  # the output is this run: its order, its exit status
                facts = {k: v for k, v in old.meta.extra.items() if k != "agent_end"}
                if "agent_end" in new.meta.extra:
                    facts["agent_end"] = new.meta.extra["agent_end"]
                # when this run happened and what it replayed, also when it is written back
                facts.update(replayed_from=str(self.source), live=list(self.live_globs))
                update: dict = {"exit_code": exit_code, "extra": facts,
                                "recorded_at": new.meta.recorded_at or datetime.now(timezone.utc).replace(microsecond=0)}
                meta = old.meta.model_copy(update=update)
                merged = Cassette(interactions=self._wire_order(old, keep, new.interactions), meta=meta,
                                  source_format=old.source_format)
            else:  # new_episodes: appended, as vcrpy does
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

    def _wire_order(self, old: Cassette, keep: list[Interaction], new: list[Interaction]) -> list[Interaction]:
        """``keep`` (old interactions, in file order) and ``new`` merged by when each request
        started in this run (see the module docstring)."""
        mine = _same_file(old.path, self.source)
        served = {i: ts for (name, i), ts in self.served_at.items() if mine(name)}
        index = {id(it): i for i, it in enumerate(old.interactions)}
        rows: list[tuple[float, int, int, Interaction]] = []
        last = float("-inf")
        for pos, it in enumerate(keep):
            at = served.get(index[id(it)])
            if at is not None:
                it = it.model_copy(update={"started_at": datetime.fromtimestamp(at, timezone.utc)})
                last = at
            rows.append((last, 0, pos, it))
        for pos, it in enumerate(new):
            at = it.started_at.timestamp() if it.started_at is not None else float("inf")
            rows.append((at, 1, pos, it))
        rows.sort(key=lambda r: r[:3])
        return [r[3] for r in rows]


def _same_file(loaded: Path | None, target: Path):
    """A predicate: does a cassette name from the playback index denote ``target``?"""
    want = {str(target), str(Path(target).resolve())}
    if loaded is not None:
        want |= {str(loaded), str(Path(loaded).resolve())}

    def check(name: str) -> bool:
        return name in want or str(Path(name).resolve()) in want

    return check
