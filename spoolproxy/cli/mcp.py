"""``spoolproxy mcp [--root DIR] [PATH...]``: the triage tools as an MCP server over stdio.

Register it with an MCP client (Claude Code: ``claude mcp add spoolproxy -- spoolproxy mcp
--root /path/to/project``); the client starts it and speaks JSON-RPC on its stdin/stdout.
The tools (see :mod:`spoolproxy.triage.mcp_server`) read the runs under PATH (default: the
root's ``cassettes/`` and the suite), relative to ``--root``, and never reach outside it.
``run_suite`` runs only cases whose command matches a glob of ``SPOOLPROXY_MCP_ALLOW``
(``;``-separated, e.g. ``python agent.py *``).  ``--check`` prints what the server would
serve and exits, without waiting for a client.

Needs the ``mcp`` extra: without it the command exits 2 with the pip command to run.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..errors import SpoolError

INSTALL = "pip install 'spoolproxy[mcp]'"


def _require_sdk() -> None:
    """Raise SpoolError when the MCP SDK (2.x) cannot be imported."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError as exc:
        try:
            from importlib.metadata import version

            found = version("mcp")
        except Exception:  # noqa: BLE001 - not installed at all
            found = None
        if found is None:
            why = "the mcp package is not installed"
        elif not found.startswith("2."):
            why = f"mcp {found} is installed, this server needs mcp 2.x"
        else:
            why = f"mcp {found} cannot be imported: {exc}"
        raise SpoolError(f"`spoolproxy mcp` needs the MCP SDK ({why}): {INSTALL}") from None


@click.command("mcp", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Project directory: tool paths are relative to it and may not leave it (default: the "
                   "current directory).")
@click.option("--suite", "suite_dir", default="spool", show_default=True, type=click.Path(path_type=Path),
              help="Suite directory, relative to --root.")
@click.option("--check", is_flag=True, help="Print the workspace and the tools, then exit (no client needed).")
def command(paths, root: Path | None, suite_dir: Path, check: bool) -> None:
    """Serve the triage tools (stats, clusters, runs, cases, annotate, test, export) over MCP stdio.

    PATHS (relative to --root) are the runs the tools read by default: cassettes,
    directories, suites (default: the root's cassettes/ and the suite).  run_suite runs only
    commands matching a glob of SPOOLPROXY_MCP_ALLOW (';'-separated, e.g. 'python agent.py *').
    """
    _require_sdk()
    from ..triage.mcp_server import build_server, serve
    from ..triage.workspace import ALLOW_ENV, Workspace

    ws = Workspace.open(root, suite=suite_dir, paths=paths)
    os.chdir(ws.root)  # a client may start us anywhere; relative paths in case files mean the project
    if check:
        import anyio

        tools = anyio.run(build_server(ws).list_tools)
        lines = [f"root: {ws.root}",
                 f"suite: {ws.rel(ws.suite)}" + ("" if ws.suite.is_dir() else " (does not exist yet)"),
                 f"runs: {', '.join(ws.rel(p) for p in ws.paths) or 'none yet (ingest a directory)'}",
                 f"{ALLOW_ENV}: " + ("; ".join(ws.allow) if ws.allow else "not set (run_suite refuses every case)"),
                 f"tools: {', '.join(t.name for t in tools)}"]
        click.echo(ws.redactor.text("\n".join(lines)))
        return
    serve(ws)
