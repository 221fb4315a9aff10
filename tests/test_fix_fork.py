"""``spoolproxy fork`` and ``spoolproxy diff`` end to end: the demo's support agent (real
openai SDK, httpx) reruns from its recordings through the real proxy, against the scripted
model server and the shop service: a system-prompt patch fixes the HTML-502 run; a
changed refund POST is blocked and never reaches the shop (unless --live allows it);
identical tool requests are replayed; a tool-result override and a route to a fixed
tool server change what the agent sees; a rerun that leaves its prefix is reported."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from spoolproxy.cassettes import load
from tests.fixproject import REFUND_Q, make_project, routes, spoolproxy, start_servers


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("forkproj"))
    model, shop_server = start_servers()
    yield root, model, shop_server
    model.shutdown()
    shop_server.shutdown()


def test_system_prompt_fork_fixes_the_html_run_and_diff_shows_why(project):
    root, model, _shop = project
    r = spoolproxy(root, "fork", "cassettes/stock-check.yaml", "--patch", "html-rule.yaml", *routes(model),
                   "-o", "cassettes/stock-fix.yaml")
    assert r.returncode == 0, r.stderr
    assert "can't check the stock of KET-BLU right now" in r.stdout  # the agent's own output
    assert "3 requests: 1 cassette, 2 patched" in r.stderr and "detect: pass" in r.stderr
    cas = load(root / "cassettes" / "stock-fix.yaml")
    assert cas.meta.extra["forked_from"] == "stock-check.yaml" and cas.meta.extra["fork_at"] == 0
    assert [it.extra["fork"] for it in cas.interactions] == ["patched", "cassette", "patched"]
    assert cas.interactions[1].extra["parent_interaction"] == 1  # the GET was served, the shop never asked
    d = spoolproxy(root, "diff", "cassettes/stock-fix.yaml", "--json")
    assert d.returncode == 0, d.stderr
    doc = json.loads(d.stdout)
    assert doc["relation"] == "fork" and doc["relation_detail"] == "A is a fork of B at interaction 0 with 1 patch"
    assert (doc["b"]["verdict"], doc["a"]["verdict"]) == ("fail", "pass")
    assert "error tool_error_ignored" in doc["gone_findings"]
    assert [s["status"] for s in doc["steps"]] == ["request", "same", "request"]
    first = doc["first_divergence"]
    assert first["step"]["a"] == 0 and first["fields"][0] == "$.messages[0].content: text differs:"
    assert any("+A tool result that is an HTML page is a failure" in ln for ln in first["fields"])
    text = spoolproxy(root, "diff", "cassettes/stock-fix.yaml").stdout
    assert "first divergence: the requests differ" in text and "verdict" in text and "fixed" in text


def test_dry_run_prints_the_patched_request_and_runs_nothing(project):
    root, model, _shop = project
    before = len(model.log)
    r = spoolproxy(root, "fork", "cassettes/stock-check.yaml", "--system-append", "Be brief.", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "first patched request: interaction 0, openai-chat POST model.example/v1/chat/completions" in r.stdout
    assert "+Be brief." in r.stdout and len(model.log) == before
    assert not (root / "cassettes" / "stock-check.fork-0.yaml").exists()


def test_changed_side_effect_is_blocked_and_never_sent(project, tmp_path):
    root, model, shop_server = project
    cheaper = tmp_path / "order.json"
    cheaper.write_text(json.dumps({"orders": [{"order_id": "ORD-1002", "item": "Stoneware mug (MUG-STN)",
                                               "total_cents": 999, "status": "delivered"}]}))
    r = spoolproxy(root, "fork", "cassettes/refund.yaml", "--tool-result", f"GET shop.example/orders*={cheaper}",
                   *routes(model, shop_server), "-o", "cassettes/refund-cheaper.yaml")
    assert r.returncode == 0, r.stderr
    assert shop_server.shop.refunds == []  # the changed refund POST never reached the shop
    assert "BLOCKED side effect: POST http://shop.example/refunds differs from the parent run" in r.stderr
    cas = load(root / "cassettes" / "refund-cheaper.yaml")
    sources = [it.extra["fork"] for it in cas.interactions]
    assert sources == ["cassette", "override", "live", "blocked", "live"]
    blocked = cas.interactions[3]
    assert json.loads(blocked.request.body)["amount_cents"] == 999  # recorded as an attempt
    assert blocked.response.status == 403 and b"spoolproxy_blocked_side_effect" in blocked.response.body
    assert cas.meta.extra["fork"]["blocked_requests"] == ["POST http://shop.example/refunds"]
    # --live names the host: the same fork may now send it
    r = spoolproxy(root, "fork", "cassettes/refund.yaml", "--tool-result", f"GET shop.example/orders*={cheaper}",
                   "--live", "shop.example", *routes(model, shop_server), "-o", "cassettes/refund-live.yaml")
    assert r.returncode == 0, r.stderr
    # both of v1's POSTs (its blind retry after the 504) now reach the shop: its double-refund bug, live
    assert [x["amount_cents"] for x in shop_server.shop.refunds] == [999, 999]


class _FixedInventory(BaseHTTPRequestHandler):
    """A fixed inventory service: JSON for every SKU."""

    def do_GET(self):  # noqa: N802
        body = json.dumps({"sku": self.path.rsplit("/", 1)[-1], "in_stock": 3}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_route_a_tool_host_to_a_fixed_server(project):
    root, model, _shop = project
    fixed = ThreadingHTTPServer(("127.0.0.1", 0), _FixedInventory)
    threading.Thread(target=fixed.serve_forever, daemon=True).start()
    try:
        r = spoolproxy(root, "fork", "cassettes/stock-check.yaml", "--at", "0", "--route",  # host:port, as shown
                       f"shop.example:80=http://127.0.0.1:{fixed.server_address[1]}", *routes(model),
                       "-o", "cassettes/stock-routed.yaml")
    finally:
        fixed.shutdown()
    assert r.returncode == 0, r.stderr
    assert "KET-BLU is in stock (3 left)." in r.stdout
    cas = load(root / "cassettes" / "stock-routed.yaml")
    tool = cas.interactions[1]
    assert tool.extra["fork"] == "routed" and tool.request.uri == "http://shop.example/inventory/KET-BLU"
    assert json.loads(tool.response.body)["in_stock"] == 3


def test_a_rerun_that_leaves_its_prefix_is_reported(project):
    root, model, _shop = project
    # v2 converts the HTML page into an error, so its second model request differs from v1's
    r = spoolproxy(root, "fork", "cassettes/stock-check.yaml", "--at", "3", *routes(model), "-o",
                   "cassettes/stock-v2.yaml", "--", sys.executable, "agent_v2.py", "Is the blue kettle KET-BLU in stock?",
                   agent_crashes=True)  # the agent gets playback's explained 400 and gives up
    assert "DIVERGED before the fork point: request 2" in r.stderr
    assert load(root / "cassettes" / "stock-v2.yaml").meta.extra["fork"]["diverged_at"] == 2


def test_host_globs_may_name_the_port_displays_show(project, tmp_path):
    """--tool-result and --route take 'host:port' (as every display shows a non-default
    port); a glob that names another port is refused with the run's hosts and ports."""
    root, _model, _shop = project
    run = tmp_path / "s8080.yaml"  # the recorded run with its tool on a non-default port
    run.write_text((root / "cassettes" / "stock-check.yaml").read_text().replace("http://shop.example/",
                                                                                 "http://shop.example:8080/"))
    (tmp_path / "none.json").write_text('{"error": "no such item"}')
    ok = spoolproxy(root, "fork", str(run), "--tool-result", f"GET shop.example:8080/inventory/*=404:{tmp_path}/none.json",
                    "--route", "shop.example:*=http://127.0.0.1:9", "--dry-run")
    assert ok.returncode == 0, ok.stderr
    line = next(ln for ln in ok.stdout.splitlines() if ln.startswith("1. tool result:"))
    assert "GET shop.example:8080/inventory/* -> 404" in line and line.endswith("-> interaction 1"), ok.stdout
    assert "2. route: shop.example:* -> http://127.0.0.1:9  -> interaction 1" in ok.stdout
    bad = spoolproxy(root, "fork", str(run), "--tool-result", f"GET shop.example:9/inventory/*={tmp_path}/none.json")
    assert bad.returncode == 2 and "(tool requests: GET shop.example:8080/inventory/KET-BLU)" in bad.stderr, bad.stderr
    bad = spoolproxy(root, "fork", str(run), "--route", "shop.example:9=http://127.0.0.1:9")
    assert bad.returncode == 2 and "(hosts: model.example, shop.example:8080)" in bad.stderr, bad.stderr


def test_bad_input_is_one_line(project, tmp_path):
    root, _model, _shop = project
    for args, msg in [(["cassettes/stock-check.yaml", "--at", "9", "--system-append", "x"], "--at 9 is out of range"),
                      (["cassettes/stock-check.yaml", "--patch", "nope.yaml"], "patch file nope.yaml does not exist"),
                      (["cassettes/stock-check.yaml", "--tool-result", "nothing"], "--tool-result 'nothing': use GLOB=FILE"),
                      (["cassettes/stock-check.yaml", "--route", "shop.example=ftp://x"], "--route"),
                      (["cassettes/stock-check.yaml"], "nothing to fork with: give a patch"),
                      (["cassettes/stock-check.yaml", "--route", "nowhere.example=http://127.0.0.1:9"],
                       "no patch applies to cassettes/stock-check.yaml"),
                      (["cassettes/stock-check.yaml", "--system-append", "x", "--"],
                       "'--' is followed by no command: put CMD after it (e.g. -- python agent.py), or leave '--' out "
                       "to run the command the cassette records"),
                      (["cassettes/stock-check.yaml", "--patch", "bad.yaml"], "does not apply: no tool named 'zap'"),
                      (["cassettes/stock-check.yaml", "--system-append", "x", "-o", "cassettes/stock-check.yaml"],
                       "is the cassette being forked"),
                      (["cassettes/stock-check.yaml", "--at", "0", "--patch", "bad.yaml"],
                       "patch 1 (tool zap: replace description 'x') does not apply: no tool named 'zap'")]:
        (root / "bad.yaml").write_text("kind: tool_description\ntool: zap\ntext: x\n")
        r = spoolproxy(root, "fork", *args)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("spoolproxy: error: ")
    r = spoolproxy(root, "diff", "cassettes/stock-check.yaml")
    assert r.returncode == 2 and "names no parent" in r.stderr
