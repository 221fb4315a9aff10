"""Explanations are bounded and off the request path (issue 11, item 1).

A 20 MB JSON body whose base64 image changed by one character and a 12 MB multipart upload
whose binary part changed by one byte go through the real proxy while small requests keep
being served on other connections; both big requests are answered (a divergence served in
default matching, an explained miss in exact matching), the differences are shown as
length + hash excerpts with the first differing offset, and the report stays small.
Every request goes through real mitmproxy to api.openai.com, pointed at a sentinel fake
provider that must see no connection.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from spoolproxy.cassettes import save
from spoolproxy.cassettes.model import Cassette, Interaction, Request
from spoolproxy.cassettes.storage import side_dir
from spoolproxy.replayer.diff import VOLATILE, diff_json_bounded, line_diff, suggest
from spoolproxy.replayer.excerpt import first_difference, looks_opaque, preview

from .test_playback import CHAT, chat_req, client, completion, playback

FILES = "https://api.openai.com/v1/files"
BOUNDARY = "spoolproxyTestBoundary7f3a"


def image_body(b64: str) -> bytes:
    doc = {"model": "gpt-4o", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is in this picture?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64}},
    ]}]}
    return json.dumps(doc).encode()


def multipart_body(data: bytes, boundary: str = BOUNDARY) -> bytes:
    return (f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nfine-tune\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"data.bin\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


def side_request(tmp_path, n: int, body: bytes, req: Request) -> Interaction:
    """A recorded interaction whose request body lives in a side file, as ``record`` stores
    uploads above --max-body-size."""
    d = side_dir(tmp_path / "big.yaml")
    d.mkdir(exist_ok=True)
    f = d / f"{n:04d}-request.bin"
    f.write_bytes(body)
    ref = {"file": f"big.yaml.bodies/{f.name}", "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    return Interaction(request=req.model_copy(update={"body": b""}), response=completion(f"big {n}"),
                       extra={"request_body": ref})


@pytest.fixture(scope="module")
def big_bodies():
    rnd = random.Random(11)
    b64 = base64.b64encode(rnd.randbytes(15_000_000)).decode()  # 20 MB of base64
    image = image_body(b64)
    changed_image = image_body(b64[:10_000_000] + ("A" if b64[10_000_000] != "A" else "B") + b64[10_000_001:])
    blob = rnd.randbytes(12_000_000)
    upload = multipart_body(blob)
    changed_upload = multipart_body(flip(blob, 6_000_000), boundary="otherClientBoundary42")
    return image, changed_image, upload, changed_upload


def write_big_cassette(tmp_path, big_bodies) -> str:
    image, _, upload, _ = big_bodies
    img_req = Request(method="POST", uri=CHAT, headers={"content-type": ["application/json"]}, body=image)
    up_req = Request(method="POST", uri=FILES, body=upload,
                     headers={"content-type": [f"multipart/form-data; boundary={BOUNDARY}"]})
    small = [Interaction(request=chat_req([{"role": "user", "content": f"small {i}"}]), response=completion(f"S{i}"))
             for i in range(40)]
    p = tmp_path / "big.yaml"
    save(Cassette(interactions=[side_request(tmp_path, 0, image, img_req), side_request(tmp_path, 1, upload, up_req),
                                *small]), p)
    return str(p)


def _big_and_small(runner, big_bodies, small_count: int = 40) -> tuple[list[httpx.Response], list[str], int]:
    """Send both changed big requests on their own connections and, while either is still
    outstanding, small requests on a third; returns the big responses, the small answers
    and how many small answers arrived while a big request was still outstanding."""
    _, changed_image, _, changed_upload = big_bodies
    done = [0]

    def big(kind: str) -> httpx.Response:
        with client(runner) as c:
            try:
                if kind == "image":
                    return c.post(CHAT, content=changed_image, headers={"content-type": "application/json"})
                return c.post(FILES, content=changed_upload,
                              headers={"content-type": "multipart/form-data; boundary=otherClientBoundary42"})
            finally:
                done[0] += 1

    answers, during = [], 0
    with ThreadPoolExecutor(2) as pool, client(runner) as c:
        futs = [pool.submit(big, "image"), pool.submit(big, "upload")]
        for i in range(small_count):
            r = c.post(CHAT, content=chat_req([{"role": "user", "content": f"small {i}"}]).body)
            answers.append(r.json()["choices"][0]["message"]["content"])
            during += done[0] < 2
        bigs = [f.result() for f in futs]
    return bigs, answers, during


def test_big_changed_bodies_are_served_while_small_requests_flow(tmp_path, fake_provider, big_bodies):
    path = write_big_cassette(tmp_path, big_bodies)
    with playback([path], fake_provider) as (runner, session):
        bigs, answers, during = _big_and_small(runner, big_bodies)
        report = session.report()
    assert answers == [f"S{i}" for i in range(40)]  # every small request got its own answer
    assert during >= 1  # ... and some while a big request was still in the proxy
    assert [b.status_code for b in bigs] == [200, 200]
    assert sorted(b.json()["choices"][0]["message"]["content"] for b in bigs) == ["big 0", "big 1"]
    assert report.exact == 40 and report.divergences == 2 and report.misses == 0
    by_uri = {r.uri: r for r in report.requests if r.outcome == "divergence"}
    image = by_uri[CHAT].differences
    assert [c.path for c in image] == ["$.messages[0].content[1].image_url.url"]
    assert image[0].recorded.startswith("<20,000,022 chars sha256:") and "data:image/png;base64," in image[0].recorded
    assert image[0].line_diff[0] == "@ first difference at char 10,000,022"
    upload = by_uri[FILES].differences
    assert [c.path for c in upload] == ["multipart['file']"]
    assert upload[0].recorded.startswith("<12,000,000 bytes sha256:") and upload[0].line_diff[0] == \
        "@ first difference at byte 6,000,000"
    size = len(report.model_dump_json())
    text = report.render()
    assert size < 40_000 and len(text) < 20_000, (size, len(text))  # megabytes of body, kilobytes of report


def test_exact_matching_misses_big_bodies_with_a_bounded_explanation(tmp_path, fake_provider, big_bodies):
    path = write_big_cassette(tmp_path, big_bodies)
    diff_dir = tmp_path / "diffs"
    with playback([path], fake_provider, match="exact", diff_dir=str(diff_dir)) as (runner, session):
        bigs, answers, _ = _big_and_small(runner, big_bodies, small_count=10)
        report = session.report()
    assert answers == [f"S{i}" for i in range(10)]
    assert [b.status_code for b in bigs] == [400, 400]
    for b in bigs:  # the SDK-shaped error stays one short paragraph
        assert b.headers["x-should-retry"] == "false" and len(b.content) < 2000
        assert "no recorded interaction matches POST https://api.openai.com/v1/" in b.json()["error"]["message"]
    misses = [r for r in report.requests if r.outcome == "miss"]
    assert len(misses) == 2 and all(m.nearest is not None and m.nearest.interaction in (0, 1) for m in misses)
    assert len(report.model_dump_json()) < 40_000
    # --diff-dir holds the full detail: both normalised bodies, every difference
    files = sorted(p.name for p in diff_dir.iterdir())
    assert len(files) == 6 and all(m.detail_files for m in misses)
    for m in misses:  # the files carry the request's number in the report
        assert all(Path(f).name.startswith(f"{m.seq:05d}-") for f in m.detail_files), (m.seq, m.detail_files)
    recorded_json = next(p for p in diff_dir.iterdir() if p.name.endswith("-recorded.json"))
    assert json.loads(recorded_json.read_text())["model"] == "gpt-4o"


def test_a_changed_long_prompt_gets_a_bounded_line_diff_and_a_flag():
    lines = [f"line {i}: some context the agent keeps in its prompt" for i in range(5000)]
    rec = "\n".join(lines[:2500] + ["Today is 2025-03-04T12:00:00Z."] + lines[2500:])
    act = "\n".join(lines[:2500] + ["Today is 2026-12-01T07:11:42Z."] + lines[2500:])
    d = diff_json_bounded({"messages": [{"content": rec}]}, {"messages": [{"content": act}]})
    (change,) = d.changes
    assert change.line_diff == [
        "@@ -2500,3 +2500,3 @@",
        " line 2499: some context the agent keeps in its prompt",
        "-Today is 2025-03-04T12:00:00Z.",
        "+Today is 2026-12-01T07:11:42Z.",
        " line 2500: some context the agent keeps in its prompt",
    ]
    assert change.recorded.startswith("<268,920 chars sha256:") and change.recorded.endswith("…>")  # a marked excerpt, not 269 KB
    assert suggest(d.changes) == [f"--normalize '{VOLATILE[0][1]}'"]


def test_excerpts_and_diffs_stay_small_whatever_the_input():
    a = "x" * 3_000_000 + "ABC" + "y" * 1_000_000
    b = "x" * 3_000_000 + "ABD" + "y" * 1_000_000
    assert first_difference(a, b) == 3_000_002 and looks_opaque(a) and not looks_opaque("x\n" * 1000)
    assert len(json.dumps(preview({"deep": [{"k": a}] * 1000}))) < 400
    many = diff_json_bounded({"k": list(range(10_000))}, {"k": list(range(1, 10_001))})
    assert len(many.changes) == 50 and many.cut == "only the first 50 differences are listed"
    assert len(line_diff("\n".join(map(str, range(10_000))), "\n".join(map(str, range(1, 10_001))))) <= 41


def test_a_report_keeps_at_most_its_budget_of_differences(tmp_path):
    from spoolproxy.replayer.report import MAX_REPORT_CHANGES
    from spoolproxy.replayer.session import PlaybackConfig, PlaybackSession

    recorded = [Interaction(request=chat_req([{"role": "user", "content": f"q{i}"}], extra=list(range(100))),
                            response=completion(str(i))) for i in range(30)]
    path = write_cassette(tmp_path, recorded)
    session = PlaybackSession(PlaybackConfig(cassettes=[path]))
    for i in range(30):  # 30 divergences, 50 listed differences each: more than one report holds
        assert session.decide(chat_req([{"role": "user", "content": f"q{i}"}], extra=list(range(1, 101)))).action == "serve"
    report = session.report()
    kept = sum(len(r.differences) for r in report.requests)
    assert report.divergences == 30 and kept == MAX_REPORT_CHANGES
    assert "differences not listed: this report already holds 1000" in " ".join(report.requests[-1].reasons)
    assert report.render().count("\n") < 2100


def write_cassette(tmp_path, interactions) -> str:
    p = tmp_path / "many.yaml"
    save(Cassette(interactions=interactions), p)
    return str(p)
