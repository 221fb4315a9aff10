"""tls_rejected: a client of the recorded program refused the spoolproxy CA, so its
traffic to that host is missing from the cassette.

The recorder notes failed client handshakes in ``meta.extra["tls_rejected"]``
(``[{host, connections, certain}]``, see :mod:`spoolproxy.proxy.tlswatch`).  Severity:
``error`` for a certificate alert (the run's recording is incomplete, and a run that looks
clean is not evidence of anything); ``warn`` when the client only hung up during the
handshake, which may have another cause.  A run-level fact: no interaction, no evidence quote.
"""

from __future__ import annotations

import os
from typing import Sequence

from .base import Context

KIND = "tls_rejected"


def check(ctx: Context) -> list:
    facts = ctx.cassette.meta.extra.get("tls_rejected")
    if not isinstance(facts, list):
        return []
    out = []
    command = ctx.cassette.meta.command or ()
    for fact in facts:
        if isinstance(fact, dict) and fact.get("host"):
            severity = "error" if fact.get("certain", True) else "warn"
            out.append(ctx.finding(KIND, severity, [], describe(fact, command), []))
    return out


def describe(fact: dict, command: Sequence[str] = ()) -> str:
    """``the client refused the spoolproxy CA for HOST (N connections): nothing from that
    host was recorded; fix: ...`` for one :meth:`TlsWatch.facts` entry."""
    n = int(fact.get("connections") or 1)
    what = "refused the spoolproxy CA" if fact.get("certain", True) else "hung up during the TLS handshake (it may not trust the spoolproxy CA)"
    return (f"a client {what} for {fact.get('host')} ({n} connection{'s' if n != 1 else ''}), so nothing it sent "
            f"there was recorded; fix: {fix_hint(command)}")


def fix_hint(command: Sequence[str] = ()) -> str:
    """Which variable or option the recorded program's client reads for its CA, by runtime
    (from the command's program name); a generic hint when unknown."""
    prog = os.path.basename(command[0]).lower() if command else ""
    if prog.startswith(("python", "pytest", "uv", "poetry", "pipenv", "hatch")) or prog.endswith(".py"):
        return ("a Python client with its own CA list (httpx/requests given verify=certifi.where(), an SSLContext with "
                "cafile=...) ignores SSL_CERT_FILE/REQUESTS_CA_BUNDLE, which spoolproxy sets: pass "
                "verify=os.environ['SSL_CERT_FILE'] or add the file from 'spoolproxy ca --cert' to its CA list")
    if prog in ("node", "npm", "npx", "pnpm", "yarn", "bun", "tsx", "ts-node") or prog.endswith((".js", ".mjs", ".ts")):
        return ("a Node client given its own 'ca' option ignores NODE_EXTRA_CA_CERTS, which spoolproxy sets: add the "
                "certificate from 'spoolproxy ca --cert' to that option")
    if prog == "deno":
        return "Deno reads DENO_CERT: export DENO_CERT=$(spoolproxy ca --cert)"
    if prog in ("java", "gradle", "gradlew", "mvn", "mvnw", "sbt", "kotlin") or prog.endswith(".jar"):
        return ("the JVM uses its own trust store: keytool -importcert -cacerts -alias spoolproxy "
                "-file $(spoolproxy ca --cert), or -Djavax.net.ssl.trustStore=...")
    if prog == "curl":
        return "curl given --cacert ignores CURL_CA_BUNDLE: pass --cacert $(spoolproxy ca --bundle)"
    if prog == "go" or prog.endswith(".go"):
        return ("a Go client with its own RootCAs ignores SSL_CERT_FILE: add the certificate from "
                "'spoolproxy ca --cert' to its pool")
    return ("trust the certificate from 'spoolproxy ca --cert' in that client's own CA store, or point its base "
            "URL at a --reverse port (plain HTTP, no certificate)")
