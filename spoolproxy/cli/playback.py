"""``spoolproxy playback [--cassette PATH]... [OPTIONS] [-- CMD [ARGS]...]``: serve cassettes offline.

With CMD: start the playback proxy, run CMD with the same environment as ``record``, print
every divergence and miss with its diff, the unused interactions and the summary line, and
exit with CMD's status.  Without CMD: print the ``export`` lines and serve until
SIGINT/SIGTERM; the control endpoint (``spoolproxy.replayer.control``) switches cassettes.

Exit status: CMD's status (0 standalone); when CMD succeeded (or standalone),
:data:`STRICT_EXIT` (3) under ``--strict`` when any request missed, diverged or was served
with a warning, or any recorded interaction went unused (CMD's own non-zero status wins over
3); 2 for bad input (a corrupt cassette or a missing side body file: nothing is served).

Options may also come from the ``[playback]`` table of spoolproxy.toml
(:class:`PlaybackTable`); command-line values are added to list options and override others.

``--isolate`` runs CMD in a network namespace where only the proxy is reachable
(:mod:`spoolproxy.proxy.isolate`); what a client tried to reach around the proxy is added to
the report as misses (:mod:`spoolproxy.replayer.blocked`).
"""

from __future__ import annotations

import os
from pathlib import Path

import click
from pydantic import BaseModel, ConfigDict, ValidationError

from .. import config
from ..errors import SpoolError, UsageError
from .common import COMMAND_CONTEXT, CommandWithCmd, ProxySettings, proxy_options, run_session
from .guard_options import guard_options, make_guard

STRICT_EXIT = 3


class PlaybackTable(BaseModel):
    """The ``[playback]`` table of spoolproxy.toml."""

    model_config = ConfigDict(extra="forbid")
    cassettes: list[str] = []
    match: str | None = None
    strict: bool | None = None
    allow_repeats: bool | None = None
    ignore_json_paths: list[str] = []
    normalize: list[str] = []
    match_headers: list[str] = []
    realtime: bool | None = None
    record_mode: str | None = None
    live: list[str] = []
    report: str | None = None
    diff_dir: str | None = None
    encode_as_recorded: bool | None = None
    sdk_rules: bool | None = None
    disable_rules: list[str] = []
    isolate: bool | None = None


def _table(path) -> PlaybackTable:
    try:
        return PlaybackTable.model_validate(config.section("playback", path))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise UsageError(f"config [playback] {where}: {err['msg']}") from None


@click.command(cls=CommandWithCmd, context_settings=COMMAND_CONTEXT,
               short_help="Serve cassettes to a command, offline, with explained misses.")
@proxy_options
@guard_options
@click.option("--cassette", "-c", "cassettes", multiple=True, type=click.Path(), metavar="PATH",
              help="Cassette file or directory of cassettes to serve (repeatable).")
@click.option("--match", type=click.Choice(["default", "exact"]), default=None,
              help="default: exact match, else the next unused interaction with the same method and URL "
              "(a divergence, as vcrpy does); exact: divergences become misses.  [default: default]")
@click.option("--strict", is_flag=True, default=None, help=f"Exit {STRICT_EXIT} when anything missed, diverged, was served with a warning or went unused "
              "(when CMD succeeded: CMD's own non-zero status wins).")
@click.option("--allow-repeats", is_flag=True, default=None, help="Serve an interaction again once its queue is used up.")
@click.option("--ignore-json-path", multiple=True, metavar="PATH", help="Ignore this JSON path in request bodies ($.a.b, $.a[*].c, $.a[0]).")
@click.option("--normalize", multiple=True, metavar="REGEX", help="Replace matches by a placeholder on both sides before matching.")
@click.option("--match-header", multiple=True, metavar="NAME", help="Also match this request header (headers are ignored otherwise).")
@click.option("--realtime", is_flag=True, default=None, help="Replay streams with their recorded chunk timing.")
@click.option("--record-mode", type=click.Choice(["none", "once", "new_episodes", "all"]), default=None,
              help="vcrpy record modes; new_episodes sends misses upstream and records them.  [default: none]")
@click.option("--live", multiple=True, metavar="GLOB",
              help="Send hosts matching GLOB ('host' or 'host:port', fnmatch) upstream and record them (repeatable); "
              "the run goes to <stem>.live.yaml beside the cassette, which stays unchanged.")
@click.option("--live-out", type=click.Path(dir_okay=False), metavar="PATH",
              help="With --live: write the run here instead of <stem>.live.yaml.")
@click.option("--write-back", is_flag=True,
              help="With --live: replace the cassette played from by this run (its live hosts re-recorded).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), help="Write the playback report as JSON.")
@click.option("--diff-dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Write each miss's and divergence's full detail to DIR: both normalised request bodies "
              "(redacted) and every difference; the report itself stays capped.")
@click.option("--encode-as-recorded", is_flag=True, default=None,
              help="Serve bodies with the Content-Encoding they were recorded with (gzip, deflate, br, zstd) "
              "instead of decoded.")
@click.option("--sdk-rules/--no-sdk-rules", default=None,
              help="Apply the built-in volatile-field rules for popular SDKs (openai-agents, litellm, telemetry; "
              "see docs/playback.md).  [default: on]")
@click.option("--disable-rule", multiple=True, metavar="NAME", help="Turn off one built-in SDK rule (repeatable).")
@click.option("--skip-bad", is_flag=True, help="Skip corrupt cassettes in a directory instead of refusing to start.")
@click.option("--isolate", is_flag=True, default=None,
              help="Run CMD in a network namespace where the proxy is the only reachable endpoint (Linux): a client "
              "that ignores the proxy variables fails at once and the summary names the host it tried.")
def command(proxy: ProxySettings, cassettes, match, strict, allow_repeats, ignore_json_path, normalize,
            match_header, realtime, record_mode, live, live_out, write_back, report_path, diff_dir, encode_as_recorded,
            sdk_rules, disable_rule, skip_bad, isolate, guard_flags) -> None:
    """Serve cassettes so CMD re-runs offline; every miss and divergence is explained.

    \b
      spoolproxy playback --cassette cassettes/run.yaml -- python agent.py
      spoolproxy playback -c cassettes/ --strict -- pytest -x
      spoolproxy playback -c run.yaml --normalize '\\d{4}-\\d{2}-\\d{2}' -- python agent.py
      spoolproxy playback -c run.yaml --live 'api.openai.com' -- python agent.py   # writes run.live.yaml
      spoolproxy playback -c run.yaml --live '127.0.0.1:8080' --write-back -- python agent.py
      spoolproxy playback -c run.yaml --live 'api.openai.com' --max-cost 0.20 --circuit-breaker -- python agent.py
      spoolproxy playback -c cassettes/ --isolate -- node agent.js   # no silent network
      spoolproxy playback -c cassettes/          # standalone: prints export lines

    --live never changes the cassette played from: the run (replayed and live
    interactions in wire order) goes to <stem>.live.yaml beside it, or --live-out PATH;
    --write-back replaces the cassette instead.

    Budgets (--max-...) and --circuit-breaker apply to the live traffic (--live hosts,
    new_episodes); served interactions cost nothing.  A recorded circuit-breaker refusal is
    served like any response, and stops later live model requests too.
    """
    serve(proxy, cassettes, match, strict, allow_repeats, ignore_json_path, normalize, match_header, realtime,
          record_mode, live, report_path, skip_bad, isolate, guard_flags, diff_dir=diff_dir,
          encode_as_recorded=encode_as_recorded, sdk_rules=sdk_rules, disable_rule=disable_rule,
          live_out=live_out, write_back=write_back)


def serve(proxy: ProxySettings, cassettes=(), match=None, strict=None, allow_repeats=None, ignore_json_path=(),
          normalize=(), match_header=(), realtime=None, record_mode=None, live=(), report_path=None,
          skip_bad=False, isolate=None, guard_flags=None, *, diff_dir=None, encode_as_recorded=None, sdk_rules=None,
          disable_rule=(), live_out=None, write_back=False) -> None:
    """Run playback with these settings (the body of ``spoolproxy playback``; ``record
    --record-mode once|new_episodes|none`` calls it too).  ``live_out``/``write_back``:
    where a ``--live`` run goes (see :func:`_live_recorder`).  Exits through SystemExit with
    the status :func:`exit_status` picks (CMD's non-zero status wins over STRICT_EXIT)."""
    from ..cassettes.redact import Redactor
    from ..replayer.fingerprint import MatchOptions
    from ..replayer.session import PlaybackConfig, PlaybackSession

    t = _table(proxy.config)
    paths = [*t.cassettes, *cassettes]
    mode = record_mode or t.record_mode or "none"
    if not paths:
        raise UsageError("give at least one --cassette PATH (a cassette file or a directory of cassettes)")
    redact_table = config.section("redact", proxy.config)
    redactor = Redactor.from_config(redact_table)
    redactor.learn_env(os.environ)  # the child's *_API_KEY/*_TOKEN/*_SECRET: never in a report or recording
    cfg = PlaybackConfig(
        cassettes=paths,
        match=match or t.match or "default",  # type: ignore[arg-type]
        allow_repeats=bool(allow_repeats if allow_repeats is not None else t.allow_repeats),
        options=MatchOptions(
            ignore_json_paths=(*t.ignore_json_paths, *ignore_json_path),
            normalize=(*t.normalize, *normalize),
            match_headers=(*t.match_headers, *match_header),
            redact_headers=tuple(redact_table.get("headers", []) or ()),
            redact_patterns=tuple(redact_table.get("patterns", []) or ()),
            sdk_rules=bool(sdk_rules if sdk_rules is not None else (t.sdk_rules if t.sdk_rules is not None else True)),
            disabled_rules=(*t.disable_rules, *disable_rule),
        ),
        realtime=bool(realtime if realtime is not None else t.realtime),
        record_mode=mode,  # type: ignore[arg-type]
        live=(*t.live, *live),
        skip_bad=skip_bad,
        diff_dir=diff_dir or t.diff_dir,
        encode_as_recorded=bool(encode_as_recorded if encode_as_recorded is not None else t.encode_as_recorded),
    )
    if cfg.match not in ("default", "exact"):
        raise UsageError(f"config [playback] match = {cfg.match!r}: use 'default' or 'exact'")
    if (live_out or write_back) and not cfg.live:
        raise UsageError(f"{'--live-out' if live_out else '--write-back'} says where a --live run goes: "
                         "add --live GLOB (the hosts to send upstream)")
    if live_out and write_back:
        raise UsageError("give --live-out PATH or --write-back, not both")
    strict = bool(strict if strict is not None else t.strict)
    report_path = report_path or t.report
    _check_outputs(cfg, report_path)
    session = PlaybackSession(cfg)  # loads every cassette: a corrupt one stops here (exit 2)
    say = (lambda s: None) if proxy.quiet else (lambda s: click.echo(s, err=True))
    for line in session.skipped:
        click.echo(f"spoolproxy: warning: skipped bad cassette {line}", err=True)
    _warn_unmatched_live(cfg.live, session)

    from ..replayer.addon import Playback  # mitmproxy itself is imported on the proxy thread, while CMD starts

    addons: list[object] = [Playback(session)]
    recorder = guard = None
    if cfg.live or mode in ("new_episodes", "all") or session.recording_new:
        recorder = _live_recorder(paths, cfg, session, redactor, live_out=live_out, write_back=write_back)
        guard, guard_addon = make_guard(guard_flags or {}, proxy.config, live_only=True)
        if guard_addon is not None:  # after playback (which marks live flows), before the live recorder
            addons.append(guard_addon)
            recorder.recorder.observers.append(guard_addon.observe)
        addons.append(recorder)
    elif guard_flags and any(v is not None for v in guard_flags.values()):
        say("spoolproxy: note: budgets and --circuit-breaker apply to live traffic; nothing is live here (use --live)")
    runner = proxy.make_runner(addons, options={"connection_strategy": "lazy", "upstream_cert": False})
    isolation = _isolation(bool(isolate if isolate is not None else t.isolate), proxy)
    if isolation is None and proxy.command:
        from ..proxy.bypass import bypass_warnings

        for line in bypass_warnings(proxy.command, reverse=bool(proxy.reverse)):
            click.echo(f"spoolproxy: warning: {line}; in playback such requests may reach the real network "
                       "(--isolate makes them fail instead)", err=True)
    n = len(session.index)
    say(f"spoolproxy: serving {n} interaction{'s' if n != 1 else ''} from {len(session._names)} cassette(s)")
    code: int | None = None
    try:
        code = run_session(
            proxy, runner, banner="Playback",
            stop_note=f"write the recording into {recorder.target} and print the playback report"
            if recorder is not None else "print the playback report (playback writes no cassette)",
            isolation=isolation,
        )
    except SpoolError:
        if not _started(runner):  # port in use etc.: just the one error line
            raise
        _finish(recorder, runner, code, session, cfg, report_path, proxy, say, redactor, isolation, guard)
        raise
    except BaseException:
        _finish(recorder, runner, code, session, cfg, report_path, proxy, say, redactor, isolation, guard)
        raise
    report = _finish(recorder, runner, code, session, cfg, report_path, proxy, say, redactor, isolation, guard)
    raise SystemExit(exit_status(code, strict, report, say))


def exit_status(code: int | None, strict: bool, report, say=lambda s: None) -> int:
    """CMD's non-zero status wins (a CI log shows the test failure first); otherwise
    STRICT_EXIT under ``strict`` when the report is not clean; otherwise CMD's status (0
    standalone)."""
    if code:
        if strict and not report.clean:
            say(f"spoolproxy: --strict: CMD exited {code}, which wins over {STRICT_EXIT} "
                "(the report above also has misses, divergences, warnings or unused interactions)")
        return code
    if strict and not report.clean:
        click.echo(f"spoolproxy: --strict: exiting {STRICT_EXIT} (misses, divergences, warnings or unused "
                   "interactions)", err=True)
        return STRICT_EXIT
    return 0


def _started(runner) -> bool:
    try:
        runner.port
    except SpoolError:
        return False
    return True


def _isolation(wanted: bool, proxy: ProxySettings):
    """An :class:`~spoolproxy.proxy.isolate.Isolation` when ``--isolate`` is asked for and the
    platform allows it; otherwise None (saying once why not)."""
    if not wanted:
        return None
    if not proxy.command:
        raise UsageError("--isolate runs CMD in its own network namespace: give a command after '--'")
    from ..proxy.isolate import Isolation, unavailable

    why = unavailable()
    if why is not None:
        click.echo(f"spoolproxy: warning: --isolate: {why}; CMD runs with normal network access", err=True)
        return None
    return Isolation([])


def _finish(recorder, runner, code, session, cfg, report_path, proxy, say, redactor, isolation=None, guard=None):
    """Merge live recordings, write --report, print the report (both redacted); returns the report."""
    if recorder is not None and _started(runner):
        existed = recorder.target.exists()
        target, added = recorder.finish(exit_code=code, extra=guard.meta() if guard is not None else None)
        n = f"{added} live interaction{'s' if added != 1 else ''}"
        if added and cfg.live and target != recorder.source:
            say(f"spoolproxy: recorded {n}; this run is in {target}{' (replaced)' if existed else ''}; "
                f"{recorder.source} is unchanged (--write-back replaces it instead)")
        elif added and cfg.live:
            say(f"spoolproxy: recorded {n}; this run replaced {target} (--write-back)")
        elif added:
            say(f"spoolproxy: recorded {n} into {target}")
        elif cfg.live:
            say(f"spoolproxy: no request went live (--live {' '.join(cfg.live)}); wrote nothing")
    for line in guard.summary_lines() if guard is not None else []:
        say(f"spoolproxy: {line}")
    report = session.report()
    redactor.absorb(session.fingerprinter.learner)  # credentials the live requests carried
    if isolation is not None:
        from ..replayer.blocked import add_blocked

        add_blocked(report, isolation.attempts)
    if cfg.live:
        report.unused = [u for u in report.unused if not session.is_live(u.uri)]
    if proxy.quiet:
        if not report.clean:
            click.echo(report.summary_line(), err=True)
    else:
        click.echo(redactor.text(report.render()), err=True)
    if cfg.diff_dir and session.explainer.write_error:
        click.echo(f"spoolproxy: warning: --diff-dir {cfg.diff_dir}: some difference files could not be written "
                   f"({session.explainer.write_error}); the report above has the differences it keeps", err=True)
    if report_path:  # after printing: an unwritable path still leaves the report on the terminal
        report.write(report_path, redactor)
    return report


def _check_outputs(cfg, report_path) -> None:
    """Before anything runs: an unwritable ``--report`` is an error (OutputError); an
    unwritable ``--diff-dir`` gets one warning line naming it and is dropped (playback
    itself does not need it).  Neither directory is created here."""
    from ..cassettes.storage import check_output_file
    from ..errors import OutputError

    if report_path:
        check_output_file(report_path)
    if cfg.diff_dir:
        try:
            check_output_file(Path(cfg.diff_dir) / "00000-diff.json")
        except OutputError as exc:
            click.echo(f"spoolproxy: warning: --diff-dir {cfg.diff_dir}: cannot write there ({exc.reason}); "
                       "no difference files will be written (choose a writable directory)", err=True)
            cfg.diff_dir = None


def _warn_unmatched_live(globs, session) -> None:
    """One warning per ``--live`` glob that names no host of the served cassettes, listing
    their hosts as displays show them (``host:port``)."""
    if not globs:
        return
    from ..replayer.hostglob import host_labels, unmatched

    uris = [e.interaction.request.uri for e in session.index.entries]
    for glob in unmatched(globs, uris):
        click.echo(f"spoolproxy: warning: --live {glob!r} matches no host of the cassette (hosts: "
                   f"{host_labels(uris) or 'none'}): those requests are replayed; use one of these hosts, "
                   "with or without its :port", err=True)


def _live_recorder(paths: list[str], cfg, session, redactor, *, live_out=None, write_back=False):
    """The recorder of live traffic.  Under ``--live`` it writes the run to ``live_out``,
    else ``<stem>.live.yaml`` beside the cassette, or (``write_back``) into the cassette
    itself; ``new_episodes`` appends to the cassette and ``all``/a new ``once`` cassette
    replace it, as vcrpy does.  Raises UsageError for several cassettes or a ``live_out``
    that is the cassette itself."""
    from ..cassettes.storage import check_writable
    from ..replayer.live import LiveRecorder, live_output_path

    files = [p for p in paths if not Path(p).is_dir()]
    if len(paths) != 1 or len(files) != 1:
        raise UsageError(
            "--live, --record-mode new_episodes/all and a new cassette under 'once' record into one "
            "cassette: give exactly one --cassette FILE"
        )
    source = Path(files[0])
    replace_all = cfg.record_mode == "all" or session.recording_new
    output = source
    if cfg.live and not replace_all and not write_back:
        output = Path(live_out) if live_out else live_output_path(source)
        if output.resolve() == source.resolve():
            raise UsageError(f"--live-out {live_out} is the cassette played from: use --write-back to replace it, "
                             "or name another file")
    check_writable(output)
    return LiveRecorder(source, replace_all=replace_all, live_globs=cfg.live, redactor=redactor, output=output)
