"""Object store over any fsspec filesystem: get, put, put-if-absent, list, delete.

The one primitive the commit protocol needs is *put-if-absent of a new object*
(see ../shared notes and docs/FORMAT.md). How each backend gets it:

* async object stores (s3fs, gcsfs, adlfs): ``_pipe_file(mode="create")``, which
  sends ``If-None-Match: *`` / ``ifGenerationMatch=0`` / an Azure condition;
* local disk: write a temp file in the same directory, fsync, ``os.link`` it to
  the final name (fails if it exists), unlink the temp file;
* ``memory://``: a process-wide lock around check-then-set;
* anything else: refused for multi-writer use unless ``single_writer=True``.

Everything is async; blocking filesystems run in the default executor so the
event loop is never blocked.

Transient failures (throttling, 5xx, 409 ConditionalRequestConflict, connection
resets, timeouts) are retried here, and only here, with full-jitter exponential backoff
within a time budget (``open_store`` turns the S3 client's own retries off, so an
unreachable endpoint fails in seconds, not a minute). A put-if-absent whose outcome is
unknown (the request may have landed before the error) is resolved on retry: if the
key now holds exactly our bytes, the write was ours.

A failure that is left is raised as a typed ``StorageError`` (``storage_error``: full,
read-only, access denied, no credentials, no bucket, unavailable) whose one-line
message says what to do; an absent key stays a ``FileNotFoundError``, the answer the
layers above ask for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import fsspec
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from .. import limits
from ..errors import InvalidIdentifier, UnsafeBackend
from .failures import absent, storage_error, unless_absent
from .failures import is_transient as is_transient  # re-exported: callers classify errors here
from .layout import kind_of

T = TypeVar("T")
_memory_lock = threading.Lock()
_OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "abfs", "az", "abfss", "adl"}


def _protocols(fs: fsspec.AbstractFileSystem) -> set[str]:
    proto = fs.protocol
    return {proto} if isinstance(proto, str) else set(proto)


class ObjectStore:
    """Keys are '/'-separated strings relative to ``root``."""

    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        root: str,
        *,
        single_writer: bool = False,
        retries: int = 6,
        backoff: float = 0.05,
        max_backoff: float = 2.0,
        retry_budget: float = 10.0,
    ) -> None:
        self.fs = fs
        self.root = root.rstrip("/")
        self.single_writer = single_writer
        self.retries, self.backoff, self.max_backoff = retries, backoff, max_backoff
        self.retry_budget = retry_budget  # seconds: no retry starts later than this after the first attempt
        self.retried = 0  # transient failures retried so far (for tests and diagnostics)
        if isinstance(fs, LocalFileSystem):
            self.kind = "local"
        elif isinstance(fs, MemoryFileSystem):
            self.kind = "memory"
        elif getattr(fs, "async_impl", False) and _protocols(fs) & _OBJECT_STORES:
            self.kind = "object"
        else:
            self.kind = "generic"
            if not single_writer:
                raise UnsafeBackend(
                    f"filesystem {type(fs).__name__} has no atomic put-if-absent: two writers could fork a "
                    "thread. Open the archive with single_writer=True if only one process ever writes."
                )

    @property
    def conditional_writes(self) -> bool:
        return self.kind != "generic"

    def path(self, key: str) -> str:
        """Full path of ``key``; a key that could leave the root (``..``, ``.``, ``//``, NUL) is refused."""
        if not key:
            return self.root
        if "\x00" in key or "\\" in key or any(seg in ("", ".", "..") for seg in key.split("/")):
            raise InvalidIdentifier(f"object key {key!r} could leave the archive root")
        return f"{self.root}/{key}" if self.root else key

    async def _retry(self, fn: Callable[[], Awaitable[T]], key: str) -> T:
        """Run ``fn`` (a request about ``key``), retrying transient failures with full-jitter exponential
        backoff within ``retry_budget``; what fails in the end is raised typed (``storage_error``)."""
        attempt, started = 0, time.monotonic()
        while True:
            try:
                return await fn()
            except Exception as exc:
                delay = random.uniform(0, min(self.max_backoff, self.backoff * 2**attempt))
                late = time.monotonic() + delay - started > self.retry_budget
                if attempt >= self.retries or late or not is_transient(exc):
                    typed = storage_error(exc, self.root, key, attempt + 1)
                    if typed is None:
                        raise
                    raise typed from exc
            attempt += 1
            self.retried += 1
            await asyncio.sleep(delay)

    async def _blocking(self, fn: Callable[..., T], *args: Any) -> T:
        if self.kind == "memory":
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    # -- reads -----------------------------------------------------------------
    async def get(self, key: str) -> bytes:
        """Bytes of ``key``; FileNotFoundError if absent; ``ObjectTooLarge`` if an archive object is
        bigger than any writer stores for its kind (``limits``), checked before reading it where the
        size is known first (local disk, memory) and before anyone decodes it elsewhere."""
        return await self._retry(lambda: self._get(key), key)

    async def _get(self, key: str) -> bytes:
        path = self.path(key)
        kind = kind_of(key)
        if self.kind == "object":
            data = await self.fs._cat_file(path, start=0)  # start=0: one GET, no sizing HEAD
        elif self.kind == "local":
            data = await self._blocking(_read_local, path, kind, key)
        else:
            data = await self._blocking(self.fs.cat_file, path)
        if kind is not None:
            limits.check_stored(kind, len(data), key=key)
        return bytes(data)

    async def get_or_none(self, key: str) -> bytes | None:
        try:
            return await self.get(key)
        except FileNotFoundError:
            return None

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return list(await asyncio.gather(*(self.get_or_none(k) for k in keys)))

    async def list_dir(self, prefix: str) -> list[str]:
        """Names directly under ``prefix`` (files and folders); [] if it does not exist."""
        return await self._retry(lambda: self._list_dir(prefix), prefix)

    async def _list_dir(self, prefix: str) -> list[str]:
        path = self.path(prefix)
        try:
            if self.kind == "object":
                # adlfs ignores ``refresh`` (its flag is ``invalidate_cache``): drop the listing cache for all
                self.fs.invalidate_cache(path)
                if "s3" in _protocols(self.fs):
                    # s3fs's ``_ls`` lists the parent again when a folder is empty (is it a file?):
                    # a second, possibly long LIST for every empty folder. One LIST is enough here.
                    entries = [e["name"] for e in await self.fs._lsdir(path, refresh=True)]
                else:
                    entries = await self.fs._ls(path, detail=False, refresh=True)
            else:
                entries = await self._blocking(lambda: self.fs.ls(path, detail=False))
        except FileNotFoundError as exc:
            if not absent(exc):
                raise
            return []
        base = path.rstrip("/") + "/"
        names = []
        for e in entries:
            e = e.rstrip("/")
            if self.kind == "memory" and not e.startswith("/") and base.startswith("/"):
                e = "/" + e
            name = e[len(base) :] if e.startswith(base) else e.rsplit("/", 1)[-1]
            if name and "/" not in name:
                names.append(name)
        return sorted(set(names))

    async def find(self, prefix: str) -> dict[str, dict[str, Any]]:
        """Every object under ``prefix`` (recursive): key -> {size, mtime (UTC datetime or None)}."""
        return await self._retry(lambda: self._find(prefix), prefix)

    async def _find(self, prefix: str) -> dict[str, dict[str, Any]]:
        path = self.path(prefix)
        try:
            if self.kind == "object":
                found = await self.fs._find(path, detail=True)
            else:
                found = await self._blocking(lambda: self.fs.find(path, detail=True))
        except FileNotFoundError as exc:
            if not absent(exc):
                raise
            return {}
        out: dict[str, dict[str, Any]] = {}
        root = self.root.lstrip("/") + "/"
        for p, info in found.items():
            rel = p.lstrip("/")
            rel = rel[len(root) :] if rel.startswith(root) else rel
            out[rel] = {"size": int(info.get("size") or 0), "mtime": _mtime(info)}
        return out

    # -- writes ----------------------------------------------------------------
    async def put(self, key: str, data: bytes) -> None:
        """Write (or replace) ``key`` atomically: readers see the old or the new bytes."""
        await self._retry(lambda: self._put(key, data), key)

    async def _put(self, key: str, data: bytes) -> None:
        path = self.path(key)
        if self.kind == "object":
            await self.fs._pipe_file(path, data)
        elif self.kind == "local":
            await self._blocking(_write_local, path, data, False)
        else:
            await self._blocking(self.fs.pipe_file, path, data)

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        """Create ``key`` only if it does not exist; False if it already did (with other bytes).

        If the key holds exactly ``data``, the write was ours: an earlier attempt whose
        reply was lost (timeout after send), retried here or inside the client library.
        """

        async def attempt() -> bool:
            if await self._create(key, data):
                return True
            return await self._get_or_none_once(key) == data

        return await self._retry(attempt, key)

    async def _get_or_none_once(self, key: str) -> bytes | None:
        try:
            return await self._get(key)
        except FileNotFoundError as exc:
            if not absent(exc):
                raise
            return None

    async def _create(self, key: str, data: bytes) -> bool:
        path = self.path(key)
        try:
            if self.kind == "object":
                await self.fs._pipe_file(path, data, mode="create")
            elif self.kind == "local":
                await self._blocking(_write_local, path, data, True)
            elif self.kind == "memory":
                with _memory_lock:
                    if self.fs.exists(path):
                        return False
                    self.fs.pipe_file(path, data)
            else:  # single_writer generic backend: check-then-set is all there is
                if await self._blocking(self.fs.exists, path):
                    return False
                await self._blocking(self.fs.pipe_file, path, data)
        except FileExistsError:
            return False
        return True

    async def copy(self, src: str, dst: str) -> None:
        """Copy ``src`` to ``dst`` on the server where the filesystem can (S3 CopyObject, GCS rewrite...)."""
        await self._retry(lambda: self._copy(src, dst), dst)

    async def _copy(self, src: str, dst: str) -> None:
        if self.kind == "object":
            await self.fs._cp_file(self.path(src), self.path(dst))
        elif self.kind == "local":
            await self._blocking(_copy_local, self.path(src), self.path(dst))
        else:
            await self._blocking(self.fs.cp_file, self.path(src), self.path(dst))

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete keys; missing ones are ignored."""
        await self._retry(lambda: self._delete(keys), keys[0] if keys else "")

    async def _delete(self, keys: Sequence[str]) -> None:
        paths = [self.path(k) for k in keys]
        if not paths:
            return
        if self.kind == "object":
            with unless_absent():
                await self.fs._rm(paths)
            return

        def rm() -> None:
            for p in paths:
                with unless_absent():
                    self.fs.rm_file(p)

        await self._blocking(rm)

    async def delete_prefix(self, prefix: str) -> None:
        await self._retry(lambda: self._delete_prefix(prefix), prefix)

    async def _delete_prefix(self, prefix: str) -> None:
        path = self.path(prefix)
        with unless_absent():
            if self.kind == "object":
                await self.fs._rm(path, recursive=True)
            else:
                await self._blocking(lambda: self.fs.rm(path, recursive=True))


def open_store(url: str, storage_options: dict[str, Any] | None = None, *, single_writer: bool = False) -> ObjectStore:
    """The store at ``url``. On S3, botocore's own retries are off unless ``storage_options`` sets them
    (``config_kwargs["retries"]``): stacked on ours they made an unreachable endpoint take a minute to
    fail; ``_retry`` alone retries, within its time budget."""
    options = dict(storage_options or {})
    if fsspec.core.split_protocol(url)[0] in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("retries", {"total_max_attempts": 1})  # botocore: attempts, the first included
        options["config_kwargs"] = config
    fs, root = fsspec.core.url_to_fs(url, **options)
    return ObjectStore(fs, root, single_writer=single_writer)


def _mtime(info: dict[str, Any]) -> datetime | None:
    for field in ("LastModified", "mtime", "updated", "last_modified", "created"):
        value = info.get(field)
        if value is None:
            continue
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
                return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def _read_local(path: str, kind: str | None = None, key: str | None = None) -> bytes:
    """The file's bytes; a file too big for an archive object of ``kind`` is refused unread."""
    with open(path, "rb") as f:
        if kind is not None:
            limits.check_stored(kind, os.fstat(f.fileno()).st_size, key=key)
        return f.read()


def _copy_local(src: str, dst: str) -> None:
    _write_local(dst, _read_local(src), False)


def _write_local(path: str, data: bytes, exclusive: bool) -> None:
    """Temp file in the same directory + fsync, then link (exclusive) or rename (replace)."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            os.link(tmp, path)
        else:
            os.replace(tmp, path)
            tmp = ""
    finally:
        if tmp:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
