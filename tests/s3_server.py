"""A local S3-compatible object store for tests: moto's server mode on a loopback port, with
s3fs as the client, so `s3://` URLs run the real network code path with no network.

``s3_server`` (session) starts ``ThreadedMotoServer(ip_address="127.0.0.1", port=0)`` and points
every fsspec S3 filesystem at it: dummy credentials go into the environment (botocore reads
them there), the endpoint into ``FSSPEC_S3_ENDPOINT_URL`` (read by fsspec when a new process
imports it, e.g. a Dask worker) and into ``fsspec.config.conf`` (this process, which imported
fsspec already). ``s3_bucket`` (per test) creates a fresh, empty bucket and returns its
``s3://`` URL, so tests never see each other's objects.

A pytest plugin of tests/conftest.py: every test folder can ask for these fixtures.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterator

import pytest

ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
_buckets = itertools.count()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """The endpoint URL (``http://127.0.0.1:<port>``) of a moto S3 server running for the session."""
    pytest.importorskip("s3fs")
    import fsspec.config
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request on stderr (CLI tests read it)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved_conf = dict(fsspec.config.conf.get("s3", {}))
    with pytest.MonkeyPatch.context() as patch:
        for key, value in {**ENV, "FSSPEC_S3_ENDPOINT_URL": endpoint}.items():
            patch.setenv(key, value)
        fsspec.config.conf["s3"] = {**saved_conf, "endpoint_url": endpoint}
        try:
            yield endpoint
        finally:
            fsspec.config.conf["s3"] = saved_conf
            server.stop()


@pytest.fixture
def s3_bucket(s3_server: str) -> str:
    """A new empty bucket on the session's server, as ``s3://<name>``."""
    import s3fs

    name = f"mmcurate-test-{os.getpid()}-{next(_buckets)}"
    fs = s3fs.S3FileSystem(endpoint_url=s3_server, skip_instance_cache=True)
    fs.mkdir(name)
    return f"s3://{name}"
