"""``memory://``: fsspec's process-wide in-memory filesystem (every ``open_store("memory://x")`` of the
process sees the same objects). Calls run inline, there is nothing to wait for. Its own
``pipe_file(mode="create")`` is check-then-set, not atomic; here one process-wide lock makes it so.
The check is a dict lookup: ``exists`` looks at every key of the process, which made building a
large archive in memory quadratic.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Unpack

import fsspec

from .. import limits
from .base import Listing, ObjectStore, StoreOptions
from .sync_fs import SyncFs, inline

_memory_lock = threading.Lock()


class MemoryStore(ObjectStore):
    """Objects in this process's memory: for tests, demos and benchmarks; gone when it exits."""

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, **options: Unpack[StoreOptions]) -> None:
        super().__init__(root, fs=fs, **options)
        self._files = SyncFs(fs, inline)

    @property
    def durable(self) -> bool:
        return False

    async def _get(self, key: str, kind: str | None) -> bytes:
        return limits.check_cut(kind, await self._files.cat(self.path(key), limits.read_end(kind)), key=key)

    async def _list_dir(self, prefix: str) -> list[str]:
        return await self._files.names(self.path(prefix))

    async def _find(self, prefix: str) -> Listing:
        return await self._files.find(self.path(prefix), self.root)

    async def _put(self, key: str, data: bytes) -> None:
        await self._files.pipe(self.path(key), data)

    async def _create(self, key: str, data: bytes) -> bool:
        path = self.fs._strip_protocol(self.path(key))
        with _memory_lock:
            if path in self.fs.store:  # not ``exists``: that scans every key of the process
                return False
            self.fs.pipe_file(path, data)
        return True

    async def _copy(self, src: str, dst: str) -> None:
        await self._files.cp(self.path(src), self.path(dst))

    async def _delete(self, keys: Sequence[str]) -> None:
        await self._files.rm([self.path(k) for k in keys])

    async def _delete_prefix(self, prefix: str) -> None:
        await self._files.rm_tree(self.path(prefix))
