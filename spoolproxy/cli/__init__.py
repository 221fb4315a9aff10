"""The ``spoolproxy`` command line.  Each sub-command lives in its own module of this
package and is imported only when used, so ``spoolproxy --help`` stays fast.

Every :class:`~spoolproxy.errors.SpoolError` becomes one line on stderr
(``spoolproxy: error: ...``) and its exit code; no traceback reaches the user.  Output paths
are written through :func:`~spoolproxy.cassettes.storage.atomic_write`, which raises
:class:`~spoolproxy.errors.OutputError` (``cannot write PATH (reason); choose a writable
path``); any other ``OSError`` that escapes a command is still one line (exit 2).
"""

from __future__ import annotations

import importlib
import sys

import click

from .. import __version__
from ..errors import SpoolError

#: command name -> (module under spoolproxy.cli, one-line help shown by --help)
COMMANDS: dict[str, tuple[str, str]] = {
    "record": ("record", "Record a command's HTTP(S) traffic into a cassette."),
    "playback": ("playback", "Serve cassettes to a command, offline, with explained misses."),
    "ca": ("ca", "Print the spoolproxy CA certificate and CA bundle paths."),
    "scan": ("scan", "Find unredacted secrets in cassettes (exit 1 if any)."),
    "recover": ("recover", "Turn a crashed recording's journal into its cassette."),
    "export": ("export", "Write a cassette in another layout (plain vcrpy, OTLP JSON)."),
    "import": ("import_", "Turn HAR, mitmproxy flow, message-log or OTLP files into cassettes."),
    "show": ("show", "Show a cassette as an agent transcript timeline."),
    "detect": ("detect", "Flag failing agent runs in cassettes, with evidence."),
    "check": ("check", "Run the user checks (oracles) on stored cassettes."),
    "export-test": ("export_test", "Turn failing runs into regression test cases."),
    "annotate": ("annotate", "Set a test case's status (pending/confirmed/rejected)."),
    "test": ("testrun", "Run the regression suite: passes / still_fails / fails_differently."),
    "fork": ("fork", "Rerun a recorded run from interaction N with patches, the model live."),
    "diff": ("diff", "Compare two runs: relation, totals, step alignment, first divergence."),
    "verify": ("verify", "Verify a patch: K patched vs K control trials live, past good runs, verdict."),
    "diagnose": ("diagnose", "Name a run's failing interaction, label and root cause, with verified quotes."),
    "fix": ("fix", "Propose 1-3 checked patches for a diagnosed run, as patch files for fork/verify."),
    "cluster": ("cluster", "Group failing runs by root cause, biggest first."),
    "report": ("report", "Write one run as a self-contained HTML report."),
    "dashboard": ("dashboard", "Write an HTML dashboard of many runs: pass rate, clusters, tests."),
    "mcp": ("mcp", "Serve the triage tools to an MCP client (Claude Code, Claude Desktop) over stdio."),
    "serve": ("serve", "Record many concurrent agent sessions, one cassette each, into a store."),
}


class LazyGroup(click.Group):
    """A click group that imports a command's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module = importlib.import_module(f"{__name__}.{COMMANDS[name][0]}")
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_) for name, (_, help_) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, package_name="spoolproxy")
def cli() -> None:
    """spoolproxy: record AI agent traffic, detect failing runs, replay them offline as tests."""


def one_line(exc: click.ClickException) -> str:
    """click's error as one line, ending with where to look for help on usage errors."""
    msg = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        msg += f" (see '{ctx.command_path} --help')"
    return msg


def main(argv: list[str] | None = None) -> None:
    """Console entry point: runs the CLI and maps SpoolError to one stderr line + exit code."""
    try:
        # standalone_mode=False returns ctx.exit(N) / click.exceptions.Exit(N) as a value
        rv = cli.main(args=argv, prog_name="spoolproxy", standalone_mode=False)
    except SpoolError as exc:
        click.echo(f"spoolproxy: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"spoolproxy: error: {one_line(exc)}", err=True)
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("spoolproxy: aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:  # a file-system failure no module turned into a SpoolError: still one line
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"spoolproxy: error: {where}{exc.strerror or exc}; check the path and its permissions", err=True)
        sys.exit(2)
    else:
        sys.exit(rv if isinstance(rv, int) else 0)
