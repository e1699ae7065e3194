"""A real S3 HTTP API for tests: moto's server on a local port, in a thread of the test process.

pyarrow's own S3 client talks to it, pointed there only through the standard ``AWS_*`` variables,
so the code under test opens ``s3://`` URIs exactly as it does against AWS. moto is a
pip-installable pure-Python server (``moto[server]``, in the test extra): no container, no
binary download. Shared by the storage tests and the Spark engine's S3 tests (the ``s3_env`` and
``bucket`` fixtures of tests/conftest.py start it)."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

ACCESS_KEY, SECRET_KEY, REGION = "statemorph", "statemorph-secret", "us-east-1"


@contextmanager
def s3_server() -> Iterator[dict[str, str]]:
    """Start the server and set the standard variables that point pyarrow (and the AWS SDK) at
    it; yields those variables (``AWS_EC2_METADATA_DISABLED`` keeps the SDK from ever asking an
    instance-metadata address for credentials). Restores the environment afterwards."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": ACCESS_KEY,
           "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def s3_filesystem(env: dict[str, str]) -> Any:
    """pyarrow's S3 filesystem for the server, with its keys given explicitly (so it carries
    them when pickled to a Spark executor)."""
    return pafs.S3FileSystem(endpoint_override=env["AWS_ENDPOINT_URL"], allow_bucket_creation=True,
                             access_key=env["AWS_ACCESS_KEY_ID"], secret_key=env["AWS_SECRET_ACCESS_KEY"],
                             region=REGION)


def new_bucket(env: dict[str, str], test_name: str) -> str:
    """A fresh bucket named after the test (created through pyarrow's own S3 client); a digest of
    the whole name keeps the parameters of one test apart."""
    digest = hashlib.sha256(test_name.encode()).hexdigest()[:8]
    name = "sm-" + re.sub(r"[^a-z0-9]+", "-", test_name.lower())[:40].strip("-") + "-" + digest
    s3_filesystem(env).create_dir(name)
    return name


def upload(local: Path, uri: str) -> None:
    """Copy a local directory under the prefix ``uri``."""
    fs, path = pafs.FileSystem.from_uri(uri)
    pafs.copy_files(str(local), path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)


def tree(uri_or_path: str) -> dict[str, bytes]:
    """Every file of a savepoint (a URI or a local path) by relative name: what a byte-for-byte
    comparison of two results needs."""
    from statemorph.savepoint.storage import local_source

    with local_source(uri_or_path) as local:
        return {p.relative_to(local).as_posix(): p.read_bytes() for p in Path(local).rglob("*") if p.is_file()}
