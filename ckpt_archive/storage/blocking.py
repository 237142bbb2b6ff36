"""Any other synchronous fsspec filesystem (an SFTP server, a WebDAV share...), its calls run in the
default executor so the event loop is never blocked.

It has no atomic put-if-absent: ``_create`` is check-then-set, so two writers could both win and
fork a thread. ``open_store`` hands it out only with ``single_writer=True``, the caller's word that
one process writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

import fsspec

from .. import limits
from .base import Listing, ObjectStore, StoreOptions
from .sync_fs import SyncFs


class BlockingStore(ObjectStore):
    """Files of a blocking fsspec filesystem, for a single writer."""

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, **options: Unpack[StoreOptions]) -> None:
        super().__init__(root, fs=fs, **options)
        self._files = SyncFs(fs)

    @property
    def conditional_create(self) -> bool:
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
        path = self.path(key)
        if await self._files.run(self.fs.exists, path):  # check-then-set: single writer only
            return False
        await self._files.pipe(path, data)
        return True

    async def _copy(self, src: str, dst: str) -> None:
        await self._files.cp(self.path(src), self.path(dst))

    async def _delete(self, keys: Sequence[str]) -> None:
        await self._files.rm([self.path(k) for k in keys])

    async def _delete_prefix(self, prefix: str) -> None:
        await self._files.rm_tree(self.path(prefix))
