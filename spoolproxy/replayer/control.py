"""The control endpoint of a running playback proxy, and a client for it.

A request through the proxy to the magic host ``spoolproxy.control`` is answered by the
playback addon itself and never forwarded (plain HTTP, so any proxy-aware client works):

* ``POST http://spoolproxy.control/cassettes`` with ``{"cassettes": ["a.yaml", "dir/"]}``:
  serve these cassettes from now on.  Answers ``200`` with ``{"ok": true, "interactions": N,
  "previous": <report of the cassettes served until now>}``, or ``400`` with
  ``{"ok": false, "error": "..."}`` (the old cassettes stay loaded).
* ``POST http://spoolproxy.control/checkpoint``: close the current segment and answer
  ``{"ok": true, "previous": <its report>}``, keeping the same cassettes loaded with what
  they already served (a test runner's teardown after the call phase).
* ``GET http://spoolproxy.control/report``: the report of the cassettes loaded now (the
  requests since the last switch and their unused interactions; each switch's answer holds
  the report of the cassettes it replaced, the end-of-run report holds every segment).

Unused interactions are counted once per loaded set: a load that replaces the cassettes
adds the replaced set's unused interactions to the run's report (the set given at start-up
only when it served something), a checkpoint adds nothing.
* ``GET http://spoolproxy.control/status``: ``{"cassettes": [...], "interactions": N, "unused": N}``.

Paths are resolved by the proxy process (relative to its working directory).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..errors import SpoolError

CONTROL_HOST = "spoolproxy.control"


def _client(proxy_url: str):
    import httpx

    # plain HTTP to the proxy itself: no TLS, so skip loading CA stores (~0.1 s per client)
    return httpx.Client(proxy=proxy_url, timeout=30, trust_env=False, verify=False)


def switch(proxy_url: str, paths: Sequence[str | Path]) -> dict[str, Any]:
    """Tell the playback proxy at ``proxy_url`` (``http://127.0.0.1:PORT``) to serve ``paths``.

    Returns the proxy's answer (``previous`` holds the closed segment's report as a dict).
    Raises SpoolError when the proxy refuses (bad cassette) or cannot be reached.
    """
    import httpx

    body = {"cassettes": [str(Path(p).resolve()) for p in paths]}
    try:
        with _client(proxy_url) as c:
            r = c.post(f"http://{CONTROL_HOST}/cassettes", json=body)
    except httpx.HTTPError as exc:
        raise SpoolError(f"cannot reach the playback proxy at {proxy_url}: {exc}; is it running?") from None
    data = _json(r)
    if r.status_code != 200 or not data.get("ok"):
        raise SpoolError(f"playback proxy refused the cassettes: {data.get('error') or r.text[:200]}")
    return data


def checkpoint(proxy_url: str) -> dict[str, Any]:
    """Close the current segment of the playback proxy at ``proxy_url`` and keep its
    cassettes; returns the answer (``previous``: the closed segment's report as a dict).
    Raises SpoolError when the proxy cannot be reached or refuses."""
    import httpx

    try:
        with _client(proxy_url) as c:
            r = c.post(f"http://{CONTROL_HOST}/checkpoint")
    except httpx.HTTPError as exc:
        raise SpoolError(f"cannot reach the playback proxy at {proxy_url}: {exc}; is it running?") from None
    data = _json(r)
    if r.status_code != 200 or not data.get("ok"):
        raise SpoolError(f"playback proxy refused the checkpoint: {data.get('error') or r.text[:200]}")
    return data


def report(proxy_url: str) -> dict[str, Any]:
    """The running proxy's report for the cassettes loaded now (a :class:`~.report.PlaybackReport`
    as a dict; requests since the last :func:`switch`)."""
    import httpx

    try:
        with _client(proxy_url) as c:
            r = c.get(f"http://{CONTROL_HOST}/report")
    except httpx.HTTPError as exc:
        raise SpoolError(f"cannot reach the playback proxy at {proxy_url}: {exc}; is it running?") from None
    return _json(r)


def _json(r) -> dict[str, Any]:
    try:
        data = r.json()
    except ValueError:
        raise SpoolError(f"{r.request.url}: not a spoolproxy playback proxy (status {r.status_code})") from None
    return data if isinstance(data, dict) else {}
