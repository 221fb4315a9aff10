"""``spoolproxy record [OPTIONS] [-- CMD [ARGS]...]``: record a program's HTTP(S) traffic.

With CMD: start the proxy, run CMD with the proxy and CA environment, wait for it, write
the cassette, print a summary and exit with CMD's exit status.  Without CMD: print the
``export`` lines to paste into another shell and record until SIGINT/SIGTERM.

The cassette defaults to ``cassettes/<UTC time>-<ms>-<pid>.yaml`` under the current
directory.  Its path is checked for writability before CMD starts; an existing cassette is
replaced (``record_mode`` all, as vcrpy does) and ``record`` says so, unless this
recording produced nothing usable (no interaction, or only transport/TLS failures): then
the good cassette is kept, the failed run goes to ``<stem>.failed-<time>.yaml`` when it
holds anything, and one line says so (``--force`` overwrites anyway).  A cassette another
``spoolproxy record`` is recording right now is refused.  Secrets are redacted on every
write (the child's ``*_API_KEY``/``*_TOKEN``/``*_SECRET`` values are known from the start),
and so are the summary lines.  Clients that refused the spoolproxy CA are named by host,
with the fix for that kind of client.  Every completed interaction is
journalled (redacted, flushed) at once; after a crash the journal becomes the cassette on
the next ``record`` of the same path (into ``<stem>.recovered-<time>.yaml``) or with
``spoolproxy recover``.

``--tag KEY=VALUE`` (repeatable, added to ``SPOOLPROXY_TAGS``) and the git commit of the
working directory go into the cassette's ``spoolproxy:`` metadata (see
:mod:`spoolproxy.triage.tags`); ``cluster``, ``dashboard`` and ``annotate`` filter by them.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .. import __version__, config
from ..errors import SpoolError, UsageError
from ..proxy.child import NO_PROXY_VARS
from .common import COMMAND_CONTEXT, CommandWithCmd, ProxySettings, parse_size, proxy_options, relative_cwd, run_session
from .guard_options import guard_options, make_guard

if TYPE_CHECKING:  # the cassette models (pydantic) are imported when a recording starts, not for --help
    from ..cassettes.redact import Redactor
    from ..proxy.recorder import Recorder
    from ..proxy.summary import RunSummary
    from ..proxy.tlswatch import TlsWatch

#: mitmproxy options for recording: connect upstream only when a request needs it, so a
#: refused/unresolvable upstream is recorded against the real request (not the CONNECT).
RECORD_OPTIONS = {"connection_strategy": "lazy"}

#: bytes of CMD's stderr kept while it runs: redacted as a whole, then cut to the last
#: STDERR_KEEP characters, so a secret near the cut is redacted before it could be halved
STDERR_WINDOW = 8192
STDERR_KEEP = 4096


def default_cassette_path(now: datetime | None = None, pid: int | None = None) -> Path:
    """``cassettes/<YYYYmmdd-HHMMSS>-<ms>-<pid>.yaml`` (UTC) under the current directory.

    Milliseconds and the process id make the name unique, so two runs started in the same
    second never share a cassette; a ``-2``, ``-3``... suffix is added should the file or
    its journal exist all the same."""
    from ..cassettes.journal import journal_path

    now = now or datetime.now(timezone.utc)
    stem = f"{now.strftime('%Y%m%d-%H%M%S')}-{now.microsecond // 1000:03d}-{os.getpid() if pid is None else pid}"
    path = Path("cassettes") / f"{stem}.yaml"
    n = 1
    while path.exists() or journal_path(path).exists():
        n += 1
        path = Path("cassettes") / f"{stem}-{n}.yaml"
    return path


def _existing_count(path: Path) -> tuple[str, int]:
    """(``N interactions`` or ``unreadable``, N) of the cassette at ``path`` (for the
    "replacing" note and the keep-the-good-cassette decision; N is 0 when unreadable)."""
    from ..cassettes.storage import load

    try:
        n = len(load(path))
    except SpoolError:
        return "unreadable", 0
    return f"{n} interaction{'s' if n != 1 else ''}", n


def unusable(summary: RunSummary, tls_facts: list[dict]) -> str | None:
    """Why a finished recording is not worth replacing a good cassette with (None when it is):
    no interaction at all, or nothing but transport failures (refused, DNS, TLS, timeout)."""
    if summary.interactions == 0:
        why = "no request went through the proxy"
        if tls_facts:
            why += f" (a client refused the spoolproxy CA for {', '.join(f['host'] for f in tls_facts[:3])})"
        return why
    if len(summary.failures) >= summary.interactions:
        n = summary.interactions
        return (f"{'the only request' if n == 1 else f'all {n} requests'} failed before an answer: "
                f"{summary.failures[0]}{' ...' if n > 1 else ''}")
    return None


def aside_path(path: Path, now: datetime | None = None) -> Path:
    """``<stem>.failed-<UTC time>.yaml`` beside ``path``, not yet taken."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.stem}.failed-{stamp}{path.suffix or '.yaml'}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.stem}.failed-{stamp}-{n}{path.suffix or '.yaml'}")
    return target


@click.command(cls=CommandWithCmd, context_settings=COMMAND_CONTEXT,
               short_help="Record a command's HTTP(S) traffic into a cassette.")
@proxy_options
@guard_options
@click.option("--cassette", "-c", type=click.Path(dir_okay=False), help="Cassette to write (default: cassettes/<UTC time>-<ms>-<pid>.yaml).")
@click.option("--max-body-size", default="10MB", show_default=True, help="Largest response body kept in the YAML.")
@click.option(
    "--large-bodies", type=click.Choice(["spill", "elide"]), default="spill", show_default=True,
    help="Bodies above --max-body-size: spill to <cassette>.bodies/ or elide (size and sha256 only).",
)
@click.option("--redact-header", multiple=True, metavar="NAME", help="Also redact this header (repeatable).")
@click.option("--redact-pattern", multiple=True, metavar="REGEX", help="Also redact matches of this regex; group 1 if any (repeatable).")
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE",
              help="Tag the run (repeatable), e.g. --tag agent=refund-bot --tag version=1.4.0; added to "
              "SPOOLPROXY_TAGS (KEY=VALUE,...). Stored in the cassette with the git commit of the working directory; "
              "cluster, dashboard and annotate group and filter by tags.")
@click.option(
    "--record-mode", type=click.Choice(["all", "once", "new_episodes", "none"]), default="all", show_default=True,
    help="vcrpy record modes: all records everything afresh (replacing the cassette); once records only when "
    "the cassette does not exist yet, else replays it; new_episodes replays what matches and records the rest; "
    "none only replays (the same as 'spoolproxy playback').  The replaying modes match requests exactly "
    "(method, URL and body), so a changed request is recorded, not served the old response.",
)
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Stop CMD after SECONDS (SIGTERM, then SIGKILL 5 s later); the cassette says it timed out.")
@click.option("--force", is_flag=True,
              help="Replace an existing cassette even when this recording produced nothing usable "
              "(no interaction, or only transport/TLS failures).")
def command(
    proxy: ProxySettings,
    cassette: str | None,
    max_body_size: str,
    large_bodies: str,
    redact_header: tuple[str, ...],
    redact_pattern: tuple[str, ...],
    tags: tuple[str, ...],
    record_mode: str,
    timeout_s: float | None,
    force: bool,
    guard_flags: dict,
) -> None:
    """Record CMD's HTTP(S) traffic into a cassette (YAML, vcrpy layout).

    \b
      spoolproxy record -- python agent.py
      spoolproxy record --cassette cassettes/run.yaml -- pytest -x
      spoolproxy record --cassette run.yaml          # standalone: prints export lines
      spoolproxy record --reverse https://api.openai.com -- node agent.js
      spoolproxy record --max-llm-calls 30 --max-cost 0.50 --circuit-breaker -- python agent.py
      spoolproxy record --tag agent=refund-bot --tag version=1.4.0 -- python agent.py
      spoolproxy record --timeout 600 -- python agent.py

    CMD's exit status, the signal that killed it, a --timeout it overran and the last 4 KB
    of its stderr (redacted; the stderr still reaches the terminal as it comes) are kept in
    the cassette: detect reports a crashed agent as agent_crashed.  (--timeout stops CMD
    itself; --max-seconds is a budget checked at each model request.)
    """
    from ..cassettes.model import CassetteMeta
    from ..cassettes.redact import Redactor
    from ..cassettes.storage import check_writable
    from ..proxy.recorder import Recorder
    from ..proxy.summary import RunSummary
    from ..proxy.tlswatch import TlsWatch
    from ..triage.tags import env_tags, parse_tags, stamp

    if timeout_s is not None and (not proxy.command or record_mode != "all"):
        raise UsageError("--timeout stops CMD while it is recorded: give CMD after '--' (record mode all)")
    run_tags = {**env_tags(), **parse_tags(tags)}  # bad tags are refused before anything starts
    path = Path(cassette) if cassette else default_cassette_path()
    if record_mode != "all":
        if not cassette:
            raise SpoolError(f"--record-mode {record_mode} replays an existing cassette: give --cassette PATH")
        from .playback import serve

        # exact matching: a changed prompt is a new episode to record, not a divergence
        serve(proxy, cassettes=(str(path),), record_mode=record_mode, match="exact", guard_flags=guard_flags)
        return
    check_writable(path)
    limit = parse_size(max_body_size)
    redactor = Redactor.from_config(config.section("redact", proxy.config), headers=redact_header, patterns=redact_pattern)
    redactor.learn_env(os.environ)  # the child's *_API_KEY/*_TOKEN/*_SECRET: known secrets from the start
    meta = CassetteMeta(
        recorder=f"spoolproxy {__version__}",
        recorded_at=datetime.now(timezone.utc).replace(microsecond=0),
        command=[redactor.text(a) for a in proxy.command] or None,
        cwd=relative_cwd(),
        record_mode="all",
    )
    stamp(meta, run_tags, redact=redactor.text)
    summary = RunSummary()
    rec = Recorder(path, meta=meta, redactor=redactor, max_body_size=limit, large_bodies=large_bodies, summary=summary)
    guard, guard_addon = make_guard(guard_flags, proxy.config)
    if guard_addon is not None:  # before the recorder: a refused model request is recorded with its refusal
        rec.observers.append(guard_addon.observe)
    tls = TlsWatch()
    runner = proxy.make_runner([a for a in (guard_addon, rec, tls) if a is not None], options=RECORD_OPTIONS)
    say = (lambda s: None) if proxy.quiet else (lambda s: click.echo(redactor.text(s), err=True))

    replacing, had = _existing_count(path) if path.is_file() else (None, 0)
    end = _End(rec, path, summary, tls, redactor, keep=had > 0 and not force, config_path=proxy.config,
               runner=runner, quiet=proxy.quiet, command=proxy.command, guard=guard)
    recovered = rec.open()  # refuses (CassetteError) when another process records this cassette
    if recovered:
        click.echo(
            f"spoolproxy: warning: recovered {recovered[1]} interactions of an interrupted recording of {path} "
            f"into {recovered[0]}",
            err=True,
        )
    if replacing is not None:
        say(f"spoolproxy: replacing {path} ({replacing})")
    inherited = [f"{n}={os.environ[n]}" for n in NO_PROXY_VARS if os.environ.get(n)]
    if inherited and proxy.command:
        say(f"spoolproxy: not passing {inherited[0]} on, so those hosts get recorded (use --no-proxy to exempt hosts)")
    outer = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    if outer and not proxy.upstream_proxy:
        say(f"spoolproxy: connecting upstream directly, not via HTTPS_PROXY={outer} (use --upstream-proxy to chain)")

    from ..proxy.bypass import bypass_warnings

    end.bypass = bypass_warnings(proxy.command, reverse=bool(proxy.reverse))  # clients that ignore HTTPS_PROXY: said with the summary
    code: int | None = None
    end.timeout_s = timeout_s
    try:
        code = run_session(proxy, runner, banner="Recording", stderr_tail=STDERR_WINDOW, timeout_s=timeout_s,
                           on_end=end.child_ended)
    except SpoolError:
        if rec.count == 0 and end.child is None:
            rec.abort()  # nothing ran: leave no cassette behind
            raise
        end.finish(code, say)
        raise
    except BaseException:
        end.finish(code, say)
        raise
    end.finish(code, say)
    raise SystemExit(code or 0)


class _End:
    """The end of a recording: keep a good cassette when this run failed, write, summarise."""

    def __init__(self, rec: Recorder, path: Path, summary: RunSummary, tls: TlsWatch, redactor: Redactor, *,
                 keep: bool, config_path, runner, quiet: bool, command, guard=None) -> None:
        self.rec, self.path, self.summary, self.tls, self.redactor = rec, path, summary, tls, redactor
        self.keep, self.config_path, self.runner, self.quiet, self.command = keep, config_path, runner, quiet, command
        #: the run's budgets/circuit breaker (:mod:`spoolproxy.guards`): usage and stop go into
        #: ``meta.extra`` and the summary
        self.guard = guard
        #: clients of CMD known to ignore the proxy (:func:`spoolproxy.proxy.bypass.bypass_warnings`)
        self.bypass: list[str] = []
        #: how CMD ended (:class:`~spoolproxy.proxy.child.ChildEnd`), once it did, and ``--timeout``
        self.child = None
        self.timeout_s: float | None = None

    def child_ended(self, child) -> None:
        """Keep how CMD ended: ``meta.extra["agent_end"]`` (signal, timeout, the redacted end
        of its stderr), which ``agent_crashed`` reads."""
        self.child = child
        self.rec.run_facts["agent_end"] = child.meta(self.redactor, keep=STDERR_KEEP)

    def warn(self, line: str) -> None:
        click.echo(self.redactor.text(f"spoolproxy: warning: {line}"), err=True)

    def finish(self, code: int | None, say) -> None:
        """Write the cassette (or keep the good one) and print the summary (``say``) and
        warnings (always; one line each under ``quiet``)."""
        facts = self.tls.facts()
        if facts:
            self.rec.run_facts["tls_rejected"] = facts
        if self.child is not None and self.child.timed_out:
            self.warn(f"CMD ran past --timeout {self.timeout_s:g} s and was stopped")
        why = unusable(self.summary, facts) if self.keep else None
        if why and self.rec.count == 0 and not facts:
            self.rec.abort()  # nothing to keep from this run, and a good cassette to protect
            self.warn(f"kept {self.path}: this recording produced nothing usable ({why}); "
                      "nothing written (--force replaces it anyway)")
            return self._tls_and_errors()
        cas = self.rec.finish(exit_code=code, extra=self.guard.meta() if self.guard is not None else None,
                              target=(lambda _cas: aside_path(self.path)) if why else None)
        n = f"{len(cas)} interaction{'s' if len(cas) != 1 else ''}"
        if why:
            self.warn(f"kept {self.path}: this recording produced nothing usable ({why}); "
                      f"it went to {cas.path} ({n}; --force replaces the cassette anyway)")
        else:
            say(f"spoolproxy: wrote {self.path} ({n})")
        for line in self.summary.lines():
            say(f"  {line}")
        for line in self.guard.summary_lines() if self.guard is not None else []:
            say(f"  {line}")
        if len(cas) or facts or code:
            for line in _findings(cas, self.config_path):
                say(f"  {line}")
        self._tls_and_errors()
        if len(cas) == 0 and not facts:
            from ..proxy.summary import NOTHING_RECORDED, NOTHING_RECORDED_SHORT

            click.echo(NOTHING_RECORDED_SHORT if self.quiet else NOTHING_RECORDED, err=True)

    def _tls_and_errors(self) -> None:
        facts = self.tls.facts()
        if facts:  # the detectors' import is heavy: only when there is something to say
            from ..detectors.checks.tls_rejected import describe

            for fact in facts:
                self.warn(describe(fact, self.command))
        for err in self.rec.write_errors[:5]:
            self.warn(f"not recorded: {err}")
        errors = self.runner.addon_errors if self.runner is not None else []
        if errors:
            self.warn(f"{len(errors)} internal error(s) while proxying, first: {errors[0]} (rerun with --verbose for details)")
        for line in self.bypass:
            self.warn(f"not recorded: {line}")


def _findings(cas, config_path, limit: int = 3) -> list[str]:
    """The detectors' verdict on the new cassette, in a few lines (never fails a recording)."""
    try:
        from ..detectors import analyze, load_detect_config

        report = analyze(cas, load_detect_config(config_path))
    except Exception as exc:  # noqa: BLE001 - a detector problem must not cost the recording
        return [f"detect: skipped ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"]
    lines = []
    if report.cost is not None and report.cost.calls:
        from .show import usd

        c = report.cost
        lines.append(f"cost: {usd(c.usd)}" + (f" (prices: {', '.join(c.sources)})" if c.usd is not None else
                                              f" (unknown: no price for {', '.join(c.unpriced_models)}; add it to [prices] in "
                                              "spoolproxy.toml)"))
    if report.checks:
        bad = [r for r in report.checks if r.status != "pass"]
        lines.append(f"checks: {len(report.checks) - len(bad)} passed" + (
            f", {len(bad)} did not ({', '.join(f'{r.name}: {r.status}' for r in bad)})" if bad else ""))
    if not report.findings:
        return lines + ["detect: pass, no findings"]
    shown = [f for f in report.findings if f.kind != "tls_rejected"]  # those get their own warning line
    lines.append(f"detect: {report.verdict}, {len(report.findings)} finding{'s' if len(report.findings) != 1 else ''} "
                 f"(spoolproxy detect {cas.path} for evidence)")
    for f in shown[:limit]:
        where = f" (interaction {f.interactions[0]})" if f.interactions else ""
        lines.append(f"  [{f.severity}] {f.kind}: {f.message}{where}")
    return lines
