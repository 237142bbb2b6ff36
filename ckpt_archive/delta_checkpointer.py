"""``DeltaCheckpointer``: deltas between snapshots over *any* checkpointer.

It uses the same delta engine and chain policy as the archive, and stores
through the inner checkpointer's ordinary protocol, so any backend can hold a
delta chain.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable
from typing import Any

from . import codec
from .chain import DeltaConfig, snapshot_due
from .delta import Delta, apply_checkpoint, diff_checkpoint
from .errors import BrokenChain, CheckpointNotFound, CheckpointVersionConflict, DuplicateCheckpointId, InvalidState
from .model import RESERVED_PREFIX, Checkpoint, Protection
from .protocol import AsyncCoreCheckpointer, Checkpointer, Ids, Infos
from .retention import PruneReport

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
        try:
            cid = await self.inner.asave(stored)
        except DuplicateCheckpointId:  # stored differently when saved again (a delta of itself): compare
            saved = await self._load_by_id(checkpoint.checkpoint_id)
            if saved is not None and checkpoint.is_resave_of(saved):
                return checkpoint.checkpoint_id
            raise
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
