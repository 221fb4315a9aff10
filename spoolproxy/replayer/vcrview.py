"""A vcrpy ``Cassette`` look-alike for tests that inspect pytest-recording's ``vcr`` fixture
while ``pytest --spoolproxy`` serves their cassettes.

Under pytest-recording a test may take the ``vcr`` fixture (a ``vcr.cassette.Cassette``) and
assert on it: ``vcr.requests[0].body`` (the recorded request), ``len(vcr)``,
``vcr.play_count``, ``vcr.play_counts``, ``vcr.all_played``.  With vcrpy switched off the
fixture would be None; :class:`CassetteView` answers the same questions from the cassettes
the playback proxy serves to the test: the recorded interactions (loaded with spoolproxy's
loader, concatenated in order as pytest-recording's combined persister does) and the
play counts the proxy's report gives for them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable

from ..cassettes import load
from ..cassettes.model import Interaction


def _vcr_request(it: Interaction):
    from vcr.request import Request as VcrRequest

    r = it.request
    return VcrRequest(r.method, r.uri, r.body, {k: list(v) for k, v in r.headers.items()})


def _vcr_response(it: Interaction) -> dict[str, Any]:
    resp = it.response
    if resp is None:
        return {"status": {"code": None, "message": ""}, "headers": {}, "body": {"string": b""}}
    return {"status": {"code": resp.status, "message": resp.reason}, "headers": dict(resp.headers),
            "body": {"string": resp.body}}


class CassetteView:
    """The vcrpy ``Cassette`` API subset tests use, over ``paths`` (the default cassette
    first, then the marker's extra ones).  ``served``: a callable returning the
    ``(cassette path, interaction index)`` pairs the proxy served to this test so far.
    Raises CassetteError (from the loader) when a cassette cannot be read."""

    def __init__(self, paths: Iterable[Path], served: Callable[[], Iterable[tuple[Path, int]]]) -> None:
        self.paths = [Path(p).resolve() for p in paths]
        self._served = served
        self._offsets: dict[Path, int] = {}
        self.data: list[tuple[Any, dict[str, Any]]] = []
        for p in self.paths:
            self._offsets[p] = len(self.data)
            self.data += [(_vcr_request(it), _vcr_response(it)) for it in load(p).interactions]
        self._path = str(self.paths[0]) if self.paths else ""

    @property
    def record_mode(self):
        from vcr.record_mode import RecordMode

        return RecordMode.NONE

    @property
    def requests(self) -> list[Any]:
        """The recorded requests (``vcr.request.Request``), in order."""
        return [req for req, _ in self.data]

    @property
    def responses(self) -> list[dict[str, Any]]:
        """The recorded responses in vcrpy's dictionary form."""
        return [resp for _, resp in self.data]

    @property
    def play_counts(self) -> Counter:
        """How often each interaction (index into :attr:`data`) was served to this test."""
        counts: Counter = Counter()
        for path, index in self._served():
            base = self._offsets.get(Path(path).resolve())
            if base is not None:
                counts[base + index] += 1
        return counts

    @property
    def play_count(self) -> int:
        return sum(self.play_counts.values())

    @property
    def all_played(self) -> bool:
        return len(self.play_counts) == len(self.data)

    @property
    def write_protected(self) -> bool:
        return True

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"<spoolproxy CassetteView {self._path} ({len(self)} interactions)>"
