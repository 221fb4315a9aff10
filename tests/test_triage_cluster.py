"""Failure clusters: normalisation, the corpus's cross-provider root causes, stable ids,
tag filters, the Ollama embed API (a local fake server speaking its wire format) and the
fallbacks, through the library and the real CLI."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from spoolproxy.cassettes import load, save
from spoolproxy.triage.clustering import cluster, cluster_runs
from spoolproxy.triage.embed import OllamaEmbedder
from spoolproxy.triage.normalize import normalize
from spoolproxy.triage.runs import collect_runs

from .fakes.routes import json_reply
from .test_proxy_support import cli_env

pytest.importorskip("sklearn", reason="similarity clustering needs the triage extra (scikit-learn)")

#: the corpus's failing runs whose root cause is a rejected API key, from three providers
AUTH = {
    "mirascope/test_authentication_error__anthropic_claude_sonnet_4_0.yaml",
    "mirascope/test_authentication_error_stream__anthropic_claude_sonnet_4_0.yaml",
    "mirascope/test_authentication_error__openai_gpt_4o_completions.yaml",
    "mirascope/test_authentication_error__openai_gpt_4o_responses.yaml",
    "mirascope/test_authentication_error_stream__openai_gpt_4o_completions.yaml",
    "mirascope/test_authentication_error__google_gemini_2_5_flash.yaml",
    "crewAI/llms__google__test_google_streaming_returns_usage_metrics.yaml",  # Gemini: "API key not valid", retried
}
#: ... and whose root cause is a model name the provider does not know, from five providers
MODEL_NOT_FOUND = {
    "crewAI/agents__test_llm_call_with_error.yaml",
    "crewAI/TestCrewMultimodalGemini.test_image_file[gemini-gemini-1.5-flash].yaml",
    "mirascope/test_model_not_found__openai_gpt_4o_completions.yaml",
    "mirascope/test_model_not_found_stream__anthropic_claude_sonnet_4_0.yaml",
    "mirascope/test_model_not_found_stream__openai_gpt_4o_responses.yaml",
    "pydantic-ai/test_bedrock__test_bedrock_error.yaml",
    "pydantic-ai/test_model_name_suggestions__test_model_name_suggestion[groq].yaml",
}


@pytest.fixture(scope="module")
def corpus_runs(corpus_dir):
    return collect_runs([corpus_dir])


def _names(c) -> set[str]:
    return {r.name for r in c.runs}


def test_normalize_strips_volatile_parts():
    key = "sk-" + "a" * 3 + "*****" + "2345"
    msg = (f"POST shop.example.com/orders/ORD-1002/refund got 502 after 3 tries: 'Order 1002' not in "
           f"/var/lib/app/data.json (req_8f3a9c21, id 3f2a9c0e-1b2c-4d5e-8f90-123456789abc) key {key} "
           "see https://docs.example.com/errors#x; OpenAI model gpt-4o-mini said \"no\"")
    out = normalize(msg)
    assert out == ("post shop.example.com/<path> got http-502 after <n> tries: <v> not in <path> (<id>, id <id>) "
                   "key <secret> see <url>; <provider> model <model> said <v>")
    # the run's own hosts and models go too, with their paths
    assert normalize("LLM call POST api.groq.com/openai/v1/chat/completions got 404: my-model-x not found",
                     hosts=("api.groq.com",), models=("my-model-x",)) == \
        "llm call post <llm-endpoint> got http-404: <model> not found"
    # provider wordings of one cause read the same
    assert {normalize(m) for m in ("Incorrect API key provided: x", "invalid x-api-key", "API key not valid")} == \
        {"invalid api key: x", "invalid api key"}


def test_corpus_same_failure_across_providers_is_one_cluster(corpus_runs):
    result = cluster(corpus_runs)
    assert result.method == "tfidf" and result.passing == 121 - 22
    by_cause = {c.cause: c for c in result.clusters if c.cause}
    auth, missing = by_cause["invalid api key"], by_cause["model not found"]
    assert _names(auth) == AUTH  # OpenAI (chat, responses, stream), Anthropic (plain, stream), Gemini (x2)
    assert set(auth.providers) == {"openai", "anthropic", "gemini"}
    assert _names(missing) == MODEL_NOT_FOUND
    assert set(missing.providers) == {"openai", "anthropic", "gemini", "bedrock", "groq"}
    # biggest first, every failing run in exactly one cluster
    sizes = [c.size for c in result.clusters]
    assert sizes == sorted(sizes, reverse=True) and sum(sizes) == 22
    others = [c for c in result.clusters if c not in (auth, missing)]
    assert all(not (_names(c) & (AUTH | MODEL_NOT_FOUND)) for c in others)


def test_cluster_ids_are_stable_across_runs_and_subsets(corpus_dir, corpus_runs, tmp_path):
    first = {c.cause: c.id for c in cluster(corpus_runs).clusters if c.cause}
    again = {c.cause: c.id for c in cluster(collect_runs([corpus_dir])).clusters if c.cause}
    assert first == again
    subset = tmp_path / "subset"
    subset.mkdir()
    for name in sorted(AUTH)[:4] + sorted(MODEL_NOT_FOUND)[:2]:
        shutil.copy(corpus_dir / name, subset / Path(name).name)
    few = {c.cause: c.id for c in cluster_runs([subset])}
    assert few["invalid api key"] == first["invalid api key"]


def _tagged_copies(corpus_dir: Path, dest: Path) -> None:
    """Two auth failures tagged version 1.4.0 and one tagged 1.5.0 (real load/save)."""
    dest.mkdir()
    for i, (name, version) in enumerate(zip(sorted(AUTH)[:3], ("1.4.0", "1.4.0", "1.5.0"))):
        cas = load(corpus_dir / name)
        cas.meta.extra["tags"] = {"agent": "refund-bot", "version": version}
        save(cas, dest / f"run{i}.yaml")


def test_cli_cluster_json_and_tag_filters(corpus_dir, tmp_path):
    runs = tmp_path / "runs"
    _tagged_copies(corpus_dir, runs)
    env = cli_env(tmp_path)

    def cli(*args):
        proc = subprocess.run([sys.executable, "-m", "spoolproxy", "cluster", *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc

    doc = json.loads(cli(str(runs), "--json").stdout)
    assert doc["method"] == "tfidf" and doc["failing"] == 3
    (only,) = doc["clusters"]
    assert only["size"] == 3 and only["cause"] == "invalid api key" and only["versions"] == ["1.4.0", "1.5.0"]
    doc = json.loads(cli(str(runs), "--json", "--tag", "version=1.4.*", "--tag", "agent=refund-bot").stdout)
    assert doc["runs"] == 2 and doc["clusters"][0]["size"] == 2
    text = cli(str(runs), "--tag", "version=9*").stdout
    assert "0 runs, none failing" in text
    table = cli(str(runs)).stdout
    assert table.startswith(only["id"]) and "3 runs  invalid api key" in table and "(tfidf, cut at 0.7)" in table
    bad = subprocess.run([sys.executable, "-m", "spoolproxy", "cluster", str(tmp_path / "nope")], capture_output=True,
                         text=True, env=env, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("spoolproxy: error: ") and "Traceback" not in bad.stderr


def test_ollama_embeddings_are_used_when_configured_and_reachable(corpus_runs, fake_provider):
    """Ollama's ``POST /api/embed`` (``{"model", "input"}`` -> ``{"embeddings"}``) served by
    the local fake: vectors that put every document in one place make one cluster."""
    seen = []

    def embed(req):
        body = req.json()
        seen.append(body)
        return json_reply(200, {"model": body["model"], "embeddings": [[1.0, 0.0, 0.5] for _ in body["input"]]})

    fake_provider.add_route("POST", "/api/embed", embed)
    failing = [r for r in corpus_runs if r.failure and r.failure.cause in (None, "output token limit")]
    result = cluster(failing, embedder=OllamaEmbedder(model="fake-embed", host=fake_provider.http_url))
    assert result.method == "ollama:fake-embed" and result.note is None
    assert len(result.clusters) == 1 and result.clusters[0].size == len(failing)
    assert seen[0]["model"] == "fake-embed" and len(seen[0]["input"]) == len({r.failure.document for r in failing})


def test_unreachable_ollama_falls_back_to_the_builtin_vectoriser(corpus_runs, fake_provider):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = cluster(corpus_runs, embedder=OllamaEmbedder(model="nomic-embed-text", host=f"http://127.0.0.1:{port}"))
    assert result.method == "tfidf" and "is not reachable" in result.note and "built-in vectoriser" in result.note
    fake_provider.add_route("POST", "/api/embed", lambda req: json_reply(404, {"error": "model 'x' not found"}))
    result = cluster(corpus_runs, embedder=OllamaEmbedder(model="x", host=fake_provider.http_url))
    assert result.method == "tfidf" and "answered 404" in result.note and "model 'x' not found" in result.note


def test_without_scikit_learn_runs_group_by_cause(corpus_dir, tmp_path):
    """The core install (no triage extra): grouping by recognised cause, said in a note."""
    script = (
        "import sys, json; sys.modules['sklearn'] = None\n"
        "from spoolproxy.triage.clustering import cluster\n"
        "from spoolproxy.triage.runs import collect_runs\n"
        f"res = cluster(collect_runs([{str(corpus_dir)!r}]))\n"
        "print(json.dumps({'method': res.method, 'note': res.note,"
        " 'clusters': [[r.name for r in c.runs] for c in res.clusters]}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["method"] == "exact" and "pip install 'spoolproxy[triage]'" in doc["note"]
    assert AUTH in [set(c) for c in doc["clusters"]] and MODEL_NOT_FOUND in [set(c) for c in doc["clusters"]]
