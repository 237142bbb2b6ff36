"""An archive object bigger than its kind's bound is refused having downloaded at most the bound.

The object is planted with the raw fsspec filesystem, as anyone who can write the bucket can. What
proves it was not downloaded is the bytes that crossed the wire: each object store is read through
a loopback TCP proxy that counts what the server sent (whatever the client library buffers, nothing
it did not receive can be in memory). On local disk there is no wire: tracemalloc's peak during the
read shows the file was never read (its bytes would be one Python allocation). The proxy also counts
requests (each read is one), so empty, small, exact-bound and missing objects are checked to read as
before, in one request, on every backend.
"""

from __future__ import annotations

import json
import socket
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from typing import Any

import fsspec
import pytest

import ckpt_archive as ca
from ckpt_archive import limits
from ckpt_archive._sync import run_sync
from ckpt_archive.format import layout
from ckpt_archive.storage import RoundTrips, open_store
from tests.conftest import _SERVERS

MARKER_LIMIT = limits.stored_limit("archive marker")  # ~1.07 MiB, the smallest bound
OVERSIZED = 16 << 20


class WireCounter:
    """A TCP proxy on loopback: bytes the server sent (``down``) and HTTP requests (``requests``:
    request lines; the reads it carries have no body, so a body cannot fake one)."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.down = self.requests = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))  # the kernel's pick: no race with other workers
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.down = self.requests = 0

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, down: bool) -> None:
        try:
            while data := src.recv(1 << 16):
                with self._lock:
                    if down:
                        self.down += len(data)
                    else:
                        self.requests += data.count(b" HTTP/1.1\r\n")
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


@dataclass
class Backend:
    """An archive location: ``url`` and ``opts`` read through the counter (if any), ``raw`` and
    ``path`` write around it, as a foreign writer would."""

    name: str
    url: str
    opts: dict[str, Any]
    raw: fsspec.AbstractFileSystem
    path: str
    wire: WireCounter | None = None

    def plant(self, key: str, data: bytes) -> None:
        path = f"{self.path}/{key}"
        self.raw.makedirs(path.rsplit("/", 1)[0], exist_ok=True)  # local disk; a no-op on object stores
        self.raw.pipe_file(path, data)

    def store(self) -> RoundTrips:
        """The store an archive at ``url`` reads through (with the archive's bounds), counting calls."""
        store = open_store(self.url, self.opts)
        store.object_kind = layout.kind_of
        return RoundTrips(store)

    def received(self) -> AbstractContextManager[list[int]]:
        return _on_wire(self.wire) if self.wire is not None else _allocated()


@contextmanager
def _on_wire(wire: WireCounter) -> Iterator[list[int]]:
    wire.reset()
    out: list[int] = []
    try:
        yield out
    finally:
        out.append(wire.down)


@contextmanager
def _allocated() -> Iterator[list[int]]:
    tracemalloc.start()
    out: list[int] = []
    try:
        yield out
    finally:
        out.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


@pytest.fixture(params=["local", "memory", "s3", "gcs", "azure"])
def backend(
    request: pytest.FixtureRequest, archive_url: Callable[..., tuple[str, dict[str, Any]]]
) -> Iterator[Backend]:
    url, opts = archive_url(request.param)
    raw, path = fsspec.core.url_to_fs(url, **opts)
    if request.param in ("local", "memory"):  # no wire: what the read allocates is measured
        yield Backend(request.param, url, opts, raw, path)
        return
    server = request.getfixturevalue(_SERVERS[request.param])
    wire = WireCounter(server.port)
    proxied = json.loads(json.dumps(opts).replace(f"127.0.0.1:{server.port}", f"127.0.0.1:{wire.port}"))
    try:
        yield Backend(request.param, url, proxied, raw, path, wire)
    finally:
        wire.close()


def test_an_oversized_object_is_refused_having_downloaded_at_most_its_bound(backend: Backend) -> None:
    cp = ca.open_archive(backend.url, storage_options=backend.opts)
    cp.save(ca.Checkpoint.new("t", {"a": 1}))
    backend.plant(layout.ARCHIVE_MARKER, b"{" * OVERSIZED)  # 16 MiB, against a bound of ~1.07 MiB
    with backend.received() as received, pytest.raises(ca.ObjectTooLarge, match="archive marker"):
        ca.open_archive(backend.url, storage_options=backend.opts).load("t")
    assert received[0] < MARKER_LIMIT + (256 << 10), (backend.name, received)  # the bound and some replies

    store = backend.store()
    with backend.received() as received, pytest.raises(ca.ObjectTooLarge, match="archive marker object is"):
        run_sync(store.get(layout.ARCHIVE_MARKER))
    assert received[0] < MARKER_LIMIT + (64 << 10), (backend.name, received)
    assert dict(store.requests) == {"get": 1} and store.retried == 0
    if backend.wire is not None:
        assert backend.wire.requests == 1


@pytest.mark.parametrize("size", [0, 5, MARKER_LIMIT, MARKER_LIMIT + 1], ids=["empty", "small", "at-bound", "one-past"])
def test_a_read_within_the_bound_is_whole_and_one_request(backend: Backend, size: int) -> None:
    """Empty (a ranged GET of it is answered 416 on every service), smaller than the range, exactly at
    the bound: the object's bytes, in one request; one byte more is refused. A key with no bound (a
    LangGraph write, a foreign file) is read whole, empty included.

    Each read gets a fresh store (a fresh connection pool): fake-gcs-server closes the connection after
    a 416 without saying so, and the client then resends the *next* request on a new connection."""
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    backend.plant(layout.ARCHIVE_MARKER, data)
    backend.plant("foreign/blob", data)
    for key in (layout.ARCHIVE_MARKER, "foreign/blob"):
        store = backend.store()
        wire = backend.wire
        if wire is not None:
            wire.reset()
        refused = size > MARKER_LIMIT and key != "foreign/blob"
        with pytest.raises(ca.ObjectTooLarge) if refused else nullcontext():
            assert run_sync(store.get(key)) == data
        assert dict(store.requests) == {"get": 1}, (key, store.calls)
        if wire is not None:
            assert wire.requests == 1, key


def test_a_missing_object_is_absent_in_one_request(backend: Backend) -> None:
    store = backend.store()
    for key in (layout.ARCHIVE_MARKER, "foreign/blob"):
        store.reset()
        if backend.wire is not None:
            backend.wire.reset()
        with pytest.raises(FileNotFoundError):
            run_sync(store.get(key))
        assert run_sync(store.get_or_none(key)) is None
        assert dict(store.requests) == {"get": 2}, key
        if backend.wire is not None:
            assert backend.wire.requests == 2, key
