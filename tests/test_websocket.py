"""WebSocket sessions recorded and replayed through the real CLI: the openai SDK's Realtime
client and the plain ``websockets`` library against a local fake WebSocket API (real TLS,
the Realtime event format), then offline playback with matching, misses and ``--strict``.

Playback points the recorded hosts (``--connect-to``) at a second fake used as a sentinel:
it must see zero connections.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from spoolproxy.cassettes import load
from spoolproxy.cassettes.websocket import WsMessage, WsSession, session_of
from spoolproxy.proxy.isolate import unavailable
from spoolproxy.replayer.fingerprint import Fingerprinter, MatchOptions
from spoolproxy.replayer.websocket import Conversation

from .fakes.realtime_wire import FakeRealtime
from .test_proxy_support import run_cli, spool_home  # noqa: F401

pytest.importorskip("websockets", reason="the websockets package (openai[realtime]) is needed for WebSocket tests")

pytestmark = pytest.mark.usefixtures("spool_home")

KEY = "sk-proj-" + "w" * 40

REALTIME_CLIENT = textwrap.dedent(
    """
    import sys
    import openai

    prompt = sys.argv[1]
    extra = sys.argv[2] if len(sys.argv) > 2 else ""
    client = openai.OpenAI(max_retries=0)
    with client.realtime.connect(model="gpt-realtime") as conn:
        conn.session.update(session={"type": "realtime", "output_modalities": ["text"], "instructions": "be brief"})
        conn.conversation.item.create(
            item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]})
        if extra == "clear":
            conn.input_audio_buffer.clear()
        conn.response.create()
        out = []
        for ev in conn:
            if ev.type == "response.output_text.delta":
                out.append(ev.delta)
            elif ev.type == "response.done":
                break
            elif ev.type == "error":
                print("ERROR", ev.error.message)
                sys.exit(2)
    print("ANSWER:", "".join(out))
    """
)

WS_CLIENT = textwrap.dedent(
    """
    import sys
    from websockets.sync.client import connect

    url, first = sys.argv[1], sys.argv[2]
    with connect(url, open_timeout=10) as ws:
        ws.send(first)
        print("got", ws.recv(timeout=10))
        ws.send(bytes([1, 2, 3]))
        print("got", list(ws.recv(timeout=10)))
        ws.send("bye")
        print("got", ws.recv(timeout=10))
        try:
            ws.recv(timeout=10)
        except Exception as exc:
            print("closed", type(exc).__name__, ws.close_code)
    """
)

GEMINI_LIVE = "wss://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"


@pytest.fixture(scope="module")
def realtime(fake_ca):
    with FakeRealtime(ca=fake_ca) as server:
        yield server


@pytest.fixture
def sentinel(fake_ca):
    with FakeRealtime(ca=fake_ca) as server:
        yield server
        assert server.connections == 0, "playback opened an upstream connection"


def _via(server, *hosts) -> list[str]:
    args = []
    for h in hosts:
        args += ["--connect-to", f"{h}:443:127.0.0.1:{server.port}"]
    return args


def _record(tmp_path, spool_home, realtime, fake_ca, script, *args, host="api.openai.com"):
    cas = tmp_path / "ws.yaml"
    proc = run_cli(["record", "-c", str(cas), "--upstream-ca", str(fake_ca.ca_pem_path), *_via(realtime, host),
                    "--", sys.executable, str(script), *args], spool_home, cwd=tmp_path, OPENAI_API_KEY=KEY)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return cas, proc


def _play(cas, spool_home, sentinel, script, *args, flags=(), host="api.openai.com"):
    return run_cli(["playback", "-c", str(cas), *flags, *_via(sentinel, host), "--", sys.executable, str(script), *args],
                   spool_home, cwd=cas.parent, OPENAI_API_KEY=KEY)


def test_openai_realtime_recorded_then_replayed_offline(tmp_path, spool_home, realtime, sentinel, fake_ca):
    script = tmp_path / "rt.py"
    script.write_text(REALTIME_CLIENT)
    cas, rec = _record(tmp_path, spool_home, realtime, fake_ca, script, "hello there")
    assert "ANSWER: Echo: hello there" in rec.stdout

    # the cassette: one interaction, the 101 handshake, messages in a readable list
    cassette = load(cas)
    assert len(cassette) == 1
    it = cassette.interactions[0]
    assert it.response.status == 101 and it.request.uri.startswith("https://api.openai.com/v1/realtime")
    ws = session_of(it)
    kinds = [(m.sender, json.loads(m.data)["type"]) for m in ws.messages]
    assert ("server", "session.created") in kinds and ("client", "response.create") in kinds
    assert kinds[-1] == ("server", "response.done")
    assert all(m.is_text for m in ws.messages)
    assert ws.close is not None and ws.close.by == "client"
    offsets = [m.at_ms for m in ws.messages]
    assert offsets == sorted(offsets) and offsets[0] >= 0
    text = cas.read_text()
    assert "  spoolproxy:\n" in text and "    websocket:\n" in text and KEY not in text

    # vcrpy still loads the file through the serializer spoolproxy ships
    from vcr.serialize import deserialize

    from spoolproxy.cassettes import vcrpy_serializer

    reqs, resps = deserialize(cas.read_text(), vcrpy_serializer)
    assert len(reqs) == 1 and resps[0]["status"]["code"] == 101

    # offline playback: same answer, strict is green, nothing reached the network
    play = _play(cas, spool_home, sentinel, script, "hello there", flags=["--strict"])
    assert play.returncode == 0, play.stderr
    assert "ANSWER: Echo: hello there" in play.stdout
    assert "served exactly 1, served with divergence 0, missed 0, unused 0" in play.stderr

    # a changed client message: served (default matching) but reported, and --strict fails
    changed = _play(cas, spool_home, sentinel, script, "something else", flags=["--strict"])
    assert "DIVERGENCE" in changed.stderr and "client message" in changed.stderr
    assert "something else" in changed.stderr
    assert "served exactly 0, served with divergence 1" in changed.stderr
    assert changed.returncode == 3, changed.stderr

    # --match exact: the changed message is a miss, the connection closes, the client fails
    exact = _play(cas, spool_home, sentinel, script, "something else", flags=["--match", "exact"])
    assert exact.returncode != 0
    assert "ANSWER" not in exact.stdout
    assert "MISS" in exact.stderr and "does not match the recording" in exact.stderr
    assert "served exactly 0, served with divergence 0, missed 1" in exact.stderr

    # an extra client message the recording never had: a miss, never "served"
    extra = _play(cas, spool_home, sentinel, script, "hello there", "clear", flags=["--strict"])
    assert extra.returncode != 0
    assert "missed 1" in extra.stderr, extra.stderr
    assert "served exactly 1" not in extra.stderr


def test_plain_websockets_text_binary_and_server_close(tmp_path, spool_home, realtime, sentinel, fake_ca):
    script = tmp_path / "ws.py"
    script.write_text(WS_CLIENT)
    host = "generativelanguage.googleapis.com"
    cas, rec = _record(tmp_path, spool_home, realtime, fake_ca, script, GEMINI_LIVE, "hi", host=host)
    assert "got HI" in rec.stdout and "got [3, 2, 1]" in rec.stdout and "got goodbye" in rec.stdout
    ws = session_of(load(cas).interactions[0])
    assert [m.is_text for m in ws.messages] == [True, True, False, False, True, True]
    assert ws.messages[2].data == bytes([1, 2, 3]) and ws.messages[3].data == bytes([3, 2, 1])
    assert ws.close.by == "server" and ws.close.code == 1000 and ws.close.reason == "done"
    assert "!!binary" in cas.read_text()

    # replayed offline, inside a network namespace where the proxy is all there is (where possible)
    isolate = ["--isolate"] if unavailable() is None else []
    play = _play(cas, spool_home, sentinel, script, GEMINI_LIVE, "hi", flags=["--strict", *isolate], host=host)
    assert play.returncode == 0, play.stderr
    assert play.stdout == rec.stdout  # same messages, same server close (code 1000)
    assert "closed ConnectionClosedOK 1000" in play.stdout

    changed = _play(cas, spool_home, sentinel, script, GEMINI_LIVE, "ho", flags=["--strict"], host=host)
    assert changed.returncode == 3
    assert "client message 1 $: text differs" in changed.stderr or "client message 1 $" in changed.stderr


def _conv(msgs, match="default", **opts):
    return Conversation(WsSession(messages=msgs), Fingerprinter(MatchOptions(**opts)), match)


def test_conversation_steps_and_warnings():
    c = lambda t: WsMessage(True, t.encode())  # noqa: E731
    s = lambda t, at=0.0: WsMessage(False, t.encode(), at_ms=at)  # noqa: E731
    rec = [s("hello"), c('{"type":"a","n":1}'), s("ra1", 5), s("ra2", 9), c('{"type":"b"}'), s("rb", 20)]

    conv = _conv(rec)
    assert [m.data for _, m in conv.opening().replies] == [b"hello"]
    step = conv.receive(c('{"n": 1, "type": "a"}'))  # same JSON, other key order: exact
    assert step.outcome == "exact" and [(d, m.data) for d, m in step.replies] == [(5.0, b"ra1"), (9.0, b"ra2")]
    assert conv.finish("client") and "after 1 of 2" in conv.finish("client")[0]

    conv = _conv(rec)
    conv.opening()
    step = conv.receive(c('{"type":"a","n":2}'))  # same type, other value: divergence, replies sent
    assert step.outcome == "divergence" and len(step.replies) == 2
    assert conv.changes[0].path == "client message 1 $.n" and conv.suggestions == ["--ignore-json-path $.n"]
    assert conv.receive(c('{"type":"b"}')).outcome == "exact"
    assert conv.outcome == "divergence" and conv.finish("client") == []

    conv = _conv(rec, ignore_json_paths=("$.n",))  # the suggested flag makes it exact
    conv.opening()
    assert conv.receive(c('{"type":"a","n":2}')).outcome == "exact"

    conv = _conv(rec)
    conv.opening()
    step = conv.receive(c('{"type":"zzz"}'))  # another event type: a miss, closed 1008
    assert step.outcome == "miss" and step.replies == [] and step.close.code == 1008
    assert conv.outcome == "miss" and "does not match" in conv.reasons[0]
    assert conv.suggestions == []  # another event type is a real change: no flag hides it

    conv = _conv(rec, match="exact")
    conv.opening()
    assert conv.receive(c('{"type":"a","n":2}')).outcome == "miss"

    conv = _conv([c("x"), s("y")])
    conv.opening()
    conv.receive(c("x"))
    extra = conv.receive(c("again"))
    assert extra.outcome == "miss" and "never recorded" in conv.reasons[-1]


def test_recorded_messages_are_redacted():
    from mitmproxy.websocket import WebSocketMessage
    from wsproto.frame_protocol import Opcode

    from spoolproxy.cassettes.model import Request
    from spoolproxy.cassettes.redact import Redactor
    from spoolproxy.proxy.websocket import WsRecording

    token = "tok" + "9" * 20  # not key-shaped: only known as the handshake's credential
    rec = WsRecording(opened=1000.0)
    rec.add(WebSocketMessage(Opcode.TEXT, True, f'{{"key": "{KEY}", "echo": "{token}"}}'.encode(), timestamp=1000.25))
    rec.add(WebSocketMessage(Opcode.BINARY, False, b"\x00\x01", timestamp=1000.5))
    hs = Request(method="GET", uri="https://api.example.com/ws", headers={"Authorization": [f"Bearer {token}"]})
    ext = rec.extension(Redactor(), hs)
    first, second = ext["messages"]
    assert KEY not in first["text"] and token not in first["text"] and "REDACTED-" in first["text"]
    assert first["from"] == "client" and first["at_ms"] == 250.0
    assert second == {"from": "server", "at_ms": 500.0, "binary": b"\x00\x01"}
    assert "close" not in ext  # still open


def test_child_env_points_websocket_clients_at_the_proxy(tmp_path):
    from spoolproxy.proxy.child import child_env, export_lines

    env = child_env("http://127.0.0.1:8899", tmp_path / "bundle.pem", base={})
    for name in ("WSS_PROXY", "WS_PROXY", "wss_proxy", "ws_proxy"):
        assert env[name] == "http://127.0.0.1:8899"
    assert "export WSS_PROXY=http://127.0.0.1:8899" in export_lines(env, base={})
