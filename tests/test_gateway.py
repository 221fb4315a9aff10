"""``spoolproxy serve``: the recording gateway, for real.

Real mitmproxy, real clients (the openai SDK, httpx) as agents, the fake provider as the
upstream, moto's S3 server as the object store (``s3://``) and fsspec's local filesystem
(``file://``).  Concurrent sessions become one cassette each, keyed by
``x-spoolproxy-session`` or the client connection; the headers never go upstream; sessions
end on the control request, when idle, when the connection closes and on SIGTERM; a crash
leaves a journal that the next start publishes.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from spoolproxy.cassettes.model import BodyRef, Cassette, Interaction, Request, Response
from spoolproxy.cassettes.redact import Redactor
from spoolproxy.cassettes.storage import parse_text, save
from spoolproxy.cli.record import RECORD_OPTIONS
from spoolproxy.proxy.runner import ProxyRunner
from spoolproxy.proxy.sessions import (
    SessionState, control_request, idle_sessions, parse_tags_header, session_id, store_key,
)

from .scale_support import need_scale, s3_server  # noqa: F401 (fixture)
from .test_proxy_support import openai_via, spawn_cli, spool_home, wait_for  # noqa: F401 (fixture)

OPENAI = "https://api.openai.com"
TODAY = None  # computed per test: sessions are keyed by their UTC start day


def _key() -> str:
    return "sk-proj-" + "Gw7" * 14  # built at run time, never a literal


def _day() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")


# -- pure decisions ------------------------------------------------------------------------
def test_session_ids_are_safe_names_and_distinct_values_stay_distinct():
    assert session_id("run-42") == "run-42"
    assert session_id("  run.7_a  ") == "run.7_a"
    weird = session_id("../../etc/passwd")
    assert "/" not in weird and not weird.startswith(".") and weird != session_id("../../etc/passwd2")
    assert len(session_id("x" * 500)) <= 96 and session_id("x" * 500) != session_id("x" * 499)
    assert session_id("") == "session"
    assert store_key("run-42", datetime(2025, 1, 31, 23, 59, tzinfo=timezone.utc)) == "2025-01-31/run-42.yaml"


def test_tag_header_pairs_merge_and_bad_pairs_are_reported_not_raised():
    tags, bad = parse_tags_header(["agent=refund-bot,version=1.4.0", "version=1.5.0, bad pair ,=x"])
    assert tags == {"agent": "refund-bot", "version": "1.5.0"}
    assert bad == ["bad pair", "=x"]


def test_idle_sessions_need_nothing_in_flight_and_enough_quiet():
    states = [SessionState("a", 0, 100.0), SessionState("b", 1, 0.0), SessionState("c", 0, 109.5)]
    assert idle_sessions(states, now=110.0, idle_s=5.0) == ["a"]


def test_control_requests_are_parsed():
    assert control_request("POST", "/sessions/run%2F1/end").session == session_id("run/1")
    assert control_request("POST", "/sessions/run-1/end").action == "end"
    assert control_request("GET", "/sessions/run-1/end").action == "method"
    assert control_request("GET", "/sessions").action == "list"
    assert control_request("GET", "/nope").action == "unknown"


# -- in-process gateway ----------------------------------------------------------------------
@contextmanager
def gateway(url: str, options: dict, spool: Path, fake, *, idle: float = 60.0, tags=None, max_body_size=10 << 20):
    """A running gateway recording into ``url``; every session is published on exit."""
    from spoolproxy.proxy.gateway import Gateway
    from spoolproxy.store import open_store
    from spoolproxy.store.publish import Publisher

    store = open_store(url, options)
    store.probe()
    pub = Publisher(store, spool)
    pub.lock()
    gw = Gateway(pub, redactor=Redactor(), tags=tags, idle_s=idle, max_body_size=max_body_size)
    runner = ProxyRunner([gw], options=RECORD_OPTIONS, connect_to=openai_via(fake), upstream_ca=fake.ca_pem_path)
    runner.start()
    try:
        yield runner, gw
    finally:
        runner.stop()
        gw.close()
        pub.unlock()


def _ssl(runner) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(runner.ca.bundle))


def _control(runner, method: str, path: str) -> httpx.Response:
    with httpx.Client(proxy=runner.proxy_url, timeout=30) as c:
        return c.request(method, f"http://spoolproxy.control{path}")


def test_concurrent_sessions_from_real_clients_become_one_cassette_each_in_s3(
        s3_server, fake_provider, tmp_path, spool_home):  # noqa: F811
    import openai

    url = f"s3://{s3_server.bucket()}/prod"
    ready = threading.Barrier(3, timeout=30)
    errors: list[BaseException] = []

    def agent_a(runner):  # the openai SDK, one session header for the whole run, a stream among its calls
        http = httpx.Client(proxy=runner.proxy_url, verify=_ssl(runner), timeout=30)
        client = openai.OpenAI(api_key=_key(), base_url=f"{OPENAI}/v1", http_client=http, max_retries=0,
                               default_headers={"x-spoolproxy-session": "agent-a",
                                                "x-spoolproxy-tags": "agent=refund-bot,version=1.4.0"})
        msgs = [{"role": "user", "content": "refund order 1002"}]
        ready.wait()
        client.chat.completions.create(model="gpt-4o-mini", messages=msgs)
        text = "".join(c.choices[0].delta.content or "" for c in
                       client.chat.completions.create(model="gpt-4o-mini", messages=msgs, stream=True) if c.choices)
        assert text
        client.chat.completions.create(model="gpt-4o-mini", messages=msgs)
        http.close()

    def agent_b(runner):  # plain httpx with the header on each request
        with httpx.Client(proxy=runner.proxy_url, verify=_ssl(runner), timeout=30,
                          headers={"x-spoolproxy-session": "agent-b", "authorization": f"Bearer {_key()}"}) as c:
            ready.wait()
            for i in range(2):
                assert c.get(f"{fake_provider.http_url}/echo/b/{i}").status_code == 200

    def agent_c(runner):  # no header: the session of its connection, ended when it closes
        with httpx.Client(proxy=runner.proxy_url, timeout=30) as c:
            ready.wait()
            assert c.get(f"{fake_provider.http_url}/echo/c").status_code == 200

    with gateway(url, s3_server.options, tmp_path / "spool", fake_provider, tags={"env": "test"}) as (runner, gw):
        def run(fn):
            try:
                fn(runner)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(fn,)) for fn in (agent_a, agent_b, agent_c)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        listing = _control(runner, "GET", "/sessions").json()
        assert {s["session"] for s in listing["sessions"]} >= {"agent-a", "agent-b"}
        ended = _control(runner, "POST", "/sessions/agent-a/end")
        assert ended.status_code == 200, ended.text
        assert ended.json() == {"ok": True, "session": "agent-a", "cassette": f"{url}/{_day()}/agent-a.yaml",
                                "interactions": 3, "error": None}
        assert _control(runner, "POST", "/sessions/agent-b/end").json()["interactions"] == 2
        again = _control(runner, "POST", "/sessions/agent-a/end")
        assert again.status_code == 404 and "no open session 'agent-a'" in again.json()["error"]
        wait_for(lambda: len(gw.published) == 3, what="the connection session to be published")
    ended_by = {p.session: p.ended for p in gw.published}
    conn = next(s for s in ended_by if s.startswith("conn-"))
    assert ended_by == {"agent-a": "end", "agent-b": "end", conn: "disconnected"}

    objects = s3_server.objects(url)
    assert sorted(objects) == sorted([f"{_day()}/agent-a.yaml", f"{_day()}/agent-b.yaml", f"{_day()}/{conn}.yaml"])
    a = parse_text(objects[f"{_day()}/agent-a.yaml"], "agent-a.yaml")
    assert [it.request.uri for it in a.interactions] == [f"{OPENAI}/v1/chat/completions"] * 3
    assert a.meta.extra["tags"] == {"env": "test", "agent": "refund-bot", "version": "1.4.0"}
    assert a.meta.extra["gateway"] == {"session": "agent-a", "ended": "end"}
    assert a.interactions[1].response.chunks and b"data: [DONE]" in a.interactions[1].response.body
    b = parse_text(objects[f"{_day()}/agent-b.yaml"], "agent-b.yaml")
    assert [it.request.uri for it in b.interactions] == [f"{fake_provider.http_url}/echo/b/{i}" for i in range(2)]
    assert b.meta.extra["tags"] == {"env": "test"}
    c = parse_text(objects[f"{_day()}/{conn}.yaml"], "c.yaml")
    assert [it.request.uri for it in c.interactions] == [f"{fake_provider.http_url}/echo/c"]
    # the session headers went neither upstream nor into a cassette; the key reached no object
    for req in fake_provider.log:
        assert not any(k.lower().startswith("x-spoolproxy-") for k, _ in req.headers)
    for cas in (a, b, c):
        for it in cas.interactions:
            assert not any(k.lower().startswith("x-spoolproxy-") for k in it.request.headers)
    assert all(_key().encode() not in data for data in objects.values())
    assert b"Bearer REDACTED-authorization-" in objects[f"{_day()}/agent-a.yaml"]


def test_idle_session_ends_and_a_reused_id_gets_its_own_cassette_with_its_big_bodies(
        fake_provider, tmp_path, spool_home):  # noqa: F811
    need_scale()
    from spoolproxy.cassettes.storage import load, read_body
    from tests.fakes.provider import huge_body

    store_dir = tmp_path / "store"
    url = f"file://{store_dir}"
    big = 200_000
    with gateway(url, {}, tmp_path / "spool", fake_provider, idle=0.3, max_body_size=64 << 10) as (runner, gw):
        with httpx.Client(proxy=runner.proxy_url, timeout=30, headers={"x-spoolproxy-session": "solo"}) as c:
            for session in (1, 2):
                assert c.get(f"{fake_provider.http_url}/echo/{session}").status_code == 200
                r = c.get(f"{fake_provider.http_url}/big", headers={"x-fake-fail": f"huge:{big}"})
                assert r.content == huge_body(big)  # streamed through whole; spilled beside the cassette
                if session == 1:
                    wait_for(lambda: len(gw.published) == 1, what="the idle session to be published")
                    assert gw.published[0].ended == "idle" and gw.published[0].url == f"{url}/{_day()}/solo.yaml"
    assert [p.ended for p in gw.published] == ["idle", "shutdown"]  # the same id again: a new session
    assert gw.published[1].url == f"{url}/{_day()}/solo-2.yaml"
    for name, n in (("solo", 1), ("solo-2", 2)):
        cas = load(store_dir / _day() / f"{name}.yaml")
        assert [it.request.uri for it in cas.interactions] == [f"{fake_provider.http_url}/echo/{n}",
                                                               f"{fake_provider.http_url}/big"]
        spilled = cas.interactions[1].response
        assert spilled.body_ref is not None and spilled.body_ref.file.startswith(f"{name}.yaml.bodies/")
        assert read_body(cas, spilled) == huge_body(big)
    assert not list((tmp_path / "spool").rglob("*.yaml")) and not list((tmp_path / "spool").rglob("*.bin"))


def test_publisher_keeps_side_bodies_with_their_cassette_under_a_new_name(tmp_path):
    need_scale()
    from spoolproxy.cassettes.storage import load, read_body, side_dir
    from spoolproxy.store import open_store
    from spoolproxy.store.publish import Publisher

    store = open_store(tmp_path / "store")
    pub = Publisher(store, tmp_path / "spool")
    pub.lock()
    other = Publisher(store, tmp_path / "spool")
    with pytest.raises(Exception, match="another spoolproxy serve uses the spool"):
        other.lock()
    big = b"0123456789" * 1000
    urls = []
    for _ in range(2):
        local = pub.local("2025-01-31/run.yaml")
        side = side_dir(local)
        side.mkdir(parents=True)
        (side / "0000.bin").write_bytes(big)
        import hashlib

        ref = BodyRef(size=len(big), sha256=hashlib.sha256(big).hexdigest(), file="run.yaml.bodies/0000.bin")
        save(Cassette(interactions=[Interaction(request=Request(method="GET", uri="http://x/big"),
                                                response=Response(status=200, body=b"", body_ref=ref))]), local)
        urls.append(pub.publish(local))
    pub.unlock()
    assert urls == [str(tmp_path / "store" / "2025-01-31" / "run.yaml"), str(tmp_path / "store" / "2025-01-31" / "run-2.yaml")]
    second = load(urls[1])
    assert second.interactions[0].response.body_ref.file == "run-2.yaml.bodies/0000.bin"
    assert read_body(second, second.interactions[0].response) == big
    assert not (tmp_path / "spool" / "2025-01-31").exists()


# -- the command line ------------------------------------------------------------------------
def _start_serve(args: list[str], home: Path) -> tuple:
    """Start ``spoolproxy serve ARGS``; returns (process, proxy URL, stderr lines so far)."""
    proc = spawn_cli(["serve", "--port", "0", *args], home)
    lines: list[str] = []

    def pump():
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    wait_for(lambda: any("press Ctrl-C" in ln for ln in lines) or proc.poll() is not None, timeout=60,
             what="spoolproxy serve to start")
    assert proc.poll() is None, "\n".join(lines)
    proxy = next(ln for ln in lines if "serving on" in ln).split("serving on ")[1].split(";")[0]
    return proc, proxy, lines


def test_sigterm_publishes_every_open_session_to_s3(s3_server, fake_provider, tmp_path, spool_home):  # noqa: F811
    url = f"s3://{s3_server.bucket()}/gw"
    proc, proxy, lines = _start_serve(
        ["--store", url, *s3_server.storage_args(), "--spool", str(tmp_path / "spool"), "--idle", "600",
         "--connect-to", f"api.openai.com:443:127.0.0.1:{fake_provider.port}",
         "--upstream-ca", str(fake_provider.ca_pem_path), "--tag", "env=ci"], spool_home)
    verify = ssl.create_default_context(cafile=str(spool_home / "ca-bundle.pem"))
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "count to five please"}]}
    try:
        for sid in ("s1", "s2"):
            with httpx.Client(proxy=proxy, verify=verify, timeout=30, headers={"x-spoolproxy-session": sid}) as c:
                assert c.post(f"{OPENAI}/v1/chat/completions", json=body,
                              headers={"authorization": f"Bearer {_key()}"}).status_code == 200
        # a slow stream is still arriving when SIGTERM comes
        got_first = threading.Event()

        def slow():
            with httpx.Client(proxy=proxy, verify=verify, timeout=30, headers={"x-spoolproxy-session": "s2"}) as c:
                try:
                    with c.stream("POST", f"{OPENAI}/v1/chat/completions", json={**body, "stream": True},
                                  headers={"x-fake-delay-ms": "400"}) as r:
                        for _ in r.iter_raw():
                            got_first.set()
                except httpx.HTTPError:
                    pass

        t = threading.Thread(target=slow)
        t.start()
        assert got_first.wait(30)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(60) == 0, "\n".join(lines)
        t.join(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = "\n".join(lines)
    assert "Traceback" not in text
    assert f"session s1: 1 interaction -> {url}/{_day()}/s1.yaml (shutdown)" in text
    assert f"session s2: 2 interactions -> {url}/{_day()}/s2.yaml (shutdown)" in text
    assert f"stopped: 2 sessions published to {url}" in text
    objects = s3_server.objects(url)
    assert sorted(objects) == [f"{_day()}/s1.yaml", f"{_day()}/s2.yaml"]
    s2 = parse_text(objects[f"{_day()}/s2.yaml"], "s2.yaml")
    assert s2.meta.extra["gateway"]["ended"] == "shutdown" and s2.meta.extra["tags"] == {"env": "ci"}
    streamed = s2.interactions[1]
    assert streamed.request.body and b'"stream": true' in streamed.request.body.replace(b'"stream":true', b'"stream": true')
    assert streamed.response is not None and streamed.response.body.startswith(b"data: ")
    assert all(_key().encode() not in data for data in objects.values())


def test_a_crashed_gateways_journal_is_published_at_the_next_start(fake_provider, tmp_path, spool_home):  # noqa: F811
    need_scale()
    store = tmp_path / "store"
    args = ["--store", f"file://{store}", "--spool", str(tmp_path / "spool")]
    proc, proxy, _ = _start_serve(args, spool_home)
    try:
        with httpx.Client(proxy=proxy, timeout=30, headers={"x-spoolproxy-session": "crashy"}) as c:
            assert c.get(f"{fake_provider.http_url}/echo/before-crash").status_code == 200
        wait_for(lambda: list((tmp_path / "spool").rglob("*.spooljournal")), what="the journal")
        journal = next((tmp_path / "spool").rglob("*.spooljournal"))
        wait_for(lambda: b"before-crash" in journal.read_bytes(), what="the interaction in the journal")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert not store.joinpath(_day()).exists()  # nothing published: the gateway died
    proc, proxy, lines = _start_serve(args, spool_home)
    try:
        assert any(f"published file://{store}/{_day()}/crashy.yaml left from an earlier run" in ln for ln in lines)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    cas = parse_text((store / _day() / "crashy.yaml").read_bytes(), "crashy.yaml")
    assert cas.meta.extra.get("recovered_from_journal") is True
    assert [it.request.uri for it in cas.interactions] == [f"{fake_provider.http_url}/echo/before-crash"]


def test_unreachable_store_is_one_line_before_anything_listens(s3_server, tmp_path, spool_home):  # noqa: F811
    from .test_proxy_support import run_cli

    out = run_cli(["serve", "--store", "s3://no-such-bucket-for-spoolproxy/x", *s3_server.storage_args(),
                   "--spool", str(tmp_path / "spool")], spool_home)
    assert out.returncode == 2
    assert out.stderr.startswith("spoolproxy: error: cannot write to s3://no-such-bucket-for-spoolproxy/x:")
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_listen_host_other_than_loopback_is_flagged():
    from spoolproxy.cli.serve import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("192.0.2.10")
