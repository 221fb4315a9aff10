"""``spoolproxy mcp`` driven by the real MCP client over stdio (``mcp.client.stdio.stdio_client``
+ ``ClientSession``): every tool answers, errors come back as ``isError`` results the server
survives, the allow-list refuses commands, nothing secret-shaped leaves the server.  One
server session serves most calls; skipped when the ``mcp`` extra is not installed."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the MCP server needs the mcp extra: pip install 'spoolproxy[mcp]'")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from .test_proxy_support import cli_env  # noqa: E402
from .test_triage_service import make_project, secret_key  # noqa: E402

TOOLS = {"stats", "list_clusters", "list_runs", "list_cases", "show_case", "show_run", "ingest", "annotate",
         "run_suite", "export_tests", "write_dashboard"}
ALLOW = "python examples/* 'Please refund*'"  # the refund case only


def serve(project: Path, home: Path, script, **env: str):
    """Start ``python -m spoolproxy mcp --root PROJECT`` as a real stdio MCP server, run
    ``await script(session)`` against it with the SDK's client, and return what it returns."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "spoolproxy", "mcp", "--root", str(project)],
                                   env=cli_env(home, **env), cwd=str(home))

    async def main():
        with open(home / "server.stderr", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await script(session)

    return anyio.run(main)


async def call(session: ClientSession, name: str, /, **arguments):
    """``(doc, result)``: the tool's JSON answer (its text content parsed; the structured
    content must say the same) and the raw result.  Fails on an error result."""
    res = await session.call_tool(name, arguments)
    text = res.content[0].text
    assert not res.is_error, f"{name}: {text}"
    doc = json.loads(text)
    assert res.structured_content == doc
    assert secret_key() not in text
    return doc, res


async def error(session: ClientSession, name: str, /, **arguments) -> str:
    """The message of a tool call that must fail as an ``isError`` result."""
    res = await session.call_tool(name, arguments)
    assert res.is_error, f"{name} should have failed: {res.content[0].text[:300]}"
    return res.content[0].text


def test_every_tool_over_stdio(tmp_path):
    project = make_project(tmp_path / "project")
    incoming = project / "incoming"
    incoming.mkdir()
    shutil.copy(project / "cassettes" / "stock-check.yaml", incoming / "stock-check-again.yaml")
    seen: dict = {}

    async def script(s: ClientSession):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == TOOLS
        for t in tools.values():  # a model reads these: each says what it returns, every argument is described
            assert len(t.description) > 150, t.name
            assert all(p.get("description") for p in t.input_schema["properties"].values()), t.name
        assert tools["stats"].annotations.read_only_hint and not tools["run_suite"].annotations.read_only_hint
        assert tools["show_run"].input_schema["properties"]["limit"]["maximum"] == 200

        stats, _ = await call(s, "stats")
        assert (stats["runs"], stats["failing"], stats["clusters"]["count"]) == (8, 3, 3)

        clusters, _ = await call(s, "list_clusters", limit=2, members=1)
        assert len(clusters["clusters"]) == 2 and clusters["page"]["next_offset"] == 2

        runs, _ = await call(s, "list_runs", verdict="fail")
        assert {r["cassette"] for r in runs["runs"]} == {"cassettes/refund.yaml", "cassettes/stock-check.yaml",
                                                         "cassettes/lost-order.yaml"}

        cases, _ = await call(s, "list_cases")
        assert {c["name"]: c["allowed"] for c in cases["cases"]} == {"lost-order": False, "refund": True,
                                                                      "stock-check": False}
        case, _ = await call(s, "show_case", name="stock-check")
        assert case["case"]["signature"][0]["kind"] == "html_error_page"

        run, _ = await call(s, "show_run", run="stock-check", focus="findings")
        assert run["verdict"] == "fail" and {f["kind"] for f in run["findings"]} >= {"html_error_page"}
        page, _ = await call(s, "show_run", run="cassettes/refund.yaml", offset=4, limit=5, max_chars=100)
        assert [x["index"] for x in page["steps"]] == [4, 5] and page["page"]["next_offset"] is None

        leak, _ = await call(s, "show_run", run="cassettes/leak.yaml")  # `call` checks the key never leaves
        assert "REDACTED-openai-key-" in leak["final_answer"]["text"]

        ingested, _ = await call(s, "ingest", path="incoming")
        assert ingested["failing"] == 1 and ingested["clusters"][0]["cases"] == ["stock-check"]
        assert ingested["clusters"][0]["new"] is False

        exported, _ = await call(s, "export_tests", paths=["incoming"])
        assert exported["written"] == [] and "stock-check" in exported["skipped"][0]["why"]
        exported, _ = await call(s, "export_tests", paths=["incoming"], dedup=False)
        assert [w["case"] for w in exported["written"]] == ["stock-check-again"]

        annotated, _ = await call(s, "annotate", cluster=case["cluster"], status="rejected")
        assert {c["name"]: c["status"] for c in annotated["changed"]} == {"stock-check": "rejected",
                                                                           "stock-check-again": "rejected"}
        annotated, _ = await call(s, "annotate", cases=["refund"], final_answer_contains=["refund"])
        assert annotated["changed"][0]["assertions"]["final_answer_contains"] == ["refund"]

        # the allow-list: a case whose command is not on it is refused, never run
        refused = await error(s, "run_suite", cases=["lost-order"])
        assert "refused to run 1 case" in refused and "SPOOLPROXY_MCP_ALLOW" in refused
        ran, _ = await call(s, "run_suite", timeout_s=120)
        assert [(r["case"], r["outcome"]) for r in ran["results"]] == [("refund", "passes")], ran["results"]
        assert [r["case"] for r in ran["refused"]] == ["lost-order"]  # stock-check is rejected now: skipped
        assert {r["case"] for r in ran["skipped"]} == {"stock-check", "stock-check-again"}
        artifact, _ = await call(s, "show_run", run=ran["results"][0]["artifact"])
        assert artifact["verdict"] == "pass"

        board, _ = await call(s, "write_dashboard", out="site/index.html", run_reports=False)
        assert board["dashboard"] == "site/index.html"

        # bad input is an isError result with one line that says what to do; the server lives on
        assert "no cassette 'nope.yaml'" in await error(s, "show_run", run="nope.yaml")
        assert "outside the project root" in await error(s, "ingest", path="../..")
        assert "greater than or equal to 1" in await error(s, "list_runs", limit=0)
        assert "no case 'ghost'" in await error(s, "annotate", cases=["ghost"], status="confirmed")
        assert "no_such_tool" in await error(s, "no_such_tool")
        seen["after"], _ = await call(s, "stats")

    serve(project, tmp_path, script, SPOOLPROXY_MCP_ALLOW=ALLOW)
    assert seen["after"]["cases"]["rejected"] == 2 and seen["after"]["latest_tests"]["outcomes"] == {"passes": 1}
    assert (project / "site" / "index.html").is_file()
    assert (project / "spool" / ".runs" / "refund").is_dir()
    assert "Traceback" not in (tmp_path / "server.stderr").read_text()


def test_ingest_the_shared_corpus_over_stdio(tmp_path, corpus_dir):
    """The shared corpus (reached through a symlink in the project): the invalid-key failures
    of OpenAI, Anthropic and Gemini come back as one new cluster, and its exemplar opens."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "corpus").symlink_to(corpus_dir)

    async def script(s: ClientSession):
        doc, _ = await call(s, "ingest", path="corpus", limit=5)
        assert (doc["runs"], doc["failing"]) == (121, 22) and len(doc["failing_runs"]) == 5
        assert doc["failing_runs_omitted"] == 17
        key = next(c for c in doc["clusters"] if c["cause"] == "invalid api key")
        assert key["new"] is True and key["new_runs"] == 7
        clusters, _ = await call(s, "list_clusters", limit=20, members=10)
        found = next(c for c in clusters["clusters"] if c["id"] == key["id"])
        assert set(found["providers"]) >= {"openai", "anthropic", "gemini"}
        assert all(m["cassette"].startswith("corpus/") for m in found["members"])
        run, _ = await call(s, "show_run", run=found["exemplar"], focus="findings")
        assert run["root_failure"]["cause"] == "invalid api key"

    serve(project, tmp_path, script)
