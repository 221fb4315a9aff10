"""Playback of side body files and elided bodies, the control endpoint's per-segment report,
the standalone banner and the exit status under ``--strict`` (issues from a fresh user's trial)."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys

import pytest

from spoolproxy.cassettes import save
from spoolproxy.cassettes.model import BodyRef, Cassette, Interaction
from spoolproxy.errors import CassetteError
from spoolproxy.replayer.control import report, switch
from spoolproxy.replayer.session import PlaybackConfig, PlaybackSession

from .conftest import REPO
from .test_playback import CHAT, chat_req, client, completion, playback, write

PAYLOAD = b'{"id": "chatcmpl-9", "object": "chat.completion", "choices": []}' * 50


def side_cassette(tmp_path, *, elided: bool = False) -> tuple[str, object]:
    """One chat interaction whose response body lives in ``big.yaml.bodies/0.bin`` (or was
    elided at record time)."""
    side = tmp_path / "big.yaml.bodies"
    side.mkdir(exist_ok=True)
    if not elided:
        (side / "0.bin").write_bytes(PAYLOAD)
    req = chat_req([{"role": "user", "content": "big"}])
    resp = completion("x").model_copy(update={"body": b"", "body_ref": BodyRef(
        size=len(PAYLOAD), sha256=hashlib.sha256(PAYLOAD).hexdigest(), file=None if elided else "big.yaml.bodies/0.bin")})
    return write(tmp_path, "big.yaml", [Interaction(request=req, response=resp)]), req


def spool(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)


def test_missing_or_resized_side_body_file_is_refused_at_load(tmp_path):
    path, _ = side_cassette(tmp_path)
    side = tmp_path / "big.yaml.bodies" / "0.bin"
    side.write_bytes(PAYLOAD[:-5])
    with pytest.raises(CassetteError, match=r"0\.bin: side body file of interaction 0 .* has \d+ bytes"):
        PlaybackSession(PlaybackConfig(cassettes=[path]))
    side.unlink()
    r = spool("playback", "-c", path, "--", sys.executable, "-c", "print('ran')")
    assert r.returncode == 2 and "ran" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spoolproxy: error: ") and "0.bin" in lines[0] and "missing" in lines[0]
    # in a directory, --skip-bad skips that cassette and serves the others
    save(Cassette(), tmp_path / "good.yaml")
    session = PlaybackSession(PlaybackConfig(cassettes=[str(tmp_path)], skip_bad=True))
    assert len(session.skipped) == 1 and "0.bin" in session.skipped[0] and len(session.index) == 0


def test_side_body_failing_at_serve_time_is_a_miss_in_the_report(tmp_path, fake_provider):
    path, req = side_cassette(tmp_path)
    with playback([path], fake_provider) as (runner, session), client(runner) as c:
        (tmp_path / "big.yaml.bodies" / "0.bin").write_bytes(b"X" * len(PAYLOAD))  # same size, other bytes
        r = c.post(CHAT, content=req.body, headers={"content-type": "application/json"})
        assert r.status_code == 400 and "sha256" in r.text
    rep = session.report()
    assert rep.misses == 1 and rep.exact == 0 and not rep.clean
    assert any("could not serve the recorded response" in x and "sha256" in x for x in rep.requests[0].reasons)
    assert "missed 1" in rep.summary_line()


def test_elided_body_is_a_warning_that_fails_strict(tmp_path, fake_provider):
    path, req = side_cassette(tmp_path, elided=True)
    with playback([path], fake_provider) as (runner, session), client(runner) as c:
        r = c.post(CHAT, content=req.body, headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.content == b"" and "x-spoolproxy-elided" in r.headers
    rep = session.report()
    assert rep.exact == 1 and rep.warned == 1 and not rep.clean
    assert "warnings 1" in rep.summary_line() and "body was elided at record time" in rep.render()


def test_report_endpoint_describes_the_current_cassettes_only(tmp_path, fake_provider):
    a = chat_req([{"role": "user", "content": "a"}])
    b = chat_req([{"role": "user", "content": "b"}])
    pa = write(tmp_path, "a.yaml", [Interaction(request=a, response=completion("A")),
                                    Interaction(request=b, response=completion("old unused"))])
    pb = write(tmp_path, "b.yaml", [Interaction(request=b, response=completion("B")),
                                    Interaction(request=a, response=completion("new unused"))])
    with playback([pa], fake_provider) as (runner, session), client(runner) as c:
        c.post(CHAT, content=a.body)
        previous = switch(runner.proxy_url, [pb])["previous"]
        assert [u["cassette"] for u in previous["unused"]] == [pa]
        c.post(CHAT, content=b.body)
        now = report(runner.proxy_url)
    assert [u["cassette"] for u in now["unused"]] == [pb] and now["cassettes"] == [pb]
    assert [r["outcome"] for r in now["requests"]] == ["exact"]
    whole = session.report()  # the end-of-run report still holds every segment
    assert len(whole.requests) == 2 and sorted(u.cassette for u in whole.unused) == [pa, pb]


def test_standalone_banner_does_not_promise_a_cassette(tmp_path):
    path = write(tmp_path, "a.yaml", [Interaction(request=chat_req([]), response=completion("A"))])
    proc = subprocess.Popen([sys.executable, "-m", "spoolproxy", "playback", "-c", path, "--port", "0"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("# press Ctrl-C"):
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    press = lines[-1]
    assert "write the cassette" not in press and "print the playback report" in press and "writes no cassette" in press
    assert any(ln.startswith("export HTTPS_PROXY=") for ln in lines)
    assert proc.returncode == 0 and "unused 1" in err


@pytest.mark.parametrize("child_code,expected", [(0, 3), (5, 5)])
def test_strict_exit_3_only_when_cmd_succeeded(tmp_path, child_code, expected):
    path = write(tmp_path, "a.yaml", [Interaction(request=chat_req([]), response=completion("never requested"))])
    env_cmd = [sys.executable, "-c", f"import sys; sys.exit({child_code})"]
    r = spool("playback", "-c", path, "--strict", "--", *env_cmd)
    assert r.returncode == expected, r.stderr
    assert "unused 1" in r.stderr
    if child_code:
        assert f"CMD exited {child_code}, which wins over 3" in r.stderr


def test_request_body_stored_in_a_side_file_is_matched_exactly(tmp_path):
    req = chat_req([{"role": "user", "content": "p" * 5000}])
    side = tmp_path / "big.yaml.bodies"
    side.mkdir()
    (side / "0000-request-1.bin").write_bytes(req.body)
    stored = req.model_copy(update={"body": b""})
    ref = {"file": "big.yaml.bodies/0000-request-1.bin", "size": len(req.body),
           "sha256": hashlib.sha256(req.body).hexdigest()}
    path = write(tmp_path, "big.yaml", [Interaction(request=stored, response=completion("A"), extra={"request_body": ref})])
    session = PlaybackSession(PlaybackConfig(cassettes=[path], match="exact"))
    assert session.decide(req).lookup.outcome == "exact"
    (side / "0000-request-1.bin").unlink()
    with pytest.raises(CassetteError, match="request side body file of interaction 0 .* is missing"):
        PlaybackSession(PlaybackConfig(cassettes=[path]))
