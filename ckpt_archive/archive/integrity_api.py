"""The integrity API of ``ArchiveCheckpointer``: verify, validate_integrity, try_restore_state, restore_state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from .._sync import run_async, run_sync
from .verify import RestoredState, VerifyReport, locate, rebuild, verify_archive

if TYPE_CHECKING:
    from .checkpointer import ArchiveCheckpointer


class IntegrityMixin:
    """The integrity API of ``ArchiveCheckpointer`` (sync facade + async twins)."""

    def _arch(self) -> ArchiveCheckpointer:
        return cast("ArchiveCheckpointer", self)

    async def _validate(self, checkpoint_id: str) -> dict[str, Any]:
        await self._arch()._check_root()
        m, _ = await locate(self._arch(), checkpoint_id)
        (state, _messages), _ = await rebuild(self._arch(), m, checkpoint_id, strict=True)
        return state

    async def _restore(self, checkpoint_id: str) -> RestoredState:
        await self._arch()._check_root()
        m, thread_id = await locate(self._arch(), checkpoint_id)
        (state, messages), notes = await rebuild(self._arch(), m, checkpoint_id, strict=False)
        return RestoredState(thread_id, checkpoint_id, state, tuple(notes), messages)

    def verify(self, thread_id: str | None = None) -> VerifyReport:
        """Check every object of the archive (or one thread); reports *every* problem, raises none."""
        return run_sync(verify_archive(self._arch(), thread_id))

    async def averify(self, thread_id: str | None = None) -> VerifyReport:
        return await run_async(verify_archive(self._arch(), thread_id))

    def validate_integrity(self, checkpoint_id: str) -> None:
        """Prove one checkpoint: every object of its chain re-read, digest-checked, and its state rebuilt
        and compared with the digest recorded at save. Raises the typed ``IntegrityError``
        (``DigestMismatch``, ``TruncatedObject``, ``MissingObject``, ``BrokenChain``, ``CorruptManifest``)
        or ``CheckpointNotFound``."""
        run_sync(self._validate(checkpoint_id))

    async def avalidate_integrity(self, checkpoint_id: str) -> None:
        await run_async(self._validate(checkpoint_id))

    def try_restore_state(self, checkpoint_id: str) -> dict[str, Any]:
        """The checkpoint's state, only once proven as ``validate_integrity`` does; raises otherwise."""
        return run_sync(self._validate(checkpoint_id))

    async def atry_restore_state(self, checkpoint_id: str) -> dict[str, Any]:
        return await run_async(self._validate(checkpoint_id))

    def restore_state(self, checkpoint_id: str) -> RestoredState:
        """Explicitly lenient: the state even when digest or size checks fail, with ``unproven`` saying
        which. Still raises when the state cannot be decoded at all (missing object, broken chain,
        garbage bytes): it never invents or empties a state."""
        return run_sync(self._restore(checkpoint_id))

    async def arestore_state(self, checkpoint_id: str) -> RestoredState:
        return await run_async(self._restore(checkpoint_id))
