"""The MCP server behind ``spoolproxy mcp``: triage tools over stdio, with the official SDK.

A thin adapter: each tool validates its arguments (the SDK checks them against the JSON
Schema built from the annotations below), calls one plain function of :mod:`.service`,
:mod:`.runview` or :mod:`.actions`, passes the dict through the project's Redactor and
returns it both as JSON text and as structured content.  A :class:`SpoolError` (bad input:
unknown case, path outside the root, a refused command) comes back as a tool result with
``isError`` and the one-line message, so the model can correct itself; nothing a client
sends stops the server.

Needs the ``mcp`` extra (``pip install 'spoolproxy[mcp]'``, the SDK's ``MCPServer``, mcp 2.x).
"""

import inspect
import json
from typing import Annotated, Any, Callable, Literal

from pydantic import Field

from ..errors import SpoolError
from .workspace import ALLOW_ENV, Workspace

INSTRUCTIONS = """\
spoolproxy triage: recorded AI-agent runs (cassettes), the failures found in them, and the
regression suite made from them. A typical session: `stats` for the overview; `list_clusters`
(failures grouped by root cause, biggest first: size is the priority); `show_run` on a cluster's
exemplar to read what the agent did, step by step, with the detectors' evidence; `export_tests`
to make regression cases (one per cluster); `list_cases` / `show_case` and `annotate` to confirm
real failures or reject false alarms (a whole cluster at once); `run_suite` to replay the
confirmed cases offline against the current agent (passes / still_fails / fails_differently /
unreplayable). `ingest` a new directory of recordings to see which failures are new.
Paths are relative to the project root; lists are paged (offset, limit; page.next_offset)."""

PathList = Annotated[list[str] | None, Field(
    description="Cassettes, directories of cassettes or suite directories, relative to the project root. "
                "Omit to use the server's runs (the project's cassettes/ and suite, plus every ingested path).")]
Tags = Annotated[dict[str, str] | None, Field(
    description='Only runs whose tags match, {"KEY": "GLOB"} (fnmatch, all must match), '
                'e.g. {"agent": "refund-bot", "version": "1.4.*"}.')]
Offset = Annotated[int, Field(ge=0, description="Skip this many items (use page.next_offset of the previous call).")]
Status = Literal["pending", "confirmed", "rejected"]


def _limit(top: int, what: str):
    return Annotated[int, Field(ge=1, le=top, description=f"At most this many {what} (1-{top}).")]


def build_server(ws: Workspace):
    """An ``mcp.server.mcpserver.MCPServer`` with the triage tools bound to ``ws``.
    Raises ImportError when the ``mcp`` package is missing."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent, ToolAnnotations

    from ..suite.annotate import CaseChange
    from . import actions, runview, service

    server = MCPServer("spoolproxy", instructions=INSTRUCTIONS, version=_version())
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def tool(name: str, title: str, description: str, annotations=read_only):
        def wrap(fn: Callable[..., dict[str, Any]]):
            def call(**kwargs) -> CallToolResult:
                try:
                    doc = ws.redact(fn(**kwargs))
                except SpoolError as exc:
                    raise ToolError(ws.redactor.text(str(exc))) from None
                except OSError as exc:  # a file the tool had to read or write
                    raise ToolError(ws.redactor.text(f"{exc.filename or ''}: {exc.strerror or exc}".strip(": "))) \
                        from None
                text = json.dumps(doc, ensure_ascii=False)
                return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=doc)

            # the SDK builds the input schema from this signature (no __future__ annotations here:
            # they must be real objects)
            call.__signature__ = inspect.signature(fn).replace(return_annotation=CallToolResult)
            call.__name__, call.__doc__ = fn.__name__, fn.__doc__
            server.add_tool(call, name=name, title=title, description=description,
                            annotations=annotations.model_copy(update={"title": title}))
            return fn
        return wrap

    @tool("stats", "Overview of runs, failures, clusters and the suite",
          "The state of the project in one call: how many recorded runs there are and how many failed, pass "
          "rate overall and per agent version (the `version` tag), failure kinds, the number of failure "
          "clusters and the 5 biggest, the suite's cases by status, and the latest `spoolproxy test` outcomes "
          "(regressions first). Start a triage session here. Returns JSON, a few KB.")
    def stats(paths: PathList = None, tags: Tags = None) -> dict:
        return service.stats(ws, paths, tags)

    @tool("list_clusters", "Failure clusters, biggest first",
          "Failing runs grouped by root cause (ids, numbers, paths, URLs, model and provider names normalised, "
          "provider wordings of one cause merged), biggest first: size is the priority. Each cluster has a "
          "stable `id` (use it with annotate, list_runs and list_cases), its cause, root finding kind, "
          "normalised signature, providers, versions, first/last seen, the `exemplar` run to read with "
          "show_run, the suite cases it already has, and up to `members` member runs. Paged.")
    def list_clusters(paths: PathList = None, tags: Tags = None, offset: Offset = 0,
                      limit: _limit(100, "clusters") = 10,
                      members: Annotated[int, Field(ge=0, le=100, description="Member runs listed per cluster "
                                                    "(members_total gives the size).")] = 5) -> dict:
        return service.list_clusters(ws, paths, tags, offset, limit, members)

    @tool("list_runs", "Recorded runs with verdict and root failure",
          "Recorded runs in path order: `cassette` path (pass it to show_run or export_tests), when, verdict "
          "(pass/fail), root failure (kind, recognised cause, message), cluster id, finding counts by "
          "severity, interactions, LLM calls, tokens, cost, providers, tags and the suite case it belongs to. "
          "Filter by verdict and cluster. Paged.")
    def list_runs(paths: PathList = None, tags: Tags = None,
                  verdict: Annotated[Literal["fail", "pass", "all"], Field(description="Which runs.")] = "all",
                  cluster: Annotated[str | None, Field(description="Only members of this cluster id (or a unique "
                                                       "prefix).")] = None,
                  offset: Offset = 0, limit: _limit(200, "runs") = 25) -> dict:
        return service.list_runs(ws, paths, tags, verdict, cluster, offset, limit)

    @tool("list_cases", "Regression cases of the suite",
          "The suite's regression cases: name, status (pending = not reviewed, confirmed = runs in the suite, "
          "rejected = false alarm), failure cluster, signature kinds and first message, the cassettes, the "
          "command it replays, whether run_suite may run it (`allowed`, from the server's allow-list) and the "
          "latest test outcome. Filter by status or cluster. Paged.")
    def list_cases(status: Annotated[Literal["pending", "confirmed", "rejected", "invalid"] | None,
                                     Field(description="Only cases with this status.")] = None,
                   cluster: Annotated[str | None, Field(description="Only cases of this cluster id (or prefix).")] = None,
                   offset: Offset = 0, limit: _limit(200, "cases") = 25) -> dict:
        return service.list_cases(ws, status, cluster, offset, limit)

    @tool("show_case", "One regression case in full",
          "One case: every field of its file (command, cassettes, routing, matching, signature, assertions), "
          "its cluster, whether run_suite may run it, and the latest test result with its explanation, detail "
          "lines (findings, near-miss request diffs) and the artifact run (open it with show_run).")
    def show_case(name: Annotated[str, Field(description="The case name (list_cases) or its file name.")],
                  details: Annotated[int, Field(ge=0, le=200, description="Detail lines of the latest result.")] = 40
                  ) -> dict:
        return service.show_case(ws, name, details)

    @tool("show_run", "One run as a transcript with findings",
          "One recorded run read as the agent's transcript: its facts (command, tags, model calls, tool calls, "
          "tokens, cost), every finding with severity, the interactions it cites and verbatim evidence (the "
          "quoted text and the field it is in), the final answer, and the steps in order: model turns (the "
          "user message and tool results fed in, the model's text and tool calls with their argument text, "
          "finish reason, tokens, cut streams, provider errors), MCP calls and plain HTTP calls (tool APIs), "
          "each marked with the findings that cite it. Texts are clipped to max_chars; steps are paged; "
          "focus='findings' keeps only the cited steps and the step before each.")
    def show_run(run: Annotated[str, Field(description="A cassette path relative to the project root (list_runs, "
                                           "list_clusters), or a case name (its failing run).")],
                 offset: Offset = 0, limit: _limit(200, "steps") = 40,
                 max_chars: Annotated[int, Field(ge=80, le=20000, description="Clip each text to this many "
                                                 "characters.")] = 800,
                 focus: Annotated[Literal["all", "findings"], Field(description="all steps, or only those the "
                                                                    "findings cite.")] = "all") -> dict:
        return runview.show_run(ws, run, offset, limit, max_chars, focus)

    @tool("ingest", "Detect and cluster a path of recordings",
          "Read every cassette under a path (file or directory), run the detectors and cluster the failing "
          "runs together with the runs the server already knows: returns the failing runs with their root "
          "failure and cluster, and per cluster how many runs are new and how many were known, with `new: "
          "true` for a failure never seen before. Files that are not cassettes are listed as skipped. The "
          "path then joins the server's runs for the other tools (add=false to only look).",
          annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False, idempotent_hint=True))
    def ingest(path: Annotated[str, Field(description="A cassette or directory, relative to the project root.")],
               tags: Tags = None,
               add: Annotated[bool, Field(description="Keep the path among the server's runs.")] = True,
               limit: _limit(200, "failing runs") = 50) -> dict:
        return service.ingest(ws, path, tags, add, limit)

    @tool("annotate", "Review cases: status and assertions, per case or per cluster",
          "Record a reviewer's verdict on regression cases: status confirmed (a real failure: run_suite runs "
          "it), rejected (a false alarm) or pending; and assertions a fixed run must also meet (final answer "
          "contains a text / matches a regex, a tool is called, at most N LLM calls) or request-matching "
          "settings (normalize regexes, ignored JSON paths). Name cases, or a cluster id to change every case "
          "of that failure cluster at once. Writes the case files; returns each case's new status and "
          "assertions.", annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                     idempotent_hint=True, open_world_hint=False))
    def annotate(cases: Annotated[list[str], Field(description="Case names (list_cases).")] = [],  # noqa: B006
                 cluster: Annotated[str | None, Field(description="A cluster id (or prefix): all its cases.")] = None,
                 status: Annotated[Status | None, Field(description="The verdict.")] = None,
                 final_answer_contains: Annotated[list[str], Field(description="Texts the final answer must "
                                                                    "contain (added).")] = [],  # noqa: B006
                 final_answer_matches: Annotated[str | None, Field(description="A Python regex the final answer "
                                                                   "must match.")] = None,
                 tools_called: Annotated[list[str], Field(description="Tools the run must call (added).")] = [],  # noqa: B006
                 max_llm_calls: Annotated[int | None, Field(ge=0, description="At most this many LLM requests.")] = None,
                 normalize: Annotated[list[str], Field(description="Matching: regexes replaced on both sides "
                                                       "(e.g. a timestamp in the prompt).")] = [],  # noqa: B006
                 ignore_json_paths: Annotated[list[str], Field(description="Matching: request body fields to "
                                                               "ignore ($.a.b, $.a[*].c).")] = [],  # noqa: B006
                 clear_assertions: Annotated[bool, Field(description="Reset assertions to the default first.")] = False
                 ) -> dict:
        change = CaseChange(status=status, contains=tuple(final_answer_contains), matches=final_answer_matches,
                            tools=tuple(tools_called), max_llm_calls=max_llm_calls, normalize=tuple(normalize),
                            ignore_json_paths=tuple(ignore_json_paths), clear_assertions=clear_assertions)
        return actions.annotate(ws, change, cases, cluster)

    @tool("run_suite", "Replay the regression suite offline",
          "Run `spoolproxy test`: each confirmed case (or the named ones) re-runs its command with every request "
          "served from its cassette (strict matching, no network) and is judged passes / still_fails / "
          "fails_differently / unreplayable / error, with an explanation, detail lines and the artifact run "
          "(open it with show_run). The case's command really runs on this machine, so only commands matching "
          f"the allow-list in the server's {ALLOW_ENV} environment variable run; others are refused and "
          "listed with the reason. Takes seconds per case.",
          annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                                      open_world_hint=False))
    def run_suite(cases: Annotated[list[str], Field(description="Case names to run (any status but rejected); "
                                                    "empty: every confirmed case.")] = [],  # noqa: B006
                  timeout_s: Annotated[float, Field(gt=0, le=3600, description="Seconds each case may run.")] = 300.0
                  ) -> dict:
        return actions.run_suite(ws, cases, timeout_s)

    @tool("export_tests", "Turn failing runs into regression cases",
          "Make a regression case in the suite for each failing run under the paths (`spoolproxy export-test`): "
          "its command, cassette, the error-level findings as signature, default assertions. With dedup (the "
          "default) only one case per failure cluster: runs whose cluster already has a case are skipped, "
          "naming it. New cases are pending unless confirm=true. Passing runs are skipped.",
          annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                      open_world_hint=False))
    def export_tests(paths: Annotated[list[str], Field(min_length=1, description="Cassettes or directories, relative "
                                                       "to the project root.")],
                     dedup: Annotated[bool, Field(description="One case per failure cluster.")] = True,
                     confirm: Annotated[bool, Field(description="Mark the new cases confirmed.")] = False,
                     command: Annotated[str | None, Field(description="Shell-style command that reproduces the runs, "
                                                          "for cassettes that recorded none.")] = None) -> dict:
        return actions.export_tests(ws, paths, dedup, confirm, command)

    @tool("write_dashboard", "Write the HTML dashboard for people",
          "Write the self-contained HTML dashboard (pass rate per version over time, failing runs per day, "
          "failure kinds, top clusters, latest test outcomes) and one HTML report per run, under the project "
          "root, for a person to open in a browser. Returns the file path and counts.",
          annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                      open_world_hint=False))
    def write_dashboard(out: Annotated[str, Field(description="An .html path under the project root.")] =
                        "site/index.html", paths: PathList = None, tags: Tags = None,
                        run_reports: Annotated[bool, Field(description="Also write one report per run.")] = True
                        ) -> dict:
        return actions.write_dashboard(ws, out, paths, tags, run_reports)

    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("spoolproxy")
    except PackageNotFoundError:
        return "0"


def serve(ws: Workspace) -> None:
    """Serve the triage tools over stdio until the client closes the connection."""
    build_server(ws).run("stdio")
