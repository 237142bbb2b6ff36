"""``memory://``: fsspec's process-wide in-memory filesystem (every ``open_store("memory://x")`` of the
process sees the same objects). Calls run inline, there is nothing to wait for. Its own
``pipe_file(mode="create")`` is check-then-set, not atomic; here one process-wide lock makes it so.
The check is a dict lookup: ``exists`` looks at every key of the process, which made building a
large archive in memory quadratic.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .blocking import BlockingStore

T = TypeVar("T")
_memory_lock = threading.Lock()


class MemoryStore(BlockingStore):
    """Objects in this process's memory: for tests, demos and benchmarks; gone when it exits."""

    @property
    def durable(self) -> bool:
        return False

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return fn(*args)

    async def _create(self, key: str, data: bytes) -> bool:
        path = self.fs._strip_protocol(self.path(key))
        with _memory_lock:
            if path in self.fs.store:  # not ``exists``: that scans every key of the process
                return False
            self.fs.pipe_file(path, data)
        return True
