"""Trust problems named at once, and no good cassette lost: real clients, real ``record``.

* a recording that produced nothing usable (only refused connections, or a program that
  crashed before its first request) keeps the good cassette; ``--force`` replaces it;
* a damaged CA is one error line at start, and ``spoolproxy ca --regenerate`` repairs it;
* a client with its own CA list (httpx with ``verify=certifi.where()``) that refuses the
  spoolproxy CA is named by host with the fix, and ``detect`` fails the run (``tls_rejected``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spoolproxy.cassettes import load
from tests.planted import echo

GOOD_AGENT = """
import httpx, os
print(httpx.get(os.environ["UPSTREAM"] + "/v1/search?q=kettle").status_code)
"""
REFUSED_AGENT = """
import httpx, socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()  # nobody listens there
for _ in range(2):
    try:
        httpx.get(f"http://127.0.0.1:{port}/v1/search")
    except httpx.HTTPError as exc:
        print("failed:", type(exc).__name__)
"""
PINNED_AGENT = """
import certifi, httpx
for _ in range(2):
    try:
        httpx.get("https://api.openai.com/v1/models", verify=certifi.where())  # its own CA list
    except httpx.HTTPError as exc:
        print("failed:", type(exc).__name__)
"""


def spoolproxy(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture
def upstream():
    server = echo.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _agents(d: Path) -> None:
    for name, code in (("good.py", GOOD_AGENT), ("refused.py", REFUSED_AGENT), ("pinned.py", PINNED_AGENT)):
        (d / name).write_text(code)


def test_a_failed_recording_never_replaces_a_good_cassette(tmp_path, upstream):
    _agents(tmp_path)
    env = {**os.environ, "UPSTREAM": upstream}
    good = spoolproxy("record", "-c", "run.yaml", "--", sys.executable, "good.py", cwd=tmp_path, env=env)
    assert good.returncode == 0, good.stderr
    before = (tmp_path / "run.yaml").read_bytes()
    assert len(load(tmp_path / "run.yaml")) == 1

    # only transport failures: kept, the failed run moved aside under the name the message gives
    r = spoolproxy("record", "-c", "run.yaml", "--", sys.executable, "refused.py", cwd=tmp_path, env=env)
    assert r.returncode == 0 and (tmp_path / "run.yaml").read_bytes() == before
    [line] = [ln for ln in r.stderr.splitlines() if ln.startswith("spoolproxy: warning: kept")]
    aside = [p.name for p in tmp_path.glob("run.failed-*.yaml")]
    assert len(aside) == 1 and f"it went to {aside[0]} (2 interactions" in line
    assert "all 2 requests failed before an answer: refused GET 127.0.0.1:" in line and "--force" in line
    assert [i.error.kind for i in load(tmp_path / aside[0]).interactions] == ["refused", "refused"]

    # the program crashed before its first request: kept, nothing written, its exit status passed on
    r = spoolproxy("record", "-q", "-c", "run.yaml", "--", sys.executable, "-c", "raise SystemExit(3)", cwd=tmp_path,
                   env=env)
    assert r.returncode == 3 and (tmp_path / "run.yaml").read_bytes() == before
    assert r.stderr.splitlines() == ["spoolproxy: warning: kept run.yaml: this recording produced nothing usable "
                                     "(no request went through the proxy); nothing written (--force replaces it anyway)"]
    assert len(list(tmp_path.glob("run.failed-*.yaml"))) == 1 and not list(tmp_path.glob(".run.yaml.spooljournal"))

    # --force: the user asked for it
    r = spoolproxy("record", "--force", "-c", "run.yaml", "--", sys.executable, "refused.py", cwd=tmp_path, env=env)
    assert r.returncode == 0 and "spoolproxy: wrote run.yaml (2 interactions)" in r.stderr
    assert [i.error.kind for i in load(tmp_path / "run.yaml").interactions] == ["refused", "refused"]


def test_a_damaged_ca_is_one_line_at_start_and_regenerates(tmp_path, upstream):
    _agents(tmp_path)
    env = {**os.environ, "SPOOLPROXY_HOME": str(tmp_path / "home"), "UPSTREAM": upstream}
    ok = spoolproxy("ca", cwd=tmp_path, env=env)
    assert ok.returncode == 0 and "CA check:       ok, valid until" in ok.stdout
    confdir = tmp_path / "home" / "mitmproxy"
    key = confdir / "mitmproxy-ca.pem"
    good = key.read_bytes()
    damages = {
        "the private key does not parse": good[:200] + b"garbage" + good[260:],
        "cannot read it": None,
        "does not parse": good.split(b"-----BEGIN CERTIFICATE-----")[0]  # its certificate block broken
        + b"-----BEGIN CERTIFICATE-----\nMIIBroken\n-----END CERTIFICATE-----\n",
    }
    for problem, data in damages.items():
        if data is None:
            key.unlink()
            (confdir / "mitmproxy-ca.p12").unlink(missing_ok=True)
            key.mkdir()  # unreadable as a file
        else:
            key.write_bytes(data)
        for args in (("record", "-c", "run.yaml", "--", sys.executable, "good.py"), ("ca",)):
            r = spoolproxy(*args, cwd=tmp_path, env=env)
            assert r.returncode == 2, (problem, r.stderr)
            [line] = r.stderr.splitlines()
            assert line.startswith(f"spoolproxy: error: the spoolproxy CA in {confdir} is damaged (") and problem in line
            assert line.endswith("run 'spoolproxy ca --regenerate' to move it aside and create a new one (then trust "
                                 "the new certificate wherever you added the old one by hand)")
        assert not (tmp_path / "run.yaml").exists()  # refused before the program ran
        if key.is_dir():
            key.rmdir()
        key.write_bytes(good)
    other = tmp_path / "other"  # a certificate file from another CA: the pair does not belong together
    spoolproxy("ca", cwd=tmp_path, env={**env, "SPOOLPROXY_HOME": str(other)})
    (confdir / "mitmproxy-ca-cert.pem").write_bytes((other / "mitmproxy" / "mitmproxy-ca-cert.pem").read_bytes())
    r = spoolproxy("ca", "--cert", cwd=tmp_path, env=env)
    assert r.returncode == 2 and "mitmproxy-ca-cert.pem is not the certificate in mitmproxy-ca.pem" in r.stderr

    r = spoolproxy("ca", "--regenerate", cwd=tmp_path, env=env)
    assert r.returncode == 0 and "CA check:       ok" in r.stdout
    assert "spoolproxy ca: moved the old CA to" in r.stderr and list((tmp_path / "home").glob("mitmproxy.old-*"))
    r = spoolproxy("record", "-c", "run.yaml", "--", sys.executable, "good.py", cwd=tmp_path, env=env)
    assert r.returncode == 0 and len(load(tmp_path / "run.yaml")) == 1


def test_a_client_that_refuses_the_ca_is_named_with_the_fix(tmp_path):
    _agents(tmp_path)
    for quiet in ((), ("-q",)):
        r = spoolproxy("record", *quiet, "-c", "tls.yaml", "--", sys.executable, "pinned.py", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        warn = [ln for ln in r.stderr.splitlines() if "refused the spoolproxy CA" in ln]
        assert warn == ["spoolproxy: warning: a client refused the spoolproxy CA for api.openai.com (2 connections), "
                        "so nothing it sent there was recorded; fix: a Python client with its own CA list "
                        "(httpx/requests given verify=certifi.where(), an SSLContext with cafile=...) ignores "
                        "SSL_CERT_FILE/REQUESTS_CA_BUNDLE, which spoolproxy sets: pass "
                        "verify=os.environ['SSL_CERT_FILE'] or add the file from 'spoolproxy ca --cert' to its CA list"]
        assert "WARNING: nothing went through the proxy" not in r.stderr  # the cause is known: no generic guess
    cas = load(tmp_path / "tls.yaml")
    assert len(cas) == 0
    assert cas.meta.extra["tls_rejected"] == [{"host": "api.openai.com", "connections": 2, "certain": True}]
    r = spoolproxy("detect", "--json", "--fail-on", "error", "tls.yaml", cwd=tmp_path)
    assert r.returncode == 1
    report = json.loads(r.stdout)
    assert report["verdict"] == "fail"
    [finding] = report["findings"]
    assert finding["kind"] == "tls_rejected" and finding["severity"] == "error"
    assert "api.openai.com" in finding["message"] and "SSL_CERT_FILE" in finding["message"]
