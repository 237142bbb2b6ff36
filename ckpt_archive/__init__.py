"""ckpt_archive: archive agent-graph checkpoints on object storage and local disk."""

from __future__ import annotations

from .archive import ArchiveCheckpointer, ObjectStore, open_archive
from .chain import DeltaConfig
from .checkpointer import Checkpointer, DeltaCheckpointer, MemoryCheckpointer
from .delta import apply, diff
from .errors import (
    BindingMismatch,
    BrokenChain,
    CheckpointConflict,
    CheckpointError,
    CheckpointNotFound,
    CheckpointVersionConflict,
    CorruptManifest,
    DigestMismatch,
    DuplicateCheckpointId,
    IntegrityError,
    InvalidIdentifier,
    InvalidState,
    MissingObject,
    ProtectionError,
    ProtectionMismatch,
    ReservedMetadataKey,
    SessionFlushConflict,
    StateValidationError,
    TruncatedObject,
    UnprovableCheckpoint,
    UnsafeBackend,
    UnsupportedFormatVersion,
)
from .model import Checkpoint, CheckpointInfo, IntegrityStatus, Protection, binding_digest, content_digest

__version__ = "0.1.0"

__all__ = [
    "ArchiveCheckpointer",
    "BindingMismatch",
    "BrokenChain",
    "Checkpoint",
    "CheckpointConflict",
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointNotFound",
    "CheckpointVersionConflict",
    "Checkpointer",
    "CorruptManifest",
    "DeltaCheckpointer",
    "DeltaConfig",
    "DigestMismatch",
    "DuplicateCheckpointId",
    "IntegrityError",
    "IntegrityStatus",
    "InvalidIdentifier",
    "InvalidState",
    "MemoryCheckpointer",
    "MissingObject",
    "ObjectStore",
    "Protection",
    "ProtectionError",
    "ProtectionMismatch",
    "ReservedMetadataKey",
    "SessionFlushConflict",
    "StateValidationError",
    "TruncatedObject",
    "UnprovableCheckpoint",
    "UnsafeBackend",
    "UnsupportedFormatVersion",
    "apply",
    "binding_digest",
    "content_digest",
    "diff",
    "open_archive",
]
