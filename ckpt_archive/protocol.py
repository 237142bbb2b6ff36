"""The checkpointer protocol and the async-core base every implementation derives from.

Each implementation writes only the ``async`` core (``_save``, ``_load``...);
``AsyncCoreCheckpointer`` turns it into the sync methods and their ``a``-prefixed
async twins, so there is one implementation per operation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

from ._sync import iterate_async, iterate_sync, run_async, run_sync
from .model import Checkpoint, CheckpointInfo
from .retention import PruneReport

Infos = list[CheckpointInfo]  # aliases: inside the classes `list` is the method
Ids = list[str]


@runtime_checkable
class Checkpointer(Protocol):
    """What every checkpointer offers, sync and async."""

    def save(self, checkpoint: Checkpoint) -> str: ...
    def load(self, thread_id: str) -> Checkpoint | None: ...
    def load_by_id(self, checkpoint_id: str) -> Checkpoint | None: ...
    def list(self, thread_id: str) -> Infos: ...
    def threads(self) -> Ids: ...
    def delete(self, thread_id: str) -> None: ...
    async def asave(self, checkpoint: Checkpoint) -> str: ...
    async def aload(self, thread_id: str) -> Checkpoint | None: ...
    async def aload_by_id(self, checkpoint_id: str) -> Checkpoint | None: ...
    async def alist(self, thread_id: str) -> Infos: ...
    async def athreads(self) -> Ids: ...
    async def adelete(self, thread_id: str) -> None: ...


class AsyncCoreCheckpointer:
    """Sync methods as thin wrappers over the async core (one implementation)."""

    async def _save(self, checkpoint: Checkpoint) -> str:
        raise NotImplementedError

    async def _load(self, thread_id: str) -> Checkpoint | None:
        raise NotImplementedError

    async def _load_by_id(self, checkpoint_id: str) -> Checkpoint | None:
        raise NotImplementedError

    async def _list(self, thread_id: str) -> Infos:
        raise NotImplementedError

    async def _threads(self) -> Ids:
        raise NotImplementedError

    async def _delete(self, thread_id: str) -> None:
        raise NotImplementedError

    def save(self, checkpoint: Checkpoint) -> str:
        return run_sync(self._save(checkpoint))

    def load(self, thread_id: str) -> Checkpoint | None:
        return run_sync(self._load(thread_id))

    def load_by_id(self, checkpoint_id: str) -> Checkpoint | None:
        return run_sync(self._load_by_id(checkpoint_id))

    def list(self, thread_id: str) -> Infos:
        return run_sync(self._list(thread_id))

    def threads(self) -> Ids:
        return run_sync(self._threads())

    def delete(self, thread_id: str) -> None:
        run_sync(self._delete(thread_id))

    async def asave(self, checkpoint: Checkpoint) -> str:
        return await run_async(self._save(checkpoint))

    async def aload(self, thread_id: str) -> Checkpoint | None:
        return await run_async(self._load(thread_id))

    async def aload_by_id(self, checkpoint_id: str) -> Checkpoint | None:
        return await run_async(self._load_by_id(checkpoint_id))

    async def alist(self, thread_id: str) -> Infos:
        return await run_async(self._list(thread_id))

    async def athreads(self) -> Ids:
        return await run_async(self._threads())

    async def adelete(self, thread_id: str) -> None:
        await run_async(self._delete(thread_id))

    # -- history and edits, for the checkpointers that have them -----------------
    async def _update_state(self, checkpoint_id: str, state: dict[str, Any], expected_version: int) -> int:
        raise NotImplementedError

    def _history(self, thread_id: str) -> AsyncIterator[Checkpoint]:
        raise NotImplementedError

    async def _remove(self, thread_id: str, checkpoint_ids: Iterable[str], dry_run: bool) -> PruneReport:
        raise NotImplementedError

    def update_state(self, checkpoint_id: str, state: dict[str, Any], expected_version: int) -> int:
        """Replace a checkpoint's state if it is still at ``expected_version``; returns the new version."""
        return run_sync(self._update_state(checkpoint_id, state, expected_version))

    async def aupdate_state(self, checkpoint_id: str, state: dict[str, Any], expected_version: int) -> int:
        return await run_async(self._update_state(checkpoint_id, state, expected_version))

    def history(self, thread_id: str) -> Iterator[Checkpoint]:
        """Every checkpoint of the thread with its full state, oldest first, lazily."""
        return iterate_sync(self._history(thread_id))

    def ahistory(self, thread_id: str) -> AsyncIterator[Checkpoint]:
        return iterate_async(self._history(thread_id))

    def remove(self, thread_id: str, checkpoint_ids: Iterable[str], *, dry_run: bool = False) -> PruneReport:
        """Remove exactly these checkpoints of the thread; every other one loads as before."""
        return run_sync(self._remove(thread_id, list(checkpoint_ids), dry_run))

    async def aremove(self, thread_id: str, checkpoint_ids: Iterable[str], *, dry_run: bool = False) -> PruneReport:
        return await run_async(self._remove(thread_id, list(checkpoint_ids), dry_run))
