"""Run mitmproxy in-process: a master with its own asyncio loop on a background thread.

:class:`ProxyRunner` builds options the way ``mitmdump`` does (mitmproxy's default addons,
``confdir`` = the per-user spoolproxy CA directory) but without mitmdump's console output
(no termlog, no dumper, no errorcheck ``sys.exit``): mitmproxy's log records go to
:attr:`ProxyRunner.log` (a bounded list) and, with ``verbose=True``, to stderr.

Modes: ``regular`` (a forward proxy for HTTP_PROXY/HTTPS_PROXY) on ``listen_port`` (0 = a
free port), plus one ``reverse:URL@PORT`` per ``reverse`` upstream, each on its own free
port.  ``connect_to`` rules (see :mod:`.upstream`) redirect upstream connections.

Start-up comes in two steps, so a program run through the proxy never waits for
mitmproxy's imports (about 0.5 s): :meth:`ProxyRunner.bind` takes the listening sockets
(stdlib only; from then on clients can connect, and their connections wait in the kernel's
accept queue), then :meth:`ProxyRunner.start` brings mitmproxy up on the background thread
and serves those sockets (mitmproxy's own listeners are off, ``server=False``; each accepted
connection goes to the :class:`~mitmproxy.proxy.mode_servers.ServerInstance` of its mode,
as mitmproxy's listener would hand it).  ``start(wait=False)`` returns at once; a
:meth:`ProxyRunner.stop` before mitmproxy is up and before any client connected gives the
proxy up without waiting for its imports to finish: the background import stops at the
next module (:class:`_ImportGate`), so no thread is left importing when the process exits.

mitmproxy keeps the running master in a module global (``mitmproxy.ctx``), so only one
ProxyRunner may run per process at a time; a second :meth:`start` raises SpoolError.
Used by ``spoolproxy record`` and ``spoolproxy playback``.
"""

from __future__ import annotations

import errno
import logging
import select
import socket
import sys
import threading
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..errors import SpoolError
from .ca import ensure_ca
from .upstream import ConnectTo, parse_connect_to, parse_reverse_spec, parse_upstream_proxy, upstream_trust_file

if TYPE_CHECKING:
    import asyncio

_ACTIVE = threading.Lock()  # one mitmproxy master per process (mitmproxy.ctx is global)


class _ImportCancelled(BaseException):
    """Raised inside a cancelled proxy thread's import; a BaseException, so no ``except
    ImportError``/``except Exception`` in the modules being imported mistakes it for a
    missing optional dependency (an interrupted module is simply left out of sys.modules)."""


class _ImportGate:
    """A :data:`sys.meta_path` finder that finds nothing: it only stops the imports of a
    thread whose proxy start was called off, at the next module it would import.  Without
    it, giving up a start would leave a daemon thread importing mitmproxy when the process
    exits, which can crash the interpreter's shutdown inside an extension module."""

    def __init__(self) -> None:
        self.cancelled: set[int] = set()

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001 - importlib's protocol
        if self.cancelled and threading.get_ident() in self.cancelled:
            raise _ImportCancelled(name)
        return None

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)


_GATE = _ImportGate()


class _LogSink(logging.Handler):
    """Keeps the last mitmproxy log records; echoes them to stderr when verbose."""

    def __init__(self, verbose: bool, maxlen: int = 500) -> None:
        super().__init__(logging.DEBUG if verbose else logging.INFO)
        self.records: deque[logging.LogRecord] = deque(maxlen=maxlen)
        self.addon_errors: list[str] = []
        self.verbose = verbose

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if record.levelno >= logging.ERROR and record.name == "mitmproxy.addonmanager" and len(self.addon_errors) < 100:
            self.addon_errors.append(record.getMessage().splitlines()[0])
        if self.verbose:
            try:
                print(f"[mitmproxy] {record.getMessage()}", file=sys.stderr)
            except Exception:  # pragma: no cover - never let logging break the proxy
                pass


class ProxyRunner:
    """Runs a mitmproxy master in-process on a background thread with its own asyncio loop.

    ``addons``: mitmproxy addon objects added after the default addons (and after the
    ``--connect-to`` addon).  ``listen_host``/``listen_port``: the forward proxy's address
    (port 0 = free port).  ``reverse``: upstream base URLs (``https://api.openai.com``,
    or ``URL@PORT`` for a fixed local port), one local port each (:attr:`reverse_ports`).  ``options``: extra mitmproxy options,
    e.g. ``{"connection_strategy": "lazy"}``.  ``upstream_ca``: a PEM file trusted for
    upstream servers in addition to the usual roots.  ``insecure_upstream``: do not verify
    upstream certificates.  ``connect_to``: ``HOST1:PORT1:HOST2:PORT2`` rules.
    ``upstream_proxy``: ``http(s)://[user:pass@]host:port`` of a proxy the forward proxy
    chains to (mitmproxy's upstream mode; reverse proxies connect directly).

    Raises UsageError (from the constructor) for a malformed ``connect_to``/``reverse``;
    :meth:`start` raises SpoolError when a port is in use or mitmproxy rejects an option.
    """

    def __init__(
        self,
        addons: list[object],
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        reverse: Sequence[str] = (),
        options: Mapping[str, object] | None = None,
        upstream_ca: Path | None = None,
        insecure_upstream: bool = False,
        connect_to: Sequence[str] = (),
        verbose: bool = False,
        upstream_proxy: str | None = None,
    ) -> None:
        self.addons = list(addons)
        self.listen_host = listen_host
        self.listen_port = int(listen_port)
        self.reverse = [parse_reverse_spec(u) for u in reverse]
        self.extra_options = dict(options or {})
        self.upstream_ca = Path(upstream_ca) if upstream_ca else None
        self.insecure_upstream = insecure_upstream
        self.connect_to = ConnectTo([parse_connect_to(s) for s in connect_to])
        self.upstream_proxy = parse_upstream_proxy(upstream_proxy) if upstream_proxy else None
        self.log = _LogSink(verbose)
        self.master = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._port: int | None = None
        self._reverse_ports: dict[str, int] = {}
        self._owns_lock = False
        self._sockets: list[tuple[str, socket.socket]] = []  # (mitmproxy mode spec, bound socket)
        self._servers: list[asyncio.AbstractServer] = []
        self._phase = "new"  # new | bound | importing | starting | running | cancelled | done
        self._phase_lock = threading.Lock()
        self._on_failure: Callable[[BaseException], None] | None = None

    # -- public ---------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The forward proxy's port (after :meth:`bind` or :meth:`start`)."""
        if self._port is None:
            raise SpoolError("the proxy is not running")
        return self._port

    @property
    def connect_host(self) -> str:
        """The address clients on this machine use (127.0.0.1 for a wildcard listen host)."""
        host = self.listen_host or "127.0.0.1"
        return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host

    @property
    def proxy_url(self) -> str:
        """``http://HOST:PORT`` of the forward proxy (IPv6 hosts bracketed)."""
        host = self.connect_host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def addon_errors(self) -> list[str]:
        """First lines of exceptions raised inside addons (spoolproxy's or yours) so far."""
        return list(self.log.addon_errors)

    @property
    def reverse_ports(self) -> dict[str, int]:
        """Upstream base URL -> local port of its reverse proxy."""
        return dict(self._reverse_ports)

    @property
    def listen_addrs(self) -> list[tuple]:
        """``socket.getsockname()`` of every listening socket (after :meth:`bind`)."""
        return [sock.getsockname() for _, sock in self._sockets if sock.fileno() >= 0]

    @property
    def failure(self) -> BaseException | None:
        """Why the proxy could not start (a SpoolError), once :meth:`start` ran in the background."""
        return self._error

    def bind(self) -> None:
        """Take this process's proxy slot, make sure the CA exists and bind every listening
        socket, without importing mitmproxy.  From now on clients may connect (their
        connections wait in the kernel's accept queue until the proxy runs) and
        :attr:`port`, :attr:`proxy_url`, :attr:`reverse_ports` and ``ca`` are known.
        Idempotent.  Raises SpoolError (port in use, another runner active, a damaged CA)."""
        if self._phase != "new":
            return
        if not _ACTIVE.acquire(blocking=False):
            raise SpoolError("another spoolproxy proxy is already running in this process; stop it first")
        self._owns_lock = True
        try:
            self._prepare()
        except BaseException:
            self._close_sockets()
            self._release()
            raise
        self._phase = "bound"

    def start(self, timeout: float = 15.0, *, wait: bool = True,
              on_failure: Callable[[BaseException], None] | None = None) -> None:
        """Start the proxy (binding first when :meth:`bind` was not called).  With ``wait``,
        block until it serves; raises SpoolError (port in use, bad option, another runner
        active in this process, start-up timeout).  Without, return at once: a failure is
        then kept in :attr:`failure`, the listening sockets are closed (so waiting clients
        see their connection reset rather than hang) and ``on_failure(error)`` is called
        from the proxy thread."""
        self.bind()
        self._on_failure = on_failure
        with self._phase_lock:
            self._phase = "importing"
        _GATE.install()
        try:
            self._thread = threading.Thread(target=self._thread_main, name="spoolproxy-mitmproxy", daemon=True)
            self._thread.start()
            if wait:
                self.wait_started(timeout)
        except BaseException:
            self._close_sockets()
            self._release()
            raise

    def wait_started(self, timeout: float = 15.0) -> None:
        """Block until the proxy started by ``start(wait=False)`` serves; raises its
        SpoolError or a start-up timeout."""
        if not self._started.wait(timeout):
            raise SpoolError(f"the proxy did not start within {timeout:.0f} s")
        if self._error is not None:
            raise self._error

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the proxy's event loop thread and return its result
        (awaited when it is a coroutine function).  Re-raises its exception."""
        import asyncio

        if self._loop is None or not self._loop.is_running():
            raise SpoolError("the proxy is not running")
        if threading.current_thread() is self._thread:
            return fn(*args)
        fut: Future = Future()

        def run() -> None:
            try:
                res = fn(*args)
                if asyncio.iscoroutine(res):
                    task = asyncio.ensure_future(res)
                    task.add_done_callback(
                        lambda t: fut.set_exception(t.exception()) if t.exception() else fut.set_result(t.result())
                    )
                    return
                fut.set_result(res)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                fut.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return fut.result()

    def stop(self, timeout: float = 15.0) -> None:
        """Shut down (runs the addons' ``done`` hooks) and wait for the thread.  Idempotent.

        When mitmproxy is still being imported and no client has connected, the start is
        called off instead (nothing went through the proxy, so nothing is lost) and this
        returns at once; otherwise it waits for the start, then shuts down, so connections
        already waiting are served."""
        try:
            if self._thread is not None and self._thread.is_alive():
                if self._give_up_if_idle():
                    return
                self._started.wait(timeout)
                if self.master is not None and self._thread.is_alive():
                    self.master.shutdown()
                    self._thread.join(timeout)
        finally:
            self._close_sockets()
            self._release()

    def _give_up_if_idle(self) -> bool:
        """Call the start off when mitmproxy is still importing and no connection waits;
        the thread stops at its next module import and is joined."""
        with self._phase_lock:
            if self._phase != "importing":
                return False
            socks = [s for _, s in self._sockets if s.fileno() >= 0]
            try:
                waiting, _, _ = select.select(socks, [], [], 0)
            except (OSError, ValueError):
                waiting = socks
            if waiting:
                return False
            self._phase = "cancelled"
            thread = self._thread
            if thread is not None and thread.ident is not None:
                _GATE.cancelled.add(thread.ident)
        self._close_sockets()
        if thread is not None:
            thread.join()
            _GATE.cancelled.discard(thread.ident)
        return True

    def __enter__(self) -> "ProxyRunner":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals ------------------------------------------------------------------
    def _release(self) -> None:
        if self._owns_lock:
            self._owns_lock = False
            _ACTIVE.release()

    def _close_sockets(self) -> None:
        for _, sock in self._sockets:
            try:
                sock.close()
            except OSError:  # pragma: no cover
                pass

    def _listen(self, port: int, what: str) -> socket.socket:
        """A listening TCP socket on ``listen_host:port`` (both IPv4 and IPv6 for a wildcard
        host, as mitmproxy listens).  Raises SpoolError naming the option to change."""
        host = self.listen_host
        try:
            dual = host in ("", "::") and socket.has_dualstack_ipv6()
            fam = socket.AF_INET6 if dual or ":" in host else socket.AF_INET
            if fam == socket.AF_INET and host and not _is_ipv4(host):
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                fam, host = infos[0][0], infos[0][4][0]
            # proto=IPPROTO_TCP, as asyncio's own listeners have it: asyncio sets TCP_NODELAY
            # only on such sockets, and without it Nagle's algorithm adds 40 ms to replies
            sock = socket.socket(fam, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if fam == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if dual else 1)
                sock.bind(("::" if dual else (host or "0.0.0.0"), port))
                sock.listen(512)
            except BaseException:
                sock.close()
                raise
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise SpoolError(f"port {port} on {self.listen_host} is already in use; choose another {what} or omit it") from None
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EACCES):
                raise SpoolError(f"cannot listen on {self.listen_host}:{port}: {exc.strerror}; check --listen-host/--port") from None
            raise SpoolError(f"the proxy cannot listen on {self.listen_host}:{port}: {exc}") from None
        return sock

    def _prepare(self) -> None:
        self.ca = ensure_ca()
        opts: dict[str, Any] = {
            "confdir": str(self.ca.confdir),
            "listen_host": self.listen_host,
            "listen_port": self.listen_port,
            "ssl_insecure": bool(self.insecure_upstream),
            "server": False,  # mitmproxy's own listeners stay off: it serves the sockets bound here
        }
        if self.upstream_ca is not None:
            opts["ssl_verify_upstream_trusted_ca"] = str(upstream_trust_file(self.upstream_ca, self.ca.confdir.parent))
        modes = ["regular"]
        if self.upstream_proxy is not None:
            url, auth = self.upstream_proxy
            modes = [f"upstream:{url}"]
            if auth:
                opts["upstream_auth"] = auth
        forward = self._listen(self.listen_port, "--port")
        self._port = forward.getsockname()[1]
        self._sockets.append((modes[0], forward))
        for url, fixed in self.reverse:
            sock = self._listen(fixed or 0, "reverse proxy port")
            port = sock.getsockname()[1]
            self._reverse_ports[url] = port
            self.connect_to.reverse_ports[port] = url
            modes.append(f"reverse:{url}@{port}")
            self._sockets.append((modes[-1], sock))
        self.connect_to.own_ports = {self._port, *self._reverse_ports.values()}
        opts["mode"] = modes
        opts.update(self.extra_options)
        self._options = opts

    def _thread_main(self) -> None:
        try:
            from mitmproxy import master  # noqa: F401 - the slow part: mitmproxy and its default addons
            from mitmproxy.addons import default_addons  # noqa: F401
        except _ImportCancelled:
            self._started.set()
            return
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._fail(SpoolError(f"the proxy failed to start: cannot import mitmproxy ({exc})"))
            self._started.set()
            return
        with self._phase_lock:
            if self._phase == "cancelled":  # stop() gave the start up meanwhile
                self._started.set()
                return
            self._phase = "starting"
        import asyncio

        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            if not self._started.is_set():
                self._fail(exc if isinstance(exc, SpoolError) else SpoolError(f"the proxy failed to start: {exc}"))
        finally:
            self._phase = "done"
            self._started.set()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def _fail(self, exc: SpoolError) -> None:
        """The start failed: keep why, close the sockets, tell whoever waits in the background."""
        self._error = exc
        self._close_sockets()
        if self._on_failure is not None:
            try:
                self._on_failure(exc)
            except Exception:  # pragma: no cover - a callback must not hide the failure
                pass

    async def _main(self) -> None:
        import asyncio

        from mitmproxy import exceptions, master, options
        from mitmproxy.addons import default_addons
        from mitmproxy.proxy.mode_servers import ServerInstance
        from mitmproxy.utils import asyncio_utils

        mlog = logging.getLogger("mitmproxy")
        mlog.propagate = False
        mlog.addHandler(self.log)
        if mlog.level == logging.NOTSET or mlog.level > self.log.level:
            mlog.setLevel(self.log.level)
        try:
            opts = options.Options()
            m = master.Master(opts, event_loop=asyncio.get_running_loop(), with_termlog=False)
            m.addons.add(*default_addons())
            m.addons.add(self.connect_to)
            m.addons.add(*self.addons)
            try:
                opts.update(**self._options)
            except (exceptions.OptionsError, KeyError) as exc:
                raise SpoolError(f"invalid proxy option: {exc}") from None
            self.master = m
            with (
                asyncio_utils.install_exception_handler(m._asyncio_exception_handler),
                asyncio_utils.set_eager_task_factory(),
            ):
                ps = m.addons.get("proxyserver")
                for spec, sock in self._sockets:  # connections queued since bind() are accepted now
                    inst = ServerInstance.make(spec, ps)
                    self._servers.append(await asyncio.start_server(inst.handle_stream, sock=sock, backlog=512))
                try:
                    await m.running()
                    self._phase = "running"
                    self._started.set()
                    await m.should_exit.wait()
                finally:
                    try:
                        for srv in self._servers:  # stop listening; mitmproxy leaves this to process exit
                            srv.close()
                    finally:
                        await m.done()
                        await _cancel_other_tasks()
        finally:
            mlog.removeHandler(self.log)


async def _cancel_other_tasks() -> None:
    """Cancel the connection handlers still running (clients that kept a connection open)."""
    import asyncio

    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, _ctx: None)  # cancelled handlers are expected here
    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=2)


def _is_ipv4(host: str) -> bool:
    try:
        socket.inet_aton(host)
    except OSError:
        return False
    return host.count(".") == 3
