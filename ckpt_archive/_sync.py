"""The one bridge between the async core and the sync facade.

All archive I/O runs on fsspec's own I/O loop (where s3fs/gcsfs/adlfs sessions
live). Sync callers block on it; async callers await it from their own loop
without blocking that loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import fsspec.asyn

T = TypeVar("T")


def io_loop() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop = fsspec.asyn.get_loop()
    return loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the I/O loop and wait for it (must not be called from that loop)."""
    loop = io_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("sync ckpt_archive API called from inside the I/O loop; use the a* methods")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


async def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the I/O loop from whatever loop the caller runs."""
    loop = io_loop()
    if asyncio.get_running_loop() is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))
