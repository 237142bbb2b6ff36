"""The checkpointer protocol, the in-memory reference and the delta wrapper.

``MemoryCheckpointer`` is the executable specification the contract tests run
against every other implementation. ``DeltaCheckpointer`` wraps *any*
checkpointer and stores deltas through it, using the same delta engine and
chain policy as the archive.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

from . import codec
from ._sync import iterate_async, iterate_sync, run_async, run_sync
from .chain import DeltaConfig, snapshot_due
from .delta import Delta, apply_checkpoint, diff_checkpoint
from .errors import (
    BrokenChain,
    CheckpointNotFound,
    CheckpointVersionConflict,
    DuplicateCheckpointId,
    InvalidState,
)
from .model import RESERVED_PREFIX, Checkpoint, CheckpointInfo, Protection
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


_MARK = RESERVED_PREFIX + "delta"
Content = tuple[dict[str, Any], list[Any]]
"""A checkpoint's content: its state and its messages."""


class DeltaCheckpointer(AsyncCoreCheckpointer):
    """Wraps any checkpointer: snapshots every N steps, deltas in between.

    The inner checkpointer receives ordinary ``Checkpoint`` objects: a delta is
    stored as ``state = {"ops": [...]}`` (message ops tagged ``target: messages``,
    ``messages = []``) with a reserved metadata marker recording the kind, the
    chain depth and the checkpoint's protection, so any backend can hold it.
    """

    def __init__(self, inner: Checkpointer, config: DeltaConfig | None = None, *, cache_size: int = 64):
        self.inner = inner
        self.config = config or DeltaConfig()
        self._cache: OrderedDict[str, tuple[Content, int]] = OrderedDict()
        self._cache_size = cache_size

    def _remember(self, checkpoint_id: str, content: Content, depth: int) -> None:
        self._cache[checkpoint_id] = (content, depth)
        self._cache.move_to_end(checkpoint_id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    async def _resolve(self, stored: Checkpoint) -> tuple[Content, int]:
        """Full state, messages and depth of a stored checkpoint, replaying from its snapshot."""
        cached = self._cache.get(stored.checkpoint_id)
        if cached is not None:
            return copy.deepcopy(cached[0]), cached[1]
        pending: list[Delta] = []
        node, depth = stored, None
        while True:
            mark = node.metadata.get(_MARK)
            if not isinstance(mark, dict) or mark.get("kind") not in ("full", "delta"):
                raise BrokenChain(
                    "stored checkpoint has no delta marker",
                    thread_id=node.thread_id,
                    checkpoint_id=node.checkpoint_id,
                )
            if depth is None:
                depth = int(mark.get("depth", 0))
            if mark["kind"] == "full":
                state, messages = node.state, node.messages
                break
            pending.append(node.state.get("ops", []))
            if node.parent_id is None:
                raise BrokenChain("delta without a parent", checkpoint_id=node.checkpoint_id)
            parent = await self.inner.aload_by_id(node.parent_id)
            if parent is None:
                raise BrokenChain(
                    f"delta's parent {node.parent_id!r} is missing",
                    thread_id=node.thread_id,
                    checkpoint_id=node.checkpoint_id,
                )
            node = parent
        for ops in reversed(pending):
            state, messages = apply_checkpoint(state, messages, ops)
        self._remember(stored.checkpoint_id, (state, messages), depth)
        return copy.deepcopy((state, messages)), depth

    def _unwrap(self, stored: Checkpoint, content: Content) -> Checkpoint:
        mark = stored.metadata.get(_MARK)
        protection = mark.get("protection") if isinstance(mark, dict) else None
        meta = {k: v for k, v in stored.metadata.items() if k != _MARK}
        out = stored.model_copy(
            update={
                "state": content[0],
                "messages": content[1],
                "metadata": meta,
                "protection": None if protection is None else Protection.model_validate(protection),
            }
        )
        out.check_protection()
        return out

    async def _save(self, checkpoint: Checkpoint) -> str:
        codec.check_json(checkpoint.state)
        checkpoint.check_protection()
        parent_id = checkpoint.parent_id
        parent: Checkpoint | None
        if parent_id is None:
            parent = await self.inner.aload(checkpoint.thread_id)
        else:
            parent = await self.inner.aload_by_id(parent_id)
            if parent is None or parent.thread_id != checkpoint.thread_id:
                raise CheckpointNotFound(f"parent {parent_id!r} is not a checkpoint of thread {checkpoint.thread_id!r}")
        parent_content, parent_depth = (None, None) if parent is None else await self._resolve(parent)
        interval = self.config.full_snapshot_interval
        content = (checkpoint.state, checkpoint.messages)
        if parent is None or parent_content is None or snapshot_due(checkpoint.step, parent_depth, interval):
            depth, kind = 0, "full"
            stored_state, stored_messages = content
        else:
            depth, kind = (parent_depth or 0) + 1, "delta"
            ops = diff_checkpoint(*parent_content, *content)
            stored_state, stored_messages = {"ops": ops}, []
        mark: dict[str, Any] = {"kind": kind, "depth": depth}
        if checkpoint.protection is not None:
            mark["protection"] = checkpoint.protection.model_dump()
        stored = checkpoint.model_copy(
            update={
                "state": stored_state,
                "messages": stored_messages,
                "protection": None,
                "metadata": {**checkpoint.metadata, _MARK: mark},
                "parent_id": None if parent is None else parent.checkpoint_id,
            }
        )
        cid = await self.inner.asave(stored)
        self._remember(cid, copy.deepcopy(content), depth)
        return cid

    async def _load(self, thread_id: str) -> Checkpoint | None:
        stored = await self.inner.aload(thread_id)
        return None if stored is None else self._unwrap(stored, (await self._resolve(stored))[0])

    async def _load_by_id(self, checkpoint_id: str) -> Checkpoint | None:
        stored = await self.inner.aload_by_id(checkpoint_id)
        return None if stored is None else self._unwrap(stored, (await self._resolve(stored))[0])

    async def _list(self, thread_id: str) -> Infos:
        out = []
        for info in await self.inner.alist(thread_id):
            mark = info.metadata.get(_MARK)
            kind = mark.get("kind", "full") if isinstance(mark, dict) else "full"
            meta = {k: v for k, v in info.metadata.items() if k != _MARK}
            out.append(info.model_copy(update={"kind": kind, "metadata": meta}))
        return out

    async def _threads(self) -> Ids:
        return await self.inner.athreads()

    # -- edits and removals: need an inner that can replace a stored checkpoint (MemoryCheckpointer) --
    def _replacer(self) -> Any:
        replace = getattr(self.inner, "_replace_stored", None)
        if replace is None:
            raise NotImplementedError(
                f"DeltaCheckpointer over {type(self.inner).__name__} cannot edit or remove checkpoints "
                "(the inner checkpointer cannot replace a stored checkpoint); use MemoryCheckpointer or the archive"
            )
        return replace

    async def _as_full(self, checkpoint_id: str) -> Checkpoint:
        """The stored form of a checkpoint re-encoded as a full snapshot of its own state."""
        stored = await self.inner.aload_by_id(checkpoint_id)
        if stored is None:
            raise CheckpointNotFound(f"checkpoint {checkpoint_id!r} does not exist")
        (state, messages), _ = await self._resolve(stored)
        mark = stored.metadata.get(_MARK)
        full: dict[str, Any] = {"kind": "full", "depth": 0}
        if isinstance(mark, dict) and mark.get("protection") is not None:
            full["protection"] = mark["protection"]  # same content: the same protection
        meta = {**stored.metadata, _MARK: full}
        return stored.model_copy(update={"state": state, "messages": messages, "metadata": meta})

    async def _delta_children(self, thread_id: str, parents: set[str]) -> list[str]:
        out = []
        for info in await self.inner.alist(thread_id):
            mark = info.metadata.get(_MARK)
            if info.parent_id in parents and isinstance(mark, dict) and mark.get("kind") == "delta":
                out.append(info.checkpoint_id)
        return out

    async def _update_state(self, checkpoint_id: str, state: dict[str, Any], expected_version: int) -> int:
        """The edited checkpoint becomes a full snapshot; its delta children are re-based first."""
        replace = self._replacer()
        if not isinstance(state, dict):
            raise InvalidState(f"state must be a dict, got {type(state).__name__}")
        codec.check_json(state)
        target = await self._as_full(checkpoint_id)
        current = {i.checkpoint_id: i.version for i in await self.inner.alist(target.thread_id)}
        if current.get(checkpoint_id, 1) != expected_version:
            raise CheckpointVersionConflict(
                f"checkpoint {checkpoint_id!r} is at version {current.get(checkpoint_id, 1)}, not "
                f"{expected_version}; nothing changed"
            )
        for child in await self._delta_children(target.thread_id, {checkpoint_id}):
            replace(await self._as_full(child))
        edited = target.model_copy(update={"state": copy.deepcopy(state)})
        mark = dict(edited.metadata[_MARK])
        if mark.get("protection") is not None:  # an edit is sanctioned: protect the new content anew
            binding = mark["protection"].get("binding_sha256")
            mark["protection"] = Protection.of(edited.state, edited.messages, binding).model_dump()
            edited = edited.model_copy(update={"metadata": {**edited.metadata, _MARK: mark}})
        version: int = replace(edited, expected_version)
        self._cache.clear()
        return version

    async def _remove(self, thread_id: str, checkpoint_ids: Iterable[str], dry_run: bool) -> PruneReport:
        """Kept deltas whose parent goes are re-based onto full snapshots first, then the inner removes."""
        replace = self._replacer()
        wanted = {i.checkpoint_id for i in await self.inner.alist(thread_id)} & set(checkpoint_ids)
        rebase = [c for c in await self._delta_children(thread_id, wanted) if c not in wanted]
        if not dry_run:
            for child in rebase:
                replace(await self._as_full(child))
        report: PruneReport = await self.inner.aremove(thread_id, wanted, dry_run=dry_run)  # type: ignore[attr-defined]
        report.rebased = rebase
        self._cache.clear()
        return report

    async def _history(self, thread_id: str) -> AsyncIterator[Checkpoint]:
        for info in await self.inner.alist(thread_id):  # parents resolve from the cache: no replays
            ckpt = await self._load_by_id(info.checkpoint_id)
            if ckpt is not None:
                yield ckpt

    async def _delete(self, thread_id: str) -> None:
        await self.inner.adelete(thread_id)
        self._cache.clear()
