"""Network access blocked by isolation, as entries of the playback report.

Under ``--isolate`` (:mod:`spoolproxy.proxy.isolate`) a client that ignores the proxy
variables is refused, and :class:`~spoolproxy.proxy.netguard.Attempt` s say what it tried.
:func:`add_blocked` appends each as a ``miss`` to a :class:`~.report.PlaybackReport`: the
program needed something playback could not give it, so the summary counts it as missed,
names the host and fails ``--strict``.  A DNS lookup of a host the program also reached
through the proxy is left out (some clients resolve a name before they ask the proxy).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from .report import PlaybackReport, RequestOutcome

BYPASS_HINT = (
    "a client that ignores HTTPS_PROXY went for the network directly (aiohttp without trust_env=True, "
    "fetch on Node.js before 22.21 and the npm openai package on it, a client given its own transport); make "
    "it use the proxy (trust_env=True, a newer Node; spoolproxy sets NODE_USE_ENV_PROXY=1) or point its base "
    "URL at a --reverse proxy"
)


def add_blocked(report: PlaybackReport, attempts) -> int:
    """Append one ``miss`` per blocked attempt to ``report`` (in place); returns how many."""
    proxied = {(urlsplit(r.uri).hostname or "").lower() for r in report.requests}
    added = 0
    for a in attempts:
        if a.kind == "dns" and a.host.lower() in proxied:
            continue
        if a.kind == "dns":
            uri = f"{a.host} (DNS lookup)"
            reason = f"blocked by --isolate: the program looked up {a.host} itself and was answered NXDOMAIN"
        else:
            uri = f"{a.host}:{a.port}" if a.host == a.address else f"{a.host}:{a.port} (address {a.address})"
            reason = f"blocked by --isolate: the program connected to {a.address}:{a.port} directly and was cut off"
        times = f" ({a.count} times)" if a.count > 1 else ""
        report.requests.append(RequestOutcome(
            seq=len(report.requests) + 1, outcome="miss", method="DNS" if a.kind == "dns" else "CONNECT",
            uri=uri, reasons=[reason + times, BYPASS_HINT],
        ))
        added += 1
    return added
