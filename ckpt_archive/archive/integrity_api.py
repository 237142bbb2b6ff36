"""The integrity API of ``ArchiveCheckpointer``: verify, validate_integrity, try_restore_state, restore_state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from .._sync import run_async, run_sync
from .chains import ChainReader, Mode
from .verify import RestoredState, VerifyReport, locate, verify_archive

if TYPE_CHECKING:
    from .checkpointer import ArchiveCheckpointer


class IntegrityMixin:
    """The integrity API of ``ArchiveCheckpointer`` (sync facade + async twins)."""

    def _arch(self) -> ArchiveCheckpointer:
        return cast("ArchiveCheckpointer", self)

    async def _replayed(self, checkpoint_id: str, mode: Mode) -> RestoredState:
        """The checkpoint rebuilt from freshly read objects (the state cache neither serves nor keeps it)."""
        await self._arch()._check_root()
        m, thread_id = await locate(self._arch(), checkpoint_id)
        reader = ChainReader(self._arch(), thread_id, mode=mode, cache=False)
        state, messages = await reader.content(m.chain(checkpoint_id), m.inline)
        return RestoredState(thread_id, checkpoint_id, state, tuple(reader.notes), messages)

    async def _validate(self, checkpoint_id: str) -> dict[str, Any]:
        return (await self._replayed(checkpoint_id, Mode.STRICT)).state

    async def _restore(self, checkpoint_id: str) -> RestoredState:
        return await self._replayed(checkpoint_id, Mode.LENIENT)

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
