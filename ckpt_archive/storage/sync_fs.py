"""A blocking fsspec filesystem's calls as one-attempt requests, for the stores over one (local
disk, memory://, any other sync filesystem). Each such store *holds* a ``SyncFs`` and calls it for
what it does the generic way; what it does better (local's ``os.link`` create, memory's locked one)
it writes itself. A helper object rather than a base class: a backend sits directly under
``ObjectStore`` and says which calls it takes from here.

``run`` is how a blocking call is made: ``in_thread`` (the default executor, so the event loop is never
blocked) or ``inline`` (memory://, where there is nothing to wait for).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import fsspec

from .base import Listing
from .failures import unless_absent
from .listing import listing, names

T = TypeVar("T")


class Runner(Protocol):
    def __call__(self, fn: Callable[..., T], /, *args: Any) -> Awaitable[T]: ...


async def in_thread(fn: Callable[..., T], /, *args: Any) -> T:
    """``fn(*args)`` in the default executor, or inline once that is shut: at interpreter exit the
    executors refuse new jobs before atexit hooks run, and the exit hook's folds and hints
    (``archive.checkpointer._flush_at_exit``) must still reach local disk."""
    try:
        future = asyncio.get_running_loop().run_in_executor(None, fn, *args)
    except RuntimeError:  # "cannot schedule new futures after (interpreter) shutdown": nothing to wait beside
        return fn(*args)
    return await future


async def inline(fn: Callable[..., T], /, *args: Any) -> T:
    return fn(*args)


class SyncFs:
    """``fs``'s calls on full paths (the store maps keys to paths), each made by ``run``."""

    def __init__(self, fs: fsspec.AbstractFileSystem, run: Runner = in_thread) -> None:
        self.fs = fs
        self.run = run

    async def cat(self, path: str, end: int | None = None) -> bytes:
        """The file's bytes, up to ``end`` (``limits.read_end``: a read never takes more than a bound)."""
        return bytes(await self.run(self.fs.cat_file, path, 0, end))

    async def names(self, path: str) -> list[str]:
        return names(path, await self.run(lambda: self.fs.ls(path, detail=False)))

    async def find(self, path: str, root: str) -> Listing:
        return listing(root, await self.run(lambda: self.fs.find(path, detail=True)))

    async def pipe(self, path: str, data: bytes) -> None:
        await self.run(self.fs.pipe_file, path, data)

    async def cp(self, src: str, dst: str) -> None:
        await self.run(self.fs.cp_file, src, dst)

    async def rm(self, paths: Sequence[str]) -> None:
        """Delete the files at ``paths``, ignoring absent ones."""

        def rm() -> None:
            for p in paths:
                with unless_absent():
                    self.fs.rm_file(p)

        await self.run(rm)

    async def rm_tree(self, path: str) -> None:
        """Delete everything under ``path``; nothing there is fine."""

        def rm() -> None:
            with unless_absent():
                self.fs.rm(path, recursive=True)

        await self.run(rm)
