"""``spoolproxy record [OPTIONS] [-- CMD [ARGS]...]``: record a program's HTTP(S) traffic.

With CMD: start the proxy, run CMD with the proxy and CA environment, wait for it, write
the cassette, print a summary and exit with CMD's exit status.  Without CMD: print the
``export`` lines to paste into another shell and record until SIGINT/SIGTERM.

The cassette defaults to ``cassettes/<UTC time>-<ms>-<pid>.yaml`` under the current
directory.  Its path is checked for writability before CMD starts; an existing cassette is
replaced (``record_mode`` all, as vcrpy does) and ``record`` says so; a cassette another
``spoolproxy record`` is recording right now is refused.  Every completed interaction is
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

import click

from .. import __version__, config
from ..cassettes.model import CassetteMeta
from ..cassettes.redact import Redactor
from ..cassettes.journal import journal_path
from ..cassettes.storage import check_writable, load
from ..errors import SpoolError
from ..proxy.child import NO_PROXY_VARS
from ..proxy.recorder import Recorder
from ..proxy.summary import NOTHING_RECORDED, NOTHING_RECORDED_SHORT, RunSummary
from .common import COMMAND_CONTEXT, ProxySettings, parse_size, proxy_options, relative_cwd, run_session

#: mitmproxy options for recording: connect upstream only when a request needs it, so a
#: refused/unresolvable upstream is recorded against the real request (not the CONNECT).
RECORD_OPTIONS = {"connection_strategy": "lazy"}


def default_cassette_path(now: datetime | None = None, pid: int | None = None) -> Path:
    """``cassettes/<YYYYmmdd-HHMMSS>-<ms>-<pid>.yaml`` (UTC) under the current directory.

    Milliseconds and the process id make the name unique, so two runs started in the same
    second never share a cassette; a ``-2``, ``-3``... suffix is added should the file or
    its journal exist all the same."""
    now = now or datetime.now(timezone.utc)
    stem = f"{now.strftime('%Y%m%d-%H%M%S')}-{now.microsecond // 1000:03d}-{os.getpid() if pid is None else pid}"
    path = Path("cassettes") / f"{stem}.yaml"
    n = 1
    while path.exists() or journal_path(path).exists():
        n += 1
        path = Path("cassettes") / f"{stem}-{n}.yaml"
    return path


def _existing_count(path: Path) -> str:
    """``N interactions`` of the cassette at ``path`` (for the "replacing" note)."""
    try:
        n = len(load(path))
    except SpoolError:
        return "unreadable"
    return f"{n} interaction{'s' if n != 1 else ''}"


@click.command(context_settings=COMMAND_CONTEXT, short_help="Record a command's HTTP(S) traffic into a cassette.")
@proxy_options
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
def command(
    proxy: ProxySettings,
    cassette: str | None,
    max_body_size: str,
    large_bodies: str,
    redact_header: tuple[str, ...],
    redact_pattern: tuple[str, ...],
    tags: tuple[str, ...],
    record_mode: str,
) -> None:
    """Record CMD's HTTP(S) traffic into a cassette (YAML, vcrpy layout).

    \b
      spoolproxy record -- python agent.py
      spoolproxy record --cassette cassettes/run.yaml -- pytest -x
      spoolproxy record --cassette run.yaml          # standalone: prints export lines
      spoolproxy record --reverse https://api.openai.com -- node agent.js
      spoolproxy record --tag agent=refund-bot --tag version=1.4.0 -- python agent.py
    """
    from ..triage.tags import env_tags, parse_tags, stamp

    run_tags = {**env_tags(), **parse_tags(tags)}  # bad tags are refused before anything starts
    path = Path(cassette) if cassette else default_cassette_path()
    if record_mode != "all":
        if not cassette:
            raise SpoolError(f"--record-mode {record_mode} replays an existing cassette: give --cassette PATH")
        from .playback import serve

        # exact matching: a changed prompt is a new episode to record, not a divergence
        serve(proxy, cassettes=(str(path),), record_mode=record_mode, match="exact")
        return
    check_writable(path)
    limit = parse_size(max_body_size)
    redactor = Redactor.from_config(config.section("redact", proxy.config), headers=redact_header, patterns=redact_pattern)
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
    runner = proxy.make_runner([rec], options=RECORD_OPTIONS)
    say = (lambda s: None) if proxy.quiet else (lambda s: click.echo(s, err=True))

    replacing = _existing_count(path) if path.is_file() else None
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

    bypass = bypass_warnings(proxy.command, reverse=bool(proxy.reverse))  # clients that ignore HTTPS_PROXY: said with the summary
    code: int | None = None
    try:
        code = run_session(proxy, runner, banner="Recording")
    except SpoolError:
        if rec.count == 0:
            rec.abort()  # nothing ran: leave no cassette behind
            raise
        _finish(rec, path, code, summary, say, proxy.config, runner, quiet=proxy.quiet, bypass=bypass)
        raise
    except BaseException:
        _finish(rec, path, code, summary, say, proxy.config, runner, quiet=proxy.quiet, bypass=bypass)
        raise
    _finish(rec, path, code, summary, say, proxy.config, runner, quiet=proxy.quiet, bypass=bypass)
    raise SystemExit(code or 0)


def _finish(rec: Recorder, path: Path, code: int | None, summary: RunSummary, say, config_path=None, runner=None,
            *, quiet: bool = False, bypass: list[str] | None = None) -> None:
    """Write the cassette and print the summary (``say``) and warnings (always; one line
    each under ``quiet``), including ``bypass``: clients of CMD known to ignore the proxy
    (:func:`spoolproxy.proxy.bypass.bypass_warnings`), whose requests are missing."""
    cas = rec.finish(exit_code=code)
    say(f"spoolproxy: wrote {path} ({len(cas)} interaction{'s' if len(cas) != 1 else ''})")
    for line in summary.lines():
        say(f"  {line}")
    if len(cas):
        for line in _findings(cas, config_path):
            say(f"  {line}")
    for err in rec.write_errors[:5]:
        click.echo(f"spoolproxy: warning: not recorded: {err}", err=True)
    errors = runner.addon_errors if runner is not None else []
    if errors:
        click.echo(f"spoolproxy: warning: {len(errors)} internal error(s) while proxying, first: {errors[0]} "
                   "(rerun with --verbose for details)", err=True)
    for line in bypass or ():
        click.echo(f"spoolproxy: warning: not recorded: {line}", err=True)
    if len(cas) == 0:
        click.echo(NOTHING_RECORDED_SHORT if quiet else NOTHING_RECORDED, err=True)


def _findings(cas, config_path, limit: int = 3) -> list[str]:
    """The detectors' verdict on the new cassette, in a few lines (never fails a recording)."""
    try:
        from ..detectors import analyze, load_detect_config

        report = analyze(cas, load_detect_config(config_path))
    except Exception as exc:  # noqa: BLE001 - a detector problem must not cost the recording
        return [f"detect: skipped ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"]
    if not report.findings:
        return ["detect: pass, no findings"]
    lines = [f"detect: {report.verdict}, {len(report.findings)} finding{'s' if len(report.findings) != 1 else ''} "
             f"(spoolproxy detect {cas.path} for evidence)"]
    for f in report.findings[:limit]:
        where = f" (interaction {f.interactions[0]})" if f.interactions else ""
        lines.append(f"  [{f.severity}] {f.kind}: {f.message}{where}")
    return lines
