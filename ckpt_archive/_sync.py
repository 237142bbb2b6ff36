"""The one bridge between the async core and the sync facade.

All archive I/O runs on fsspec's own I/O loop (where s3fs/gcsfs/adlfs sessions
live). Sync callers block on it; async callers await it from their own loop
without blocking that loop.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar, cast

import fsspec.asyn

T = TypeVar("T")
_END = object()


def io_loop() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop = fsspec.asyn.get_loop()
    return loop


def _on_io_loop() -> bool:
    """Is the caller running on the I/O loop's own thread (where nothing may wait for that loop)?"""
    try:
        return asyncio.get_running_loop() is io_loop()
    except RuntimeError:
        return False


def _loop_stopped() -> bool:
    """Is the interpreter shutting down? fsspec's I/O thread is a daemon: from then on it never runs
    again, so a wait for the loop would never end (a finalizer or an unfinished iterator closed then)."""
    return sys.is_finalizing()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the I/O loop and wait for it (must not be called from that loop)."""
    loop = io_loop()
    if _on_io_loop():
        coro.close()
        raise RuntimeError("sync ckpt_archive API called from inside the I/O loop; use the a* methods")
    if _loop_stopped():
        coro.close()
        raise RuntimeError("sync ckpt_archive API called while the interpreter shuts down; call it before exit")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


async def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the I/O loop from whatever loop the caller runs."""
    loop = io_loop()
    if asyncio.get_running_loop() is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


async def _next(agen: AsyncIterator[T]) -> T | object:
    try:
        return await agen.__anext__()
    except StopAsyncIteration:
        return _END


_closing: set[asyncio.Task[Any]] = set()


def iterate_sync(agen: AsyncIterator[T]) -> Iterator[T]:
    """Drive an async iterator living on the I/O loop from sync code, one item at a time."""
    try:
        while True:
            item = run_sync(_next(agen))
            if item is _END:
                return
            yield cast(T, item)
    finally:
        aclose = getattr(agen, "aclose", None)
        if aclose is not None:
            if _on_io_loop():  # left unfinished and collected on the I/O loop's own thread: cannot wait
                task = io_loop().create_task(aclose())
                _closing.add(task)
                task.add_done_callback(_closing.discard)
            elif not _loop_stopped():  # at exit nothing can run it, and an ending process frees everything
                run_sync(aclose())


async def iterate_async(agen: AsyncIterator[T]) -> AsyncIterator[T]:
    """The same from any event loop: every step runs on the I/O loop."""
    try:
        while True:
            item = await run_async(_next(agen))
            if item is _END:
                return
            yield cast(T, item)
    finally:
        aclose = getattr(agen, "aclose", None)
        if aclose is not None:
            await run_async(aclose())
