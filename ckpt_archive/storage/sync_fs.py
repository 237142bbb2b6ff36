"""A blocking fsspec filesystem's calls as one-attempt requests, for the stores over one (local
disk, memory://, any other sync filesystem). Each such store *holds* a ``SyncFs`` and calls it for
what it does the generic way; what it does better (local's ``os.link`` create, memory's locked one)
it writes itself. A helper object rather than a base class: a backend sits directly under
``ObjectStore`` and says which calls it takes from here.

``run`` is how a blocking call is made: ``in_thread`` (the default executor, so the event loop is never
blocked) or ``inline`` (memory://, where there is nothing to wait for); ``read`` is how its reads and
listings are made (``run`` unless told): local disk's are ``Batched``, the reads and listings one turn
of the event loop asks for going to the executor as one job.
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


Call = tuple[Callable[..., Any], tuple[Any, ...]]


def _run_all(calls: list[Call]) -> list[tuple[bool, Any]]:
    """Each call in turn, its result or the exception it raised (one call's failure is its own)."""
    out: list[tuple[bool, Any]] = []
    for fn, args in calls:
        try:
            out.append((True, fn(*args)))
        except Exception as exc:
            out.append((False, exc))
    return out


class Batched:
    """A runner making the blocking calls asked for in one turn of an event loop as one executor job,
    each in turn (``submit``: ``in_thread``), so that the loop waits on one thread-pool hop and one
    wake-up for them, not one each. A ``get_tuple`` asks in one turn for the probe of the next commit
    and the listing of the head's writes, a cold read for the hint and the commits after it: on local
    disk each is a fraction of the hop. For reads and listings of one folder only (fast, never
    blocking: a local read refuses a FIFO or a device before it opens it, and opens with
    ``O_NONBLOCK``, ``local.py``): writes keep their own jobs, so that one caller's fsync never waits
    behind another's, and so does the recursive walk (``find_local``: a whole tree, for gc or verify),
    so that no read waits behind it."""

    def __init__(self, submit: Runner = in_thread) -> None:
        self.submit = submit
        self._pending: dict[asyncio.AbstractEventLoop, list[tuple[Call, asyncio.Future[Any]]]] = {}

    async def __call__(self, fn: Callable[..., T], /, *args: Any) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        batch = self._pending.get(loop)
        if batch is None:
            batch = self._pending[loop] = []
            loop.call_soon(self._flush, loop, self.TURNS)
        batch.append(((fn, args), future))
        return await future

    TURNS = 2
    """Turns of the loop a batch waits for more calls before it goes: a call one caller makes after a
    hop through a task of its own (``asyncio.gather`` wraps each awaitable in a task, which starts a
    turn later) joins the batch of a call another made a turn before (a ``get_tuple``'s probe, behind
    the root check's ``gather``, and its listing of the head's writes). A turn is a pass over the
    loop's ready callbacks, microseconds, where a thread-pool hop and its wake-up are a tenth of a
    millisecond or more."""

    def _flush(self, loop: asyncio.AbstractEventLoop, turns: int) -> None:
        if turns > 1:
            loop.call_soon(self._flush, loop, turns - 1)
            return
        batch = self._pending.pop(loop)
        task = loop.create_task(self._run(batch))
        _running.add(task)  # held until done (the loop keeps only a weak reference)
        task.add_done_callback(_running.discard)

    async def _run(self, batch: list[tuple[Call, asyncio.Future[Any]]]) -> None:
        try:
            results = await self.submit(_run_all, [call for call, _ in batch])
        except BaseException as exc:  # the executor refused the job (shut down), or a crash in it
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), (ok, value) in zip(batch, results, strict=True):
            if future.done():  # its caller was cancelled meanwhile
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


_running: set[asyncio.Task[None]] = set()


class SyncFs:
    """``fs``'s calls on full paths (the store maps keys to paths), each made by ``run`` (reads and
    one-folder listings by ``read``, ``run`` unless told; a recursive ``find`` keeps ``run``: no read
    batched with it waits behind a whole tree)."""

    def __init__(self, fs: fsspec.AbstractFileSystem, run: Runner = in_thread, read: Runner | None = None) -> None:
        self.fs = fs
        self.run = run
        self.read = run if read is None else read

    async def cat(self, path: str, end: int | None = None) -> bytes:
        """The file's bytes, up to ``end`` (``limits.read_end``: a read never takes more than a bound)."""
        return bytes(await self.read(self.fs.cat_file, path, 0, end))

    async def names(self, path: str) -> list[str]:
        return names(path, await self.read(lambda: self.fs.ls(path, detail=False)))

    async def find(self, path: str, root: str) -> Listing:
        return listing(root, await self.run(lambda: self.fs.find(path, detail=True)))  # a whole tree: its own job

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
