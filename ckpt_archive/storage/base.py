"""The storage interface: what the archive, sessions and the LangGraph saver ask of a backend.

Keys are '/'-separated strings relative to the store's ``root``. The one primitive the commit
protocol needs is *put-if-absent of a new object* (docs/design/003-storage.md); everything else is
plain get, put, list and delete.

``ObjectStore`` is split in two on purpose:

* the public methods (``get``, ``put_if_absent``, ``list_dir``...) are written once, here: every
  request runs in the one retry loop (``retry.Retry``), failures come out typed, a stored object
  bigger than its kind allows is refused (``limits``), and a put-if-absent whose reply was lost is
  recognised as ours. The archive calls only these;
* the ``_``-prefixed request methods (``_get``, ``_create``, ``_list_dir``...) are what a backend
  implements: one attempt, no retry, errors as the client raises them. A ``WrapperStore`` forwards
  them, so faults, latency and request counts are injected *below* the retry loop and see every
  attempt, on every backend alike.

What differs between backends that callers must know is a capability property, not a kind name.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypedDict, TypeVar

from .. import limits
from ..errors import InvalidIdentifier, ObjectTooLarge
from .failures import absent
from .retry import Retry

T = TypeVar("T")

ObjectKind = Callable[[str], "str | None"]
"""Key -> the kind of object it names (its size bound in ``limits.LIMITS``), None for no bound. The
archive sets its layout's (``engine.root.Root``): storage knows sizes, not what keys mean."""

Listing = dict[str, dict[str, Any]]
"""``find``'s answer: key -> {"size": int, "mtime": UTC datetime or None}."""


class StoreOptions(TypedDict, total=False):
    """What every store takes besides its backend's own arguments."""

    retry: Retry | None
    object_kind: ObjectKind | None


class ObjectStore(abc.ABC):
    """An object store under ``root``; see the module doc for the public/request split."""

    def __init__(
        self, root: str, *, fs: Any = None, retry: Retry | None = None, object_kind: ObjectKind | None = None
    ) -> None:
        self.root = root.rstrip("/")
        self.fs = fs
        """The fsspec filesystem under the store, for readers that hand files to another library
        (pyarrow datasets); None for a store that has none."""
        self.retry = retry if retry is not None else Retry()
        self.object_kind = object_kind

    # -- capabilities --------------------------------------------------------------
    @property
    def conditional_create(self) -> bool:
        """``put_if_absent`` is atomic against other processes (two writers cannot both win)."""
        return True

    @property
    def durable(self) -> bool:
        """What is written outlives this process."""
        return True

    @property
    def batched_puts(self) -> bool:
        """``put_many`` writes its objects in one request of the backend (``_put_many``): local disk,
        whose every write is a job on a thread pool, makes one job of them instead of one per object."""
        return False

    @property
    def retried(self) -> int:
        return self.retry.retried

    @property
    def retries(self) -> int:
        return self.retry.retries

    def path(self, key: str) -> str:
        """Full path of ``key``; a key that could leave the root (``..``, ``.``, ``//``, NUL) is refused."""
        if not key:
            return self.root
        if "\x00" in key or "\\" in key or any(seg in ("", ".", "..") for seg in key.split("/")):
            raise InvalidIdentifier(f"object key {key!r} could leave the archive root")
        return f"{self.root}/{key}" if self.root else key

    # -- the interface -------------------------------------------------------------
    async def get(self, key: str) -> bytes:
        """Bytes of ``key``; FileNotFoundError if absent; ``ObjectTooLarge`` if an archive object is
        bigger than any writer stores for its kind (``limits``), checked before reading it where the
        size is known first (local disk), by a read bounded to one byte past it on object stores, and
        before anyone decodes it elsewhere (memory). An empty object is b"" on every backend."""
        return await self.retry.run(lambda: self._read(key), self.root, key)

    async def get_or_none(self, key: str) -> bytes | None:
        try:
            return await self.get(key)
        except FileNotFoundError:
            return None

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return list(await asyncio.gather(*(self.get_or_none(k) for k in keys)))

    async def get_each(self, keys: Sequence[str]) -> list[bytes | ObjectTooLarge | None]:
        """``get_many``, but an object the store refuses unread (``ObjectTooLarge``: over its kind's
        bound, or not a regular file) comes back as its error in its place: a reader of many objects
        that reports every problem (verify) reports it and reads the others; one that raises, raises
        it when it comes to that object."""

        async def one(key: str) -> bytes | ObjectTooLarge | None:
            try:
                return await self.get_or_none(key)
            except ObjectTooLarge as exc:
                return exc

        return list(await asyncio.gather(*(one(k) for k in keys)))

    async def list_dir(self, prefix: str) -> list[str]:
        """Names directly under ``prefix`` (files and folders), sorted; [] if it does not exist."""
        return await self.retry.run(lambda: self._absent_is([], self._list_dir(prefix)), self.root, prefix)

    async def find(self, prefix: str) -> Listing:
        """Every object under ``prefix`` (recursive): key -> {size, mtime (UTC datetime or None)}."""
        empty: Listing = {}
        return await self.retry.run(lambda: self._absent_is(empty, self._find(prefix)), self.root, prefix)

    async def put(self, key: str, data: bytes) -> None:
        """Write (or replace) ``key`` atomically: readers see the old or the new bytes."""
        await self.retry.run(lambda: self._put(key, data), self.root, key)

    async def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """``put`` of every ``(key, data)``, together: all have landed when it returns (a commit that
        names them may follow). Where the backend ``batched_puts``, in one request (retried whole: a
        put is idempotent); elsewhere each its own request, all at once."""
        if self.batched_puts and len(items) > 1:
            await self.retry.run(lambda: self._put_many(items), self.root, items[0][0])
        else:
            await asyncio.gather(*(self.put(key, data) for key, data in items))

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        """Create ``key`` only if it does not exist; False if it already did (with other bytes).

        If the key holds exactly ``data``, the write was ours: an earlier attempt whose
        reply was lost (timeout after send), retried here or inside the client library.
        """

        async def attempt() -> bool:
            if await self._create(key, data):
                return True
            return await self._absent_is(None, self._read(key)) == data  # absent: not ours either

        return await self.retry.run(attempt, self.root, key)

    async def copy(self, src: str, dst: str) -> None:
        """Copy ``src`` to ``dst``, on the server where the backend can (object stores: S3 CopyObject, GCS rewrite)."""
        await self.retry.run(lambda: self._copy(src, dst), self.root, dst)

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete keys; missing ones are ignored."""
        if keys:
            await self.retry.run(lambda: self._delete(keys), self.root, keys[0])

    async def delete_prefix(self, prefix: str) -> None:
        """Delete everything under ``prefix``; nothing there is fine."""
        await self.retry.run(lambda: self._delete_prefix(prefix), self.root, prefix)

    async def abort_stale_uploads(self, before: datetime, owned: Callable[[str], bool] = lambda key: True) -> int:
        """Abort multipart uploads under the root started before ``before`` (a crashed writer's leave
        nothing visible, but cost storage until aborted) whose key (relative to the root) is ``owned``;
        how many. Not retried: gc runs again."""
        return await self._abort_stale_uploads(before, owned)

    async def _read(self, key: str) -> bytes:
        kind = self.object_kind(key) if self.object_kind is not None else None
        data = await self._get(key, kind)
        if kind is not None:
            limits.check_stored(kind, len(data), key=key)
        return data

    @staticmethod
    async def _absent_is(empty: T, request: Awaitable[T]) -> T:
        """``request``'s answer, or ``empty`` where the key or folder is absent (never the bucket)."""
        try:
            return await request
        except FileNotFoundError as exc:
            if not absent(exc):
                raise
            return empty

    # -- requests: one attempt each, what a backend implements ---------------------
    @abc.abstractmethod
    async def _get(self, key: str, kind: str | None) -> bytes:
        """The bytes; ``kind`` lets a backend that knows the size first refuse before reading."""

    @abc.abstractmethod
    async def _list_dir(self, prefix: str) -> list[str]: ...

    @abc.abstractmethod
    async def _find(self, prefix: str) -> Listing: ...

    @abc.abstractmethod
    async def _put(self, key: str, data: bytes) -> None: ...

    async def _put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """One attempt at every put of ``items`` (a backend with ``batched_puts`` does it in one request)."""
        await asyncio.gather(*(self._put(key, data) for key, data in items))

    @abc.abstractmethod
    async def _create(self, key: str, data: bytes) -> bool:
        """Create ``key`` unless it exists; False if it did."""

    @abc.abstractmethod
    async def _copy(self, src: str, dst: str) -> None: ...

    @abc.abstractmethod
    async def _delete(self, keys: Sequence[str]) -> None:
        """Delete ``keys``, ignoring absent ones."""

    @abc.abstractmethod
    async def _delete_prefix(self, prefix: str) -> None: ...

    async def _abort_stale_uploads(self, before: datetime, owned: Callable[[str], bool]) -> int:
        return 0  # only object stores with multipart uploads have any
