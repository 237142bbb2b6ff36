"""Local disk. Put-if-absent: write a temp file in the *same directory*, fsync it, then
``os.link`` it to the final name, which fails if that exists; readers never see a half-written
file. (``open("xb")`` would let them; ``LocalFileSystem.mv`` silently overwrites.) A plain put
renames the temp file over the old one, so readers see the old or the new bytes.

Reads check the size an ``fstat`` gives before reading: a file too big for its kind is refused unread.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Sequence
from typing import Unpack

import fsspec

from .. import limits
from .base import Listing, ObjectStore, StoreOptions
from .sync_fs import SyncFs


class LocalStore(ObjectStore):
    """Files under a local directory: reads and writes its own, listings and deletes ``SyncFs``'s."""

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, **options: Unpack[StoreOptions]) -> None:
        super().__init__(root, fs=fs, **options)
        self._files = SyncFs(fs)

    async def _get(self, key: str, kind: str | None) -> bytes:
        return await self._files.run(_read_local, self.path(key), kind, key)

    async def _list_dir(self, prefix: str) -> list[str]:
        return await self._files.names(self.path(prefix))

    async def _find(self, prefix: str) -> Listing:
        return await self._files.find(self.path(prefix), self.root)

    async def _put(self, key: str, data: bytes) -> None:
        await self._files.run(_write_local, self.path(key), data, False)

    async def _create(self, key: str, data: bytes) -> bool:
        try:
            await self._files.run(_write_local, self.path(key), data, True)
        except FileExistsError:
            return False
        return True

    async def _copy(self, src: str, dst: str) -> None:
        await self._files.run(_copy_local, self.path(src), self.path(dst))

    async def _delete(self, keys: Sequence[str]) -> None:
        await self._files.rm([self.path(k) for k in keys])

    async def _delete_prefix(self, prefix: str) -> None:
        await self._files.rm_tree(self.path(prefix))


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
