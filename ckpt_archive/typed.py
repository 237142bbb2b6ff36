"""TypedCheckpointer: one thread's checkpoints as instances of a pydantic model.

The state is stored as the model's JSON dump (``model_dump(mode="json")``) in any
checkpointer; the recursion count rides in reserved metadata. Loading validates
the stored JSON against the model again, so a model that changed incompatibly
raises ``StateValidationError`` naming the checkpoint and the failing fields
instead of handing back a half-valid object.

Edits and deletions use the backend's ``update_state``/``remove`` when it has them
(edited in place, versions kept by the backend). A backend without them (any plain
``Checkpointer``) gets *edit records* instead: an edit of checkpoint ``c`` to version
``n`` is saved as a new checkpoint with the id ``c~v<n>`` (a deletion as ``c~deleted``)
and reserved metadata naming ``c``. The deterministic id makes two racing editors
collide (``DuplicateCheckpointId`` from the backend's put-if-absent commit), so the
loser gets ``CheckpointVersionConflict``. Edit records are hidden from ``list``,
``last`` and ``snapshots``; a deleted checkpoint's bytes stay in the backend.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from ._sync import run_sync
from .errors import (
    CheckpointConflict,
    CheckpointNotFound,
    CheckpointVersionConflict,
    DuplicateCheckpointId,
    InvalidState,
    StateValidationError,
)
from .model import RESERVED_PREFIX, Checkpoint, CheckpointInfo, check_identifier

S = TypeVar("S", bound=BaseModel)
TYPED_KEY = RESERVED_PREFIX + "typed"
"""Reserved metadata: ``{"recursion_count", "model"}``; edit records add ``edit_of`` and ``version``
(or ``deleted``)."""


class TypedBackend(Protocol):
    """What a TypedCheckpointer needs from its backend; ``aupdate_state``/``aremove`` are used if present."""

    async def asave(self, checkpoint: Checkpoint) -> str: ...
    async def aload_by_id(self, checkpoint_id: str) -> Checkpoint | None: ...
    async def alist(self, thread_id: str) -> list[CheckpointInfo]: ...


@dataclass(frozen=True, slots=True)
class TypedSnapshot(Generic[S]):
    """One checkpoint of the thread: its state, when it was made, where it stands, its edit version."""

    checkpoint_id: str
    state: S
    created_at: datetime
    sequence: int  # 1 for the oldest checkpoint of the thread
    recursion_count: int
    version: int


@dataclass(slots=True)
class _Entry:
    """A checkpoint as the typed view sees it: its info, the id holding its current state, its version."""

    info: CheckpointInfo
    current: str
    version: int
    recursion_count: int


def _typed(metadata: dict[str, Any]) -> dict[str, Any]:
    typed = metadata.get(TYPED_KEY)
    return typed if isinstance(typed, dict) else {}


def _entries(infos: list[CheckpointInfo]) -> dict[str, _Entry]:
    """The thread's checkpoints, oldest first, with their edit records folded in (deleted ones left out)."""
    out: dict[str, _Entry] = {}
    deleted: set[str] = set()
    for info in infos:
        meta = _typed(info.metadata)
        base = meta.get("edit_of")
        if base is None:
            count = int(meta.get("recursion_count", 0))
            out[info.checkpoint_id] = _Entry(info, info.checkpoint_id, info.version, count)
        elif meta.get("deleted"):
            deleted.add(base)
        elif base in out and int(meta.get("version", 0)) > out[base].version:
            out[base].current, out[base].version = info.checkpoint_id, int(meta["version"])
    return {cid: e for cid, e in out.items() if cid not in deleted}


class TypedCheckpointer(Generic[S]):
    """``TypedCheckpointer(MyState, backend, "thread-1")``: a thread of pydantic states, sync and async."""

    def __init__(self, model: type[S], backend: TypedBackend, thread_id: str) -> None:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"model must be a pydantic BaseModel subclass, got {model!r}")
        self.model = model
        self.backend = backend
        self.thread_id = check_identifier(thread_id, "thread_id")
        self._model_name = f"{model.__module__}.{model.__qualname__}"

    # -- conversions -------------------------------------------------------------
    def _dump(self, state: S) -> dict[str, Any]:
        if not isinstance(state, self.model):
            raise InvalidState(f"state must be a {self.model.__name__}, got {type(state).__name__}")
        data: dict[str, Any] = state.model_dump(mode="json")
        return data

    def _validate(self, ckpt: Checkpoint, checkpoint_id: str) -> S:
        try:
            return self.model.model_validate(ckpt.state)
        except ValidationError as exc:
            fields = [".".join(str(p) for p in err["loc"]) or "<root>" for err in exc.errors()]
            detail = "; ".join(f"field {f!r}: {err['msg']}" for f, err in zip(fields, exc.errors(), strict=True))
            error = StateValidationError(
                f"checkpoint {checkpoint_id!r} of thread {self.thread_id!r} no longer validates "
                f"against {self.model.__name__}: {detail}"
            )
            error.checkpoint_id = checkpoint_id  # type: ignore[attr-defined]
            error.fields = fields  # type: ignore[attr-defined]
            raise error from None

    async def _entries(self) -> dict[str, _Entry]:
        return _entries(await self.backend.alist(self.thread_id))

    async def _entry(self, checkpoint_id: str) -> _Entry:
        entry = (await self._entries()).get(checkpoint_id)
        if entry is None:
            raise CheckpointNotFound(f"checkpoint {checkpoint_id!r} is not in thread {self.thread_id!r}")
        return entry

    async def _state(self, entry: _Entry) -> tuple[S, datetime]:
        ckpt = await self.backend.aload_by_id(entry.current)
        if ckpt is None:
            raise CheckpointNotFound(f"checkpoint {entry.info.checkpoint_id!r} vanished from thread {self.thread_id!r}")
        return self._validate(ckpt, entry.info.checkpoint_id), entry.info.created_at

    def _record(self, checkpoint_id: str, suffix: str, state: dict[str, Any], meta: dict[str, Any]) -> Checkpoint:
        return Checkpoint(
            thread_id=self.thread_id,
            checkpoint_id=f"{checkpoint_id}~{suffix}",
            state=state,
            metadata={TYPED_KEY: {"model": self._model_name, "edit_of": checkpoint_id, **meta}},
        )

    # -- async core --------------------------------------------------------------
    async def _next_step(self) -> int:
        infos = await self.backend.alist(self.thread_id)
        return max((i.step for i in infos), default=-1) + 1

    async def asave(self, state: S, recursion_count: int) -> str:
        data = self._dump(state)
        if not isinstance(recursion_count, int) or recursion_count < 0:
            raise InvalidState(f"recursion_count must be a non-negative int, got {recursion_count!r}")
        ckpt = Checkpoint(
            thread_id=self.thread_id,
            state=data,
            step=await self._next_step(),
            metadata={TYPED_KEY: {"recursion_count": recursion_count, "model": self._model_name}},
        )
        return await self.backend.asave(ckpt)

    async def aload(self, checkpoint_id: str) -> S:
        return (await self._state(await self._entry(checkpoint_id)))[0]

    async def alist(self) -> list[str]:
        """Checkpoint ids, oldest first."""
        return list(await self._entries())

    async def adelete(self, checkpoint_id: str) -> None:
        await self._entry(checkpoint_id)
        remove = getattr(self.backend, "aremove", None)
        if remove is not None:
            infos = await self.backend.alist(self.thread_id)
            ids = [
                i.checkpoint_id for i in infos if checkpoint_id in (i.checkpoint_id, _typed(i.metadata).get("edit_of"))
            ]
            try:
                await remove(self.thread_id, ids)
                return
            except NotImplementedError:
                pass
        tombstone = self._record(checkpoint_id, "deleted", {}, {"deleted": True})
        try:
            await self.backend.asave(tombstone.model_copy(update={"step": await self._next_step()}))
        except DuplicateCheckpointId:
            raise CheckpointNotFound(f"checkpoint {checkpoint_id!r} was deleted meanwhile") from None

    async def alast(self) -> tuple[S, int] | None:
        """The latest state and its recursion count, or None for an empty thread."""
        entries = await self._entries()
        if not entries:
            return None
        entry = entries[next(reversed(entries))]
        return (await self._state(entry))[0], entry.recursion_count

    async def asnapshots(self) -> list[TypedSnapshot[S]]:
        """Every checkpoint, oldest first, with its current state (one pass over the history if it has one)."""
        entries = await self._entries()
        loaded: dict[str, Checkpoint] = {}
        history = getattr(self.backend, "ahistory", None)
        if history is not None:
            try:
                wanted = {e.current for e in entries.values()}
                async for ckpt in history(self.thread_id):
                    if ckpt.checkpoint_id in wanted:
                        loaded[ckpt.checkpoint_id] = ckpt
            except NotImplementedError:
                loaded = {}
        out: list[TypedSnapshot[S]] = []
        for sequence, (cid, entry) in enumerate(entries.items(), start=1):
            ckpt = loaded.get(entry.current)
            state = self._validate(ckpt, cid) if ckpt is not None else (await self._state(entry))[0]
            out.append(TypedSnapshot(cid, state, entry.info.created_at, sequence, entry.recursion_count, entry.version))
        return out

    async def aupdate_state(self, checkpoint_id: str, state: S, expected_version: int) -> int:
        """Replace a checkpoint's state if its version is still ``expected_version``; the new version.

        Raises CheckpointVersionConflict (nothing changed) when another edit came first.
        """
        data = self._dump(state)
        entry = await self._entry(checkpoint_id)
        update = getattr(self.backend, "aupdate_state", None)
        if update is not None and entry.current == checkpoint_id:  # in place, versions kept by the backend
            try:
                version: int = await update(checkpoint_id, data, expected_version)
                return version
            except NotImplementedError:
                pass
        for _ in range(16):
            if entry.version != expected_version:
                raise CheckpointVersionConflict(
                    f"checkpoint {checkpoint_id!r} is at version {entry.version}, not {expected_version}; "
                    "nothing changed"
                )
            new = expected_version + 1
            meta = {"version": new, "recursion_count": entry.recursion_count}
            record = self._record(checkpoint_id, f"v{new}", data, meta)
            try:
                await self.backend.asave(record.model_copy(update={"step": await self._next_step()}))
                return new
            except DuplicateCheckpointId:
                raise CheckpointVersionConflict(
                    f"checkpoint {checkpoint_id!r} was edited to version {new} meanwhile; nothing changed"
                ) from None
            except CheckpointConflict:  # another save moved the thread on: read again and retry
                entry = await self._entry(checkpoint_id)
        raise CheckpointConflict(f"thread {self.thread_id!r} kept changing; try the edit again")

    # -- sync facade -------------------------------------------------------------
    def save(self, state: S, recursion_count: int) -> str:
        return run_sync(self.asave(state, recursion_count))

    def load(self, checkpoint_id: str) -> S:
        return run_sync(self.aload(checkpoint_id))

    def list(self) -> list[str]:
        return run_sync(self.alist())

    def delete(self, checkpoint_id: str) -> None:
        run_sync(self.adelete(checkpoint_id))

    def last(self) -> tuple[S, int] | None:
        return run_sync(self.alast())

    def snapshots(self) -> builtins.list[TypedSnapshot[S]]:
        return run_sync(self.asnapshots())

    def update_state(self, checkpoint_id: str, state: S, expected_version: int) -> int:
        return run_sync(self.aupdate_state(checkpoint_id, state, expected_version))


__all__ = ["TYPED_KEY", "TypedBackend", "TypedCheckpointer", "TypedSnapshot"]
