"""``spoolproxy serve --store URL``: a long-running recording gateway for many agents.

Agents send their traffic through the gateway (``HTTPS_PROXY=http://HOST:PORT`` and the
spoolproxy CA, or ``--reverse`` for clients that cannot use a proxy).  Each agent session is
recorded into its own cassette, the way ``spoolproxy record`` records one run (same
redaction, streams, side bodies, crash-safe journal):

* a request with ``x-spoolproxy-session: ID`` belongs to session ``ID``; without it, to the
  session of its client connection; ``x-spoolproxy-tags: KEY=VALUE,...`` adds run tags
  (both headers are removed before the request goes upstream);
* a session ends after ``--idle`` seconds without activity, when its connection closes
  (connection sessions), on ``POST http://spoolproxy.control/sessions/ID/end`` (answered
  once its cassette is in the store, with ``{"ok", "session", "cassette", "interactions"}``)
  or on SIGINT/SIGTERM, which ends and publishes every open session before exiting;
* its cassette goes to ``STORE/<UTC day>/<session id>.yaml`` (``-2``, ``-3``... when
  taken), uploaded to a temporary key then moved, after its side bodies.  Journals and
  cassettes wait in a local spool (``--spool``); what a crash or a failed upload left there
  is published at the next start.

Exit status 0 after a clean stop; 1 when some cassettes could not be uploaded (they stay in
the spool); 2 for bad options, an unreachable store or a port in use.
"""

from __future__ import annotations

import hashlib
import ipaddress
import signal
import threading
from pathlib import Path

import click

from .. import __version__, config
from ..cassettes.redact import Redactor
from ..errors import SpoolError
from .common import ProxySettings, parse_size, wait_for_signal


def default_spool(store_url: str) -> Path:
    """``$SPOOLPROXY_HOME/serve/<12 hex of the store URL>``: one spool per store."""
    from ..proxy.ca import ca_dir

    key = store_url if "://" in store_url else str(Path(store_url).resolve())
    return ca_dir() / "serve" / hashlib.sha1(key.encode("utf-8")).hexdigest()[:12]


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@click.command(context_settings={"help_option_names": ["-h", "--help"]},
               short_help="Record many concurrent agent sessions, one cassette each, into a store.")
@click.option("--store", default="cassettes", show_default=True, metavar="URL",
              help="Where cassettes go: a directory, file:///..., s3://bucket/prefix or another fsspec URL.")
@click.option("--storage-option", "storage_options", multiple=True, metavar="KEY=VALUE",
              help="fsspec storage option (repeatable), e.g. endpoint_url=http://127.0.0.1:9000 for an "
                   "S3-compatible server; credentials come from the usual AWS_* variables, never from here.")
@click.option("--idle", type=click.FloatRange(min=0.05), default=300.0, show_default=True, metavar="SECONDS",
              help="End a session after this many seconds with no request in flight and none started.")
@click.option("--spool", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="Local directory for journals and cassettes waiting for upload "
                   "(default: $SPOOLPROXY_HOME/serve/<hash of the store>).")
@click.option("--port", "-p", type=click.IntRange(0, 65535), default=0, help="Port to listen on (default: a free port).")
@click.option("--listen-host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback lets anyone who reaches it use the gateway.")
@click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE",
              help="Tag every session (repeatable; added to SPOOLPROXY_TAGS); a session's x-spoolproxy-tags win.")
@click.option("--max-body-size", default="10MB", show_default=True, help="Largest body kept in the YAML.")
@click.option("--large-bodies", type=click.Choice(["spill", "elide"]), default="spill", show_default=True,
              help="Bodies above --max-body-size: spill to <cassette>.bodies/ (uploaded too) or elide.")
@click.option("--redact-header", multiple=True, metavar="NAME", help="Also redact this header (repeatable).")
@click.option("--redact-pattern", multiple=True, metavar="REGEX", help="Also redact matches of this regex (repeatable).")
@click.option("--reverse", multiple=True, metavar="URL",
              help="Also run a reverse proxy for this upstream base URL (URL@PORT for a fixed port; repeatable).")
@click.option("--connect-to", multiple=True, metavar="HOST1:PORT1:HOST2:PORT2",
              help="Connect to HOST2:PORT2 for requests to HOST1:PORT1 (curl's meaning); cassettes keep the original URL.")
@click.option("--upstream-ca", type=click.Path(dir_okay=False), metavar="PEM", help="Also trust this CA upstream.")
@click.option("--insecure-upstream", is_flag=True, help="Do not verify upstream TLS certificates.")
@click.option("--upstream-proxy", metavar="URL", help="Chain to this proxy (http://[user:pass@]host:port).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="spoolproxy.toml to read [redact] from (default: the usual lookup).")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors and warnings.")
@click.option("--verbose", "-v", is_flag=True, help="Show mitmproxy's log on stderr.")
def command(store: str, storage_options, idle: float, spool: Path | None, port: int, listen_host: str, tags,
            max_body_size: str, large_bodies: str, redact_header, redact_pattern, reverse, connect_to,
            upstream_ca, insecure_upstream: bool, upstream_proxy, config_path, quiet: bool, verbose: bool) -> None:
    """Record many concurrent agent sessions, one cassette per session, into a store.

    \b
      spoolproxy serve --store cassettes/
      spoolproxy serve --store s3://team-runs/prod --idle 120 --tag env=prod
      # agent side: HTTPS_PROXY=http://127.0.0.1:PORT SSL_CERT_FILE=<spoolproxy ca bundle>
      #   header x-spoolproxy-session: run-42   (x-spoolproxy-tags: version=1.4.0)
      curl -x http://127.0.0.1:PORT -X POST http://spoolproxy.control/sessions/run-42/end
    """
    from ..proxy.gateway import Gateway, Published
    from ..store import open_store, parse_storage_options
    from ..store.publish import Publisher
    from ..triage.tags import env_tags, parse_tags
    from .record import RECORD_OPTIONS

    say = (lambda s: None) if quiet else (lambda s: click.echo(s, err=True))
    run_tags = {**env_tags(), **parse_tags(tags)}
    limit = parse_size(max_body_size)
    redactor = Redactor.from_config(config.section("redact", config_path), headers=redact_header,
                                    patterns=redact_pattern)
    target = open_store(store, parse_storage_options(storage_options))
    target.probe()
    publisher = Publisher(target, spool or default_spool(target.url))
    publisher.lock()
    try:
        _publish_leftovers(publisher, say)

        def published(p: Published) -> None:
            line = redactor.text(f"session {p.session}: {p.interactions} interaction{'s' if p.interactions != 1 else ''}")
            if p.url:
                say(f"spoolproxy: {line} -> {redactor.text(p.url)} ({p.ended})")
            else:
                click.echo(f"spoolproxy: warning: {line} not published ({p.error}); kept at {p.kept}, published at the "
                           "next start", err=True)

        gateway = Gateway(publisher, redactor=redactor, tags=run_tags, idle_s=idle, max_body_size=limit,
                          large_bodies=large_bodies, recorder_name=f"spoolproxy {__version__} serve",
                          on_published=published,
                          on_warning=lambda line: click.echo(f"spoolproxy: warning: {redactor.text(line)}", err=True))
        settings = ProxySettings(port=port, listen_host=listen_host, reverse=tuple(reverse),
                                 connect_to=tuple(connect_to), upstream_ca=Path(upstream_ca) if upstream_ca else None,
                                 insecure_upstream=insecure_upstream, verbose=verbose, upstream_proxy=upstream_proxy)
        runner = settings.make_runner([gateway], options=RECORD_OPTIONS)
        outcome = _serve(runner, gateway, target.url, publisher.spool, listen_host, idle, say)
    finally:
        publisher.unlock()
    kept = [p for p in outcome if p.url is None]
    say(f"spoolproxy: stopped: {len(outcome) - len(kept)} session{'s' if len(outcome) - len(kept) != 1 else ''} "
        f"published to {target.url}" + (f", {len(kept)} kept in {publisher.spool}" if kept else ""))
    if kept:
        raise SystemExit(1)


def _publish_leftovers(publisher, say) -> None:
    """Publish what a crash or a failed upload left in the spool (warnings for failures)."""
    for path in publisher.leftovers():
        try:
            url = publisher.publish(path)
        except SpoolError as exc:
            click.echo(f"spoolproxy: warning: {path} left from an earlier run is not published yet: {exc}", err=True)
            continue
        say(f"spoolproxy: published {url} left from an earlier run")


def _serve(runner, gateway, store_url: str, spool: Path, listen_host: str, idle: float, say) -> list:
    """Start the proxy, wait for SIGINT/SIGTERM, stop, publish what is open; returns every Published."""
    stop_requested: list[int] = []

    def early(signum, _frame):
        stop_requested.append(signum)

    in_main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, early) for s in (signal.SIGTERM, signal.SIGINT)} if in_main else {}
    try:
        runner.start()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    try:
        if not is_loopback(listen_host):
            click.echo(f"spoolproxy: warning: listening on {listen_host}: anyone who can reach this address can send "
                       "traffic through the gateway and read the answers; keep it behind a firewall or use "
                       "--listen-host 127.0.0.1", err=True)
        if not stop_requested:
            say(f"spoolproxy: serving on {runner.proxy_url}; cassettes to {store_url} (spool {spool}); "
                f"sessions end after {idle:g} s idle")
            say(f"spoolproxy: agents use HTTPS_PROXY={runner.proxy_url} and SSL_CERT_FILE={runner.ca.bundle}"
                + "".join(f"; {u} at http://{runner.connect_host}:{p}" for u, p in runner.reverse_ports.items()))
            wait_for_signal(lambda: say("spoolproxy: press Ctrl-C (or send SIGTERM) to publish every open session "
                                        "and stop"))
    finally:
        runner.stop()
    return gateway.close()
