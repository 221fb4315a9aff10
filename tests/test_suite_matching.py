"""Matching options in regression runs: an agent whose prompt holds the current time can only
replay with ``--normalize`` (flag, case ``match_options`` via ``annotate``, or the project's
``[playback]`` table), and the hints ``spoolproxy test`` prints name flags it has.

The cassette is built here (a refund POST answered 504 then 201, then one OpenAI Chat
Completions call whose prompt holds a 2020 timestamp); the agent is a real openai-SDK script
run through the real playback proxy, so the duplicate refund makes the case ``still_fails``
once the prompt matches.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from spoolproxy.cassettes import save
from spoolproxy.cassettes.model import Cassette, CassetteMeta, Interaction, Request, Response
from spoolproxy.replayer.report import RecordedRef, RequestOutcome
from spoolproxy.suite.files import load_case
from spoolproxy.suite.outcome import regression_lines

TS_RX = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z"

AGENT = '''
import sys, time, requests
from openai import OpenAI
c = OpenAI(base_url="http://llm.test/v1", api_key="sk-proj-" + "k" * 40, max_retries=0)
r1 = requests.post("http://shop.test/refunds", json={"order": 1002, "amount": 10})
r2 = requests.post("http://shop.test/refunds", json={"order": 1002, "amount": 10})
now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
r = c.chat.completions.create(model="gpt-4o-mini", messages=[
    {"role": "user", "content": "at %s refund status: %s %s" % (now, r1.status_code, r2.status_code)}])
print(r.choices[0].message.content)
'''


def _json(status: int, doc: dict) -> Response:
    return Response(status=status, headers={"content-type": ["application/json"]}, body=json.dumps(doc).encode())


def _cassette() -> Cassette:
    refund = json.dumps({"order": 1002, "amount": 10}).encode()
    post = dict(method="POST", uri="http://shop.test/refunds", headers={"content-type": ["application/json"]},
                body=refund)
    chat = {"messages": [{"role": "user", "content": "at 2020-01-02T03:04:05Z refund status: 504 201"}],
            "model": "gpt-4o-mini"}
    answer = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1577934245, "model": "gpt-4o-mini",
              "choices": [{"index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant", "content": "Refund RF-1 created."}}]}
    return Cassette(
        interactions=[
            Interaction(request=Request(**post), response=_json(504, {"error": "gateway timeout"})),
            Interaction(request=Request(**post), response=_json(201, {"refund": "RF-1"})),
            Interaction(request=Request(method="POST", uri="http://llm.test/v1/chat/completions",
                                        headers={"content-type": ["application/json"]},
                                        body=json.dumps(chat).encode()),
                        response=_json(200, answer)),
        ],
        meta=CassetteMeta(recorder="test", command=["python", "agent_ts.py"], cwd=".", exit_code=0),
    )


def spoolproxy(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spoolproxy", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=240)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "spoolproxy.toml").write_text("")
    (tmp_path / "agent_ts.py").write_text(AGENT)
    save(_cassette(), tmp_path / "cassettes" / "ts.yaml")
    suite = tmp_path / "spool"
    suite.mkdir()
    case = {"name": "ts", "status": "confirmed", "command": {"argv": ["python", "agent_ts.py"], "cwd": "."},
            "cassette": "cassettes/ts.yaml",
            "signature": [{"kind": "duplicate_side_effect", "message": "identical POST sent 2 times"}]}
    (suite / "ts.yaml").write_text(yaml.safe_dump(case, sort_keys=False))
    return tmp_path


def _outcome(project: Path, *args: str) -> tuple[str, dict]:
    r = spoolproxy("test", "--json", *args, cwd=project)
    assert "Traceback" not in r.stderr, r.stderr
    data = json.loads(r.stdout)
    return data["results"][0]["outcome"], data["results"][0]


def test_timestamp_in_prompt_needs_normalize_flag(project: Path) -> None:
    outcome, res = _outcome(project)
    assert outcome == "unreplayable", res
    details = "\n".join(res["details"])
    assert "--allow-repeats" not in details
    assert "spoolproxy annotate ts --normalize '" in details  # a flag annotate and test have
    assert "(or spoolproxy test --normalize '" in details
    outcome, res = _outcome(project, "--normalize", TS_RX)
    assert outcome == "still_fails", res
    assert res["explanation"].startswith("signature came back: duplicate_side_effect")


def test_normalize_from_the_playback_table_and_from_the_case(project: Path) -> None:
    (project / "spoolproxy.toml").write_text(f"[playback]\nnormalize = ['{TS_RX}']\n")
    assert _outcome(project)[0] == "still_fails"
    (project / "spoolproxy.toml").write_text("")
    r = spoolproxy("annotate", "ts", "--normalize", TS_RX, cwd=project)
    assert r.returncode == 0 and "matching: normalize" in r.stdout, r.stderr
    assert load_case(project / "spool" / "ts.yaml").match_options.normalize == [TS_RX]
    text = (project / "spool" / "ts.yaml").read_text()
    assert "match_options:" in text
    assert _outcome(project)[0] == "still_fails"


def test_bad_match_options_are_one_line(project: Path) -> None:
    r = spoolproxy("test", "--normalize", "(", cwd=project)
    assert r.returncode == 2 and r.stderr.startswith("spoolproxy: error: --normalize '('"), r.stderr
    assert "Traceback" not in r.stderr
    doc = yaml.safe_load((project / "spool" / "ts.yaml").read_text())
    doc["match_options"] = {"normalise": ["x"]}
    (project / "spool" / "ts.yaml").write_text(yaml.safe_dump(doc))
    outcome, res = _outcome(project)
    assert outcome == "error" and "unknown key 'match_options.normalise'" in res["explanation"]
    assert "did you mean 'normalize'" in res["explanation"]
    r = spoolproxy("annotate", "ts", "--ignore-json-path", "messages", "--suite", "spool", cwd=project)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_hints_never_suggest_ignoring_a_message_or_allow_repeats() -> None:
    ref = RecordedRef(cassette="c.yaml", interaction=3, method="POST", uri="http://shop.example/refunds")
    tool_result = RequestOutcome(seq=6, outcome="miss", method="POST", uri="http://model.example/v1/chat/completions",
                                 nearest=ref, suggestions=["--ignore-json-path $.messages[5].content"],
                                 suggestion_verified=True)
    lines = regression_lines(tool_result, "stock")
    assert not any("ignore-json-path" in ln or "to match, add" in ln for ln in lines), lines
    meta = RequestOutcome(seq=2, outcome="miss", method="POST", uri="http://model.example/v1/chat/completions",
                          nearest=ref, suggestions=["--ignore-json-path $.metadata.request_id"])
    assert any("spoolproxy annotate stock --ignore-json-path $.metadata.request_id" in ln
               for ln in regression_lines(meta, "stock"))
    repeated = RequestOutcome(seq=5, outcome="miss", method="POST", uri="http://shop.example/refunds", nearest=ref,
                              reasons=["every matching interaction was already served (1x); "
                                       "use --allow-repeats to serve it again"])
    lines = regression_lines(repeated, "refund")
    assert not any("allow-repeats" in ln for ln in lines)
    assert any("more often than the recording did" in ln for ln in lines)
