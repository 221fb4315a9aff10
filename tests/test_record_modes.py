"""``spoolproxy record --record-mode``: vcrpy's record modes on the record command."""

from __future__ import annotations

from spoolproxy.cassettes import load

from .test_proxy_support import run_cli, spool_home  # noqa: F401
from .test_record_cli import _upstream

CURL = (
    "curl -sS https://api.openai.com/v1/chat/completions -H 'content-type: application/json' "
    "-d '{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}'"
)


def test_once_records_when_missing_then_replays_offline_and_new_episodes_appends(tmp_path, spool_home, fake_provider):
    path = tmp_path / "modes.yaml"
    first = run_cli(["record", "--record-mode", "once", "-c", str(path), *_upstream(fake_provider), "--",
                     "sh", "-c", CURL % "first question"], spool_home)
    assert first.returncode == 0, first.stderr
    assert "first question" in first.stdout and len(load(path)) == 1
    seen = len(fake_provider.requests_to("/chat/completions"))

    again = run_cli(["record", "--record-mode", "once", "-c", str(path), *_upstream(fake_provider), "--",
                     "sh", "-c", CURL % "first question"], spool_home)
    assert again.returncode == 0, again.stderr
    assert "first question" in again.stdout
    assert len(fake_provider.requests_to("/chat/completions")) == seen  # served from the cassette, upstream untouched

    more = run_cli(["record", "--record-mode", "new_episodes", "-c", str(path), *_upstream(fake_provider), "--",
                    "sh", "-c", (CURL % "first question") + "; " + (CURL % "second question")], spool_home)
    assert more.returncode == 0, more.stderr
    assert "second question" in more.stdout
    assert len(fake_provider.requests_to("/chat/completions")) == seen + 1  # only the new episode went upstream
    assert [b"second question" in i.request.body for i in load(path).interactions] == [False, True]


def test_replay_modes_need_a_cassette_path(tmp_path, spool_home):
    proc = run_cli(["record", "--record-mode", "none", "--", "true"], spool_home, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("spoolproxy: error:") and "--cassette" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_new_episodes_records_a_changed_prompt_instead_of_serving_the_old_answer(tmp_path, spool_home, fake_provider):
    path = tmp_path / "changed.yaml"
    first = run_cli(["record", "-c", str(path), *_upstream(fake_provider), "--", "sh", "-c", CURL % "old prompt"],
                    spool_home)
    assert first.returncode == 0, first.stderr
    seen = len(fake_provider.requests_to("/chat/completions"))
    changed = run_cli(["record", "--record-mode", "new_episodes", "-c", str(path), *_upstream(fake_provider), "--",
                       "sh", "-c", CURL % "new prompt"], spool_home)
    assert changed.returncode == 0, changed.stderr
    assert "new prompt" in changed.stdout and "old prompt" not in changed.stdout  # upstream answered the new one
    assert len(fake_provider.requests_to("/chat/completions")) == seen + 1
    bodies = [i.request.body for i in load(path).interactions]
    assert len(bodies) == 2 and b"old prompt" in bodies[0] and b"new prompt" in bodies[1]
