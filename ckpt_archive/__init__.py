"""ckpt_archive: archive agent-graph checkpoints on object storage and local disk."""

from __future__ import annotations

from .archive import ArchiveCheckpointer, ObjectStore, Problem, RestoredState, VerifyReport, open_archive
from .chain import DeltaConfig
from .checkpointer import Checkpointer, DeltaCheckpointer, MemoryCheckpointer
from .delta import apply, diff
from .errors import (
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
    ReservedMetadataKey,
    TruncatedObject,
    UnsafeBackend,
    UnsupportedFormatVersion,
)
from .model import Checkpoint, CheckpointInfo

__version__ = "0.1.0"

__all__ = [
    "ArchiveCheckpointer",
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
    "InvalidIdentifier",
    "InvalidState",
    "MemoryCheckpointer",
    "MissingObject",
    "ObjectStore",
    "Problem",
    "ReservedMetadataKey",
    "RestoredState",
    "TruncatedObject",
    "UnsafeBackend",
    "UnsupportedFormatVersion",
    "VerifyReport",
    "apply",
    "diff",
    "open_archive",
]
