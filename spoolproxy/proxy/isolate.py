"""Running the program where the only reachable endpoint is the proxy (``--isolate``).

A client that ignores ``HTTPS_PROXY`` (aiohttp without ``trust_env=True``, Node < 24
``fetch``, the npm ``openai`` package on such a Node) would, in playback, silently reach the
real network.  Under isolation the program runs in a Linux network namespace of its own
(``unshare(CLONE_NEWNET)``; inside a new user namespace, ``CLONE_NEWUSER``, when not root,
with the caller's uid and gid mapped to themselves, so files keep their owners): its only
interface is loopback, IPv4 (and IPv6 where enabled) is routed to loopback, and before
``exec`` the child binds a few sockets there and hands them to this process over a Unix
socket pair (``SCM_RIGHTS``): a listener on the proxy's own address, relayed to the real
proxy, a DNS sinkhole on the resolver addresses and a trap on ports 80/443
(:mod:`.netguard`).  So a client honouring the proxy variables works as usual, and one that
does not fails at once (``NXDOMAIN``, connection refused) while :attr:`Isolation.attempts`
names the host it tried.

Not covered: Unix sockets (a local Docker or D-Bus socket stays reachable) and ports of
other programs on this host's loopback (a local tool server must go through the proxy:
``--no-proxy-localhost`` does not work under isolation).

:func:`unavailable` probes once per process whether this platform allows it (Linux with user
namespaces, or root) and returns the reason when it does not.
"""

from __future__ import annotations

import errno
import fcntl
import ipaddress
import os
import socket
import struct
import sys
import threading
from pathlib import Path
from typing import Callable, Sequence

from .netguard import Attempt, NetGuard

#: ports the trap listens on for direct connections (HTTP and HTTPS)
TRAP_PORTS = (443, 80)
#: resolver addresses always sinkholed (glibc's default, systemd-resolved's stub)
DEFAULT_RESOLVERS = ("127.0.0.1", "127.0.0.53")

# ioctl and rtnetlink numbers (linux/sockios.h, linux/if.h, linux/rtnetlink.h, linux/netlink.h)
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_RTM_NEWROUTE, _NLMSG_ERROR = 24, 2
_NLM_F_REQUEST, _NLM_F_ACK, _NLM_F_EXCL, _NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
_RT_TABLE_LOCAL, _RTPROT_BOOT, _RT_SCOPE_HOST, _RTN_LOCAL, _RTA_OIF = 255, 3, 254, 2, 4

_PROBE: list[str | None] = []
_PROBE_LOCK = threading.Lock()


def resolver_addresses(path: str | Path = "/etc/resolv.conf") -> list[str]:
    """The ``nameserver`` addresses of ``resolv.conf`` plus :data:`DEFAULT_RESOLVERS`."""
    found: list[str] = []
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            addr = parts[1].split("%", 1)[0]
            try:
                ipaddress.ip_address(addr)
            except ValueError:
                continue
            found.append(addr)
    return list(dict.fromkeys([*found, *DEFAULT_RESOLVERS]))


# -- inside the child (between fork and exec: only system calls, nothing imported) ----------
def _enter_namespace(uid: int, gid: int, userns: bool | None) -> None:
    """unshare a network namespace: directly as root, else (or when ``userns``) inside a new
    user namespace."""
    if uid == 0 and not userns:
        try:
            os.unshare(os.CLONE_NEWNET)
            return
        except OSError:
            pass  # root without CAP_SYS_ADMIN (a container): try a user namespace
    os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNET)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, _SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def _route_all_to_loopback(family: int) -> None:
    """``ip route add local 0.0.0.0/0 dev lo`` (or ``::/0``) in the local table, by rtnetlink."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as nl:
        nl.bind((0, 0))
        body = struct.pack("BBBBBBBBI", family, 0, 0, 0, _RT_TABLE_LOCAL, _RTPROT_BOOT, _RT_SCOPE_HOST, _RTN_LOCAL, 0)
        body += struct.pack("HHI", 8, _RTA_OIF, socket.if_nametoindex("lo"))
        flags = _NLM_F_REQUEST | _NLM_F_ACK | _NLM_F_CREATE | _NLM_F_EXCL
        nl.send(struct.pack("IHHII", 16 + len(body), _RTM_NEWROUTE, flags, 1, 0) + body)
        reply = nl.recv(4096)
        if len(reply) >= 20 and struct.unpack("H", reply[4:6])[0] == _NLMSG_ERROR:
            err = -struct.unpack("i", reply[16:20])[0]
            if err and err != errno.EEXIST:
                raise OSError(err, f"rtnetlink: {os.strerror(err)}")


def _bind(family: int, kind: int, addr: tuple) -> socket.socket:
    s = socket.socket(family, kind)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind(addr)
    if kind == socket.SOCK_STREAM:
        s.listen(128)
    return s


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class Isolation:
    """One isolated run of a program (see the module docstring).

    ``relays``: ``(host, port)`` addresses of the proxy (forward proxy, reverse proxies) the
    program gets through, at the same address inside the namespace.  Use as a context
    manager around starting the program with :attr:`preexec` as (part of) its
    ``preexec_fn``; :attr:`attempts` lists what was blocked, :attr:`error` says why the
    namespace could not be made (the child then fails to start:
    ``subprocess.SubprocessError``).  ``resolvers``: addresses to sinkhole DNS on (default:
    :func:`resolver_addresses`); ``userns``: True forces a user namespace also as root
    (what an unprivileged user gets), None picks.
    """

    def __init__(self, relays: Sequence[tuple[str, int]], resolvers: Sequence[str] | None = None, *,
                 userns: bool | None = None) -> None:
        self.relays = [(h, int(p)) for h, p in relays]
        self.userns = userns
        self.resolvers = list(resolvers) if resolvers is not None else resolver_addresses()
        self.error: str | None = None
        self.guard: NetGuard | None = None
        self._parent: socket.socket | None = None
        self._child: socket.socket | None = None
        self._waiter: threading.Thread | None = None
        self._closed = threading.Event()

    @property
    def attempts(self) -> list[Attempt]:
        """Blocked network accesses of the program (empty before it ran)."""
        return self.guard.attempts if self.guard is not None else []

    def __enter__(self) -> "Isolation":
        self._parent, self._child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._waiter = threading.Thread(target=self._receive, name="spoolproxy-isolate", daemon=True)
        self._waiter.start()
        return self

    def __exit__(self, *exc) -> None:
        self._closed.set()
        for s in (self._child, self._parent):
            if s is not None:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        if self._waiter is not None:
            self._waiter.join(5)
        if self.guard is not None:
            self.guard.stop()
        for s in (self._child, self._parent):
            if s is not None:
                s.close()

    def failure(self, timeout: float = 2.0) -> str | None:
        """Why the namespace could not be made (waits up to ``timeout`` seconds for the child's
        message), or None."""
        if self.error is None and self._waiter is not None:
            self._waiter.join(timeout)
        return self.error

    # -- the child's side -----------------------------------------------------------------
    @property
    def preexec(self) -> Callable[[], None]:
        """The ``preexec_fn`` that enters the namespace and hands its sockets over.  Raises
        (in the child, so the program does not start) when the namespace cannot be made."""
        assert self._child is not None, "use Isolation as a context manager"
        chan = self._child
        uid, gid = os.geteuid(), os.getegid()
        relays, resolvers, userns = list(self.relays), list(self.resolvers), self.userns

        def preexec() -> None:
            try:
                _enter_namespace(uid, gid, userns)
                _loopback_up()
                _route_all_to_loopback(socket.AF_INET)
                try:
                    _route_all_to_loopback(socket.AF_INET6)
                    v6 = True
                except OSError:
                    v6 = False
                socks = [_bind(_family(h), socket.SOCK_STREAM, (h, p)) for h, p in relays]
                head = f"{len(socks)}"
                dns = []
                for addr in resolvers:
                    if ":" in addr and not v6:
                        continue
                    try:
                        dns.append(_bind(_family(addr), socket.SOCK_DGRAM, (addr, 53)))
                    except OSError:
                        continue
                traps = []
                for port in TRAP_PORTS:
                    if any(p == port for _, p in relays):
                        continue
                    for fam, any_addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
                        if fam == socket.AF_INET6 and not v6:
                            continue
                        try:
                            traps.append(_bind(fam, socket.SOCK_STREAM, (any_addr, port)))
                        except OSError:
                            continue
                head += f" {len(dns)} {len(traps)}"
                all_socks = [*socks, *dns, *traps]
                socket.send_fds(chan, [b"ok " + head.encode()], [s.fileno() for s in all_socks])
            except BaseException as exc:
                try:
                    chan.send(f"error {exc}".encode("utf-8", "replace")[:1000])
                except OSError:
                    pass
                raise

        return preexec

    # -- this process's side ------------------------------------------------------------------
    def _receive(self) -> None:
        """Wait for the child's sockets (or its error), then serve them."""
        assert self._parent is not None
        try:
            msg, fds, _flags, _addr = socket.recv_fds(self._parent, 2048, 64)
        except OSError:
            return
        if not msg:
            return
        if msg.startswith(b"error "):
            self.error = msg[6:].decode("utf-8", "replace")
            return
        try:
            n_relay, n_dns, n_trap = (int(x) for x in msg.split()[1:4])
        except ValueError:
            self.error = "the isolated child sent a malformed message"
            for fd in fds:
                os.close(fd)
            return
        socks = [socket.socket(fileno=fd) for fd in fds]
        relays = [(s, target) for s, target in zip(socks[:n_relay], self.relays)]
        self.guard = NetGuard(relays, socks[n_relay:n_relay + n_dns], socks[n_relay + n_dns:n_relay + n_dns + n_trap])
        self.guard.start()


def unavailable() -> str | None:
    """None when programs can be isolated here; else one line saying why not.  Probed once
    per process by starting ``true`` (or this Python) in an isolated namespace."""
    with _PROBE_LOCK:
        if not _PROBE:
            _PROBE.append(_probe())
        return _PROBE[0]


def _probe() -> str | None:
    import shutil
    import subprocess

    if not sys.platform.startswith("linux"):
        return f"network isolation needs Linux network namespaces (this is {sys.platform})"
    if not hasattr(os, "unshare"):
        return "network isolation needs os.unshare (Python >= 3.12 on Linux)"
    prog = shutil.which("true") or sys.executable
    argv = [prog] if prog != sys.executable else [prog, "-c", ""]
    with Isolation([], resolvers=[]) as iso:
        try:
            subprocess.run(argv, preexec_fn=iso.preexec, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=20, check=False)
        except (subprocess.SubprocessError, OSError) as exc:
            why = iso.failure() or str(exc)
            hint = ("user namespaces are disabled or restricted here (sysctl kernel.unprivileged_userns_clone, "
                    "kernel.apparmor_restrict_unprivileged_userns, or a container's seccomp profile)"
                    if os.geteuid() != 0 else "this root lacks CAP_SYS_ADMIN (a container?)")
            return f"cannot create a network namespace ({why}): {hint}"
    return None
