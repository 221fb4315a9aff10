"""Options and run loop shared by ``spoolproxy record`` and ``spoolproxy playback``.

Usage in a sub-command module (this is how ``record`` does it; ``playback`` can do the same
and add its own options such as ``--record-mode``)::

    @click.command(context_settings=COMMAND_CONTEXT)
    @proxy_options              # --port --listen-host --reverse --connect-to --upstream-ca
                                # --insecure-upstream --proxy-localhost/--no-proxy-localhost
                                # --no-proxy --config --quiet --verbose, and CMD...
    @click.option("--cassette", ...)
    def command(proxy: ProxySettings, cassette: str) -> None:
        runner = proxy.make_runner([MyAddon(...)], options={...})
        code = run_session(proxy, runner, banner="Recording")   # child or standalone
        ...
        raise SystemExit(code or 0)

``proxy_options`` folds its options into one :class:`ProxySettings` argument named
``proxy``.  :func:`run_session` starts the proxy, runs CMD with :func:`~spoolproxy.proxy.child.child_env`
(or, without CMD, prints the ``export`` lines and waits for SIGINT/SIGTERM), and always
stops the proxy, so addons' ``done`` hooks run.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import click

from ..errors import UsageError
from ..proxy.child import ChildEnd, check_command, child_env, export_lines, reverse_env, run_child_watched
from ..proxy.runner import ProxyRunner

#: context settings for commands taking ``-- CMD [ARGS...]``: everything after the first
#: positional argument belongs to CMD.
COMMAND_CONTEXT = {"ignore_unknown_options": True, "allow_interspersed_args": False, "help_option_names": ["-h", "--help"]}

#: ``ctx.meta`` key: the command line held a ``--`` separator (see :class:`CommandWithCmd`)
SEPARATOR_SEEN = "spoolproxy.separator_seen"


class CommandWithCmd(click.Command):
    """A command taking ``[-- CMD [ARGS]...]`` (use with ``cls=``).  click drops the ``--``
    itself, so this notes that one was given: ``spoolproxy record --`` with nothing after it
    (an empty ``$CMD`` in a CI script) is then a usage error, not standalone mode, which
    would wait for Ctrl-C forever.  ``without_cmd``: what leaving ``--`` out does, for the
    error message (``fork`` runs the recorded command)."""

    def __init__(self, *args: Any, without_cmd: str = "run standalone", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.without_cmd = without_cmd

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[SEPARATOR_SEEN] = "--" in args
        return super().parse_args(ctx, args)

_PROXY_KEYS = (
    "port", "listen_host", "reverse", "connect_to", "upstream_ca", "insecure_upstream",
    "proxy_localhost", "no_proxy", "config", "quiet", "verbose", "command_args", "upstream_proxy",
)


@dataclass
class ProxySettings:
    """The shared options, as given on the command line."""

    port: int = 0
    listen_host: str = "127.0.0.1"
    reverse: tuple[str, ...] = ()
    connect_to: tuple[str, ...] = ()
    upstream_ca: Path | None = None
    insecure_upstream: bool = False
    proxy_localhost: bool = True
    no_proxy: tuple[str, ...] = ()
    config: Path | None = None
    quiet: bool = False
    verbose: bool = False
    command: tuple[str, ...] = field(default_factory=tuple)
    upstream_proxy: str | None = None

    def make_runner(self, addons: list[object], *, options: Mapping[str, object] | None = None) -> ProxyRunner:
        """A :class:`ProxyRunner` for these settings.  Raises UsageError for malformed
        ``--connect-to``/``--reverse`` values."""
        return ProxyRunner(
            addons,
            listen_host=self.listen_host,
            listen_port=self.port,
            reverse=self.reverse,
            options=options,
            upstream_ca=self.upstream_ca,
            insecure_upstream=self.insecure_upstream,
            connect_to=self.connect_to,
            verbose=self.verbose,
            upstream_proxy=self.upstream_proxy,
        )

    def env_for(self, runner: ProxyRunner, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The child environment for a started ``runner`` (proxy, CA bundle, NO_PROXY and,
        for ``--reverse`` upstreams, ``SPOOLPROXY_REVERSE_<HOST>`` / ``OPENAI_BASE_URL`` /
        ``ANTHROPIC_BASE_URL``; see :func:`~spoolproxy.proxy.child.reverse_env`)."""
        env = child_env(
            runner.proxy_url,
            runner.ca.bundle,
            base=base,
            proxy_localhost=self.proxy_localhost,
            no_proxy=self.no_proxy,
            ca_cert=runner.ca.cert,
        )
        env.update(reverse_env(runner.reverse_ports, runner.connect_host, env))
        return env


def proxy_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator adding the shared proxy options and ``CMD...``; the command function
    receives them as one ``proxy: ProxySettings`` keyword."""

    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        picked = {k: kwargs.pop(k) for k in _PROXY_KEYS}
        cmd = tuple(picked.pop("command_args"))
        if cmd and cmd[0] == "--":
            cmd = cmd[1:]
        elif cmd and cmd[0].startswith("-") and cmd[0] != "-":
            raise UsageError(unknown_option_message(cmd[0], _option_names()))
        ctx = click.get_current_context(silent=True)
        if not cmd and ctx is not None and ctx.meta.get(SEPARATOR_SEEN):
            without = getattr(ctx.command, "without_cmd", "run standalone")
            raise UsageError("'--' is followed by no command: put CMD after it (e.g. -- python agent.py), "
                             f"or leave '--' out to {without}")
        if picked["port"] is not None and not 0 <= picked["port"] < 65536:
            raise UsageError(f"--port {picked['port']} is out of range 0-65535")
        settings = ProxySettings(
            port=picked["port"] or 0,
            listen_host=picked["listen_host"],
            reverse=tuple(picked["reverse"]),
            connect_to=tuple(picked["connect_to"]),
            upstream_ca=Path(picked["upstream_ca"]) if picked["upstream_ca"] else None,
            insecure_upstream=picked["insecure_upstream"],
            proxy_localhost=picked["proxy_localhost"],
            no_proxy=tuple(h for v in picked["no_proxy"] for h in v.split(",") if h.strip()),
            config=Path(picked["config"]) if picked["config"] else None,
            quiet=picked["quiet"],
            verbose=picked["verbose"],
            command=cmd,
            upstream_proxy=picked["upstream_proxy"],
        )
        return fn(proxy=settings, **kwargs)

    options = [
        click.argument("command_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- CMD [ARGS]...]"),
        click.option("--verbose", "-v", is_flag=True, help="Show mitmproxy's log on stderr."),
        click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors and warnings."),
        click.option("--config", type=click.Path(dir_okay=False), help="spoolproxy.toml to use (default: looked up from the cwd)."),
        click.option(
            "--no-proxy", "no_proxy", multiple=True, metavar="HOSTS",
            help="Hosts the program may reach directly, unrecorded (comma-separated, repeatable). "
            "An inherited NO_PROXY is never passed on.",
        ),
        click.option(
            "--proxy-localhost/--no-proxy-localhost", default=True, show_default=True,
            help="Send localhost/127.0.0.1/::1 through the proxy too (local tool servers get recorded); "
            "--no-proxy-localhost exempts them.",
        ),
        click.option("--insecure-upstream", is_flag=True, help="Do not verify upstream TLS certificates."),
        click.option(
            "--upstream-proxy", metavar="URL",
            help="Chain to this proxy (http://[user:pass@]host:port), e.g. a corporate proxy; "
            "an inherited HTTPS_PROXY is not used by spoolproxy itself.",
        ),
        click.option(
            "--upstream-ca", type=click.Path(dir_okay=False), metavar="PEM",
            help="Also trust this CA for upstream servers (a private or test CA).",
        ),
        click.option(
            "--connect-to", multiple=True, metavar="HOST1:PORT1:HOST2:PORT2",
            help="Connect to HOST2:PORT2 for requests to HOST1:PORT1 (curl's meaning; empty HOST1/PORT1 match any). "
            "The cassette keeps the original URL.",
        ),
        click.option(
            "--reverse", multiple=True, metavar="URL",
            help="Also run a reverse proxy for this upstream base URL, URL@PORT for a fixed local port "
            "(repeatable; one port each), for clients that cannot use a proxy. CMD gets "
            "SPOOLPROXY_REVERSE_<HOST>=http://127.0.0.1:PORT, and OPENAI_BASE_URL/ANTHROPIC_BASE_URL for those hosts.",
        ),
        click.option("--listen-host", default="127.0.0.1", show_default=True, help="Address the proxy listens on."),
        click.option("--port", "-p", type=int, default=None, help="Proxy port (default: a free port)."),
    ]
    for opt in options:
        wrapper = opt(wrapper)
    return wrapper


def _option_names() -> list[str]:
    """Every option name (``--cassette``, ``-c``...) of the command being invoked."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return []
    names: list[str] = []
    for param in ctx.command.get_params(ctx):
        if isinstance(param, click.Option):
            names += [*param.opts, *param.secondary_opts]
    return names


def unknown_option_message(word: str, names: list[str]) -> str:
    """``no such option: --casette (did you mean --cassette?)`` for an option-like first
    word of CMD that click passed through (CMD without ``--``; click drops a leading ``--``
    itself, so a program whose name starts with ``-`` cannot be run); the suggestion is the
    closest of ``names`` (difflib), omitted when none is close."""
    import difflib

    opt = word.split("=", 1)[0]
    close = difflib.get_close_matches(opt, [n for n in names if n.startswith("--")] if opt.startswith("--") else names,
                                      n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"no such option: {opt}{hint}"


def parse_size(text: str) -> int:
    """``10MB``, ``512k``, ``1g``, ``1048576`` -> bytes.  Raises UsageError."""
    s = str(text).strip().lower().replace(" ", "")
    for suffix in ("ib", "b"):
        if s.endswith(suffix) and s[: -len(suffix)][-1:].isalpha():
            s = s[: -len(suffix)]
            break
    if s.endswith("b"):
        s = s[:-1]
    mult = {"k": 1024, "m": 1024**2, "g": 1024**3}.get(s[-1:], 1)
    num = s[:-1] if s[-1:] in ("k", "m", "g") else s
    try:
        value = float(num)
    except ValueError:
        raise UsageError(f"size {text!r} is not a size; use e.g. 10MB, 512k or 1048576") from None
    if value < 0:
        raise UsageError(f"size {text!r} must not be negative")
    return int(value * mult)


def wait_for_signal(on_armed: Callable[[], None] | None = None) -> int:
    """Block until SIGINT or SIGTERM; return the signal number (main thread only).
    ``on_armed`` runs once the handlers are in place (print "press Ctrl-C" there, so a
    signal sent on seeing it cannot arrive before the handler).

    The stop is then under way: until the process exits, SIGINT and SIGTERM are ignored
    (``SIG_IGN``, which interpreter shutdown keeps), so an impatient second Ctrl-C while
    the cassette is written can neither abort the write nor turn a normal stop into an
    error; SIGKILL or SIGQUIT (Ctrl-\\) still end a stop that hangs."""
    got: list[int] = []
    ev = threading.Event()

    def handler(signum, _frame):
        got.append(signum)
        ev.set()

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if on_armed is not None:
            on_armed()
        while not ev.wait(0.5):
            pass
    except BaseException:
        for s, h in old.items():
            signal.signal(s, h)
        raise
    for s in old:
        signal.signal(s, signal.SIG_IGN)
    return got[0]


def run_session(
    settings: ProxySettings,
    runner: ProxyRunner,
    *,
    banner: str = "Recording",
    echo: Callable[[str], None] | None = None,
    env_base: Mapping[str, str] | None = None,
    stop_note: str = "write the cassette",
    stderr_tail: int = 0,
    timeout_s: float | None = None,
    on_end: Callable[[ChildEnd], None] | None = None,
    isolation=None,
) -> int | None:
    """Start ``runner``, then run ``settings.command`` through it and return its exit
    status; without a command print the ``export`` lines and wait for SIGINT/SIGTERM
    (returns None; ``stop_note`` says what stopping does).  The proxy is stopped in every
    case.  SIGTERM during start-up still stops cleanly.  ``stderr_tail``, ``timeout_s``: see
    :func:`~spoolproxy.proxy.child.run_child_watched`; ``on_end`` gets how CMD ended (before
    the proxy stops).  ``isolation``: an :class:`~spoolproxy.proxy.isolate.Isolation` to run
    CMD in (its relays are set to the proxy's addresses here; read its ``attempts``
    afterwards).  Raises SpoolError (port in use: exit 2; CMD not found: 127)."""
    say = echo or (lambda s: click.echo(s, err=True))
    if settings.command:
        check_command(settings.command, env_base)  # CMD not found: refuse before starting
    stop_requested: list[int] = []

    def early(signum, _frame):  # a signal while mitmproxy starts: stop once it is up
        stop_requested.append(signum)

    in_main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, early) for s in (signal.SIGTERM,)} if in_main else {}
    try:
        runner.bind()  # the ports are ours now: CMD's connections wait for the proxy
        if not settings.command:
            runner.start()
    except BaseException:
        runner.stop()
        raise
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    try:
        if stop_requested:
            return 128 + stop_requested[0] if settings.command else None
        env = settings.env_for(runner, env_base)
        if settings.command:
            if not settings.quiet:
                say(f"spoolproxy: {banner.lower()} via {runner.proxy_url}{_reverse_note(runner)}")

            def proxy_up(child) -> None:  # CMD runs: bring mitmproxy up meanwhile
                runner.start(wait=False, on_failure=lambda _exc: _stop_child(child))

            if isolation is not None:
                end = _run_isolated(settings.command, env, runner, isolation, stderr_tail, timeout_s, proxy_up)
            else:
                end = run_child_watched(settings.command, env, stderr_tail=stderr_tail, timeout_s=timeout_s,
                                        on_started=proxy_up)
            if on_end is not None:
                on_end(end)
            if runner.failure is not None:
                raise runner.failure
            return end.code
        click.echo(f"# spoolproxy: {banner.lower()} via {runner.proxy_url}; paste into another shell:")
        for line in export_lines(env, env_base if env_base is not None else os.environ):
            click.echo(line)
        wait_for_signal(lambda: click.echo(f"# press Ctrl-C (or send SIGTERM) to stop and {stop_note}"))
        return None
    finally:
        runner.stop()


def _stop_child(child) -> None:
    """The proxy failed to start under a running CMD: end CMD, whose requests cannot be served."""
    try:
        child.terminate()
    except OSError:  # pragma: no cover - already gone
        pass


def _run_isolated(command, env, runner: ProxyRunner, isolation, stderr_tail: int = 0,
                  timeout_s: float | None = None, on_started=None) -> ChildEnd:
    """Run CMD in ``isolation`` with the proxy (and reverse proxies) reachable inside."""
    from ..errors import SpoolError

    host = runner.connect_host
    isolation.relays = [(host, runner.port), *((host, p) for p in runner.reverse_ports.values())]
    with isolation:
        try:
            return run_child_watched(command, env, preexec=isolation.preexec, stderr_tail=stderr_tail,
                                     timeout_s=timeout_s, on_started=on_started)
        except SpoolError as exc:
            why = isolation.failure()
            if why:
                raise SpoolError(f"cannot isolate {command[0]}'s network: {why}; "
                                 "run without --isolate", exit_code=exc.exit_code) from None
            raise


def _reverse_note(runner: ProxyRunner) -> str:
    ports = runner.reverse_ports
    if not ports:
        return ""
    return "; " + ", ".join(f"{u} at http://{runner.connect_host}:{p}" for u, p in ports.items())


def relative_cwd() -> str:
    """The cwd, relative to the project (nearest parent with spoolproxy.toml,
    pyproject.toml or .git) when inside one, else absolute."""
    cwd = Path.cwd()
    for d in (cwd, *cwd.parents):
        if any((d / n).exists() for n in ("spoolproxy.toml", "pyproject.toml", ".git")):
            rel = cwd.relative_to(d)
            return "." if str(rel) == "." else str(rel)
    return str(cwd)
