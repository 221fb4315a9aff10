"""Fixtures for the scale tests: a real S3-compatible server (moto's, on 127.0.0.1 with a
free port) and a real Dask cluster of worker processes, each started once per session.

Both skip (with the reason) when the ``scale`` extra or moto is not installed.  The S3
credentials are test values set in the environment for the session (s3fs reads them, and
the Dask workers and CLI subprocesses inherit them); the endpoint is passed as the storage
option ``endpoint_url``, as a user would.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field

import pytest

S3_ENV = {"AWS_ACCESS_KEY_ID": "spoolproxy-test", "AWS_SECRET_ACCESS_KEY": "spoolproxy-test",
          "AWS_DEFAULT_REGION": "us-east-1"}


@dataclass
class S3Server:
    """A running moto S3 server: ``endpoint`` (``http://127.0.0.1:PORT``) and the fsspec
    ``options`` that reach it."""

    endpoint: str
    options: dict = field(default_factory=dict)

    def fs(self):
        import s3fs

        return s3fs.S3FileSystem(endpoint_url=self.endpoint, skip_instance_cache=True)

    def bucket(self, prefix: str = "runs") -> str:
        """A fresh empty bucket's name."""
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        self.fs().mkdir(name)
        return name

    def objects(self, url: str) -> dict[str, bytes]:
        """Every object under ``s3://bucket/prefix`` as ``{key relative to it: bytes}``."""
        fs = self.fs()
        root = url.split("://", 1)[1].rstrip("/")
        return {p[len(root) + 1:]: fs.cat_file(p) for p in fs.find(root)}

    def storage_args(self) -> list[str]:
        return ["--storage-option", f"endpoint_url={self.endpoint}"]


def need_scale() -> None:
    """Skip unless fsspec, s3fs, pyarrow, dask, distributed and moto's server are importable."""
    for mod in ("fsspec", "s3fs", "pyarrow", "dask", "distributed", "moto.server"):
        pytest.importorskip(mod, reason=f"{mod} is not installed (pip install 'spoolproxy[scale]' and moto[server])")


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on 127.0.0.1 (a free port) for the whole session."""
    need_scale()
    from moto.server import ThreadedMotoServer

    old = {k: os.environ.get(k) for k in [*S3_ENV, "AWS_PROFILE", "AWS_SESSION_TOKEN"]}
    os.environ.update(S3_ENV)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        os.environ.pop(k, None)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        yield S3Server(endpoint, {"endpoint_url": endpoint})
    finally:
        server.stop()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def dask_scheduler(s3_server):
    """A Dask LocalCluster of 2 worker processes (1 thread each) on 127.0.0.1, started once
    (after the S3 credentials are in the environment, so the workers inherit them);
    yields the scheduler's address."""
    import logging

    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1",
                           dashboard_address=None, silence_logs=logging.ERROR)
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()
