from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import ckpt_archive as ca
from ckpt_archive.testing import S3Server

_bucket_ids = itertools.count()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture
def s3_url(s3_server: S3Server) -> str:
    return s3_server.make_bucket(f"bucket-{next(_bucket_ids)}") + "/archive"


BACKENDS = ["local", "memory", "s3"]


@pytest.fixture
def archive_url(request: pytest.FixtureRequest, tmp_path: Any) -> Callable[..., tuple[str, dict[str, Any]]]:
    """A factory of fresh archive URLs (with storage options) for a backend name."""

    def make(backend: str) -> tuple[str, dict[str, Any]]:
        if backend == "local":
            return str(tmp_path / f"archive-{next(_bucket_ids)}"), {}
        if backend == "memory":
            return f"memory://archive-{next(_bucket_ids)}", {}
        server: S3Server = request.getfixturevalue("s3_server")
        return server.make_bucket(f"bucket-{next(_bucket_ids)}") + "/archive", server.storage_options()

    return make


def open_backend(make: Callable[..., tuple[str, dict[str, Any]]], backend: str, **kw: Any) -> ca.ArchiveCheckpointer:
    url, opts = make(backend)
    return ca.open_archive(url, storage_options=opts, **kw)
