"""Small pieces of the recording proxy: --connect-to/--reverse parsing, the child
environment, body decoding and spilling, streaming redaction, failure kinds, the summary
and the per-user CA."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
import zlib
from pathlib import Path

import pytest

from spoolproxy.cassettes.model import Interaction, Request, Response
from spoolproxy.cassettes.redact import Redactor
from spoolproxy.cli.common import parse_size
from spoolproxy.errors import UsageError
from spoolproxy.proxy.bodysink import BodySink, StreamRedactor
from spoolproxy.proxy.ca import ensure_ca
from spoolproxy.proxy.child import child_env, export_lines
from spoolproxy.proxy.failures import classify
from spoolproxy.proxy.summary import RunSummary, provider_of
from spoolproxy.proxy.upstream import ConnectRule, ConnectTo, parse_connect_to, parse_reverse

from .test_proxy_support import spool_home  # noqa: F401 (fixture)


def _key() -> str:
    return "sk-ant-api03-" + "k7" * 20


# -- --connect-to / --reverse --------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, rule",
    [
        ("api.openai.com:443:127.0.0.1:8443", ConnectRule("api.openai.com", 443, "127.0.0.1", 8443)),
        ("::127.0.0.1:9000", ConnectRule(None, None, "127.0.0.1", 9000)),
        ("example.com:80::8080", ConnectRule("example.com", 80, None, 8080)),
        ("[::1]:443:[::1]:8443", ConnectRule("::1", 443, "::1", 8443)),
    ],
)
def test_connect_to_specs_parse_like_curl(spec, rule):
    assert parse_connect_to(spec) == rule


@pytest.mark.parametrize("spec", ["api.openai.com:443:127.0.0.1", "a:b:c:d", "x:99999:y:1", "justahost", ""])
def test_malformed_connect_to_is_one_line_usage_error(spec):
    with pytest.raises(UsageError) as exc:
        parse_connect_to(spec)
    assert "\n" not in str(exc.value) and "--connect-to" in str(exc.value)


def test_connect_to_first_matching_rule_wins_and_empty_fields_match_any():
    ct = ConnectTo([parse_connect_to("api.openai.com:443:127.0.0.1:1"), parse_connect_to(":443:127.0.0.1:2")])
    assert ct.target("API.OPENAI.COM", 443) == ("127.0.0.1", 1)
    assert ct.target("other.example", 443) == ("127.0.0.1", 2)
    assert ct.target("other.example", 80) is None


def test_reverse_urls_are_validated():
    assert parse_reverse("https://api.openai.com/") == "https://api.openai.com"
    for bad in ("ftp://x", "https://api.openai.com/v1", "api.openai.com"):
        with pytest.raises(UsageError):
            parse_reverse(bad)


# -- child environment ----------------------------------------------------------------------
def test_child_env_points_every_client_at_proxy_and_bundle(tmp_path):
    bundle = tmp_path / "b.pem"
    base = {"PATH": "/bin", "NO_PROXY": "api.openai.com,localhost", "no_proxy": "*", "SSL_CERT_DIR": "/etc/ssl/certs"}
    env = child_env("http://127.0.0.1:1234", bundle, base=base)
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY"):
        assert env[name] == "http://127.0.0.1:1234"
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        assert env[name] == str(bundle)
    assert env["NODE_USE_ENV_PROXY"] == "1"
    assert env["NO_PROXY"] == env["no_proxy"] == ""  # inherited exemptions would hide recorded hosts
    assert "SSL_CERT_DIR" not in env and env["PATH"] == "/bin"
    env2 = child_env("http://p:1", bundle, base={}, proxy_localhost=False, no_proxy=["tools.internal"])
    assert env2["NO_PROXY"] == "tools.internal,localhost,127.0.0.1,::1"
    lines = export_lines(env2, base={})
    assert "export HTTPS_PROXY=http://p:1" in lines and any(l.startswith("export SSL_CERT_FILE=") for l in lines)


# -- sizes ----------------------------------------------------------------------------------
def test_parse_size():
    assert parse_size("10MB") == 10 * 1024 * 1024
    assert parse_size("512k") == 512 * 1024
    assert parse_size("1048576") == 1048576
    assert parse_size("1.5m") == int(1.5 * 1024 * 1024)
    with pytest.raises(UsageError):
        parse_size("lots")


# -- body capture ---------------------------------------------------------------------------
def _encode(enc: str, data: bytes) -> bytes:
    if enc == "gzip":
        return gzip.compress(data)
    if enc == "deflate":
        return zlib.compress(data)
    if enc == "deflate-raw":
        c = zlib.compressobj(wbits=-15)
        return c.compress(data) + c.flush()
    if enc == "br":
        import brotli

        return brotli.compress(data)
    if enc == "zstd":
        try:
            from compression import zstd  # type: ignore[import-not-found]
        except ImportError:
            from backports import zstd  # type: ignore[no-redef]
        return zstd.compress(data)
    raise AssertionError(enc)


@pytest.mark.parametrize("enc", ["gzip", "deflate", "deflate-raw", "br", "zstd"])
def test_body_sink_decodes_incrementally_and_passes_wire_bytes_through(enc):
    data = b"".join(f'data: {{"n": {i}, "text": "token {i}"}}\n\n'.encode() for i in range(400))
    wire = _encode(enc, data)
    sink = BodySink(encoding="deflate" if enc == "deflate-raw" else enc)
    out = b"".join(sink(wire[i : i + 97]) for i in range(0, len(wire), 97))
    assert out == wire  # the client gets the bytes as they came
    got = sink.finish()
    assert got.decoded and got.body == data
    assert sum(c.size for c in got.chunks) == len(data)
    assert [c.offset_ms for c in got.chunks] == sorted(c.offset_ms for c in got.chunks)


def test_body_sink_keeps_undecodable_body_as_received():
    sink = BodySink(encoding="gzip")
    sink(b"not gzip at all")
    got = sink.finish()
    assert not got.decoded and got.body == b"not gzip at all"


def test_body_sink_spills_redacted_and_bounded(tmp_path):
    key = _key()
    piece = b"x" * 1000
    parts = [piece] * 50 + [b"..." + key[:10].encode(), key[10:].encode() + b"..."] + [piece] * 50
    sink = BodySink(limit=4096, mode="spill", spill_dir=tmp_path / "c.yaml.bodies", redactor=Redactor())
    for p in parts:
        sink(p)
        assert len(sink.mem) <= 4096
    got = sink.finish(prefix="0007")
    side = tmp_path / got.body_ref.file
    data = side.read_bytes()
    assert key.encode() not in data and b"REDACTED-anthropic-key-" in data  # split secret found
    assert got.body_ref.size == len(data) == sum(c.size for c in got.chunks)
    assert got.body_ref.sha256 == hashlib.sha256(data).hexdigest()
    assert side.name.startswith("0007-") and stat.S_IMODE(side.stat().st_mode) == 0o600


def test_stream_redactor_finds_secret_across_every_split():
    key = _key().encode()
    text = b"a" * 300 + b" " + key + b" " + b"b" * 300
    red = Redactor()
    for cut in range(0, len(text), 7):
        out: list[bytes] = []
        sr = StreamRedactor(red, out.append, hold=64)
        sr.write(text[:cut])
        sr.write(text[cut:])
        sr.close()
        assert b"".join(out) == red.bytes_(text)


# -- failures ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "msg, had, kind, during",
    [
        ("[Errno 111] Connect call failed ('127.0.0.1', 9)", False, "refused", "connect"),
        ("[Errno -2] Name or service not known", False, "dns", "connect"),
        ("TLS handshake failed: certificate verify failed", False, "tls", "connect"),
        ("peer closed connection without sending complete message body: incomplete chunked read", True, "reset", "response"),
        ("Client disconnected.", True, "other", "response"),
    ],
)
def test_failure_kinds(msg, had, kind, during):
    f = classify(msg, had_response=had)
    assert (f.kind, f.during, f.message) == (kind, during, msg)


# -- summary ----------------------------------------------------------------------------------
def _it(uri: str, req: dict, body: bytes, ctype: str = "application/json", status: int = 200) -> Interaction:
    return Interaction(
        request=Request(method="POST", uri=uri, body=json.dumps(req).encode()),
        response=Response(status=status, headers={"content-type": [ctype]}, body=body),
    )


def test_summary_counts_calls_tokens_errors_and_streams():
    s = RunSummary()
    s.add(_it("https://api.openai.com/v1/chat/completions", {"model": "gpt-4o"},
              json.dumps({"model": "gpt-4o-2024", "usage": {"prompt_tokens": 11, "completion_tokens": 5}}).encode()))
    sse = (
        b'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-x","usage":{"input_tokens":20,"output_tokens":1}}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":9}}\n\n'
    )
    s.add(_it("https://api.anthropic.com/v1/messages", {"model": "claude-x", "stream": True}, sse, "text/event-stream"))
    s.add(_it("https://api.groq.com/openai/v1/chat/completions", {"model": "llama"}, b"{}", status=429))
    s.add(_it("https://tools.example/search", {}, b"{}"))
    assert s.interactions == 4 and s.streams == 1
    assert s.calls[("openai", "gpt-4o")] == 1 and s.calls[("anthropic", "claude-x")] == 1
    assert s.calls[("openai-compatible", "llama")] == 1
    assert (s.tokens_in["openai"], s.tokens_out["openai"]) == (11, 5)
    assert (s.tokens_in["anthropic"], s.tokens_out["anthropic"]) == (20, 9)
    assert s.http_errors[429] == 1
    text = "\n".join(s.lines())
    assert "anthropic" in text and "429 x1" in text
    assert provider_of(_it("https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent", {}, b"")) == "gemini"
    assert provider_of(_it("http://127.0.0.1:11434/api/chat", {}, b"")) == "ollama"


# -- CA ---------------------------------------------------------------------------------------
def test_ca_lives_in_the_user_directory_with_private_key_modes(spool_home):
    paths = ensure_ca()
    assert paths.confdir.parent == spool_home and paths.cert.is_file()
    key = paths.confdir / "mitmproxy-ca.pem"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(spool_home.stat().st_mode) == 0o700
    bundle = paths.bundle.read_text()
    assert paths.cert.read_text().strip() in bundle
    assert bundle.count("BEGIN CERTIFICATE") > 10  # the usual roots come too
    assert ensure_ca() == paths  # idempotent
    assert not str(paths.cert).startswith(str(Path.cwd()))
    os.chmod(key, 0o644)
    ensure_ca()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600  # repaired


def test_reverse_env_tells_the_child_where_each_upstream_listens():
    from spoolproxy.proxy.child import reverse_env
    from spoolproxy.proxy.upstream import parse_reverse_spec

    assert parse_reverse_spec("https://api.openai.com@8080") == ("https://api.openai.com", 8080)
    assert parse_reverse_spec("http://127.0.0.1:9000") == ("http://127.0.0.1:9000", None)
    with pytest.raises(UsageError):
        parse_reverse_spec("https://api.openai.com@0")
    ports = {"https://api.openai.com": 4001, "https://api.anthropic.com": 4002, "https://tools.example:8443": 4003}
    env = reverse_env(ports, base={"ANTHROPIC_BASE_URL": "https://my-gateway.example"})
    assert env["SPOOLPROXY_REVERSE_API_OPENAI_COM"] == "http://127.0.0.1:4001"
    assert env["SPOOLPROXY_REVERSE_TOOLS_EXAMPLE"] == "http://127.0.0.1:4003"
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:4001/v1"
    assert "ANTHROPIC_BASE_URL" not in env  # the user's own gateway setting is left alone


def test_upstream_proxy_urls():
    from spoolproxy.proxy.upstream import parse_upstream_proxy

    assert parse_upstream_proxy("http://proxy.corp:3128") == ("http://proxy.corp:3128", None)
    assert parse_upstream_proxy("http://u%40x:p@proxy.corp") == ("http://proxy.corp:80", "u@x:p")
    for bad in ("socks5://p:1080", "proxy.corp:3128", "http://p:notaport"):
        with pytest.raises(UsageError):
            parse_upstream_proxy(bad)


def test_summary_failure_lines_name_non_default_ports():
    from spoolproxy.cassettes.model import Failure
    from spoolproxy.proxy.summary import host_port

    def failed(uri: str) -> Interaction:
        return Interaction(request=Request(method="POST", uri=uri), error=Failure(kind="reset", message="x", during="response"))

    assert host_port(failed("https://api.openai.com/v1/x")) == "api.openai.com"
    assert host_port(failed("http://127.0.0.1:80/v1/x")) == "127.0.0.1"
    assert host_port(failed("https://[::1]:8443/v1/x")) == "[::1]:8443"
    s = RunSummary()
    s.add(failed("http://127.0.0.1:8080/v1/chat/completions"))
    assert "transport failures: 1 (reset POST 127.0.0.1:8080/v1/chat/completions)" in s.lines()
