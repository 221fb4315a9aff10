"""Redaction rules: whole-token key shapes (media never corrupted), secrets remembered for a
run, credentials in URLs, secret fields at any depth, the corpus' media byte for byte, and
``spoolproxy scan`` flagging cassettes recorded before these rules existed."""

from __future__ import annotations

import base64
import json
import random
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from spoolproxy.cassettes import Cassette, Interaction, Redactor, Request, Response, load, save
from spoolproxy.cassettes.secret_rules import standalone
from spoolproxy.cassettes.secret_scan import scan_interaction
from tests.conftest import corpus_files
from tests.planted.shapes import build, forms

SHAPES = build(seed=3)
KEY = SHAPES["openai-key"][0]
B64_RUN = re.compile(rb"[A-Za-z0-9+/_\-]{256,}={0,2}")


def req(uri: str = "https://api.example/v1/x", headers: dict | None = None, body: bytes = b"") -> Request:
    return Request(method="POST", uri=uri, headers={k: [v] for k, v in (headers or {}).items()}, body=body)


def resp(body: bytes, ctype: str = "application/json") -> Response:
    return Response(status=200, headers={"content-type": [ctype]}, body=body)


def leaks(obj, *secrets: str) -> list[str]:
    """Secrets (in any written form) still present in a model dump."""
    flat = obj.model_dump_json() if hasattr(obj, "model_dump_json") else str(obj)
    for v in (getattr(i, "request", None) for i in getattr(obj, "interactions", [])):
        if v is not None:
            flat += v.body.decode("utf-8", "replace")
    for i in getattr(obj, "interactions", []):
        if i.response is not None:
            flat += i.response.body.decode("utf-8", "replace")
    return [s for s in secrets for f in forms(s) if f in flat]


# -- 1. media is never corrupted ------------------------------------------------------
def _b64(rng: random.Random, n: int, urlsafe: bool) -> str:
    raw = base64.b64encode(rng.randbytes(n)).decode()
    return raw.replace("+", "-").replace("/", "_") if urlsafe else raw


def test_key_shaped_runs_inside_base64_media_are_left_alone():
    rng = random.Random(7)
    fake_openai = "sk-" + _b64(rng, 40, True)[:40].replace("=", "")
    fake_aws = "AKIA" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))
    fake_github = "ghp_" + "".join(rng.choice("abcdefghijKLMNOP0123456789") for _ in range(36))
    video = _b64(rng, 3000, True)
    video = video[:1000] + fake_openai + video[1000:2000] + fake_github + video[2000:]   # base64url
    image = _b64(rng, 3000, False)
    image = image[:500] + "/" + fake_aws + "+" + image[500:]                            # standard base64
    pdf = _b64(rng, 2000, False)
    body = json.dumps({"contents": [{"parts": [
        {"inline_data": {"mime_type": "video/mp4", "data": video}},
        {"image_url": {"url": "data:image/png;base64," + image}},
        {"text": "key: " + KEY},                                                     # a real key, on its own
    ]}], "document": pdf}).encode()
    part = _b64(rng, 2000, True)
    multipart = (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.pdf\"\r\n"
                 b"Content-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n\r\n"
                 + (part[:700] + fake_openai + part[700:]).encode() + b"\r\n--XyZ\r\n"
                 b"Content-Disposition: form-data; name=\"raw\"\r\n\r\n" + rng.randbytes(4000) + b"\r\n--XyZ--\r\n")
    red = Redactor()
    out = red.bytes_(body)
    for blob in (video, image, pdf):
        assert blob.encode() in out
    assert KEY not in out.decode() and b"REDACTED-openai-key-" in out
    assert red.bytes_(multipart) == multipart
    binary = rng.randbytes(20000)
    it = Redactor().interaction(Interaction(request=req(body=binary), response=resp(binary, "audio/wav")))
    assert it.request.body == binary and it.response.body == binary


@pytest.mark.parametrize("before, after, alone", [
    (b" ", b" ", True), (b"=", b"&", True), (b'"', b'"', True), (b"\\n", b"\\n", True), (b"%3D", b"%26", True),
    (b"/", b"/", True),            # holds '-': cannot be inside standard base64, and base64url has no '/'
    (b"a", b" ", False), (b"_", b" ", False), (b"-", b" ", False), (b" ", b"=", False),
])
def test_token_boundaries(before, after, alone):
    data = b"x" + before + KEY.encode() + after + b"y"
    start = 1 + len(before)
    assert standalone(data, start, start + len(KEY)) is alone
    aws = SHAPES["aws-key-id"][0].encode()
    assert not standalone(b"ab/" + aws + b"+cd", 3, 3 + len(aws))  # alnum only: '/' and '+' may be base64


def test_corpus_media_bodies_are_unchanged_byte_for_byte(corpus_dir, capsys):
    """Every corpus cassette through the redactor as record/export apply it: media payloads
    (base64 runs of 256+ characters: images, audio, video, PDFs; non-UTF-8 bodies) are
    byte-identical; every change is listed with its reason."""
    changes: list[str] = []
    media = 0
    for path in corpus_files():
        cas = load(path)
        red = Redactor()
        out = red.cassette(cas)
        for i, (a, b) in enumerate(zip(cas.interactions, out.interactions)):
            for side in ("request", "response"):
                x, y = getattr(a, side), getattr(b, side)
                if x is None:
                    continue
                try:
                    x.body.decode("utf-8")
                except UnicodeDecodeError:
                    assert y.body == x.body, f"{path.name} #{i} {side}: binary body changed"
                    media += 1
                    continue
                for run in B64_RUN.findall(x.body):
                    assert run in y.body, f"{path.name} #{i} {side}: a {len(run)}-byte base64 payload changed"
                    media += 1
                if x.body != y.body:
                    kinds = sorted({k for k, _, _ in Redactor().find(x.body)} | {"remembered"})
                    changes.append(f"{path.parent.name}/{path.name} #{i} {side}: {', '.join(kinds)}")
    assert media > 20  # the corpus does hold inline images, audio, video and PDFs
    # the only changes: secret fields (a PostHog api_key; the passwords a test hands its tool),
    # and those passwords again wherever the prompt repeats them
    assert changes and all(re.search(r": (field|remembered)", c) for c in changes), changes
    with capsys.disabled():
        print(f"\ncorpus: {media} media payloads unchanged; {len(changes)} bodies changed (secret fields and "
              f"their repeats), e.g. {changes[0]}")


# -- 2. a secret seen once is hidden everywhere -------------------------------------------
def test_a_secret_seen_once_is_hidden_everywhere_in_the_run():
    token = "tok_" + "Zp4" * 8          # no known shape: only its position says it is a secret
    password = "Wq7-" + "mellon" * 2     # only a JSON field name says so, in the third interaction
    its = [
        Interaction(request=req(f"https://api.example/v1/users/{quote(password, safe='')}/profile")),  # before it is known
        Interaction(request=req(headers={"x-auth-token": token}),
                    response=resp(json.dumps({"echo": token, "note": f"token={quote_plus(token)}"}).encode())),
        Interaction(request=req(body=json.dumps({"login": {"user": "bo", "password": password}}).encode()),
                    response=resp(json.dumps({"msg": json.dumps({"said": f"you sent {password}"})}).encode())),
        Interaction(request=req(f"https://api.example/v1/lookup/{token}?q={quote(password)}")),
    ]
    red = Redactor()
    out = red.cassette(Cassette(interactions=its))
    assert leaks(out, token, password) == []
    ph = out.interactions[1].request.headers["x-auth-token"][0]
    assert json.loads(out.interactions[1].response.body)["echo"] == ph  # the same placeholder everywhere
    assert out.interactions[3].request.uri.startswith(f"https://api.example/v1/lookup/{ph}?q=REDACTED-field-")
    assert "REDACTED-field-" in out.interactions[0].request.uri


@pytest.mark.parametrize("name", ["slack-webhook", "discord-webhook", "teams-webhook", "zapier-webhook",
                                  "postgres-dsn", "redis-dsn", "mongodb-srv-dsn", "sentry-dsn"])
def test_credentials_inside_urls(name):
    url, secret = SHAPES[name]
    host = re.match(r"[a-z+]+://(?:[^@/]*@)?([^/:]+)", url).group(1)
    text = f'notify {url} now; config: {json.dumps({"hook": url})}'
    out = Redactor().text(text)
    assert secret not in out and host in out and "REDACTED-" in out
    assert secret not in Redactor().uri(url) and host in Redactor().uri(url)  # as a request's own URL


def test_userinfo_password_kept_user_and_host():
    out = Redactor().text("postgresql://report:s3cr3t-Pass@db.example:5432/sales and https://example.com:8080/path@x")
    assert out.startswith("postgresql://report:REDACTED-url-password-") and "@db.example:5432/sales" in out
    assert out.endswith("https://example.com:8080/path@x")  # a port is not a password


def test_secret_fields_at_any_depth_and_inside_json_strings():
    secret, api_key, tok = "Hq3!" + "v" * 9, "ak_" + "Rt5" * 6, "tk" + "Lm8" * 8
    body = json.dumps({"tools": [{"function": {"arguments": json.dumps({"db": {"secret": secret, "api_key": api_key}})}}],
                       "deep": {"a": [{"b": {"token": tok}}]},
                       "logprobs": {"content": [{"token": "Hello", "logprob": -0.1, "bytes": [72]},
                                                {"token": "implementation_detail", "logprob": -0.2, "bytes": [1]}]},
                       "thinking": {"signature": "EqQBCkgIARABGAIiQ" * 4}}).encode()
    out = Redactor().bytes_(body)
    for s in (secret, api_key, tok):
        assert s.encode() not in out
    doc = json.loads(out)
    assert [t["token"] for t in doc["logprobs"]["content"]] == ["Hello", "implementation_detail"]
    assert doc["thinking"]["signature"] == "EqQBCkgIARABGAIiQ" * 4


def test_environment_secrets_are_known_from_the_start():
    red = Redactor()
    n = red.learn_env({"OPENAI_API_KEY": KEY, "INTERNAL_SERVICE_TOKEN": "svc-" + "Yt6" * 7, "DB_PASSWORD": "hunter2-x",
                       "PATH": "/usr/bin:/bin", "OLLAMA_API_KEY": "ollama", "HF_HUB_DISABLE_TOKEN": "1"})
    assert n == 3
    out = red.text(f"agent says: {KEY} / svc-{'Yt6' * 7} / pw hunter2-x / ollama at /usr/bin")
    assert "svc-" not in out and "hunter2-x" not in out and KEY not in out
    assert "ollama at /usr/bin" in out  # a stand-in word and an ordinary variable are not secrets


def test_scan_reports_what_redaction_would_hide():
    for name, (value, secret) in SHAPES.items():
        if name == "env-only-token":
            continue
        body = json.dumps({"arguments": json.dumps({"password": value})}).encode()
        it = Interaction(request=req(body=body), response=resp(json.dumps({"echo": value}).encode()))
        hits = list(scan_interaction(0, it))
        assert {h.field for h in hits} >= {"request.body", "response.body"}, name
        assert all(secret not in h.excerpt for h in hits)
        assert list(scan_interaction(0, Redactor().interaction(it))) == [], name


def test_scan_exits_1_on_every_cassette_recorded_before_these_rules(tmp_path):
    """Cassettes as an older spoolproxy wrote them (secrets not yet recognised stay raw):
    one per shape and place; scan flags each one, and never prints a secret."""
    files = []
    for name, (value, secret) in SHAPES.items():
        if name == "env-only-token":
            continue
        in_string = Interaction(request=req(body=json.dumps({"arguments": json.dumps({"password": value})}).encode()),
                                response=resp(b'{"ok": true}'))
        in_url = Interaction(request=req(f"https://hooks.example/v1/cb?api_key={quote(value, safe='')}"),
                             response=resp(json.dumps({"next": f"see {value}"}).encode()))
        for where, it in (("string", in_string), ("url", in_url)):
            files.append(save(Cassette(interactions=[it]), tmp_path / f"{name}-{where}.yaml"))  # save() does not redact
    r = subprocess.run([sys.executable, "-m", "spoolproxy", "scan", str(tmp_path)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1, r.stderr
    for f in files:
        assert f"{f}: interaction 0:" in r.stdout, f.name
    for _, secret in SHAPES.values():
        assert secret not in r.stdout + r.stderr
    assert f"in {len(files)} of {len(files)} file(s)" in r.stderr


def test_scan_reports_a_value_of_a_secret_environment_variable(tmp_path):
    token = "Gv2" * 10  # no shape: only the environment says it is a secret
    save(Cassette(interactions=[Interaction(request=req(body=f"note {token}".encode()), response=resp(b"{}"))]),
         tmp_path / "c.yaml")
    env = {"PATH": "/usr/bin:/bin", "SPOOLPROXY_HOME": str(tmp_path / "home")}
    r = subprocess.run([sys.executable, "-m", "spoolproxy", "scan", str(tmp_path / "c.yaml")], capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "spoolproxy", "scan", str(tmp_path / "c.yaml")], capture_output=True,
                       text=True, timeout=60, env={**env, "BILLING_API_TOKEN": token})
    assert r.returncode == 1 and "request.body: known-secret" in r.stdout and token not in r.stdout


def test_redaction_is_stable_and_idempotent():
    it = Interaction(request=req(headers={"authorization": f"Bearer {KEY}"}, body=json.dumps({"k": KEY}).encode()),
                     response=resp(json.dumps({"url": SHAPES["slack-webhook"][0]}).encode()))
    once = Redactor().interaction(it)
    assert Redactor().interaction(it) == once           # same secret, same placeholder, in every run
    assert Redactor().interaction(once) == once         # an exported cassette does not churn


def test_bodies_whose_length_changed_keep_their_chunks_in_step():
    from spoolproxy.cassettes.model import Chunk

    sse = (f"data: {json.dumps({'delta': 'use ' + KEY})}\n\n" + "data: [DONE]\n\n").encode()
    r = resp(sse, "text/event-stream").model_copy(update={"chunks": [Chunk(offset_ms=0, size=len(sse) - 14),
                                                                      Chunk(offset_ms=5, size=14)]})
    out = Redactor().response(r)
    assert sum(c.size for c in out.chunks) == len(out.body) and KEY.encode() not in out.body


def test_a_secret_learned_late_is_removed_from_side_files_too(tmp_path):
    """Recorder.finish's last pass: a side body file written before the secret was known."""
    from spoolproxy.cassettes.model import BodyRef
    from spoolproxy.cassettes.redact_late import late_pass

    password = "Pz9-" + "x" * 4 + "Kq"
    side = tmp_path / "run.yaml.bodies"
    side.mkdir()
    (side / "0000-a.bin").write_bytes(b"big body ... " + password.encode() + b" ... end")
    first = Interaction(request=req("https://api.example/big"),
                        response=resp(b"").model_copy(update={"body_ref": BodyRef(size=1, sha256="", file="run.yaml.bodies/0000-a.bin")}))
    red = Redactor()
    red.interaction(Interaction(request=req(body=f"password={password}".encode(),
                                            headers={"content-type": "application/x-www-form-urlencoded"})))
    out = late_pass(Cassette(interactions=[first]), tmp_path / "run.yaml", red)
    data = (side / "0000-a.bin").read_bytes()
    assert password.encode() not in data and b"REDACTED-field-" in data
    assert out.interactions[0].response.body_ref.size == len(data)
