"""Run mitmproxy in-process: a master with its own asyncio loop on a background thread.

:class:`ProxyRunner` builds options the way ``mitmdump`` does (mitmproxy's default addons,
``confdir`` = the per-user spoolproxy CA directory) but without mitmdump's console output
(no termlog, no dumper, no errorcheck ``sys.exit``): mitmproxy's log records go to
:attr:`ProxyRunner.log` (a bounded list) and, with ``verbose=True``, to stderr.

Modes: ``regular`` (a forward proxy for HTTP_PROXY/HTTPS_PROXY) on ``listen_port`` (0 = a
free port), plus one ``reverse:URL@PORT`` per ``reverse`` upstream, each on its own free
port.  ``connect_to`` rules (see :mod:`.upstream`) redirect upstream connections.

mitmproxy keeps the running master in a module global (``mitmproxy.ctx``), so only one
ProxyRunner may run per process at a time; a second :meth:`start` raises SpoolError.
Used by ``spoolproxy record`` and ``spoolproxy playback``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import sys
import threading
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import SpoolError
from .ca import ensure_ca
from .upstream import ConnectTo, parse_connect_to, parse_reverse_spec, parse_upstream_proxy, upstream_trust_file

_ACTIVE = threading.Lock()  # one mitmproxy master per process (mitmproxy.ctx is global)


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

    # -- public ---------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The forward proxy's port (after :meth:`start`)."""
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

    def start(self, timeout: float = 15.0) -> None:
        """Start the proxy; block until it listens.  Raises SpoolError (port in use,
        bad option, another runner active in this process, start-up timeout)."""
        if not _ACTIVE.acquire(blocking=False):
            raise SpoolError("another spoolproxy proxy is already running in this process; stop it first")
        self._owns_lock = True
        try:
            self._prepare()
            self._thread = threading.Thread(target=self._thread_main, name="spoolproxy-mitmproxy", daemon=True)
            self._thread.start()
            if not self._started.wait(timeout):
                raise SpoolError(f"the proxy did not start within {timeout:.0f} s")
            if self._error is not None:
                raise self._error
        except BaseException:
            self._release()
            raise

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the proxy's event loop thread and return its result
        (awaited when it is a coroutine function).  Re-raises its exception."""
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
        """Shut down (runs the addons' ``done`` hooks) and wait for the thread.  Idempotent."""
        try:
            if self.master is not None and self._thread is not None and self._thread.is_alive():
                self.master.shutdown()
                self._thread.join(timeout)
        finally:
            self._release()

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

    def _prepare(self) -> None:
        self.ca = ensure_ca()
        opts: dict[str, Any] = {
            "confdir": str(self.ca.confdir),
            "listen_host": self.listen_host,
            "listen_port": self.listen_port,
            "ssl_insecure": bool(self.insecure_upstream),
        }
        if self.upstream_ca is not None:
            opts["ssl_verify_upstream_trusted_ca"] = str(upstream_trust_file(self.upstream_ca, self.ca.confdir.parent))
        modes = ["regular"]
        if self.upstream_proxy is not None:
            url, auth = self.upstream_proxy
            modes = [f"upstream:{url}"]
            if auth:
                opts["upstream_auth"] = auth
        for url, fixed in self.reverse:
            port = fixed or _free_port(self.listen_host)
            self._reverse_ports[url] = port
            self.connect_to.reverse_ports[port] = url
            modes.append(f"reverse:{url}@{port}")
        opts["mode"] = modes
        opts.update(self.extra_options)
        self._options = opts

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            if not self._started.is_set():
                self._error = exc if isinstance(exc, SpoolError) else SpoolError(f"the proxy failed to start: {exc}")
        finally:
            self._started.set()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    async def _main(self) -> None:
        from mitmproxy import exceptions, master, options
        from mitmproxy.addons import default_addons
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
                ok = await ps.setup_servers()
                if not ok:
                    raise self._listen_error(ps)
                for inst in ps.servers:
                    port = inst.listen_addrs[0][1] if inst.listen_addrs else None
                    if inst.mode.type_name in ("regular", "upstream"):
                        self._port = port
                try:
                    await m.running()
                    self._started.set()
                    await m.should_exit.wait()
                finally:
                    try:
                        await ps.servers.update([])  # stop listening; mitmproxy leaves this to process exit
                    finally:
                        await m.done()
                        await _cancel_other_tasks()
        finally:
            mlog.removeHandler(self.log)

    def _listen_error(self, ps) -> SpoolError:
        for inst in ps.servers:
            exc = inst.last_exception
            if exc is None:
                continue
            port = inst.mode.listen_port(self.listen_port)
            if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
                what = "--port" if inst.mode.type_name in ("regular", "upstream") else "reverse proxy port"
                return SpoolError(f"port {port} on {self.listen_host} is already in use; choose another {what} or omit it")
            if isinstance(exc, OSError) and exc.errno in (errno.EADDRNOTAVAIL, errno.EACCES):
                return SpoolError(f"cannot listen on {self.listen_host}:{port}: {exc.strerror}; check --listen-host/--port")
            return SpoolError(f"the proxy cannot listen on {self.listen_host}:{port}: {exc}")
        return SpoolError("the proxy failed to start its servers")


async def _cancel_other_tasks() -> None:
    """Cancel the connection handlers still running (clients that kept a connection open)."""
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, _ctx: None)  # cancelled handlers are expected here
    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=2)


def _free_port(host: str) -> int:
    """A currently free TCP port on ``host`` (for reverse modes, which need distinct ports)."""
    fam = socket.AF_INET6 if ":" in (host or "") else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.bind((host or "127.0.0.1", 0))
        return s.getsockname()[1]
