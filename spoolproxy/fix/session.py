"""A fork session: for each request of a rerun, where its answer comes from.

Pure (no mitmproxy), like :mod:`spoolproxy.replayer.session`; :mod:`.addon` carries the
decisions out.  A fork of a parent cassette at interaction ``at`` counts the requests the
rerun sends, in arrival order:

* **before the fork point** (the first ``at`` requests) every request is served strictly
  from the parent's first ``at`` interactions (exact matching, as ``spoolproxy test``
  does); a request they cannot answer gets playback's explained miss and the fork is
  marked diverged (the agent did not replay its own prefix);
* **from the fork point on**:

  1. a tool request matching a :class:`~.patches.ToolResultPatch` gets the patch's
     response (``override``);
  2. an LLM request (a wire format :mod:`.wire` knows, or the endpoint of an LLM call of
     the parent) goes live with the request patches applied (``patched``, or ``live``
     when no patch changed it);
  3. a request to a host of a :class:`~.patches.RouteToolPatch` goes live to that server
     (``routed``);
  4. a tool request identical to one of the parent's (exact matching) is served from the
     cassette (``cassette``);
  5. a different GET/HEAD/OPTIONS, or any request to a ``--live`` host, goes live (``live``);
  6. anything else (a changed POST, PUT, PATCH, DELETE: a side effect) is never sent: it
     gets a ``403`` with an explanation and is recorded as an attempt (``blocked``).

:class:`ForkSession` is thread-safe.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from ..cassettes.model import Cassette, Request
from ..replayer.fingerprint import Fingerprinter, MatchOptions
from ..replayer.hostglob import any_matches, host_label, url_names
from ..replayer.index import Index
from ..replayer.session import Decision
from .apply import apply_patches, model_requests
from .patches import PatchSet

Source = Literal["cassette", "live", "patched", "routed", "override", "blocked", "miss", "refused"]
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
#: Interaction.extra key of a fork cassette: where each interaction's answer came from
EXTRA_KEY = "fork"
#: sources whose request goes upstream to the model: what live budgets and a trial's cost count
LIVE_SOURCES = ("live", "patched")


@dataclass
class ForkDecision:
    """What the proxy does with one request of a fork.

    ``source``: see :data:`Source`.  ``playback``: for ``cassette``/``miss`` (and a
    recorded transport failure), the playback decision to carry out.  ``body`` / ``path``:
    the patched request to send (None: unchanged).  ``route``: base URL to send the request
    to instead (``routed``).  ``response``: ``(status, headers, body)`` to answer with
    (``override``, ``blocked``).  ``patches``: 0-based indexes of the patches that changed
    the request.  ``parent``: the parent interaction served.
    """

    seq: int
    source: Source
    playback: Decision | None = None
    body: bytes | None = None
    path: str | None = None
    route: str | None = None
    response: tuple[int, dict[str, str], bytes] | None = None
    patches: list[int] = field(default_factory=list)
    parent: int | None = None
    note: str = ""

    def extra(self) -> dict:
        """The per-interaction facts the fork cassette keeps (``Interaction.extra``)."""
        out: dict = {EXTRA_KEY: self.source}
        if self.parent is not None:
            out["parent_interaction"] = self.parent
        if self.patches:
            out["patched_by"] = [n + 1 for n in self.patches]
        if self.note:
            out["fork_note"] = self.note
        return out


class ForkRequest(BaseModel):
    """One request of the fork, as reported."""

    seq: int
    source: str
    method: str
    uri: str
    parent: int | None = None
    patches: list[int] = Field(default_factory=list)
    note: str = ""


class ForkReport(BaseModel):
    """What happened in a fork: every request's source, the blocked side effects, where
    the rerun left its parent's prefix (``diverged_at``, a request number) and how many
    requests each patch changed (``applied``, by 1-based patch number)."""

    parent: str
    at: int
    patches: list[str] = Field(default_factory=list)
    patch_kinds: list[str] = Field(default_factory=list)
    requests: list[ForkRequest] = Field(default_factory=list)
    diverged_at: int | None = None
    applied: dict[int, int] = Field(default_factory=dict)

    def count(self, source: str) -> int:
        return sum(1 for r in self.requests if r.source == source)

    @property
    def blocked(self) -> list[ForkRequest]:
        return [r for r in self.requests if r.source == "blocked"]

    @property
    def reached(self) -> bool:
        """True when the rerun got to the fork point."""
        return len(self.requests) >= self.at and self.diverged_at is None

    def summary(self) -> dict:
        """Counts per source plus the blocked attempts (for ``meta.extra["fork"]``)."""
        counts = {s: self.count(s) for s in ("cassette", "live", "patched", "routed", "override", "blocked", "miss",
                                             "refused")}
        return {"requests": len(self.requests), **{k: v for k, v in counts.items() if v},
                "blocked_requests": [f"{r.method} {r.uri}" for r in self.blocked],
                "diverged_at": self.diverged_at, "reached_fork_point": self.reached,
                "applied": {str(k): v for k, v in self.applied.items()}}

    def lines(self) -> list[str]:
        """Human lines for the terminal."""
        counts = ", ".join(f"{self.count(s)} {s}" for s in ("cassette", "patched", "live", "routed", "override",
                                                            "blocked", "miss", "refused") if self.count(s))
        out = [f"{len(self.requests)} requests: {counts or 'none'}"]
        if self.diverged_at is not None:
            r = self.requests[self.diverged_at]
            out.append(f"DIVERGED before the fork point: request {self.diverged_at} ({r.method} {r.uri}) is not "
                       f"among the parent's first {self.at} interactions; the agent did not replay its own prefix "
                       f"(fork at {self.diverged_at} or earlier, or check --normalize)")
        elif not self.reached:
            out.append(f"the rerun ended after {len(self.requests)} requests, before the fork point ({self.at})")
        for n, text in enumerate(self.patches, 1):
            k = self.applied.get(n, 0)
            tool = n <= len(self.patch_kinds) and self.patch_kinds[n - 1] in ("tool_result", "route")
            verb = "served" if tool else "changed"
            out.append(f"patch {text}: {verb} {k} request{'s' if k != 1 else ''}" +
                       ("" if k or tool else " (never applied)"))
        for r in self.blocked:
            out.append(f"BLOCKED side effect: {r.method} {r.uri} differs from the parent run; not sent "
                       f"(allow with --live {urlsplit(r.uri).hostname})")
        return out


class ForkSession:
    """Decides every request of one fork (see the module docstring).

    ``parent``: the loaded parent cassette (side bodies checked, as
    :func:`spoolproxy.replayer.session.load_cassettes` does); ``at``: the fork point, a
    0-based interaction index, ``0 <= at <= len(parent)``; ``patches``: applied from the
    fork point on; ``live``: host globs whose differing requests may go live (side effects
    included); ``options``: request matching settings (normalize, ignored JSON paths).
    Raises ValueError for an ``at`` out of range.
    """

    def __init__(self, parent: Cassette, at: int, patches: PatchSet | None = None, *, live: tuple[str, ...] = (),
                 options: MatchOptions | None = None) -> None:
        if not 0 <= at <= len(parent.interactions):
            raise ValueError(f"fork point {at} is out of range 0-{len(parent.interactions)}")
        self.parent = parent
        self.at = at
        self.patches = patches or PatchSet()
        self.live = tuple(g.lower() for g in live)
        fp = Fingerprinter(options or MatchOptions())
        self.fingerprinter = fp
        self.prefix = Index([Cassette(interactions=parent.interactions[:at], path=parent.path)], fp, match="exact")
        self.rest = Index([Cassette(interactions=parent.interactions[at:], path=parent.path)], fp, match="exact")
        self.model_endpoints = {self._endpoint(parent.interactions[i].request) for i in model_requests(parent)}
        self.model_endpoints |= self._other_llm_endpoints(parent)
        name = str(parent.path) if parent.path else "<parent>"
        self._report = ForkReport(parent=name, at=at, patches=self.patches.describe(),
                                  patch_kinds=[p.kind for p in self.patches.patches])
        self._lock = threading.Lock()
        self._seq = 0

    # -- classification -------------------------------------------------------------------
    @staticmethod
    def _endpoint(req: Request) -> tuple[str, str, int | None, str]:
        u = urlsplit(req.uri)
        return (u.scheme, (u.hostname or "").lower(), u.port, u.path)

    @staticmethod
    def _other_llm_endpoints(parent: Cassette) -> set:
        """Endpoints of LLM calls the detectors recognise but :mod:`.wire` does not patch
        (Bedrock, Cohere): they go live from the fork point on too."""
        from ..detectors.adapters.registry import classify

        out = set()
        for it in parent.interactions:
            if classify(it)[0] == "llm":
                out.add(ForkSession._endpoint(it.request))
        return out

    def is_model_request(self, req: Request) -> bool:
        """True for an LLM API request (by wire format, or an endpoint the parent's LLM calls used)."""
        if self._endpoint(req) in self.model_endpoints:
            return True
        return apply_patches([], req.method, urlsplit(req.uri).path, req.body).api is not None

    def _live_host(self, uri: str) -> bool:
        return any_matches(self.live, uri)

    # -- per request -----------------------------------------------------------------------
    def decide(self, req: Request) -> ForkDecision:
        """Decide one request (see the module docstring) and add it to the report."""
        with self._lock:
            seq = self._seq
            self._seq += 1
        d = self._prefix(seq, req) if seq < self.at else self._after(seq, req)
        self._add(d, req)
        return d

    def _prefix(self, seq: int, req: Request) -> ForkDecision:
        lk = self.prefix.lookup(req)
        if lk.outcome == "miss":
            with self._lock:
                if self._report.diverged_at is None:
                    self._report.diverged_at = seq
            return ForkDecision(seq, "miss", playback=Decision("miss", lk), note="not in the parent's prefix")
        entry = lk.entry
        assert entry is not None
        action = "kill" if entry.interaction.response is None else "serve"
        return ForkDecision(seq, "cassette", playback=Decision(action, lk), parent=entry.index)

    def _after(self, seq: int, req: Request) -> ForkDecision:
        u = urlsplit(req.uri)
        host, names = host_label(req.uri), url_names(req.uri)  # "127.0.0.1:18801", the names globs match
        path = u.path + (f"?{u.query}" if u.query else "")
        model = self.is_model_request(req)
        if not model:
            for n, p in enumerate(self.patches.patches):
                if p.kind == "tool_result" and p.matches(req.method, names, path):
                    return ForkDecision(seq, "override", response=(p.status, p.response_headers(), p.response_body()),
                                        patches=[n])
        if model:
            applied = apply_patches(self.patches, req.method, path, req.body)
            if applied.changed:
                return ForkDecision(seq, "patched", body=applied.body,
                                    path=applied.path if applied.path != path else None, patches=applied.changed)
            return ForkDecision(seq, "live")
        for n, p in enumerate(self.patches.patches):
            if p.kind == "route" and p.matches_host(names):
                return ForkDecision(seq, "routed", route=p.to, patches=[n])
        lk = self.rest.lookup(req)
        if lk.outcome != "miss" and lk.entry is not None:
            action = "kill" if lk.entry.interaction.response is None else "serve"
            return ForkDecision(seq, "cassette", playback=Decision(action, lk), parent=self.at + lk.entry.index)
        if req.method.upper() in SAFE_METHODS:
            return ForkDecision(seq, "live", note="differs from the parent's requests; a safe method")
        if self._live_host(req.uri):
            return ForkDecision(seq, "live", note="differs from the parent's requests; host allowed by --live")
        return ForkDecision(seq, "blocked", response=self._blocked_response(req, host),
                            note="a side effect that differs from the parent run")

    @staticmethod
    def _blocked_response(req: Request, host: str) -> tuple[int, dict[str, str], bytes]:
        message = (f"spoolproxy fork blocked {req.method} {host}{urlsplit(req.uri).path}: it differs from the parent "
                   f"run's requests and {req.method} has side effects, so it was not sent. Rerun the fork with "
                   f"--live {host} to allow it.")
        body = json.dumps({"error": {"message": message, "type": "spoolproxy_blocked_side_effect"}}).encode()
        return 403, {"content-type": "application/json", "x-should-retry": "false", "x-spoolproxy": "blocked"}, body

    def _add(self, d: ForkDecision, req: Request) -> None:
        uri = self.fingerprinter.redactor.uri(req.uri)
        with self._lock:
            self._report.requests.append(ForkRequest(seq=d.seq, source=d.source, method=req.method.upper(), uri=uri,
                                                     parent=d.parent, patches=[n + 1 for n in d.patches], note=d.note))
            for n in d.patches:
                self._report.applied[n + 1] = self._report.applied.get(n + 1, 0) + 1

    def serve_failed(self, seq: int, reason: str) -> None:
        """Request ``seq``'s recorded response could not be served (a side body went
        missing): it counts as a miss."""
        with self._lock:
            for r in self._report.requests:
                if r.seq == seq:
                    r.source, r.note = "miss", f"could not serve the recorded response: {reason}"

    def refused(self, seq: int, reason: str) -> None:
        """Request ``seq``, a model request about to go live, was refused by the run's
        circuit breaker (:mod:`spoolproxy.guards`) and never sent: it counts as ``refused``."""
        with self._lock:
            for r in self._report.requests:
                if r.seq == seq:
                    r.source, r.note = "refused", reason

    def report(self) -> ForkReport:
        """A snapshot of the report so far."""
        with self._lock:
            return self._report.model_copy(deep=True)
