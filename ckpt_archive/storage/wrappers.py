"""Stores around another store, shared by tests and benchmarks instead of each improvising its own.

A ``WrapperStore`` forwards the *request* methods (``_get``, ``_create``...) to the store it wraps
and shares its retry policy and counter, so the public methods (retry loop, typing, size bounds)
run once, in the wrapper, and a wrapper sees every attempt below the loop, on every backend:

* ``FaultStore`` -- fail, lose the reply of, or crash at the k-th write; outages below the retry
  loop (the fault-injection tests: tests/test_faults.py, test_commit_outcome.py);
* ``RoundTrips`` -- sequential round trips and requests by kind, with an optional latency added to
  every request, as on a real object store (request-economy tests, benchmarks).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from .base import Listing, ObjectStore

T = TypeVar("T")


class WrapperStore(ObjectStore):
    """Forwards every request to ``inner``; subclasses override what they change."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner.root, fs=inner.fs, retry=inner.retry, object_kind=inner.object_kind)
        self.inner = inner

    @property
    def conditional_create(self) -> bool:
        return self.inner.conditional_create

    @property
    def durable(self) -> bool:
        return self.inner.durable

    async def _get(self, key: str, kind: str | None) -> bytes:
        return await self.inner._get(key, kind)

    async def _list_dir(self, prefix: str) -> list[str]:
        return await self.inner._list_dir(prefix)

    async def _find(self, prefix: str) -> Listing:
        return await self.inner._find(prefix)

    async def _put(self, key: str, data: bytes) -> None:
        await self.inner._put(key, data)

    async def _create(self, key: str, data: bytes) -> bool:
        return await self.inner._create(key, data)

    async def _copy(self, src: str, dst: str) -> None:
        await self.inner._copy(src, dst)

    async def _delete(self, keys: Sequence[str]) -> None:
        await self.inner._delete(keys)

    async def _delete_prefix(self, prefix: str) -> None:
        await self.inner._delete_prefix(prefix)

    async def _abort_stale_uploads(self, before: datetime, owned: Callable[[str], bool]) -> int:
        return await self.inner._abort_stale_uploads(before, owned)


# -- faults -------------------------------------------------------------------------
FAULT_MODES = ("fail", "fail-after", "crash")  # and "lost-reply": see FaultStore


class Crash(BaseException):
    """The simulated death of the writing process (a BaseException: no library code catches it)."""


@dataclass
class FaultPlan:
    """Which mutating call fails and how; ``calls`` records them all, in order."""

    mode: str
    k: int  # 1-based index of the mutating call that fails
    calls: list[str] = field(default_factory=list)
    hit: bool = False
    dead: bool = False
    armed: bool = True
    outage: int = 0  # requests still to fail below the retry loop
    outage_after_lost_reply: int = 10**6


class FaultStore(WrapperStore):
    """Counts every mutating call -- ``put``, ``put_if_absent``, ``delete``, ``delete_prefix`` -- and at
    call ``plan.k``:

    * ``fail``: raises an OSError *instead of* writing (a definite failure);
    * ``fail-after``: writes, then raises (the reply was lost: an ambiguous outcome);
    * ``crash``: raises ``Crash``, and from then on every counted call and every read raises
      ``Crash`` too: the process is gone, writes still in flight never happen (server-side ``copy``
      and ``abort_stale_uploads`` are neither counted nor stopped: no test's plan relies on them);
    * ``lost-reply``: the write lands, then an outage of ``plan.outage_after_lost_reply`` requests
      starts: the reply is lost and so is every retry (including the one that would find the bytes).

    ``plan.outage``: the next that many requests (``_get``, ``_put``, ``_create``) fail with
    ``ConnectionResetError``, so the real retries run and give up.
    """

    def __init__(self, inner: ObjectStore, plan: FaultPlan) -> None:
        super().__init__(inner)
        self.plan = plan
        self._lost_next = False

    def _check_alive(self) -> None:
        if self.plan.dead:
            raise Crash("process is dead")

    def _mutate(self, what: str) -> bool:
        """Count a mutating call; True when it must raise after writing."""
        self._check_alive()
        plan = self.plan
        if not plan.armed:
            return False
        plan.calls.append(what)
        if len(plan.calls) != plan.k:
            return False
        plan.hit = True
        if plan.mode == "crash":
            plan.dead = True
            raise Crash(f"crashed before {what}")
        if plan.mode == "fail":
            raise OSError(f"injected failure of {what}")
        return True

    def _after(self, what: str) -> None:
        if self.plan.mode == "lost-reply":
            self.plan.outage = self.plan.outage_after_lost_reply
            raise ConnectionResetError(f"injected lost reply after {what}")
        raise OSError(f"injected lost reply after {what}")

    def _request(self) -> None:
        if self.plan.outage > 0:
            self.plan.outage -= 1
            raise ConnectionResetError("injected outage")

    async def _get(self, key: str, kind: str | None) -> bytes:
        self._request()
        return await super()._get(key, kind)

    async def _put(self, key: str, data: bytes) -> None:
        self._request()
        await super()._put(key, data)

    async def _create(self, key: str, data: bytes) -> bool:
        self._request()
        created = await super()._create(key, data)
        if self._lost_next:
            self._lost_next = False
            self._after(f"create {key}")
        return created

    async def get(self, key: str) -> bytes:
        self._check_alive()
        return await super().get(key)

    async def list_dir(self, prefix: str) -> list[str]:
        self._check_alive()
        return await super().list_dir(prefix)

    async def find(self, prefix: str) -> Listing:
        self._check_alive()
        return await super().find(prefix)

    async def put(self, key: str, data: bytes) -> None:
        after = self._mutate(f"put {key}")
        await super().put(key, data)
        self._check_alive()
        if after:
            self._after(f"put {key}")

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        after = self._mutate(f"put_if_absent {key}")
        if after and self.plan.mode == "lost-reply":  # inside the retry loop: the first attempt lands
            self._lost_next, after = True, False
        created = await super().put_if_absent(key, data)
        self._check_alive()
        if after:
            self._after(f"put_if_absent {key}")
        return created

    async def delete(self, keys: Sequence[str]) -> None:
        after = self._mutate(f"delete {list(keys)}")
        await super().delete(keys)
        if after:
            self._after("delete")

    async def delete_prefix(self, prefix: str) -> None:
        after = self._mutate(f"delete_prefix {prefix}")
        await super().delete_prefix(prefix)
        if after:
            self._after(f"delete_prefix {prefix}")


# -- latency, round trips and requests ------------------------------------------------
class RoundTrips(WrapperStore):
    """Counts the sequential round trips and the requests (by method) made through the store.

    A request's depth is 1 + the deepest request that had *completed* before it started; requests
    issued together share a depth. ``depth`` is the number of sequential round trips since
    ``reset()``; ``requests`` counts them by method (``get``, ``list_dir``...), listings included
    on every backend.

    On loopback some requests answer much faster than others, so two independent chains of
    requests can interleave and the count overstate the depth; ``latency`` (seconds, added before
    every request) makes every round trip cost about the same, as on a real object store, for
    assertions that must not depend on timing.
    """

    def __init__(self, inner: ObjectStore, latency: float = 0.0) -> None:
        super().__init__(inner)
        self.latency = latency
        self.depth = 0
        self.calls: list[tuple[str, str, int]] = []
        self.requests: Counter[str] = Counter()
        self._completed = 0

    def reset(self) -> None:
        self.depth = self._completed = 0
        self.calls.clear()
        self.requests.clear()

    async def _trip(self, name: str, key: str, request: Callable[[], Awaitable[T]]) -> T:
        depth = self._completed + 1
        self.calls.append((name, key, depth))
        self.requests[name] += 1
        try:
            if self.latency:
                await asyncio.sleep(self.latency)
            return await request()
        finally:
            self._completed = max(self._completed, depth)
            self.depth = max(self.depth, depth)

    async def _get(self, key: str, kind: str | None) -> bytes:
        return await self._trip("get", key, lambda: super(RoundTrips, self)._get(key, kind))

    async def _list_dir(self, prefix: str) -> list[str]:
        return await self._trip("list_dir", prefix, lambda: super(RoundTrips, self)._list_dir(prefix))

    async def _find(self, prefix: str) -> Listing:
        return await self._trip("find", prefix, lambda: super(RoundTrips, self)._find(prefix))

    async def _put(self, key: str, data: bytes) -> None:
        await self._trip("put", key, lambda: super(RoundTrips, self)._put(key, data))

    async def _create(self, key: str, data: bytes) -> bool:
        return await self._trip("create", key, lambda: super(RoundTrips, self)._create(key, data))

    async def _copy(self, src: str, dst: str) -> None:
        await self._trip("copy", dst, lambda: super(RoundTrips, self)._copy(src, dst))

    async def _delete(self, keys: Sequence[str]) -> None:
        await self._trip("delete", keys[0] if keys else "", lambda: super(RoundTrips, self)._delete(keys))

    async def _delete_prefix(self, prefix: str) -> None:
        await self._trip("delete_prefix", prefix, lambda: super(RoundTrips, self)._delete_prefix(prefix))
