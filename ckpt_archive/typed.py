"""TypedCheckpointer: one thread's checkpoints as instances of a pydantic model.

The state is stored as the model's JSON dump (``model_dump(mode="json")``) in any
checkpointer; the recursion count rides in reserved metadata. Loading validates
the stored JSON against the model again, so a model that changed incompatibly
raises ``StateValidationError`` naming the checkpoint and the failing fields
instead of handing back a half-valid object.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from ._sync import run_sync
from .errors import CheckpointNotFound, InvalidState, StateValidationError
from .model import RESERVED_PREFIX, Checkpoint, CheckpointInfo, check_identifier

S = TypeVar("S", bound=BaseModel)
TYPED_KEY = RESERVED_PREFIX + "typed"
"""Reserved metadata: ``{"recursion_count": int, "model": "module.QualName"}``."""


class EditableCheckpointer(Protocol):
    """What a TypedCheckpointer needs from its backend (MemoryCheckpointer, ArchiveCheckpointer...)."""

    async def asave(self, checkpoint: Checkpoint) -> str: ...
    async def aload(self, thread_id: str) -> Checkpoint | None: ...
    async def aload_by_id(self, checkpoint_id: str) -> Checkpoint | None: ...
    async def alist(self, thread_id: str) -> list[CheckpointInfo]: ...
    async def aupdate_state(self, checkpoint_id: str, state: dict[str, Any], expected_version: int) -> int: ...
    async def aremove(self, thread_id: str, checkpoint_ids: list[str]) -> Any: ...


@dataclass(frozen=True, slots=True)
class TypedSnapshot(Generic[S]):
    """One checkpoint of the thread: its state, when it was made, where it stands, its edit version."""

    checkpoint_id: str
    state: S
    created_at: datetime
    sequence: int  # 1 for the oldest checkpoint of the thread
    recursion_count: int
    version: int


class TypedCheckpointer(Generic[S]):
    """``TypedCheckpointer(MyState, backend, "thread-1")``: a thread of pydantic states, sync and async."""

    def __init__(self, model: type[S], backend: EditableCheckpointer, thread_id: str) -> None:
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

    def _validate(self, ckpt: Checkpoint) -> S:
        try:
            return self.model.model_validate(ckpt.state)
        except ValidationError as exc:
            fields = [".".join(str(p) for p in err["loc"]) or "<root>" for err in exc.errors()]
            detail = "; ".join(f"field {f!r}: {err['msg']}" for f, err in zip(fields, exc.errors(), strict=True))
            error = StateValidationError(
                f"checkpoint {ckpt.checkpoint_id!r} of thread {self.thread_id!r} no longer validates "
                f"against {self.model.__name__}: {detail}"
            )
            error.checkpoint_id = ckpt.checkpoint_id  # type: ignore[attr-defined]
            error.fields = fields  # type: ignore[attr-defined]
            raise error from None

    @staticmethod
    def _recursion_count(metadata: dict[str, Any]) -> int:
        typed = metadata.get(TYPED_KEY)
        return int(typed.get("recursion_count", 0)) if isinstance(typed, dict) else 0

    async def _own(self, checkpoint_id: str) -> Checkpoint:
        ckpt = await self.backend.aload_by_id(checkpoint_id)
        if ckpt is None or ckpt.thread_id != self.thread_id:
            raise CheckpointNotFound(f"checkpoint {checkpoint_id!r} is not in thread {self.thread_id!r}")
        return ckpt

    # -- async core --------------------------------------------------------------
    async def asave(self, state: S, recursion_count: int) -> str:
        data = self._dump(state)
        if not isinstance(recursion_count, int) or recursion_count < 0:
            raise InvalidState(f"recursion_count must be a non-negative int, got {recursion_count!r}")
        infos = await self.backend.alist(self.thread_id)
        ckpt = Checkpoint(
            thread_id=self.thread_id,
            state=data,
            step=infos[-1].step + 1 if infos else 0,
            metadata={TYPED_KEY: {"recursion_count": recursion_count, "model": self._model_name}},
        )
        return await self.backend.asave(ckpt)

    async def aload(self, checkpoint_id: str) -> S:
        return self._validate(await self._own(checkpoint_id))

    async def alist(self) -> list[str]:
        return [info.checkpoint_id for info in await self.backend.alist(self.thread_id)]

    async def adelete(self, checkpoint_id: str) -> None:
        await self._own(checkpoint_id)
        await self.backend.aremove(self.thread_id, [checkpoint_id])

    async def alast(self) -> tuple[S, int] | None:
        """The latest state and its recursion count, or None for an empty thread."""
        ckpt = await self.backend.aload(self.thread_id)
        return None if ckpt is None else (self._validate(ckpt), self._recursion_count(ckpt.metadata))

    async def asnapshots(self) -> list[TypedSnapshot[S]]:
        out: list[TypedSnapshot[S]] = []
        for sequence, info in enumerate(await self.backend.alist(self.thread_id), start=1):
            ckpt = await self._own(info.checkpoint_id)
            out.append(
                TypedSnapshot(
                    checkpoint_id=info.checkpoint_id,
                    state=self._validate(ckpt),
                    created_at=ckpt.created_at,
                    sequence=sequence,
                    recursion_count=self._recursion_count(ckpt.metadata),
                    version=info.version,
                )
            )
        return out

    async def aupdate_state(self, checkpoint_id: str, state: S, expected_version: int) -> int:
        """Replace a checkpoint's state if its version is still ``expected_version``; the new version.

        Raises CheckpointVersionConflict (nothing changed) when another edit came first.
        """
        data = self._dump(state)
        await self._own(checkpoint_id)
        return await self.backend.aupdate_state(checkpoint_id, data, expected_version)

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


__all__ = ["TYPED_KEY", "EditableCheckpointer", "TypedCheckpointer", "TypedSnapshot"]
