"""Any synchronous fsspec filesystem, its calls run in the default executor so the event loop is
never blocked. The base of the local-disk and memory stores, which replace what they do better.

On its own (an SFTP server, a WebDAV share...) it has no atomic put-if-absent: ``_create`` is
check-then-set, so two writers could both win and fork a thread. ``open_store`` hands it out only
with ``single_writer=True``, the caller's word that one process writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .base import Listing
from .failures import unless_absent
from .fsspec_base import FsspecStore

T = TypeVar("T")


class BlockingStore(FsspecStore):
    """Files of a blocking fsspec filesystem, for a single writer."""

    @property
    def conditional_create(self) -> bool:
        return False

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    async def _get(self, key: str, kind: str | None) -> bytes:
        return bytes(await self._run(self.fs.cat_file, self.path(key)))

    async def _list_dir(self, prefix: str) -> list[str]:
        path = self.path(prefix)
        return self._names(path, await self._run(lambda: self.fs.ls(path, detail=False)))

    async def _find(self, prefix: str) -> Listing:
        path = self.path(prefix)
        return self._listing(await self._run(lambda: self.fs.find(path, detail=True)))

    async def _put(self, key: str, data: bytes) -> None:
        await self._run(self.fs.pipe_file, self.path(key), data)

    async def _create(self, key: str, data: bytes) -> bool:
        path = self.path(key)
        if await self._run(self.fs.exists, path):  # check-then-set: single writer only
            return False
        await self._run(self.fs.pipe_file, path, data)
        return True

    async def _copy(self, src: str, dst: str) -> None:
        await self._run(self.fs.cp_file, self.path(src), self.path(dst))

    async def _delete(self, keys: Sequence[str]) -> None:
        paths = [self.path(k) for k in keys]

        def rm() -> None:
            for p in paths:
                with unless_absent():
                    self.fs.rm_file(p)

        await self._run(rm)

    async def _delete_prefix(self, prefix: str) -> None:
        path = self.path(prefix)

        def rm() -> None:
            with unless_absent():
                self.fs.rm(path, recursive=True)

        await self._run(rm)
