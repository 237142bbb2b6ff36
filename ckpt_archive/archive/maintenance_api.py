"""The public maintenance methods of ``ArchiveCheckpointer``: sync facade and async twins.

Thin wrappers only; the implementations live in ``maintenance.py`` (prune,
remove, edits, pins), ``history.py`` (history, fork, copy_thread) and
``gc.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from .._sync import iterate_async, iterate_sync, run_async, run_sync
from ..model import Checkpoint
from ..retention import GcReport, PruneReport, RetentionPolicy
from . import gc as _gc
from . import history as _history
from . import maintenance as _m

if TYPE_CHECKING:
    from .checkpointer import ArchiveCheckpointer

Progress = Callable[[int, int, PruneReport], None]


class MaintenanceMixin:
    """Retention, garbage collection, history and edits (see docs/FORMAT.md, "Retention")."""

    @property
    def _cp(self) -> ArchiveCheckpointer:
        return cast("ArchiveCheckpointer", self)

    # -- retention ---------------------------------------------------------------
    def prune(self, thread_id: str, policy: RetentionPolicy, *, dry_run: bool = False) -> PruneReport:
        """Remove the thread's checkpoints ``policy`` does not keep (the newest always stays)."""
        return run_sync(_m.prune(self._cp, thread_id, policy, dry_run=dry_run))

    async def aprune(self, thread_id: str, policy: RetentionPolicy, *, dry_run: bool = False) -> PruneReport:
        return await run_async(_m.prune(self._cp, thread_id, policy, dry_run=dry_run))

    def prune_all(
        self,
        policy: RetentionPolicy,
        *,
        shard: tuple[int, int] | None = None,
        concurrency: int = 8,
        progress: Progress | None = None,
        dry_run: bool = False,
    ) -> list[PruneReport]:
        """Prune every thread, or only shard ``(i, n)`` of them (stable, disjoint by thread-id hash)."""
        coro = _m.prune_all(self._cp, policy, shard=shard, concurrency=concurrency, progress=progress, dry_run=dry_run)
        return run_sync(coro)

    async def aprune_all(
        self,
        policy: RetentionPolicy,
        *,
        shard: tuple[int, int] | None = None,
        concurrency: int = 8,
        progress: Progress | None = None,
        dry_run: bool = False,
    ) -> list[PruneReport]:
        coro = _m.prune_all(self._cp, policy, shard=shard, concurrency=concurrency, progress=progress, dry_run=dry_run)
        return await run_async(coro)

    def remove(self, thread_id: str, checkpoint_ids: Iterable[str], *, dry_run: bool = False) -> PruneReport:
        """Remove exactly these checkpoints; every other one still loads to the same state."""
        return run_sync(_m.remove(self._cp, thread_id, list(checkpoint_ids), dry_run=dry_run))

    async def aremove(self, thread_id: str, checkpoint_ids: Iterable[str], *, dry_run: bool = False) -> PruneReport:
        return await run_async(_m.remove(self._cp, thread_id, list(checkpoint_ids), dry_run=dry_run))

    def gc(self, *, grace: timedelta | None = None, unsafe_no_writers: bool = False) -> GcReport:
        """Delete tombstoned, orphaned and superseded objects older than ``grace`` (default: gc_grace).

        A grace below ``gc_floor(gc_grace)`` (2 s for a gc_grace of 0, gc_grace itself from 2 s on) would
        delete what a running save is about to commit: it raises ``UnsafeGcGrace`` unless
        ``unsafe_no_writers=True`` says that no process is writing to or reading the archive."""
        return run_sync(_gc.gc(self._cp, grace=grace, unsafe_no_writers=unsafe_no_writers))

    async def agc(self, *, grace: timedelta | None = None, unsafe_no_writers: bool = False) -> GcReport:
        return await run_async(_gc.gc(self._cp, grace=grace, unsafe_no_writers=unsafe_no_writers))

    def pin(self, checkpoint_id: str) -> bool:
        """Mark a checkpoint pinned (``keep_pinned()`` keeps it); True if it was not pinned before."""
        return run_sync(_m.set_pinned(self._cp, checkpoint_id, True))

    async def apin(self, checkpoint_id: str) -> bool:
        return await run_async(_m.set_pinned(self._cp, checkpoint_id, True))

    def unpin(self, checkpoint_id: str) -> bool:
        return run_sync(_m.set_pinned(self._cp, checkpoint_id, False))

    async def aunpin(self, checkpoint_id: str) -> bool:
        return await run_async(_m.set_pinned(self._cp, checkpoint_id, False))

    # -- history and edits -------------------------------------------------------
    def history(self, thread_id: str) -> Iterator[Checkpoint]:
        """Every checkpoint of the thread with its full state, oldest first, lazily."""
        return iterate_sync(_history.iter_history(self._cp, thread_id))

    def ahistory(self, thread_id: str) -> AsyncIterator[Checkpoint]:
        return iterate_async(_history.iter_history(self._cp, thread_id))

    def update_state(self, checkpoint_id: str, state: dict[str, Any], expected_version: int) -> int:
        """Replace a checkpoint's state (optimistic concurrency); returns the new version."""
        return run_sync(_m.update_state(self._cp, checkpoint_id, state, expected_version))

    async def aupdate_state(self, checkpoint_id: str, state: dict[str, Any], expected_version: int) -> int:
        return await run_async(_m.update_state(self._cp, checkpoint_id, state, expected_version))

    def fork(self, checkpoint_id: str, new_thread_id: str) -> str:
        """Start a new thread at a copy of the checkpoint; returns the new checkpoint's id."""
        return run_sync(_history.fork(self._cp, checkpoint_id, new_thread_id))

    async def afork(self, checkpoint_id: str, new_thread_id: str) -> str:
        return await run_async(_history.fork(self._cp, checkpoint_id, new_thread_id))

    def copy_thread(self, src_thread_id: str, dst_thread_id: str) -> dict[str, str]:
        """Copy a whole thread (server-side object copies); returns {old checkpoint id: new id}."""
        return run_sync(_history.copy_thread(self._cp, src_thread_id, dst_thread_id))

    async def acopy_thread(self, src_thread_id: str, dst_thread_id: str) -> dict[str, str]:
        return await run_async(_history.copy_thread(self._cp, src_thread_id, dst_thread_id))
