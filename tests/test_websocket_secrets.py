"""Secrets in WebSocket messages: a cassette written without redaction (as before redaction
covered messages on every write path, or by another tool) holds keys in its messages;
``spoolproxy scan`` finds them (exit 1) and ``spoolproxy export`` / ``spoolproxy import``
write them redacted, with the messages' JSON still JSON and binary payloads unchanged."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

from spoolproxy.cassettes import Cassette, Interaction, Redactor, Request, Response, load, save
from spoolproxy.cassettes.websocket import session_of

from .test_proxy_support import cli_env

OPENAI_KEY = "sk-proj-" + "Wq7" * 14
SESSION_SECRET = "ya29." + "Zx81" * 8  # an OAuth access token: secret by its field name
HANDSHAKE_TOKEN = "tok" + "9" * 24  # not key-shaped: known only as the handshake's credential
AUDIO = bytes(range(256)) * 4  # a binary payload that must come through byte for byte


def spool(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in cli_env(tmp_path / "home").items() if not k.endswith(("_API_KEY", "_TOKEN", "_SECRET"))}
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60, env=env)


def leaky_cassette() -> Cassette:
    """One OpenAI Realtime session, stored without any redaction."""
    messages = [
        {"from": "client", "at_ms": 2.0, "text": json.dumps({"type": "conversation.item.create", "item": {
            "type": "function_call_output", "call_id": "call_1",  # a tool's JSON answer, held in a string
            "output": json.dumps({"user": "ana", "access_token": SESSION_SECRET, "expires_in": 3600})}})},
        {"from": "client", "at_ms": 5.5, "text": json.dumps({"type": "conversation.item.create", "item": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": f"my other key is {OPENAI_KEY}, keep it safe"}]}})},
        {"from": "client", "at_ms": 7.0, "binary": AUDIO},
        {"from": "server", "at_ms": 9.25, "text": f"debug: authorized as {HANDSHAKE_TOKEN}"},
    ]
    hs = Request(method="GET", uri="https://api.openai.com/v1/realtime?model=gpt-4o-realtime-preview",
                 headers={"Authorization": [f"Bearer {HANDSHAKE_TOKEN}"], "Upgrade": ["websocket"],
                          "Connection": ["Upgrade"]})
    it = Interaction(request=hs, response=Response(status=101, reason="Switching Protocols",
                                                   headers={"Upgrade": ["websocket"], "Connection": ["Upgrade"]}),
                     extra={"websocket": {"messages": messages, "close": {"by": "client", "code": 1000, "reason": ""}}})
    return Cassette(interactions=[it])


def raw_secrets_in(text: str) -> list[str]:
    return [s for s in (OPENAI_KEY, SESSION_SECRET, HANDSHAKE_TOKEN) if s in text]


def test_scan_finds_keys_in_websocket_messages_and_export_redacts_them(tmp_path):
    path = save(leaky_cassette(), tmp_path / "realtime.yaml")  # storage.save writes what it is given
    assert raw_secrets_in(path.read_text()) == [OPENAI_KEY, SESSION_SECRET, HANDSHAKE_TOKEN]

    r = spool(tmp_path, "scan", str(path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{path}: interaction 0: websocket.messages[1].text: openai-key" in r.stdout
    assert f"{path}: interaction 0: websocket.messages[0].text: field" in r.stdout  # JSON inside the message
    assert f"{path}: interaction 0: websocket.messages[3].text: known-secret" in r.stdout  # the echoed credential
    assert raw_secrets_in(r.stdout + r.stderr) == []  # never printed

    out = tmp_path / "clean.yaml"
    r = spool(tmp_path, "export", str(path), "--format", "spoolproxy", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert raw_secrets_in(out.read_text()) == []
    ws = session_of(load(out).interactions[0])
    created, item, audio, debug = ws.messages
    output = json.loads(json.loads(created.data)["item"]["output"])  # still JSON, only the secret replaced
    assert output["access_token"].startswith("REDACTED-") and output["user"] == "ana" and output["expires_in"] == 3600
    assert "REDACTED-openai-key-" in json.loads(item.data)["item"]["content"][0]["text"]
    assert audio.data == AUDIO and not audio.is_text
    handshake = load(out).interactions[0].request.headers["Authorization"][0]
    assert debug.data.decode() == f"debug: authorized as {handshake.split(' ', 1)[1]}"  # one placeholder for one secret
    assert ws.close is not None and ws.close.code == 1000
    r = spool(tmp_path, "scan", str(out))
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_secret_first_seen_in_a_message_is_hidden_everywhere():
    """The redactor learns a secret from a message and replaces it in the HTTP parts too."""
    cas = leaky_cassette()
    it = cas.interactions[0]
    echoed = it.model_copy(update={"request": it.request.model_copy(
        update={"uri": it.request.uri + f"&trace={SESSION_SECRET}"})})
    red = Redactor().cassette(Cassette(interactions=[echoed])).interactions[0]
    ws = session_of(red)
    texts = [red.request.uri, *red.request.headers["Authorization"], *(m.data.decode() for m in ws.messages if m.is_text)]
    assert raw_secrets_in("\n".join(texts)) == []
    assert ws.messages[2].data == AUDIO
    token = json.loads(json.loads(ws.messages[0].data)["item"]["output"])["access_token"]
    assert red.request.uri.endswith(f"&trace={token}")  # the same placeholder in the URL as in the message


def test_import_redacts_websocket_messages_of_a_har(tmp_path):
    """A HAR whose ``_webSocketMessages`` (Chromium's devtools export) carry a key."""
    har = {"log": {"version": "1.2", "creator": {"name": "WebInspector", "version": "537.36"}, "entries": [{
        "startedDateTime": "2026-12-01T10:00:00.000Z", "time": 12.5,
        "request": {"method": "GET", "url": "wss://api.openai.com/v1/realtime?model=gpt-4o-realtime-preview",
                    "httpVersion": "HTTP/1.1", "headers": [{"name": "Upgrade", "value": "websocket"}],
                    "queryString": [], "cookies": [], "headersSize": -1, "bodySize": 0},
        "response": {"status": 101, "statusText": "Switching Protocols", "httpVersion": "HTTP/1.1",
                     "headers": [{"name": "Upgrade", "value": "websocket"}], "cookies": [],
                     "content": {"size": 0, "mimeType": "x-unknown"}, "redirectURL": "", "headersSize": -1,
                     "bodySize": 0},
        "cache": {}, "timings": {"send": 0, "wait": 10, "receive": 2.5},
        "_webSocketMessages": [
            {"type": "send", "time": 1764583200.1, "opcode": 1,
             "data": json.dumps({"type": "session.update", "session": {"instructions": f"use {OPENAI_KEY}"}})},
            {"type": "receive", "time": 1764583200.2, "opcode": 2, "data": base64.b64encode(AUDIO).decode()},
        ]}]}}
    src = tmp_path / "devtools.har"
    src.write_text(json.dumps(har))
    r = spool(tmp_path, "import", str(src), "-o", "imported")
    assert r.returncode == 0, r.stderr
    written = [p for p in (tmp_path / "imported").rglob("*.yaml")]
    assert len(written) == 1 and OPENAI_KEY not in written[0].read_text()
    msgs = load(written[0]).interactions[0].extra["websocket_messages"]
    assert "REDACTED-openai-key-" in json.loads(msgs[0]["data"])["session"]["instructions"]
    assert base64.b64decode(msgs[1]["data"]) == AUDIO
    assert spool(tmp_path, "scan", str(written[0])).returncode == 0
    assert os.environ.get("SPOOLPROXY_TEST_NEVER_SET") is None  # the environment held no key to learn from
