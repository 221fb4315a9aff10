"""The proxy side of an isolated child's network: relays to the proxy, a DNS sinkhole, a trap.

An isolated child (:mod:`.isolate`) lives in a network namespace of its own whose only
interface is loopback.  Before running the program, the child creates a few sockets in
that namespace and hands them over (``SCM_RIGHTS``); :class:`NetGuard` serves them from
this process, on a thread with its own asyncio loop:

* **relays**: a listener on the proxy's address (``127.0.0.1:PORT``) inside the namespace;
  each connection is piped to the real proxy on this host's loopback, so a client that
  honours ``HTTPS_PROXY`` works exactly as without isolation;
* **DNS sinkhole**: UDP port 53 on the resolver addresses of ``/etc/resolv.conf`` (made
  local inside the namespace): every query is answered ``NXDOMAIN`` (RFC 1035 RCODE 3) at
  once and its name noted, so a client resolving an API host itself fails loudly
  (``ENOTFOUND``, ``Name or service not known``) and the host it tried is known;
* **trap**: TCP ports 80 and 443 on every address (all of IPv4 is routed to loopback inside
  the namespace): a client that connects to an address directly (its own resolver, an IP
  literal) has its TLS SNI or HTTP ``Host`` read, noted and the connection closed.

Every such attempt becomes an :class:`Attempt`; :attr:`NetGuard.attempts` lists them
(deduplicated, with counts) for the playback summary.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Literal

logger = logging.getLogger(__name__)

#: bytes a trapped connection may send before we decide who it wanted to reach
SNIFF_BYTES = 16384
#: seconds to wait for those bytes
SNIFF_TIMEOUT_S = 2.0


@dataclass
class Attempt:
    """One kind of blocked network access: ``kind`` dns (a name lookup) | connect (a TCP
    connection to an address that is not the proxy), ``host`` (the name looked up, the TLS
    SNI / HTTP Host, or the address), ``port`` (connect only), ``address`` (the address
    dialled, connect only) and how often it happened."""

    kind: Literal["dns", "connect"]
    host: str
    port: int | None = None
    address: str | None = None
    count: int = 1

    def describe(self) -> str:
        """``DNS lookup of api.openai.com`` / ``TCP connection to api.openai.com (1.2.3.4:443)``."""
        times = f" ({self.count}x)" if self.count > 1 else ""
        if self.kind == "dns":
            return f"DNS lookup of {self.host}{times}"
        where = f"{self.address}:{self.port}"
        return f"TCP connection to {self.host} ({where}){times}" if self.host != self.address else \
            f"TCP connection to {where}{times}"


def dns_question(packet: bytes) -> tuple[str, int] | None:
    """``(name, qtype)`` of the first question of a DNS query (RFC 1035 4.1), or None."""
    q = _question(packet)
    return (q[0], q[1]) if q else None


def _question(packet: bytes) -> tuple[str, int, int] | None:
    """``(name, qtype, offset after the question)`` or None."""
    if len(packet) < 12 or struct.unpack("!H", packet[4:6])[0] < 1:
        return None
    pos, labels = 12, []
    while pos < len(packet):
        n = packet[pos]
        if n == 0:
            pos += 1
            break
        if n & 0xC0 or pos + 1 + n > len(packet):
            return None
        labels.append(packet[pos + 1: pos + 1 + n].decode("ascii", "replace"))
        pos += 1 + n
    if pos + 4 > len(packet):
        return None
    return ".".join(labels).lower(), struct.unpack("!H", packet[pos: pos + 2])[0], pos + 4


def nxdomain(query: bytes) -> bytes:
    """The ``NXDOMAIN`` answer to ``query``: same id and question, QR and RA set, opcode and
    RD copied (empty for a packet that is no query)."""
    q = _question(query)
    if q is None:
        return b""
    qid, flags = struct.unpack("!HH", query[:4])
    out_flags = 0x8000 | (flags & 0x7900) | 0x0080 | 3  # QR, opcode+RD copied, RA, RCODE=NXDOMAIN
    return struct.pack("!HHHHHH", qid, out_flags, 1, 0, 0, 0) + query[12:q[2]]


def tls_server_name(data: bytes) -> str | None:
    """The SNI host name of a TLS ClientHello (RFC 8446 4.1.2, RFC 6066 3), or None."""
    try:
        if len(data) < 5 or data[0] != 0x16:
            return None
        p = 5
        if data[p] != 1:  # handshake type client_hello
            return None
        p += 4 + 2 + 32  # handshake header, legacy_version, random
        p += 1 + data[p]  # session id
        p += 2 + struct.unpack("!H", data[p:p + 2])[0]  # cipher suites
        p += 1 + data[p]  # compression methods
        end = p + 2 + struct.unpack("!H", data[p:p + 2])[0]
        p += 2
        while p + 4 <= min(end, len(data)):
            etype, elen = struct.unpack("!HH", data[p:p + 4])
            p += 4
            if etype == 0:  # server_name: list length, name type, name length, name
                nlen = struct.unpack("!H", data[p + 3:p + 5])[0]
                return data[p + 5:p + 5 + nlen].decode("ascii", "replace").lower()
            p += elen
    except (IndexError, struct.error):
        return None
    return None


def http_host(data: bytes) -> str | None:
    """The ``Host`` header (without port) of a plain HTTP request head, or None."""
    head = data.split(b"\r\n\r\n", 1)[0]
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"host":
            host = value.strip().decode("latin-1")
            if host.startswith("["):
                return host[1:].split("]", 1)[0].lower()
            return host.split(":", 1)[0].lower()
    return None


class NetGuard:
    """Serves the sockets an isolated child handed over (see the module docstring).

    ``relays``: the listening sockets (inside the namespace) and the ``(host, port)`` of the
    real proxy each forwards to; ``dns``: bound UDP sockets; ``traps``: listening TCP
    sockets.  :meth:`start` runs them on a thread; :meth:`stop` closes everything.
    """

    def __init__(self, relays: list[tuple[socket.socket, tuple[str, int]]], dns: list[socket.socket],
                 traps: list[socket.socket]) -> None:
        self.relays, self.dns, self.traps = relays, dns, traps
        self._attempts: dict[tuple, Attempt] = {}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="spoolproxy-netguard", daemon=True)
        self._ready = threading.Event()

    @property
    def attempts(self) -> list[Attempt]:
        """Blocked accesses so far, in first-seen order."""
        out: dict[tuple, Attempt] = {}
        with self._lock:
            for a in self._attempts.values():
                key = (a.kind, a.host, None if a.kind == "dns" else a.port)
                if key in out:
                    out[key].count = max(out[key].count, a.count)
                else:
                    out[key] = Attempt(a.kind, a.host, None if a.kind == "dns" else a.port, a.address, a.count)
        return list(out.values())

    def note(self, kind: str, host: str, port: int | None = None, address: str | None = None) -> None:
        """Count one blocked access (a DNS lookup: ``port`` is the query type, so A and AAAA
        queries of one lookup count once)."""
        key = (kind, host, port)
        with self._lock:
            if key in self._attempts:
                self._attempts[key].count += 1
            else:
                self._attempts[key] = Attempt(kind, host, port, address)  # type: ignore[arg-type]

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        for s in [*(s for s, _ in self.relays), *self.dns, *self.traps]:
            s.close()

    # -- the loop -----------------------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        except Exception as exc:  # pragma: no cover - never take the run down
            logger.warning("spoolproxy: network guard failed to start: %s", exc)
        finally:
            self._ready.set()
        self._loop.run_forever()
        for task in asyncio.all_tasks(self._loop):
            task.cancel()
        self._loop.run_until_complete(asyncio.sleep(0))
        self._loop.close()

    async def _serve(self) -> None:
        for sock, target in self.relays:
            sock.setblocking(False)
            await asyncio.start_server(lambda r, w, t=target: self._relay(r, w, t), sock=sock)
        for sock in self.dns:
            sock.setblocking(False)
            await self._loop.create_datagram_endpoint(lambda: _DnsSink(self), sock=sock)
        for sock in self.traps:
            sock.setblocking(False)
            await asyncio.start_server(self._trap, sock=sock)

    async def _relay(self, reader, writer, target: tuple[str, int]) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*target)
        except OSError:
            writer.close()
            return

        async def pipe(src, dst) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                try:
                    dst.write_eof() if dst.can_write_eof() else dst.close()
                except (OSError, RuntimeError):
                    pass

        await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))
        for w in (writer, up_w):
            w.close()

    async def _trap(self, reader, writer) -> None:
        local = writer.get_extra_info("sockname") or ("?", 0)
        address, port = str(local[0]), int(local[1])
        host = None
        try:
            async with asyncio.timeout(SNIFF_TIMEOUT_S):
                data = await reader.read(SNIFF_BYTES)
            host = tls_server_name(data) or http_host(data)
        except (TimeoutError, ConnectionError, OSError):
            pass
        self.note("connect", host or address, port, address)
        writer.close()


class _DnsSink(asyncio.DatagramProtocol):
    """Answers every DNS query NXDOMAIN and notes the name looked up."""

    def __init__(self, guard: NetGuard) -> None:
        self.guard = guard
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr) -> None:
        q = dns_question(data)
        if q is None or self.transport is None:
            return
        self.guard.note("dns", q[0], q[1])
        self.transport.sendto(nxdomain(data), addr)
