"""Import files the real tools write at test time, then play an imported HAR back.

``make_samples.py`` drives the real openai SDK through real mitmproxy (HAR and flow
files from mitmproxy's own addons) with the official OpenTelemetry instrumentation (OTLP
JSON from the SDK's exporter), this time with a key-shaped API key; the imported
cassettes must hold no trace of it, and the imported HAR must serve the unmodified agent
offline through spoolproxy's playback proxy.
"""

from __future__ import annotations

import importlib.util
import os
import ssl
from pathlib import Path

import httpx
import openai
import pytest

from spoolproxy.cassettes import save
from spoolproxy.detectors import analyze, build_transcript
from spoolproxy.interop import import_file
from spoolproxy.proxy.ca import ensure_ca
from spoolproxy.proxy.runner import ProxyRunner
from spoolproxy.replayer.addon import Playback
from spoolproxy.replayer.session import PlaybackConfig, PlaybackSession

pytest.importorskip("opentelemetry.instrumentation.openai_v2", reason="the dev extra's OpenTelemetry packages write the OTLP samples")
pytest.importorskip("opentelemetry.exporter.otlp.json.file", reason="the dev extra's OpenTelemetry packages write the OTLP samples")

MAKE = Path(__file__).parent / "data" / "interop" / "make_samples.py"
KEY = "sk-proj-" + "L" * 40


def _samples_module():
    spec = importlib.util.spec_from_file_location("make_samples", MAKE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def live_samples(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("interop-live")
    os.environ["SAMPLE_API_KEY"] = KEY
    try:
        _samples_module().make(out)
    finally:
        os.environ.pop("SAMPLE_API_KEY", None)
    return out


def test_every_file_the_tools_wrote_imports_redacted_and_detects(live_samples):
    names = sorted(p.name for p in live_samples.iterdir())
    assert names == ["agent-1002.flows", "agent-1002.har", "agent-1003.flows", "agent-1003.har",
                     "agent-messages.jsonl", "agent-otlp-events.jsonl", "agent-otlp.jsonl"]
    assert KEY.encode() in (live_samples / "agent-1002.har").read_bytes()  # the tools wrote the key
    verdicts = {}
    for p in sorted(live_samples.iterdir()):
        for run in import_file(p):
            from spoolproxy.cassettes.storage import dumps

            assert KEY not in dumps(run.cassette)
            failing = any(b"1002" in it.request.body for it in run.cassette.interactions)
            verdicts[(p.name, failing)] = analyze(run.cassette).verdict
    assert {k: v for k, v in verdicts.items() if k[1]} == {k: "fail" for k in verdicts if k[1]}
    assert {k: v for k, v in verdicts.items() if not k[1]} == {k: "pass" for k in verdicts if not k[1]}
    assert len(verdicts) == 10


def test_imported_har_plays_back_to_the_real_agent_offline(live_samples, tmp_path, fake_provider):
    [run] = import_file(live_samples / "agent-1002.har")
    cassette = tmp_path / "imported.yaml"
    save(run.cassette, cassette)
    recorded_answer = build_transcript(run.cassette).final_answer.text
    shop = run.cassette.interactions[1].request.uri.rsplit("/orders/", 1)[0]
    session = PlaybackSession(PlaybackConfig(cassettes=[str(cassette)]))
    rules = [f"api.openai.com:443:127.0.0.1:{fake_provider.port}", f"::127.0.0.1:{fake_provider.http_port}"]
    verify = ssl.create_default_context(cafile=str(ensure_ca().bundle))
    with ProxyRunner([Playback(session)], options={"connection_strategy": "lazy", "upstream_cert": False},
                     connect_to=rules) as runner:
        with httpx.Client(proxy=runner.proxy_url, verify=verify, timeout=20) as http:
            client = openai.OpenAI(base_url="https://api.openai.com/v1", http_client=http, max_retries=0, api_key=KEY)
            answer = _samples_module().run_agent(client, http, shop, "1002", None)
    rep = session.report()
    assert rep.misses == 0 and rep.unused == []
    assert fake_provider.connections == 0  # nothing left the proxy
    assert answer == recorded_answer  # the agent got, offline, exactly what it got when recorded
    assert answer.startswith("The tool said: <html>") and "502 Bad Gateway" in answer
