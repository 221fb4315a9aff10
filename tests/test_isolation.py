"""No silent network in playback: ``--isolate`` runs the program in a network namespace where
the proxy is the only reachable endpoint.  Real clients that ignore the proxy variables
(aiohttp without ``trust_env``, Node 20's built-in ``fetch``) must fail loudly and be named
in the summary; clients that honour them must work as usual.  ``record`` warns about such
clients even when other requests were recorded.

Skipped (with the reason) where the platform cannot create network namespaces.
"""

from __future__ import annotations

import shutil
import ssl
import struct
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from spoolproxy.cassettes import load, save
from spoolproxy.cassettes.model import Cassette, Interaction, Request, Response
from spoolproxy.proxy.bypass import aiohttp_warnings, node_warning
from spoolproxy.proxy.isolate import Isolation, resolver_addresses, unavailable
from spoolproxy.proxy.netguard import dns_question, http_host, nxdomain, tls_server_name

from .test_proxy_support import openai_via, run_cli, spool_home  # noqa: F401

MODELS = "https://api.openai.com/v1/models"

needs_netns = pytest.mark.skipif(unavailable() is not None, reason=f"no network isolation here: {unavailable()}")


def _query(name: str, qtype: int = 1) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
    return struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack("!HH", qtype, 1)


def test_wire_parsers():
    q = _query("api.openai.com", 28)
    assert dns_question(q) == ("api.openai.com", 28)
    answer = nxdomain(q)
    qid, flags, qd, an = struct.unpack("!HHHH", answer[:8])
    assert qid == 0x1234 and flags & 0x8000 and flags & 0xF == 3 and flags & 0x0100 and (qd, an) == (1, 0)
    assert answer[12:] == q[12:]
    assert dns_question(b"\0" * 5) is None and nxdomain(b"junk") == b""

    # a real TLS ClientHello, produced by Python's ssl module
    ctx = ssl.create_default_context()
    obj = ctx.wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_hostname="api.anthropic.com")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    assert tls_server_name(out.read()) == "api.anthropic.com"
    assert tls_server_name(b"GET / HTTP/1.1\r\n") is None
    assert http_host(b"GET / HTTP/1.1\r\nHost: Example.com:8080\r\n\r\n") == "example.com"
    assert http_host(b"GET / HTTP/1.1\r\nhost: [::1]:80\r\n\r\n") == "::1"


def test_resolver_addresses(tmp_path):
    conf = tmp_path / "resolv.conf"
    conf.write_text("# comment\nnameserver 10.1.2.3\nnameserver fe80::1%eth0\nnameserver bogus\nsearch x\n")
    assert resolver_addresses(conf) == ["10.1.2.3", "fe80::1", "127.0.0.1", "127.0.0.53"]


def test_bypass_warnings_units(tmp_path):
    assert node_warning((20, 20, 2)) and "fetch()" in node_warning((20, 20, 2))
    assert node_warning((22, 21, 0)) is None and node_warning((24, 5, 0)) is None
    assert "node:http" in node_warning((24, 1, 0)) and "fetch()" not in node_warning((24, 1, 0))
    bad = tmp_path / "bad.py"
    bad.write_text("import aiohttp\n\nasync def f():\n    async with aiohttp.ClientSession() as s:\n        pass\n")
    good = tmp_path / "good.py"
    good.write_text("import aiohttp\nasync def f():\n    async with aiohttp.ClientSession(trust_env=True):\n        pass\n")
    warnings = aiohttp_warnings([bad, good], tmp_path)
    assert len(warnings) == 1 and warnings[0].startswith("bad.py:4: aiohttp ClientSession without trust_env=True")


@pytest.fixture
def local_http():
    """A plain HTTP server on this host's loopback (outside any namespace)."""
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("content-length", "5")
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *a):
            pass

    srv = HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()


CHILD = textwrap.dedent(
    """
    import socket, ssl, sys, urllib.request
    port = int(sys.argv[1])
    print("relay", urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read().decode())
    try:
        socket.getaddrinfo("api.openai.com", 443)
        print("dns resolved")
    except OSError as exc:
        print("dns failed")
    s = socket.create_connection(("203.0.113.7", 443), timeout=5)
    try:
        ssl.create_default_context().wrap_socket(s, server_hostname="api.anthropic.com")
        print("tls ok")
    except (OSError, ssl.SSLError):
        print("tls failed")
    try:
        socket.create_connection(("203.0.113.7", 8443), timeout=5)
        print("8443 connected")
    except OSError:
        print("8443 refused")
    """
)


@needs_netns
@pytest.mark.parametrize("userns", [None, True], ids=["default", "user-namespace"])
def test_isolated_child_reaches_only_the_relayed_port(tmp_path, local_http, userns):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    with Isolation([("127.0.0.1", local_http)], userns=userns) as iso:
        proc = subprocess.run([sys.executable, str(script), str(local_http)], preexec_fn=iso.preexec,
                              capture_output=True, text=True, timeout=60)
        attempts = iso.attempts
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:4] == ["relay hello", "dns failed", "tls failed", "8443 refused"]
    described = [a.describe() for a in attempts]
    assert "DNS lookup of api.openai.com" in described  # A and AAAA queries: one lookup
    assert "TCP connection to api.anthropic.com (203.0.113.7:443)" in described


def _models_cassette(tmp_path):
    path = tmp_path / "models.yaml"
    resp = Response(status=200, headers={"content-type": ["application/json"]}, body=b'{"object": "list", "data": []}')
    save(Cassette(interactions=[Interaction(request=Request(method="GET", uri=MODELS), response=resp)]), path)
    return path


AIOHTTP = textwrap.dedent(
    """
    import asyncio, sys, aiohttp

    async def main(trust):
        async with aiohttp.ClientSession(trust_env=trust) as s:
            async with s.get("https://api.openai.com/v1/models") as r:
                print("status", r.status, await r.text())

    asyncio.run(main(sys.argv[1] == "trust"))
    """
)


@needs_netns
def test_playback_isolate_aiohttp(tmp_path, spool_home, fake_provider):
    cas = _models_cassette(tmp_path)
    script = tmp_path / "agent.py"
    script.write_text(AIOHTTP)
    via = [a for rule in openai_via(fake_provider) for a in ("--connect-to", rule)]

    # without trust_env: DNS is refused inside the namespace; the summary names the host
    bad = run_cli(["playback", "-c", str(cas), "--isolate", "--strict", *via, "--",
                   sys.executable, str(script), "plain"], spool_home, cwd=tmp_path)
    assert bad.returncode != 0
    assert "status 200" not in bad.stdout
    assert "MISS" in bad.stderr and "DNS api.openai.com (DNS lookup)" in bad.stderr
    assert "blocked by --isolate" in bad.stderr and "aiohttp without trust_env=True" in bad.stderr
    assert "missed 1, unused 1" in bad.stderr
    assert "Traceback (most recent call last)" not in bad.stderr.split("MISS")[1]

    # with trust_env=True the same client goes through the proxy, which is reachable inside
    good = run_cli(["playback", "-c", str(cas), "--isolate", "--strict", *via, "--",
                    sys.executable, str(script), "trust"], spool_home, cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    assert 'status 200 {"object": "list", "data": []}' in good.stdout
    assert "served exactly 1, served with divergence 0, missed 0, unused 0" in good.stderr
    assert fake_provider.connections == 0


NODE_FETCH = textwrap.dedent(
    """
    try {
      const r = await fetch("https://api.openai.com/v1/models");
      console.log("status", r.status);
    } catch (e) {
      console.log("fetch failed", e.cause ? e.cause.code : e.message);
      process.exit(4);
    }
    """
)


@needs_netns
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_playback_isolate_node_fetch(tmp_path, spool_home, fake_provider):
    cas = _models_cassette(tmp_path)
    script = tmp_path / "agent.mjs"
    script.write_text(NODE_FETCH)
    proc = run_cli(["playback", "-c", str(cas), "--isolate", "--", "node", str(script)], spool_home, cwd=tmp_path)
    from spoolproxy.proxy.bypass import node_version

    v = node_version()
    if v is not None and node_warning(v) is None:
        assert proc.returncode == 0 and "status 200" in proc.stdout  # a Node that honours the proxy
        return
    assert proc.returncode == 4, proc.stderr
    assert "fetch failed ENOTFOUND" in proc.stdout
    assert "DNS api.openai.com (DNS lookup)" in proc.stderr and "missed 1" in proc.stderr


@needs_netns
def test_engine_isolates_cases(tmp_path):
    """``spoolproxy test``'s engine (isolated by default where possible) reports the bypass."""
    from spoolproxy.suite.engine import play_and_record

    cas = _models_cassette(tmp_path)
    script = tmp_path / "agent.py"
    script.write_text(AIOHTTP)
    played = play_and_record([sys.executable, str(script), "plain"], cwd=tmp_path, cassette=cas,
                             artifact=tmp_path / "run.yaml", isolate=True, timeout_s=60)
    assert played.exit_code != 0
    blocked = [r for r in played.report.requests if r.method == "DNS"]
    assert [r.uri for r in blocked] == ["api.openai.com (DNS lookup)"] and blocked[0].outcome == "miss"
    assert load(tmp_path / "run.yaml").interactions == []


def test_record_warns_about_bypassing_clients(tmp_path, spool_home, fake_provider):
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(
        """
        import httpx
        print(httpx.get("https://api.openai.com/v1/models", timeout=20).status_code)

        async def side_channel():
            import aiohttp
            async with aiohttp.ClientSession() as s:  # ignores HTTPS_PROXY: never recorded
                await s.get("https://api.example.com/")
        """
    ))
    via = [a for rule in openai_via(fake_provider) for a in ("--connect-to", rule)]
    proc = run_cli(["record", "-c", str(tmp_path / "run.yaml"), "--upstream-ca", str(fake_provider.ca_pem_path), *via,
                    "--", sys.executable, str(script)], spool_home, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stderr and "(1 interaction)" in proc.stderr
    assert "spoolproxy: warning: not recorded: agent.py:7: aiohttp ClientSession without trust_env=True" in proc.stderr
    assert "nothing went through the proxy" not in proc.stderr
