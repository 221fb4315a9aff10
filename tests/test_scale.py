"""``detect`` / ``cluster`` beyond one machine: the shared corpus in a real S3-compatible
store (moto), analysed by a real Dask cluster of two worker processes, findings written as
Parquet and read back by ``cluster`` and ``dashboard``; everything must equal the
single-process run over the same cassettes on disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spoolproxy.cli import main

from .conftest import REPO
from .scale_support import dask_scheduler, need_scale, s3_server  # noqa: F401 (fixtures)


def spool(capsys, *args: str) -> tuple[int, str, str]:
    """Run ``spoolproxy ARGS`` in-process: (exit status, stdout, stderr)."""
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    out, err = capsys.readouterr()
    return exit_.value.code or 0, out, err


@pytest.fixture(scope="module")
def corpus_url(s3_server, corpus_dir):  # noqa: F811
    """The shared corpus uploaded to ``s3://BUCKET/corpus``."""
    url = f"s3://{s3_server.bucket('corpus')}/corpus"
    s3_server.fs().put(str(corpus_dir) + "/", url.split("://", 1)[1] + "/", recursive=True)
    return url


def _by_name(lines: str, prefix: str) -> dict[str, dict]:
    """JSON Lines of ``detect --json`` keyed by the cassette's path below ``prefix``."""
    out = {}
    for line in lines.splitlines():
        doc = json.loads(line)
        name = doc.pop("cassette")
        assert name.startswith(prefix), name
        out[name[len(prefix):].lstrip("/")] = doc
    return out


def test_dask_detect_over_s3_equals_the_single_process_run(capsys, corpus_dir, corpus_url, dask_scheduler, s3_server,
                                                          tmp_path):  # noqa: F811
    code, local_out, _ = spool(capsys, "detect", str(corpus_dir), "--json")
    assert code == 0
    table = tmp_path / "findings.parquet"
    code, dask_out, err = spool(capsys, "detect", corpus_url, "--json", "--engine", "dask",
                                "--scheduler", dask_scheduler, *s3_server.storage_args(), "--parquet", str(table))
    assert code == 0, err
    assert "wrote" in err and "(121 runs)" in err
    local = _by_name(local_out, str(corpus_dir))
    distributed = _by_name(dask_out, corpus_url)
    assert len(local) == 121
    assert distributed == local  # same verdicts, same findings with the same evidence, same order of keys
    assert list(distributed) == sorted(distributed)  # output order is the key order, whatever the engine

    from spoolproxy.scale.parquet import read_rows

    rows = read_rows(table)
    assert [r["cassette"] for r in rows] == [f"{corpus_url}/{k}" for k in distributed]
    for r in rows:
        doc = distributed[r["cassette"][len(corpus_url) + 1:]]
        assert r["verdict"] == doc["verdict"] and r["findings"] == doc["findings"]
    failing = [r for r in rows if r["verdict"] == "fail"]
    assert failing and all(r["failure_document"] for r in failing)
    assert sum(r["interactions"] for r in rows) > 121


def test_dask_cluster_and_dashboard_from_parquet_equal_the_local_clusters(capsys, corpus_dir, corpus_url, dask_scheduler,
                                                                          s3_server, tmp_path):  # noqa: F811
    code, local_out, _ = spool(capsys, "cluster", str(corpus_dir), "--json")
    assert code == 0
    table = tmp_path / "runs.parquet"
    code, dask_out, err = spool(capsys, "cluster", corpus_url, "--json", "--engine", "dask", "--scheduler",
                                dask_scheduler, *s3_server.storage_args(), "--parquet", str(table))
    assert code == 0, err
    code, table_out, err = spool(capsys, "cluster", str(table), "--json")
    assert code == 0, err

    def shape(text: str, prefix: str):
        doc = json.loads(text)
        return doc["runs"], doc["failing"], [
            (c["id"], c["size"], c["cause"], sorted(r["cassette"] or r["name"] for r in c["runs"])) for c in doc["clusters"]]

    local = json.loads(local_out)
    names = {r["cassette"]: r["cassette"][len(str(corpus_dir.resolve())):] for c in local["clusters"] for r in c["runs"]}
    want = (local["runs"], local["failing"],
            [(c["id"], c["size"], c["cause"], sorted(names[r["cassette"]] for r in c["runs"])) for c in local["clusters"]])
    got = json.loads(dask_out)
    got_shape = (got["runs"], got["failing"], [(c["id"], c["size"], c["cause"],
                                                 sorted(r["name"][len(corpus_url):] for r in c["runs"]))
                                                for c in got["clusters"]])
    assert got_shape == want
    assert json.loads(table_out)["clusters"] == got["clusters"]  # clustered from the table, nothing re-read

    page = tmp_path / "site" / "index.html"
    code, out, err = spool(capsys, "dashboard", "--findings", str(table), "-o", str(page))
    assert code == 0, err
    assert f"{local['runs']} runs ({local['failing']} failing)" in out
    html = page.read_text()
    assert all(c["id"] in html for c in local["clusters"][:3])


def test_local_engine_reads_the_store_too_and_corrupt_cassettes_are_error_rows(capsys, s3_server, tmp_path):  # noqa: F811
    from spoolproxy.cassettes.storage import save
    from spoolproxy.scale.parquet import read_rows

    from .test_detect_wire import cassette, chat_response, llm

    save(cassette(llm([{"role": "user", "content": "hi"}], chat_response("Hello there."))), tmp_path / "good.yaml")
    (tmp_path / "bad.yaml").write_text("interactions:\n  - request: {\n  x: [\n")
    (tmp_path / "expected.yaml").write_text("kind: tool_loop\n")  # not a cassette: skipped with a warning
    url = f"s3://{s3_server.bucket()}/mixed"
    s3_server.fs().put(str(tmp_path) + "/", url.split("://", 1)[1] + "/", recursive=True)
    table = tmp_path / "out" / "rows.parquet"
    code, out, err = spool(capsys, "detect", url, "--json", *s3_server.storage_args(), "--parquet", str(table))
    assert code == 2  # a corrupt cassette, as without a store
    assert f"spoolproxy: error: {url}/bad.yaml:" in err
    assert f"spoolproxy: warning: skipped {url}/expected.yaml" in err
    assert [json.loads(ln)["verdict"] for ln in out.splitlines()] == ["error", "pass"]
    rows = read_rows(table)
    assert [(r["cassette"].rsplit("/", 1)[1], r["verdict"]) for r in rows] == [("bad.yaml", "error"), ("good.yaml", "pass")]


def test_engine_options_are_checked_before_anything_runs(capsys, tmp_path):
    need_scale()
    code, _, err = spool(capsys, "detect", str(tmp_path), "--scheduler", "tcp://127.0.0.1:1")
    assert code == 2 and "--scheduler and --workers need --engine dask" in err
    code, _, err = spool(capsys, "detect", str(tmp_path), "--engine", "dask", "--jobs", "2")
    assert code == 2 and "--jobs is for the local engine" in err
    (tmp_path / "x.parquet").write_text("not parquet")
    code, _, err = spool(capsys, "cluster", str(tmp_path / "x.parquet"))
    assert code == 2 and "not a readable Parquet file" in err


def test_without_the_scale_extra_dask_is_one_line_saying_what_to_install(tmp_path):
    """A real interpreter where ``distributed`` cannot be imported (as without the extra)."""
    blocker = tmp_path / "block"
    (blocker / "distributed").mkdir(parents=True)
    (blocker / "distributed" / "__init__.py").write_text(
        "raise ModuleNotFoundError('No module named distributed', name='distributed')\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "run.yaml").write_text("version: 1\ninteractions: []\n")
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{REPO}"}
    out = subprocess.run([sys.executable, "-m", "spoolproxy", "detect", str(tmp_path / "c"), "--engine", "dask"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2
    assert out.stderr == "spoolproxy: error: --engine dask needs dask and distributed: pip install 'spoolproxy[scale]'\n"


def test_cassette_keys_and_storage_options():
    from spoolproxy.errors import UsageError
    from spoolproxy.store.fs import is_cassette_key, is_url, parse_storage_options

    assert is_cassette_key("2025-01-31/run-42.yaml") and is_cassette_key("a/b.json")
    assert not is_cassette_key("2025-01-31/.run-42.yaml.3f2a.tmp")  # an upload in progress
    assert not is_cassette_key("2025-01-31/run-42.yaml.bodies/0000.yaml")  # a side body
    assert not is_cassette_key(".spool/x.yaml") and not is_cassette_key("notes.txt")
    assert is_url("s3://b/p") and is_url("file:///x") and not is_url("cassettes/") and not is_url("C:x")
    assert parse_storage_options(["endpoint_url=http://127.0.0.1:9000", "anon=false", 'client_kwargs={"a": 1}']) == {
        "endpoint_url": "http://127.0.0.1:9000", "anon": False, "client_kwargs": {"a": 1}}
    with pytest.raises(UsageError, match="expected KEY=VALUE"):
        parse_storage_options(["endpoint_url"])
