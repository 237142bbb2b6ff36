"""The checkpoint record and the listing entry (pydantic v2 value types)."""

from __future__ import annotations

import copy
from contextvars import ContextVar
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .codec import check_json, content_digest, json_copy_raw, sha256
from .errors import (
    BindingMismatch,
    CheckpointError,
    InvalidState,
    ProtectionMismatch,
    ReservedMetadataKey,
    UnprovableCheckpoint,
)
from .ids import check_identifier as check_identifier  # re-exported: its home is ``ids``
from .ids import mint_checkpoint_id
from .ids import uuid7 as uuid7

JSON = Any
"""A JSON value: None, bool, int, float, str, list of JSON, dict of str to JSON."""

RESERVED_PREFIX = "ckpt_archive."
"""Metadata keys with this prefix belong to ckpt_archive (pins, versions...)."""
LANGGRAPH_KEY = RESERVED_PREFIX + "langgraph"
"""Record metadata key of a checkpoint the LangGraph saver wrote: its LangGraph id, parent id and the
channels it stores a value for (spec.md section 11). Here, so that readers without the langgraph
extra (analysis, CLI) spell it as the saver does."""


def _minted(data: dict[str, Any]) -> str:
    """The default checkpoint id: minted for the thread (a thread id that failed validation raises there)."""
    thread_id = data.get("thread_id")
    return mint_checkpoint_id(thread_id) if isinstance(thread_id, str) else uuid7()


def check_user_metadata(metadata: dict[str, Any]) -> None:
    for key in metadata:
        if isinstance(key, str) and key.startswith(RESERVED_PREFIX):
            raise ReservedMetadataKey(f"metadata key {key!r} is reserved (prefix {RESERVED_PREFIX!r})")


def binding_digest(token: str | bytes) -> str:
    """The digest a host passes as ``binding_digest``: sha256 of, e.g., an authorisation token."""
    return sha256(token.encode("utf-8") if isinstance(token, str) else token)


class IntegrityStatus(StrEnum):
    """What a checkpoint can prove about its own content."""

    VERIFIED = "verified"  # protected, and state and messages hash to the recorded digests
    UNPROTECTED = "unprotected"  # legacy: no digests recorded, so nothing can be proven
    TAMPERED = "tampered"  # protected, but the content (or the binding) does not match


class Protection(BaseModel):
    """Digests recorded when a checkpoint is created: proof that it is complete and unaltered.

    These are the checkpoint's own digests of its content (``content_digest``), what the memory and
    delta checkpointers keep. An archive record stores them once, as the record's ``state_sha256`` /
    ``messages_sha256`` (or, encrypted, proves the content by MACs), and keeps in ``fields.protection``
    only the binding; a loaded checkpoint's protection is rebuilt from the record (spec section 13).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    algorithm: Literal["sha256"] = "sha256"
    state_sha256: str
    messages_sha256: str
    binding_sha256: str | None = None

    @classmethod
    def of(cls, state: dict[str, Any], messages: list[Any], binding_digest: str | None = None) -> Protection:
        return cls(
            state_sha256=content_digest(state),
            messages_sha256=content_digest(messages),
            binding_sha256=binding_digest,
        )


_AT_SAVE: ContextVar[bool] = ContextVar("ckpt_archive_state_checked_at_save", default=False)
"""Set while ``Checkpoint._checked_at_save`` builds a checkpoint (per thread and task)."""


class Checkpoint(BaseModel):
    """One saved step of one thread. Immutable: the ``with_*`` helpers return copies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    thread_id: str
    checkpoint_id: str = Field(default_factory=lambda data: _minted(data))
    """By default minted for the thread (``ids.mint_checkpoint_id``): the id says where it lives."""
    parent_id: str | None = None
    step: int = 0
    state: dict[str, JSON] = Field(default_factory=dict)
    pending_nodes: list[str] = Field(default_factory=list)
    metadata: dict[str, JSON] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    cleared_interrupt: str | None = None
    attempts: dict[str, int] = Field(default_factory=dict)
    child_ledger: dict[str, JSON] = Field(default_factory=dict)
    run_id: str | None = None
    node_id: str | None = None
    messages: list[JSON] = Field(default_factory=list)
    protection: Protection | None = None

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:  # surface our typed error, not pydantic's wrapper
            for err in exc.errors():
                original = (err.get("ctx") or {}).get("error")
                if isinstance(original, CheckpointError):
                    raise original from None
            raise

    @classmethod
    def _checked_at_save(cls, **data: Any) -> Checkpoint:
        """A checkpoint whose state and messages are only checked when saved, for integrations that
        hand it straight to ``ArchiveCheckpointer.save``. Save checks and copies both before anything
        else, so checking them here too would be a second pass over the whole state on every put (which
        mostly grows); a non-JSON value raises the same ``InvalidState``, from
        ``save``. Every other field is validated as in ``Checkpoint(...)``."""
        token = _AT_SAVE.set(True)
        try:
            return cls(**data)
        finally:
            _AT_SAVE.reset(token)

    @field_validator("thread_id", mode="before")
    @classmethod
    def _thread_id(cls, v: Any) -> str:
        return check_identifier(v, "thread_id")

    @field_validator("checkpoint_id", mode="before")
    @classmethod
    def _checkpoint_id(cls, v: Any) -> str:
        return check_identifier(v, "checkpoint_id")

    @field_validator("parent_id", mode="before")
    @classmethod
    def _parent_id(cls, v: Any) -> str | None:
        return None if v is None else check_identifier(v, "parent_id")

    @field_validator("state", "metadata", "child_ledger", mode="before")
    @classmethod
    def _json(cls, v: Any, info: Any) -> Any:
        if not isinstance(v, dict):
            raise InvalidState(f"{info.field_name} must be a dict with string keys, got {type(v).__name__}")
        if info.field_name != "state":
            check_json(v, info.field_name)
        elif _AT_SAVE.get():  # save checks the rest; the field's own type needs string keys at the top
            bad = [k for k in v if not isinstance(k, str)]
            if bad:
                raise InvalidState(f"state: key {bad[0]!r} is not a string")
        else:  # states of a thread mostly grow: check what changed (codec._reuse)
            json_copy_raw(v, "state", series=info.data.get("thread_id"))
        return v

    @field_validator("messages", mode="before")
    @classmethod
    def _messages(cls, v: Any, info: Any) -> Any:
        if not isinstance(v, list):
            raise InvalidState(f"messages must be a list, got {type(v).__name__}")
        if _AT_SAVE.get():
            return v
        json_copy_raw(v, "messages", series=info.data.get("thread_id"))
        return v

    @field_validator("step", "attempts")
    @classmethod
    def _sealable(cls, v: Any, info: Any) -> Any:
        """Numbers the record stores must fit its JSON (64-bit integers): refused here, not by the
        commit after the payloads were written."""
        check_json(v, info.field_name)
        return v

    @field_validator("created_at")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)

    @classmethod
    def new(
        cls,
        thread_id: str,
        state: dict[str, JSON],
        step: int = 0,
        pending_nodes: list[str] | None = None,
        *,
        parent_id: str | None = None,
        metadata: dict[str, JSON] | None = None,
        messages: list[JSON] | None = None,
        run_id: str | None = None,
        node_id: str | None = None,
        protect: bool = False,
        binding_digest: str | None = None,
    ) -> Checkpoint:
        """A fresh checkpoint with a new time-ordered id; refuses non-JSON state naming the key.

        ``protect=True`` (implied by a ``binding_digest``) records the digests of the state and
        messages as they are now, so the checkpoint can later prove it is complete and unaltered.
        """
        metadata = dict(metadata or {})
        check_user_metadata(metadata)
        ckpt = cls(
            thread_id=thread_id,
            state=state,
            step=step,
            pending_nodes=list(pending_nodes or []),
            parent_id=parent_id,
            metadata=metadata,
            messages=list(messages or []),
            run_id=run_id,
            node_id=node_id,
        )
        return ckpt.protect(binding_digest) if protect or binding_digest is not None else ckpt

    # -- protection ------------------------------------------------------------
    @property
    def is_protected(self) -> bool:
        return self.protection is not None

    def protect(self, binding_digest: str | None = None) -> Checkpoint:
        """A copy whose protection records the digests of the current state and messages."""
        protection = Protection.of(self.state, self.messages, binding_digest)
        return self.model_copy(update={"protection": protection})

    def integrity_status(self, binding_digest: str | None = None) -> IntegrityStatus:
        """VERIFIED, UNPROTECTED (legacy, cannot be proven) or TAMPERED; never raises."""
        try:
            self.validate_integrity(binding_digest)
        except UnprovableCheckpoint:
            return IntegrityStatus.UNPROTECTED
        except (ProtectionMismatch, BindingMismatch):
            return IntegrityStatus.TAMPERED
        return IntegrityStatus.VERIFIED

    def validate_integrity(self, binding_digest: str | None = None) -> None:
        """Prove the content is what was protected; pass the host's ``binding_digest`` to check it too.

        Raises UnprovableCheckpoint (no protection), ProtectionMismatch (state or messages
        changed) or BindingMismatch -- all ``IntegrityError`` subclasses.
        """
        self._prove(None, binding_digest)

    def _prove(self, digests: tuple[str, str] | None, binding_digest: str | None) -> None:
        where = {"thread_id": self.thread_id, "checkpoint_id": self.checkpoint_id}
        p = self.protection
        if p is None:
            raise UnprovableCheckpoint("checkpoint has no protection: its state cannot be proven", **where)
        state_sha256, messages_sha256 = digests or (content_digest(self.state), content_digest(self.messages))
        if state_sha256 != p.state_sha256:
            raise ProtectionMismatch("state differs from the digest recorded at creation", **where)
        if messages_sha256 != p.messages_sha256:
            raise ProtectionMismatch("messages differ from the digest recorded at creation", **where)
        if binding_digest is not None and binding_digest != p.binding_sha256:
            raise BindingMismatch("checkpoint is bound to another binding digest", **where)

    def check_protection(self, digests: tuple[str, str] | None = None) -> None:
        """What checkpointers run on save and load: validate when protected, accept legacy checkpoints.

        ``digests``: the ``content_digest`` of the state and of the messages when the caller has them
        (the archive's save, whose record stores them), so a content is hashed once."""
        if self.protection is not None:
            self._prove(digests, None)

    def try_restore_state(self, binding_digest: str | None = None) -> dict[str, JSON]:
        """A private copy of the state, only once it is proven (raises an IntegrityError otherwise)."""
        self.validate_integrity(binding_digest)
        return copy.deepcopy(self.state)

    def restore_state(self) -> dict[str, JSON]:
        """The explicitly lenient variant: a private copy of the state, proven or not."""
        return copy.deepcopy(self.state)

    def is_resave_of(self, saved: Checkpoint) -> bool:
        """Would saving ``self`` add nothing to ``saved`` (a checkpoint with its id, of the same thread)?
        So it is for a save retried after an unknown outcome. The rule is the archive's (``is_resave``),
        over both as records, their contents compared by digest."""
        return self.thread_id == saved.thread_id and is_resave(self._as_record(), saved._as_record())

    def _as_record(self) -> dict[str, Any]:
        digests = {"state_sha256": content_digest(self.state), "messages_sha256": content_digest(self.messages)}
        return {**self.record_fields(digests), "parent": self.parent_id}

    def record_fields(self, digests: dict[str, Any]) -> dict[str, Any]:
        """The fields of this checkpoint's record that do not depend on where it is committed (the
        archive's record has them as they are; ``digests``: the fields proving its content)."""
        record: dict[str, Any] = {
            "id": self.checkpoint_id,
            "step": self.step,
            "created_at": self.created_at.isoformat(),
            "metadata": self.metadata,
            "fields": {
                "pending_nodes": self.pending_nodes,
                "cleared_interrupt": self.cleared_interrupt,
                "attempts": self.attempts,
                "child_ledger": self.child_ledger,
            },
            "version": 1,
            **digests,
        }
        for name in ("run_id", "node_id"):  # written only when set
            if getattr(self, name) is not None:
                record["fields"][name] = getattr(self, name)
        if self.protection is not None:  # its digests are the record's own (``digests``): only the binding
            record["fields"]["protection"] = {"binding_sha256": self.protection.binding_sha256}
        return record

    def with_cleared_interrupt(self, node: str) -> Checkpoint:
        return self.model_copy(update={"cleared_interrupt": node})

    def with_metadata(self, key: str, value: JSON) -> Checkpoint:
        check_user_metadata({key: value})
        check_json(value, f"metadata[{key!r}]")
        return self.model_copy(update={"metadata": {**self.metadata, key: value}})

    def with_parent(self, parent_id: str | None) -> Checkpoint:
        return self.model_copy(update={"parent_id": parent_id})

    def with_state(self, state: dict[str, JSON]) -> Checkpoint:
        """A copy with another state; a protected checkpoint is protected anew (same binding)."""
        check_json(state, "state")
        return self._reprotect(self.model_copy(update={"state": state}))

    def with_messages(self, messages: list[JSON]) -> Checkpoint:
        """A copy with another message list; a protected checkpoint is protected anew (same binding)."""
        check_json(messages, "messages")
        return self._reprotect(self.model_copy(update={"messages": list(messages)}))

    def _reprotect(self, ckpt: Checkpoint) -> Checkpoint:
        return ckpt if self.protection is None else ckpt.protect(self.protection.binding_sha256)


def is_resave(new: dict[str, Any], saved: dict[str, Any]) -> bool:
    """The one re-save rule: would saving a checkpoint whose record is ``new`` add nothing to the
    record ``saved`` of its id? Records as ``Checkpoint.record_fields`` makes them, with their
    ``parent``: every field equal (the ids, step, time, metadata, fields, content digests), the
    parent too unless ``new`` names none. The archive compares a save with a committed record by it,
    without loading the record's content (``ops.save.committed``); the other checkpointers compare
    two checkpoints (``Checkpoint.is_resave_of``)."""
    parent = new.get("parent")
    same = all(saved.get(k) == v for k, v in new.items() if k != "parent")
    return same and (parent is None or saved.get("parent") == parent)


class CheckpointInfo(BaseModel):
    """A listing entry: everything about a checkpoint except its state (never read to list)."""

    model_config = ConfigDict(frozen=True)

    thread_id: str
    checkpoint_id: str
    parent_id: str | None
    step: int
    kind: Literal["full", "delta"]
    created_at: datetime
    stored_bytes: int
    metadata: dict[str, JSON] = Field(default_factory=dict)
    version: int = 1
