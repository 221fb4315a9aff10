"""The pytest plugin, exercised in subprocess ``pytest`` runs: suite cases collected as
test items, the ``spoolproxy_session`` fixture around the real openai SDK, and
``--spoolproxy`` serving pytest-recording cassettes (also to a curl subprocess)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def pytest_run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=240)


def test_suite_cases_are_collected_as_test_items(tmp_path: Path) -> None:
    (tmp_path / "spoolproxy.toml").write_text("")
    shutil.copytree(REPO / "cassettes", tmp_path / "cassettes")
    for v in ("v1", "v2"):
        shutil.copy(REPO / "examples" / f"agent_{v}.py", tmp_path / f"agent_{v}.py")
    suite = tmp_path / "spool"
    suite.mkdir()
    common = {"status": "confirmed", "signature": [{"kind": "html_error_page"}, {"kind": "duplicate_side_effect"}]}
    cases = {
        "fixed": {"command": {"argv": ["python", "agent_v2.py", "Please refund order ORD-1002, the mug arrived broken."]},
                  "cassette": "cassettes/refund.pinned.yaml"},
        "broken": {"command": {"argv": ["python", "agent_v1.py", "Is the blue kettle KET-BLU in stock?"]},
                   "cassette": "cassettes/stock-check.yaml"},
        "later": {"command": {"argv": ["python", "agent_v1.py", "x"]}, "cassette": "cassettes/refund.yaml",
                  "status": "pending"},
    }
    for name, doc in cases.items():
        (suite / f"{name}.yaml").write_text(yaml.safe_dump({"name": name, **common, **doc}))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # no suite configured: nothing collected
    r = pytest_run(tmp_path)
    assert "no tests ran" in r.stdout, r.stdout
    (tmp_path / "pytest.ini").write_text("[pytest]\nspoolproxy_suite = spool\n")
    r = pytest_run(tmp_path, "-rA")
    out = r.stdout
    assert r.returncode == 1, out + r.stderr
    assert "1 failed, 1 passed, 1 skipped" in out
    assert "still_fails: signature came back: html_error_page" in out
    assert "FAILED spool/broken.yaml::broken" in out and "PASSED spool/fixed.yaml::fixed" in out
    assert "spoolproxy case status: pending" in out
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the command-line option works too
    r = pytest_run(tmp_path, "--spoolproxy-suite", "spool", "-k", "later", "-rA")
    assert r.returncode == 0 and "1 skipped" in r.stdout, r.stdout


def test_fixture_records_and_plays_back_the_openai_sdk(tmp_path: Path) -> None:
    (tmp_path / "test_block.py").write_text(textwrap.dedent(f'''
        import sys
        sys.path.insert(0, {str(REPO / "examples")!r})
        import model_server
        from openai import OpenAI

        def ask():
            client = OpenAI(base_url="http://model.example/v1", api_key="test-" + "k" * 8, max_retries=0)
            msgs = [{{"role": "user", "content": "Where is my order ORD-1001?"}}]
            stream = client.chat.completions.create(model="m", messages=msgs, stream=True)
            return "".join(c.choices[0].delta.content or "" for c in stream if c.choices) or [
                tc.function.name for c in [client.chat.completions.create(model="m", messages=msgs)]
                for tc in c.choices[0].message.tool_calls]

        def test_record_then_replay(spoolproxy_session):
            server = model_server.start()
            route = f"model.example:80:127.0.0.1:{{server.server_address[1]}}"
            with spoolproxy_session.record("cassettes/block.yaml", connect_to=[route]) as rec:
                live = ask()
            server.shutdown()
            server.server_close()
            assert rec.cassette is not None and len(rec.cassette.interactions) == 2
            with spoolproxy_session.playback("cassettes/block.yaml", match="exact") as play:
                assert play.env["HTTPS_PROXY"] == play.proxy_url
                replayed = ask()
            assert replayed == live == ["lookup_order"]
            assert play.report.exact == 2 and play.report.misses == 0
    '''))
    r = pytest_run(tmp_path, "test_block.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout
    assert (tmp_path / "cassettes" / "block.yaml").is_file()


VCR_CASSETTE = """\
interactions:
- request:
    body: null
    headers: {}
    method: GET
    uri: http://shop.example/orders?id=ORD-1001
  response:
    body:
      string: '{"orders": [{"order_id": "ORD-1001", "status": "shipped"}]}'
    headers:
      Content-Type:
      - application/json
    status:
      code: 200
      message: OK
version: 1
"""


def test_spoolproxy_serves_pytest_recording_cassettes(tmp_path: Path) -> None:
    (tmp_path / "test_api.py").write_text(textwrap.dedent('''
        import shutil, subprocess
        import httpx
        import pytest

        URL = "http://shop.example/orders?id=ORD-1001"

        @pytest.mark.vcr
        def test_lookup():
            assert httpx.get(URL).json()["orders"][0]["status"] == "shipped"

        @pytest.mark.vcr
        def test_other_order():   # its cassette lacks this request: fails both ways
            assert httpx.get("http://shop.example/orders?id=ORD-9").status_code == 200

        @pytest.mark.vcr
        def test_lookup_with_curl():   # a non-Python client in a subprocess
            out = subprocess.run(["curl", "-s", "--max-time", "10", URL], capture_output=True, text=True)
            assert '"shipped"' in out.stdout
    '''))
    d = tmp_path / "cassettes" / "test_api"
    d.mkdir(parents=True)
    for name in ("test_lookup", "test_other_order", "test_lookup_with_curl"):
        (d / f"{name}.yaml").write_text(VCR_CASSETTE)
    plain = pytest_run(tmp_path, "test_api.py", "-k", "not curl", "-rA")
    assert "1 failed, 1 passed" in plain.stdout, plain.stdout
    proxied = pytest_run(tmp_path, "test_api.py", "--spoolproxy", "-rA")
    out = proxied.stdout
    assert "1 failed, 2 passed" in out, out + proxied.stderr
    assert "PASSED test_api.py::test_lookup_with_curl" in out and "FAILED test_api.py::test_other_order" in out
    assert "spoolproxy playback" in out and "MISS" in out and "ORD-9" in out  # the miss is explained


def test_spoolproxy_honours_project_fixtures_and_the_vcr_fixture(tmp_path: Path) -> None:
    """A project that moves its cassettes (``vcr_cassette_dir``), inspects pytest-recording's
    ``vcr`` fixture, turns warnings into errors and keeps one pooled async client across
    tests: the same tests pass with vcrpy and under --spoolproxy."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent('''
        import os
        import pytest

        @pytest.fixture(scope="module")
        def vcr_cassette_dir(request):
            return os.path.join(os.path.dirname(str(request.node.fspath)), "recorded")
    '''))
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings =\n    error\n")
    (tmp_path / "test_api.py").write_text(textwrap.dedent('''
        import asyncio, json
        import httpx
        import pytest

        URL = "http://shop.example/orders?id=ORD-1001"
        CLIENT = {}

        def shared():  # one pooled client for the whole module, as SDK wrappers often cache it
            if "c" not in CLIENT:
                CLIENT["c"] = httpx.AsyncClient()
            return CLIENT["c"]

        @pytest.mark.vcr
        def test_first(vcr):
            assert asyncio.run(shared().get(URL)).json()["orders"][0]["status"] == "shipped"
            assert len(vcr) == 1 and vcr.requests[0].uri == URL and vcr.play_count == 1 and vcr.all_played

        @pytest.mark.vcr
        def test_second(vcr):   # a new event loop: the pooled connection of test_first must not be reused
            assert asyncio.run(shared().get(URL)).status_code == 200
            assert vcr.play_counts[0] == 1

        def test_no_cassette(vcr):
            assert vcr is None
    '''))
    d = tmp_path / "recorded"
    d.mkdir()
    for name in ("test_first", "test_second"):
        (d / f"{name}.yaml").write_text(VCR_CASSETTE)
    plain = pytest_run(tmp_path, "test_api.py", "-rA")
    assert "3 passed" in plain.stdout, plain.stdout
    proxied = pytest_run(tmp_path, "test_api.py", "--spoolproxy", "-rA")
    assert "3 passed" in proxied.stdout, proxied.stdout + proxied.stderr
