"""Fault injection for the storage path: fail or "crash" at the k-th write or delete.

``FaultyStore`` wraps a real ``ObjectStore`` (whatever fsspec filesystem it runs on) and
counts every mutating call -- ``put``, ``put_if_absent``, ``delete``, ``delete_prefix`` --
which is every way the archive changes storage. At call ``k`` it

* ``fail``: raises an OSError *instead of* writing (a definite failure);
* ``fail-after``: writes, then raises (the reply was lost: an ambiguous outcome);
* ``crash``: raises ``Crash`` (a BaseException, so no library code can catch it) and from
  then on every call, reads included, raises ``Crash`` too: the process is gone, writes
  still in flight never happen.

``FaultPlan.outage`` (any mode): the next that many requests below the store's retry loop
(``_create``, ``_put``, ``_get``...) fail with ``ConnectionResetError``, so the real retries
run and give up. Mode ``lost-reply`` starts such an outage right after call ``k`` wrote: the
reply is lost and so is every retry (including the one that would have found the bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ckpt_archive.archive.store import ObjectStore

MODES = ("fail", "fail-after", "crash")  # lost-reply: see the module docstring


class Crash(BaseException):
    """The simulated death of the writing process."""


@dataclass
class FaultPlan:
    mode: str
    k: int  # 1-based index of the mutating call that fails
    calls: list[str] = field(default_factory=list)
    hit: bool = False
    dead: bool = False
    armed: bool = True
    outage: int = 0  # requests still to fail below the retry loop
    outage_after_lost_reply: int = 10**6


class FaultyStore(ObjectStore):
    def __init__(self, inner: ObjectStore, plan: FaultPlan) -> None:
        self.__dict__.update(inner.__dict__)
        self.plan = plan

    def _check_alive(self) -> None:
        if self.plan.dead:
            raise Crash("process is dead")

    async def _mutate(self, what: str) -> bool:
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

    async def _get(self, key: str) -> bytes:
        self._request()
        return await super()._get(key)

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

    async def find(self, prefix: str) -> dict[str, dict[str, object]]:
        self._check_alive()
        return await super().find(prefix)

    async def put(self, key: str, data: bytes) -> None:
        after = await self._mutate(f"put {key}")
        await super().put(key, data)
        self._check_alive()
        if after:
            self._after(f"put {key}")

    _lost_next = False

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        after = await self._mutate(f"put_if_absent {key}")
        if after and self.plan.mode == "lost-reply":  # inside the retry loop: the first attempt lands
            self._lost_next, after = True, False
        created = await super().put_if_absent(key, data)
        self._check_alive()
        if after:
            self._after(f"put_if_absent {key}")
        return created

    async def delete(self, keys: Sequence[str]) -> None:
        after = await self._mutate(f"delete {list(keys)}")
        await super().delete(keys)
        if after:
            self._after("delete")

    async def delete_prefix(self, prefix: str) -> None:
        after = await self._mutate(f"delete_prefix {prefix}")
        await super().delete_prefix(prefix)
        if after:
            self._after(f"delete_prefix {prefix}")
