"""The state layer of ``ArchiveCheckpointer``: the state cache, and contents to ``Checkpoint``.

Contents are rebuilt by the one chain replay (``chains.ChainReader``), checked against the digests
recorded at save before anyone sees them; they are cached by record version, so an edit never serves
a stale state.
"""

from __future__ import annotations

from datetime import datetime

from .. import codec
from ..model import Checkpoint, Protection
from .chains import ChainReader
from .content import Content
from .manifest import Manifest, Record
from .manifest_reader import ManifestReader


class StateReader(ManifestReader):
    """The state layer of ``ArchiveCheckpointer``: cached contents, contents to ``Checkpoint``."""

    def _remember(self, checkpoint_id: str, content: Content) -> None:
        """Cache a content (least recently used dropped first); keys come from ``state_key``."""
        self._states[checkpoint_id] = content
        self._states.move_to_end(checkpoint_id)
        while len(self._states) > self._state_cache:
            self._states.popitem(last=False)

    def _checkpoint(self, thread_id: str, rec: Record, content: Content) -> Checkpoint:
        """The caller's private copy of a checkpoint; its protection, when present, is checked."""
        f = rec.get("fields", {})
        state, messages = codec.loads(codec.dumps(content))
        protection = f.get("protection")
        ckpt = Checkpoint.model_construct(
            thread_id=thread_id,
            checkpoint_id=rec["id"],
            parent_id=rec.get("parent"),
            step=rec["step"],
            state=state,
            pending_nodes=list(f.get("pending_nodes", [])),
            metadata=dict(rec.get("metadata", {})),
            created_at=datetime.fromisoformat(rec["created_at"]),
            cleared_interrupt=f.get("cleared_interrupt"),
            attempts=dict(f.get("attempts", {})),
            child_ledger=dict(f.get("child_ledger", {})),
            run_id=f.get("run_id"),
            node_id=f.get("node_id"),
            messages=messages,
            protection=None if protection is None else Protection.model_validate(protection),
        )
        ckpt.check_protection()
        return ckpt

    async def _content_of(self, m: Manifest, checkpoint_id: str) -> Content:
        """(state, messages) of a checkpoint of ``m``, from the cache or rebuilt from its chain."""
        return await ChainReader(self, m.thread_id).content(m.chain(checkpoint_id), m.inline)
