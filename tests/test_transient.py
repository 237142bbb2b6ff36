"""Transient storage errors are retried; an ambiguous commit (reply lost after the write) resolves to ours.

Faults are injected at the real S3 server (moto over HTTP), so the whole client stack
(botocore, s3fs, our ObjectStore) sees genuine error replies.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest

import ckpt_archive as ca
from ckpt_archive.format import layout
from ckpt_archive.storage import is_transient
from ckpt_archive.testing import FaultProxy, S3Server

_ids = itertools.count()


def wrapped(cause: BaseException) -> OSError:
    """How fsspec backends surface a client error: an OSError whose __cause__ is the original."""
    try:
        raise OSError("backend error") from cause
    except OSError as exc:
        return exc


def test_classification_of_real_client_errors() -> None:
    from azure.core.exceptions import HttpResponseError, ServiceRequestError
    from botocore.exceptions import ClientError
    from gcsfs.retry import HttpError

    def s3(code: str, status: int) -> ClientError:
        return ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")

    azure_busy = HttpResponseError(message="busy")
    azure_busy.status_code = 503
    for exc in (
        s3("SlowDown", 503),
        s3("ConditionalRequestConflict", 409),
        s3("InternalError", 500),
        HttpError({"code": 429, "message": "rate"}),
        HttpError({"code": 503, "message": "backend"}),
        azure_busy,
        ServiceRequestError("connection reset"),
        ConnectionResetError(),
        TimeoutError(),
    ):
        assert is_transient(exc), exc
        assert is_transient(wrapped(exc)), exc
    for exc in (
        s3("AccessDenied", 403),
        s3("PreconditionFailed", 412),
        HttpError({"code": 404, "message": "nope"}),
        FileNotFoundError("x"),
        FileExistsError("x"),
        PermissionError("x"),
        ValueError("x"),
    ):
        assert not is_transient(exc), exc
        assert not is_transient(wrapped(exc)), exc


@pytest.fixture
def s3_archive(s3_server: S3Server) -> tuple[ca.ArchiveCheckpointer, S3Server]:
    bucket = f"transient-{uuid.uuid4().hex[:16]}"  # unique: the id() of a freed object repeats
    url = s3_server.make_bucket(bucket) + "/archive"
    return ca.open_archive(url, storage_options=s3_server.storage_options()), s3_server


def saves(cp: ca.ArchiveCheckpointer, n: int, start: int = 0) -> list[ca.Checkpoint]:
    out = []
    for step in range(start, start + n):
        ckpt = ca.Checkpoint.new("t", {"step": step, "items": list(range(step))}, step=step)
        cp.save(ckpt)
        out.append(ckpt)
    return out


@pytest.mark.parametrize(
    ("status", "code", "count"),
    [
        pytest.param(503, "SlowDown", 1, marks=pytest.mark.soak),  # botocore's own backoff: slow
        (409, "ConditionalRequestConflict", 2),
    ],
)
def test_transient_errors_on_commit_are_retried(s3_archive: Any, status: int, code: str, count: int) -> None:
    cp, server = s3_archive
    first = saves(cp, 1)
    server.inject(status, code, count=count, path=layout.log_key("t", 2))
    second = saves(cp, 1, start=1)
    assert server.faults_left() == 0
    if code == "ConditionalRequestConflict":  # botocore does not retry a 409: our backoff did
        assert cp.store.retried == count
    assert [i.checkpoint_id for i in cp.list("t")] == [first[0].checkpoint_id, second[0].checkpoint_id]
    assert ca.open_archive(cp.url, storage_options=server.storage_options()).load("t").state == second[0].state


def test_transient_errors_on_reads_are_retried(s3_archive: Any) -> None:
    cp, server = s3_archive
    saved = saves(cp, 3)
    server.inject(503, "SlowDown", count=1, method="GET")
    again = ca.open_archive(cp.url, storage_options=server.storage_options())
    assert again.load("t").state == saved[-1].state  # type: ignore[union-attr]
    assert server.faults_left() == 0


def test_ambiguous_commit_resolves_to_our_own(s3_archive: Any) -> None:
    """The commit lands but its reply is an error: the retry finds our own bytes and reports success."""
    cp, server = s3_archive
    saves(cp, 1)
    server.inject(500, "InternalError", count=1, path=layout.log_key("t", 2), after=True)
    second = saves(cp, 1, start=1)[0]
    assert server.faults_left() == 0
    infos = cp.list("t")
    assert [i.checkpoint_id for i in infos][-1] == second.checkpoint_id and len(infos) == 2
    third = saves(cp, 1, start=2)[0]
    assert ca.open_archive(cp.url, storage_options=server.storage_options()).load("t").state == third.state
    assert ca.open_archive(cp.url, storage_options=server.storage_options()).verify().ok


def test_permanent_errors_are_not_retried(s3_archive: Any) -> None:
    cp, server = s3_archive
    saves(cp, 1)
    server.inject(403, "AccessDenied", count=1, path=layout.log_key("t", 2))
    before = cp.store.retried
    with pytest.raises(OSError):
        saves(cp, 1, start=1)
    assert cp.store.retried == before
    assert len(cp.list("t")) == 1


GCS_503 = (b'{"error": {"code": 503, "message": "injected"}}', {"Content-Type": "application/json"})
AZURE_503 = (
    b'<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>injected</Message></Error>',
    {"Content-Type": "application/xml", "x-ms-error-code": "ServerBusy"},
)


def through_proxy(request: pytest.FixtureRequest, backend: str) -> tuple[str, dict[str, Any], FaultProxy]:
    """A fresh bucket on the real emulator, reached through a FaultProxy."""
    server: Any = request.getfixturevalue("gcs_server" if backend == "gcs" else "azure_server")
    url = server.make_bucket(f"proxied-{next(_ids)}") + "/archive"
    proxy = FaultProxy(server.port).start()
    request.addfinalizer(proxy.stop)
    opts = server.storage_options()
    if backend == "gcs":
        opts = {**opts, "endpoint_url": proxy.endpoint}
    else:
        opts = {**opts, "connection_string": server.connection_string().replace(str(server.port), str(proxy.port))}
    return url, opts, proxy


def lost_reply_and_transient(request: pytest.FixtureRequest, backend: str) -> None:
    url, opts, proxy = through_proxy(request, backend)
    body, headers = GCS_503 if backend == "gcs" else AZURE_503
    cp = ca.open_archive(url, storage_options=opts)
    cp.save(ca.Checkpoint.new("t", {"a": 0}))
    # the commit lands, its reply is a 503: the client retries, finds the key, and we recognise our bytes
    proxy.inject(503, body, headers=headers, method="*", path=layout.log_key("t", 2), after=True)
    cp.save(ca.Checkpoint.new("t", {"a": 1}, step=1))
    # a 503 that was not applied: retried
    proxy.inject(503, body, headers=headers, method="*", path=layout.log_key("t", 3))
    last = ca.Checkpoint.new("t", {"a": 2}, step=2)
    cp.save(last)
    assert proxy.faults_left() == 0
    fresh = ca.open_archive(url, storage_options=opts)
    assert [i.step for i in fresh.list("t")] == [0, 1, 2]
    assert fresh.load("t").state == last.state  # type: ignore[union-attr]
    assert fresh.verify().ok


def test_gcs_lost_reply_and_transient_errors(request: pytest.FixtureRequest) -> None:
    lost_reply_and_transient(request, "gcs")


@pytest.mark.soak  # the Azure SDK waits ~15 s before retrying a 503
def test_azure_lost_reply_and_transient_errors(request: pytest.FixtureRequest) -> None:
    lost_reply_and_transient(request, "azure")
