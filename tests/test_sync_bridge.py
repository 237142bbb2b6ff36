"""The sync facade over the async core: an unfinished sync iterator closed on the I/O loop's own thread
(the garbage collector may finalise it there) closes its async iterator without an error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ckpt_archive._sync import iterate_sync, run_sync


def test_an_unfinished_iterator_closed_on_the_io_loop_closes_its_source() -> None:
    closed: list[bool] = []

    async def source() -> AsyncIterator[int]:
        try:
            for i in range(10):
                yield i
        finally:
            closed.append(True)

    items = iterate_sync(source())
    assert next(items) == 0

    async def close_here() -> None:
        items.close()  # raised "sync ckpt_archive API called from inside the I/O loop" before
        for _ in range(5):
            await asyncio.sleep(0)

    run_sync(close_here())
    assert closed == [True]

    elsewhere = iterate_sync(source())
    assert next(elsewhere) == 0
    elsewhere.close()  # from this (non-loop) thread: waits for the source to close
    assert closed == [True, True]
