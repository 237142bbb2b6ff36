"""ckpt_archive: archive agent-graph checkpoints on object storage and local disk."""

from __future__ import annotations

from .archive import (
    ArchiveCheckpointer,
    Encryption,
    ObjectStore,
    Problem,
    RestoredState,
    VerifyReport,
    open_archive,
)
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
    DecryptionFailed,
    DigestMismatch,
    DuplicateCheckpointId,
    EncryptionError,
    IntegrityError,
    InvalidIdentifier,
    InvalidState,
    KeyUnavailable,
    MissingObject,
    PlaintextRefused,
    ReservedMetadataKey,
    TruncatedObject,
    UnsafeBackend,
    UnsupportedFormatVersion,
)
from .model import Checkpoint, CheckpointInfo
from .retention import GcReport, PruneReport, RetentionPolicy

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
    "DecryptionFailed",
    "DeltaCheckpointer",
    "DeltaConfig",
    "DigestMismatch",
    "DuplicateCheckpointId",
    "Encryption",
    "EncryptionError",
    "GcReport",
    "IntegrityError",
    "InvalidIdentifier",
    "InvalidState",
    "KeyUnavailable",
    "MemoryCheckpointer",
    "MissingObject",
    "ObjectStore",
    "PlaintextRefused",
    "Problem",
    "PruneReport",
    "ReservedMetadataKey",
    "RestoredState",
    "RetentionPolicy",
    "TruncatedObject",
    "UnsafeBackend",
    "UnsupportedFormatVersion",
    "VerifyReport",
    "apply",
    "diff",
    "open_archive",
]
