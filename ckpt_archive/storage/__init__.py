"""The storage layer: an ``ObjectStore`` interface, one implementation per backend family, the retry
loop, and wrappers tests and benchmarks share (docs/design/003-storage.md). It imports nothing from
the archive: what keys mean (their size bounds) is handed to it as ``object_kind``."""

from __future__ import annotations

from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from ..errors import UnsafeBackend
from .base import Listing, ObjectKind, ObjectStore
from .blocking import BlockingStore
from .failures import is_transient, storage_error
from .fsspec_object import OBJECT_STORE_PROTOCOLS, FsspecObjectStore, protocols
from .local import LocalStore
from .memory import MemoryStore
from .retry import Retry
from .wrappers import Crash, FaultPlan, FaultStore, RoundTrips, WrapperStore

__all__ = [
    "BlockingStore",
    "Crash",
    "FaultPlan",
    "FaultStore",
    "FsspecObjectStore",
    "Listing",
    "LocalStore",
    "MemoryStore",
    "ObjectKind",
    "ObjectStore",
    "Retry",
    "RoundTrips",
    "WrapperStore",
    "is_transient",
    "open_store",
    "storage_error",
    "store_for",
]


def open_store(
    url: str | fsspec.AbstractFileSystem,
    storage_options: dict[str, Any] | None = None,
    *,
    root: str = "",
    single_writer: bool = False,
    retry: Retry | None = None,
) -> ObjectStore:
    """The store at ``url`` (or under ``root`` of an fsspec filesystem ``url``). On S3, botocore's own
    retries are off unless ``storage_options`` sets them (``config_kwargs["retries"]``): stacked on
    ours they made an unreachable endpoint take a minute to fail; ``Retry`` alone retries, within
    its time budget."""
    if not isinstance(url, str):
        return store_for(url, root, single_writer=single_writer, retry=retry)
    options = dict(storage_options or {})
    if fsspec.core.split_protocol(url)[0] in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("retries", {"total_max_attempts": 1})  # botocore: attempts, the first included
        options["config_kwargs"] = config
    fs, path = fsspec.core.url_to_fs(url, **options)
    return store_for(fs, path, single_writer=single_writer, retry=retry)


def store_for(
    fs: fsspec.AbstractFileSystem, root: str, *, single_writer: bool = False, retry: Retry | None = None
) -> ObjectStore:
    """The implementation for ``fs``: the one place that looks at what kind of filesystem it is. One
    without an atomic put-if-absent is refused unless ``single_writer`` (the caller's word that only
    one process ever writes), as icechunk's ``unsafe_use_conditional_create`` is a named choice."""
    if isinstance(fs, LocalFileSystem):
        return LocalStore(fs, root, retry=retry)
    if isinstance(fs, MemoryFileSystem):
        return MemoryStore(fs, root, retry=retry)
    if getattr(fs, "async_impl", False) and protocols(fs) & OBJECT_STORE_PROTOCOLS:
        return FsspecObjectStore(fs, root, retry=retry)
    store = BlockingStore(fs, root, retry=retry)
    if not (store.conditional_create or single_writer):
        raise UnsafeBackend(
            f"filesystem {type(fs).__name__} has no atomic put-if-absent: two writers could fork a "
            "thread. Open the archive with single_writer=True if only one process ever writes."
        )
    return store
