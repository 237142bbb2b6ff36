"""``MemoryCheckpointer``: the process-local reference implementation.

It is the executable specification the contract tests run against every other
implementation, so it favours obviousness (deep copies in and out, one lock)
over speed.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable
from typing import Any

from . import codec
from .errors import CheckpointNotFound, CheckpointVersionConflict, DuplicateCheckpointId, InvalidState
from .model import Checkpoint, CheckpointInfo
from .protocol import AsyncCoreCheckpointer, Ids, Infos
from .retention import PruneReport


class MemoryCheckpointer(AsyncCoreCheckpointer):
    """Process-local reference implementation; every value is deep-copied in and out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads_map: dict[str, OrderedDict[str, Checkpoint]] = {}
        self._owner: dict[str, str] = {}
        self._versions: dict[str, int] = {}

    async def _save(self, checkpoint: Checkpoint) -> str:
        codec.check_json(checkpoint.state)
        checkpoint.check_protection()
        with self._lock:
            if checkpoint.checkpoint_id in self._owner:
                saved = self._threads_map[self._owner[checkpoint.checkpoint_id]][checkpoint.checkpoint_id]
                if checkpoint.is_resave_of(saved):
                    return checkpoint.checkpoint_id
                raise DuplicateCheckpointId(f"checkpoint {checkpoint.checkpoint_id!r} is already saved")
            chain = self._threads_map.setdefault(checkpoint.thread_id, OrderedDict())
            parent = checkpoint.parent_id
            if parent is None and chain:
                parent = next(reversed(chain))
            elif parent is not None and parent not in chain:
                raise CheckpointNotFound(f"parent {parent!r} is not a checkpoint of thread {checkpoint.thread_id!r}")
            stored = copy.deepcopy(checkpoint.with_parent(parent))
            chain[checkpoint.checkpoint_id] = stored
            self._owner[checkpoint.checkpoint_id] = checkpoint.thread_id
            return checkpoint.checkpoint_id

    async def _load(self, thread_id: str) -> Checkpoint | None:
        with self._lock:
            chain = self._threads_map.get(thread_id)
            found = copy.deepcopy(next(reversed(chain.values()))) if chain else None
        if found is not None:
            found.check_protection()
        return found

    async def _load_by_id(self, checkpoint_id: str) -> Checkpoint | None:
        with self._lock:
            thread = self._owner.get(checkpoint_id)
            if thread is None:
                return None
            found = copy.deepcopy(self._threads_map[thread][checkpoint_id])
        found.check_protection()
        return found

    async def _list(self, thread_id: str) -> Infos:
        with self._lock:
            chain = list(self._threads_map.get(thread_id, {}).values())
            versions = [self._versions.get(c.checkpoint_id, 1) for c in chain]
        return [_info(c, "full", len(codec.dumps(c.state)), version=v) for c, v in zip(chain, versions, strict=True)]

    async def _threads(self) -> Ids:
        with self._lock:
            return sorted(t for t, chain in self._threads_map.items() if chain)

    async def _delete(self, thread_id: str) -> None:
        with self._lock:
            for cid in self._threads_map.pop(thread_id, {}):
                self._owner.pop(cid, None)
                self._versions.pop(cid, None)

    # -- history and edits (same semantics as ArchiveCheckpointer) -----------------
    async def _update_state(self, checkpoint_id: str, state: dict[str, Any], expected_version: int) -> int:
        if not isinstance(state, dict):
            raise InvalidState(f"state must be a dict, got {type(state).__name__}")
        codec.check_json(state)
        with self._lock:
            thread = self._owner.get(checkpoint_id)
            if thread is None:
                raise CheckpointNotFound(f"checkpoint {checkpoint_id!r} does not exist")
            version = self._versions.get(checkpoint_id, 1)
            if version != expected_version:
                raise CheckpointVersionConflict(
                    f"checkpoint {checkpoint_id!r} is at version {version}, not {expected_version}; nothing changed"
                )
            chain = self._threads_map[thread]
            # with_state: a protected checkpoint is protected anew (an edit is a sanctioned change)
            chain[checkpoint_id] = chain[checkpoint_id].with_state(copy.deepcopy(state))
            self._versions[checkpoint_id] = version + 1
            return version + 1

    def _replace_stored(self, stored: Checkpoint, expected_version: int | None = None) -> int:
        """Replace a stored checkpoint as is (state and metadata), for wrappers such as DeltaCheckpointer.

        With ``expected_version`` it is an edit (checked, version + 1); without, a re-encoding of the
        same logical checkpoint (version unchanged). Returns the version.
        """
        with self._lock:
            thread = self._owner.get(stored.checkpoint_id)
            if thread is None:
                raise CheckpointNotFound(f"checkpoint {stored.checkpoint_id!r} does not exist")
            version = self._versions.get(stored.checkpoint_id, 1)
            if expected_version is not None:
                if version != expected_version:
                    raise CheckpointVersionConflict(
                        f"checkpoint {stored.checkpoint_id!r} is at version {version}, not {expected_version}; "
                        "nothing changed"
                    )
                version += 1
                self._versions[stored.checkpoint_id] = version
            self._threads_map[thread][stored.checkpoint_id] = copy.deepcopy(stored)
            return version

    async def _history(self, thread_id: str) -> AsyncIterator[Checkpoint]:
        with self._lock:
            ids = list(self._threads_map.get(thread_id, {}))
        for cid in ids:
            ckpt = await self._load_by_id(cid)
            if ckpt is not None:
                yield ckpt

    async def _remove(self, thread_id: str, checkpoint_ids: Iterable[str], dry_run: bool) -> PruneReport:
        wanted = set(checkpoint_ids)
        with self._lock:
            chain = self._threads_map.get(thread_id, OrderedDict())
            removed = [cid for cid in chain if cid in wanted]
            report = PruneReport(
                thread_id,
                removed=removed,
                kept={cid: ["not named"] for cid in chain if cid not in wanted},
                objects_freed=len(removed),
                bytes_freed=sum(len(codec.dumps(chain[cid].state)) for cid in removed),
                dry_run=dry_run,
            )
            if not dry_run:
                for cid in removed:
                    del chain[cid]
                    self._owner.pop(cid, None)
                    self._versions.pop(cid, None)
            return report


def _info(
    c: Checkpoint, kind: str, stored: int, metadata: dict[str, Any] | None = None, *, version: int = 1
) -> CheckpointInfo:
    return CheckpointInfo(
        thread_id=c.thread_id,
        checkpoint_id=c.checkpoint_id,
        parent_id=c.parent_id,
        step=c.step,
        kind=kind,  # type: ignore[arg-type]
        created_at=c.created_at,
        stored_bytes=stored,
        metadata=c.metadata if metadata is None else metadata,
        version=version,
    )
