"""``spoolproxy record`` as a real subprocess: exit codes, summary, signals, crash safety,
standalone mode, memory on big bodies, and bad input (one line, no traceback)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from spoolproxy.cassettes import load
from spoolproxy.cassettes.journal import journal_path, recover

from .test_proxy_support import cli_env, openai_via, run_cli, spawn_cli, spool_home, wait_for  # noqa: F401

pytestmark = pytest.mark.usefixtures("spool_home")


def _upstream(fake) -> list[str]:
    args = ["--upstream-ca", str(fake.ca_pem_path)]
    for rule in openai_via(fake):
        args += ["--connect-to", rule]
    return args


def _one_error_line(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("spoolproxy: error: ")
    return lines[0]


AGENT = textwrap.dedent(
    """
    import sys, time, httpx
    n_done, then = int(sys.argv[1]), sys.argv[2]
    body = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(timeout=30) as c:
        for i in range(n_done):
            with c.stream("POST", "https://api.openai.com/v1/chat/completions", json=body) as r:
                r.read()
            print("done", i, flush=True)
        if then == "hang":
            with c.stream("POST", "https://api.openai.com/v1/chat/completions", json=body,
                          headers={"x-fake-delay-ms": "3000"}) as r:
                print("started", flush=True)
                r.read()
        else:
            print("idle", flush=True)
            time.sleep(60)
    """
)


def _read_until(proc, word: str) -> list[str]:
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(word):
            return seen
    pytest.fail(f"child ended before printing {word!r}: {seen} / {proc.stderr.read()}")


def test_cli_records_curl_returns_its_exit_code_and_prints_summary(tmp_path, spool_home, fake_provider):
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname='x'\n")
    path = project / "cassettes" / "e2e.yaml"
    curl = (
        "curl -sS https://api.openai.com/v1/chat/completions -H 'content-type: application/json' "
        "-H \"Authorization: Bearer $KEY\" "
        "-d '{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hello world\"}]}'; exit 3"
    )
    key = "sk-proj-" + "e" * 40
    proc = run_cli(["record", "-c", str(path), *_upstream(fake_provider), "--", "sh", "-c", curl],
                   spool_home, cwd=project / "sub", KEY=key)
    assert proc.returncode == 3, proc.stderr
    assert '"chat.completion"' in proc.stdout  # curl got the answer
    assert "LLM calls (openai): gpt-4o-mini x1" in proc.stderr and "tokens in" in proc.stderr
    assert "wrote" in proc.stderr and "(1 interaction)" in proc.stderr
    # the detectors' verdict closes the summary: the traffic is clean, but CMD exited 3
    assert "detect: fail, 1 finding" in proc.stderr and "agent_crashed: the recorded command exited with status 3" in proc.stderr
    cas = load(path)
    assert cas.meta.exit_code == 3 and cas.meta.command[:2] == ["sh", "-c"] and cas.meta.cwd == "sub"
    assert cas.meta.record_mode == "all"
    (it,) = cas.interactions
    assert it.request.uri == "https://api.openai.com/v1/chat/completions"
    assert key not in path.read_text()
    assert not journal_path(path).exists()


def test_cli_warns_loudly_when_nothing_went_through(tmp_path, spool_home):
    path = tmp_path / "empty.yaml"
    proc = run_cli(["record", "-c", str(path), "--", sys.executable, "-c", "pass"], spool_home)
    assert proc.returncode == 0
    assert "WARNING: nothing went through the proxy" in proc.stderr and "trust_env=True" in proc.stderr
    assert load(path).interactions == []
    # -q: the same warning in one line, and nothing else (not even the summary)
    quiet = run_cli(["record", "-q", "-c", str(tmp_path / "empty2.yaml"), "--", sys.executable, "-c", "pass"], spool_home)
    assert quiet.returncode == 0
    assert quiet.stderr.splitlines() == [
        "spoolproxy: warning: nothing went through the proxy, the cassette has no interactions "
        "(rerun without -q for the likely causes)"
    ]
    assert load(tmp_path / "empty2.yaml").interactions == []


def test_quiet_prints_nothing_for_a_good_recording_and_loud_says_it_replaces(tmp_path, spool_home, fake_provider):
    path = tmp_path / "q.yaml"
    fetch = ["--", "curl", "-sS", "https://api.openai.com/v1/models"]
    first = run_cli(["record", "-q", "-c", str(path), *_upstream(fake_provider), *fetch], spool_home)
    assert first.returncode == 0 and first.stderr == ""
    assert '"list"' in first.stdout and len(load(path)) == 1
    loud = run_cli(["record", "-c", str(path), *_upstream(fake_provider), "--", "sh", "-c",
                    "curl -sS https://api.openai.com/v1/models; curl -sS https://api.openai.com/v1/models"], spool_home)
    assert loud.returncode == 0, loud.stderr
    assert f"spoolproxy: replacing {path} (1 interaction)\n" in loud.stderr  # before the run: the old one is gone
    assert loud.stderr.index("replacing") < loud.stderr.index("wrote")
    assert len(load(path)) == 2  # record mode all: replaced, as vcrpy does


def test_a_cassette_being_recorded_is_refused_to_a_second_record(tmp_path, spool_home, fake_provider):
    """Two `record -c same.yaml`: the second exits 2 with one line before its CMD starts, and
    the first one's recording (journal, then cassette) is untouched."""
    path = tmp_path / "same.yaml"
    marker = tmp_path / "second-ran"
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    first = spawn_cli(["record", "-q", "-c", str(path), *_upstream(fake_provider), "--",
                       sys.executable, str(script), "2", "idle"], spool_home)
    try:
        _read_until(first, "idle")  # 2 interactions journalled, the child sleeps
        second = run_cli(["record", "-c", str(path), *_upstream(fake_provider), "--", "touch", str(marker)], spool_home)
        assert second.returncode == 2
        line = _one_error_line(second)
        assert str(path) in line and "being recorded by another spoolproxy process" in line and "--cassette" in line
        assert not marker.exists()
        assert not list(tmp_path.glob("same.recovered-*"))  # the live journal was not "recovered"
        assert journal_path(path).exists()
        os.kill(first.pid, signal.SIGTERM)
        _, err = first.communicate(timeout=30)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert first.returncode == 128 + signal.SIGTERM, err
    cas = load(path)
    assert len(cas) == 2 and all(it.response.status == 200 for it in cas.interactions)
    assert not journal_path(path).exists()


def test_default_cassette_names_of_concurrent_runs_differ(tmp_path, spool_home):
    procs = [spawn_cli(["record", "-q", "--", sys.executable, "-c", "pass"], spool_home, cwd=tmp_path) for _ in range(3)]
    for p in procs:
        p.communicate(timeout=60)
        assert p.returncode == 0
    made = sorted((tmp_path / "cassettes").glob("*.yaml"))
    assert len(made) == 3 and all(load(m).interactions == [] for m in made)


def test_default_cassette_path_gets_a_suffix_when_taken(tmp_path, monkeypatch):
    from datetime import datetime, timezone

    from spoolproxy.cli.record import default_cassette_path

    monkeypatch.chdir(tmp_path)
    now = datetime(2026, 12, 1, 8, 48, 2, 123456, tzinfo=timezone.utc)
    first = default_cassette_path(now, pid=42)
    assert first.as_posix() == "cassettes/20261201-084802-123-42.yaml"
    first.parent.mkdir()
    journal_path(first).write_text("")  # a recording in progress (or crashed) under that name
    assert default_cassette_path(now, pid=42).as_posix() == "cassettes/20261201-084802-123-42-2.yaml"


@pytest.mark.parametrize("sub", ["record", "playback"])
def test_mistyped_option_is_a_usage_error_not_the_command(tmp_path, spool_home, sub):
    marker = tmp_path / "ran"
    proc = run_cli([sub, "--casette", str(tmp_path / "x.yaml"), "--", "touch", str(marker)], spool_home)
    assert proc.returncode == 2
    assert _one_error_line(proc) == "spoolproxy: error: no such option: --casette (did you mean --cassette?)"
    assert not marker.exists() and not (tmp_path / "x.yaml").exists()
    no_dashes = run_cli([sub, "--cassete=x.yaml", "touch", str(marker)], spool_home, cwd=tmp_path)
    assert no_dashes.returncode == 2 and "no such option: --cassete (did you mean --cassette?)" in _one_error_line(no_dashes)
    assert not marker.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_sigkill_of_record_takes_the_child_down(tmp_path, spool_home):
    child_code = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    proc = spawn_cli(["record", "-q", "-c", str(tmp_path / "orphan.yaml"), "--", sys.executable, "-c", child_code],
                     spool_home)
    try:
        child_pid = int(proc.stdout.readline())
        assert _alive(child_pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        wait_for(lambda: not _alive(child_pid), what="the child to die with its parent")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_transport_failure_summary_names_the_port(tmp_path, spool_home):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: connections are refused
    path = tmp_path / "refused.yaml"
    proc = run_cli(["record", "-c", str(path), "--", "curl", "-sS", "-X", "POST", "-d", "{}",
                    f"http://127.0.0.1:{port}/v1/search"], spool_home)
    assert proc.returncode != 0  # curl saw its connection close
    assert f"transport failures: 1 (refused POST 127.0.0.1:{port}/v1/search)" in proc.stderr
    (it,) = load(path).interactions
    assert it.error.kind == "refused"


def test_retries_refused_at_connect_are_not_duplicate_side_effects(tmp_path, spool_home):
    """A client retrying a POST whose server refuses the connection sent nothing twice:
    detect on the recording reports the transport failures, not a duplicate side effect."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: connections are refused
    path = tmp_path / "retries.yaml"
    url = f"http://127.0.0.1:{port}/v1/traces/ingest"
    proc = run_cli(["record", "-c", str(path), "--", "sh", "-c",
                    f"for n in 1 2 3; do curl -sS -X POST -d '{{\"spans\": 1}}' {url}; done; exit 0"], spool_home)
    assert proc.returncode == 0, proc.stderr
    its = load(path).interactions
    assert len(its) == 3 and all(it.error.kind == "refused" and it.error.during == "connect" for it in its)
    proc = run_cli(["detect", "--json", str(path)], spool_home)
    kinds = [f["kind"] for f in json.loads(proc.stdout)["findings"]]
    assert "duplicate_side_effect" not in kinds and "http_error" in kinds


def test_sigkill_loses_at_most_the_in_flight_interaction(tmp_path, spool_home, fake_provider):
    path = tmp_path / "crash.yaml"
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    proc = spawn_cli(["record", "-q", "-c", str(path), *_upstream(fake_provider), "--",
                      sys.executable, str(script), "3", "hang"], spool_home)
    try:
        _read_until(proc, "started")  # 3 streams completed, the 4th is mid-flight
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the orphaned child
        proc.communicate()
    assert not path.exists() and journal_path(path).exists()
    cas = recover(path)
    assert len(cas) == 3  # every completed interaction, only the in-flight one lost
    assert all(b"data: [DONE]" in it.response.body for it in cas.interactions)
    assert load(path).meta.extra.get("recovered_from_journal") is True
    assert not journal_path(path).exists()


def test_next_record_recovers_a_stale_journal_first(tmp_path, spool_home, fake_provider):
    path = tmp_path / "again.yaml"
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    proc = spawn_cli(["record", "-q", "-c", str(path), *_upstream(fake_provider), "--",
                      sys.executable, str(script), "1", "hang"], spool_home)
    try:
        _read_until(proc, "started")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    again = run_cli(["record", "-q", "-c", str(path), "--", sys.executable, "-c", "pass"], spool_home)
    assert again.returncode == 0
    assert "recovered 1 interactions of an interrupted recording" in again.stderr
    (recovered,) = tmp_path.glob("again.recovered-*.yaml")
    assert len(load(recovered)) == 1 and len(load(path)) == 0


def test_sigterm_to_record_still_writes_the_cassette(tmp_path, spool_home, fake_provider):
    path = tmp_path / "term.yaml"
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    proc = spawn_cli(["record", "-q", "-c", str(path), *_upstream(fake_provider), "--",
                      sys.executable, str(script), "2", "idle"], spool_home)
    try:
        _read_until(proc, "idle")
        os.kill(proc.pid, signal.SIGTERM)  # forwarded to the child, then the cassette is written
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGTERM, err
    cas = load(path)
    assert len(cas) == 2 and cas.meta.exit_code == 128 + signal.SIGTERM
    assert not journal_path(path).exists()


def test_standalone_mode_prints_exports_and_records_until_sigint(tmp_path, spool_home, fake_provider):
    import httpx

    path = tmp_path / "alone.yaml"
    proc = spawn_cli(["record", "-c", str(path), *_upstream(fake_provider)], spool_home)
    try:
        lines = _read_until(proc, "export SSL_CERT_FILE=")
        exports = dict(line.removeprefix("export ").strip().split("=", 1) for line in lines if line.startswith("export "))
        proxy = exports["HTTPS_PROXY"]
        assert exports["NO_PROXY"] in ("", "''")
        with httpx.Client(proxy=proxy, verify=exports["SSL_CERT_FILE"].strip("'"), trust_env=False) as c:
            assert c.get("https://api.openai.com/v1/models").status_code == 200
        _read_until(proc, "# press Ctrl-C")  # the banner: from here Ctrl-C stops and writes the cassette
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:  # an impatient user: Ctrl-C, Ctrl-C, ...
            proc.send_signal(signal.SIGINT)
            time.sleep(0.02)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err  # a normal stop, however often Ctrl-C was pressed
    assert "aborted" not in err and "Traceback" not in err, err
    assert f"spoolproxy: wrote {path} (1 interaction)" in err
    assert [i.request.uri for i in load(path).interactions] == ["https://api.openai.com/v1/models"]


def test_big_body_streams_with_bounded_memory(tmp_path, spool_home, fake_provider):
    """A 30 MB body with --max-body-size 1MB: the recorder's peak RSS stays far below 30 MB
    over a run that moved nothing (mitmproxy itself is the baseline)."""
    size = 30 * 1024 * 1024

    def peak_rss_kb(args: list[str]) -> int:
        p = subprocess.Popen([sys.executable, "-m", "spoolproxy", *args], env=cli_env(spool_home),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        assert p.returncode == 0
        return usage.ru_maxrss

    fetch = ["curl", "-sS", "-o", os.devnull, "-H", f"x-fake-fail: huge:{size}", "https://api.openai.com/v1/files/f/content"]
    base = peak_rss_kb(["record", "-q", "-c", str(tmp_path / "small.yaml"), *_upstream(fake_provider), "--",
                        "curl", "-sS", "-o", os.devnull, "https://api.openai.com/v1/models"])
    big = peak_rss_kb(["record", "-q", "--max-body-size", "1MB", "-c", str(tmp_path / "big.yaml"),
                       *_upstream(fake_provider), "--", *fetch])
    resp = load(tmp_path / "big.yaml").interactions[0].response
    assert resp.body_ref.size == size
    assert (tmp_path / resp.body_ref.file).stat().st_size == size
    assert big - base < 20 * 1024, (base, big)  # KiB: a buffered body would add >= 30 MB


# -- bad input -------------------------------------------------------------------------------
def test_port_in_use_is_one_line_and_cmd_never_runs(tmp_path, spool_home):
    marker = tmp_path / "ran"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run_cli(["record", "--port", str(port), "-c", str(tmp_path / "p.yaml"), "--", "touch", str(marker)], spool_home)
    assert proc.returncode == 2
    assert "already in use" in _one_error_line(proc)
    assert not marker.exists() and not (tmp_path / "p.yaml").exists()
    assert not journal_path(tmp_path / "p.yaml").exists()


def test_command_not_found_exits_127(tmp_path, spool_home):
    proc = run_cli(["record", "-c", str(tmp_path / "nf.yaml"), "--", "no-such-command-spoolproxy-test"], spool_home)
    assert proc.returncode == 127
    assert "command not found: no-such-command-spoolproxy-test" in _one_error_line(proc)


def test_unwritable_cassette_is_refused_before_cmd_starts(tmp_path, spool_home):
    marker = tmp_path / "ran"
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a directory")
    proc = run_cli(["record", "-c", str(blocker / "c.yaml"), "--", "touch", str(marker)], spool_home)
    assert proc.returncode == 2
    assert "file.txt" in _one_error_line(proc)
    assert not marker.exists()


@pytest.mark.parametrize("spec", ["api.openai.com:443:127.0.0.1", "h:notaport:x:1"])
def test_malformed_connect_to_is_one_line(tmp_path, spool_home, spec):
    marker = tmp_path / "ran"
    proc = run_cli(["record", "--connect-to", spec, "-c", str(tmp_path / "m.yaml"), "--", "touch", str(marker)], spool_home)
    assert proc.returncode == 2
    assert "--connect-to" in _one_error_line(proc)
    assert not marker.exists()


def test_reverse_mode_gives_cmd_its_base_url_and_records_the_real_url(tmp_path, spool_home, fake_provider):
    path = tmp_path / "rev.yaml"
    script = (
        "curl -sS \"$OPENAI_BASE_URL/chat/completions\" -H 'content-type: application/json' "
        "-d '{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}' && "
        "curl -sS \"$SPOOLPROXY_REVERSE_API_OPENAI_COM/v1/models\""
    )
    proc = run_cli(["record", "-q", "-c", str(path), "--reverse", "https://api.openai.com", *_upstream(fake_provider),
                    "--", "sh", "-c", script], spool_home)
    assert proc.returncode == 0, proc.stderr
    assert '"chat.completion"' in proc.stdout and '"list"' in proc.stdout
    uris = [it.request.uri for it in load(path).interactions]
    assert uris == ["https://api.openai.com/v1/chat/completions", "https://api.openai.com/v1/models"]


def test_config_and_options_add_redaction(tmp_path, spool_home, fake_provider):
    cfg = tmp_path / "spoolproxy.toml"
    cfg.write_text('[redact]\npatterns = ["corp-[a-z0-9]{12}"]\n')
    path = tmp_path / "red.yaml"
    token, header = "corp-" + "a1" * 6, "opaque-value-" + "z" * 8
    cmd = "curl -sS https://api.openai.com/echo/x -H \"x-team-secret: $H\" -d \"token=$T\""
    proc = run_cli(["record", "-q", "--config", str(cfg), "--redact-header", "X-Team-Secret", "-c", str(path),
                    *_upstream(fake_provider), "--", "sh", "-c", cmd], spool_home, H=header, T=token)
    assert proc.returncode == 0, proc.stderr
    assert token in proc.stdout  # the echo reached the client unchanged
    text = path.read_text()
    assert token not in text and header not in text.split("response:")[0]
    assert "REDACTED-custom-" in text and "REDACTED-x-team-secret-" in text


def test_ca_command_prints_paths(tmp_path, spool_home):
    from click.testing import CliRunner

    from spoolproxy.cli import cli

    out = CliRunner().invoke(cli, ["ca"], env={"SPOOLPROXY_HOME": str(spool_home)})
    assert out.exit_code == 0
    assert f"CA certificate: {spool_home}/mitmproxy/mitmproxy-ca-cert.pem" in out.output
    assert f"CA bundle:      {spool_home}/ca-bundle.pem" in out.output
    only = CliRunner().invoke(cli, ["ca", "--bundle"], env={"SPOOLPROXY_HOME": str(spool_home)})
    assert only.output.strip() == f"{spool_home}/ca-bundle.pem"


def test_upstream_proxy_chains_to_another_proxy(tmp_path, spool_home, fake_provider):
    """An in-process recorder chained (--upstream-proxy) to a standalone `spoolproxy record`
    standing in for a corporate proxy: both see the request under its real URL."""
    import httpx

    from spoolproxy.proxy.ca import ensure_ca

    from .test_proxy_support import recording

    outer_path = tmp_path / "outer.yaml"
    outer = spawn_cli(["record", "-c", str(outer_path), *_upstream(fake_provider)], spool_home)
    try:
        lines = _read_until(outer, "export SSL_CERT_FILE=")
        corp = next(l for l in lines if l.startswith("export HTTPS_PROXY=")).split("=", 1)[1].strip()
        inner_path = tmp_path / "inner.yaml"
        with recording(inner_path, upstream_proxy=corp, upstream_ca=ensure_ca().cert) as s:
            with httpx.Client(proxy=s.runner.proxy_url, verify=s.client_ssl(), trust_env=False) as c:
                assert c.get("https://api.openai.com/v1/models").status_code == 200
        outer.send_signal(signal.SIGINT)
        outer.communicate(timeout=30)
    finally:
        if outer.poll() is None:
            os.killpg(outer.pid, signal.SIGKILL)
    assert [i.request.uri for i in s.cassette.interactions] == ["https://api.openai.com/v1/models"]
    assert [i.request.uri for i in load(outer_path).interactions] == ["https://api.openai.com/v1/models"]
