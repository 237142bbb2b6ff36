"""The one retry loop of the storage layer, and its time budget.

Transient failures (throttling, 5xx, 409 ConditionalRequestConflict, connection resets, timeouts)
are retried here, and only here, with full-jitter exponential backoff within a time budget
(``open_store`` turns the S3 client's own retries off, so an unreachable endpoint fails in seconds,
not a minute). What fails in the end is raised as a typed ``StorageError`` (``failures``).

A ``Retry`` is a policy plus a counter, held by a store and shared with every wrapper around it,
so a wrapper placed below the loop (fault injection, request counting) sees each attempt while
the loop itself, and its ``retried`` count, stay one.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from .failures import absent, is_transient, storage_error

T = TypeVar("T")


@dataclass
class Retry:
    """``retries`` attempts after the first, none starting later than ``budget`` seconds after it."""

    retries: int = 6
    backoff: float = 0.05
    max_backoff: float = 2.0
    budget: float = 10.0
    retried: int = 0  # transient failures retried so far (for tests and diagnostics)

    async def run(self, fn: Callable[[], Awaitable[T]], root: str, key: str) -> T:
        """Run ``fn`` (a request about ``key`` under ``root``), retrying transient failures; what fails
        in the end is raised typed (``storage_error``), or as is when it is no storage failure."""
        attempt, started = 0, time.monotonic()
        while True:
            try:
                return await fn()
            except Exception as exc:
                if absent(exc):  # an answer (the key is not there), not a failure: the hot path of every probe
                    raise
                delay = random.uniform(0, min(self.max_backoff, self.backoff * 2**attempt))
                late = time.monotonic() + delay - started > self.budget
                if attempt >= self.retries or late or not is_transient(exc):
                    typed = storage_error(exc, root, key, attempt + 1)
                    if typed is None:
                        raise
                    raise typed from exc
            attempt += 1
            self.retried += 1
            await asyncio.sleep(delay)
