"""ckpt_archive: archive agent-graph checkpoints on object storage and local disk."""

from __future__ import annotations

from .archive import ArchiveCheckpointer, ObjectStore, open_archive
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
    "DeltaCheckpointer",
    "DeltaConfig",
    "DigestMismatch",
    "DuplicateCheckpointId",
    "GcReport",
    "IntegrityError",
    "InvalidIdentifier",
    "InvalidState",
    "MemoryCheckpointer",
    "MissingObject",
    "ObjectStore",
    "PruneReport",
    "ReservedMetadataKey",
    "RetentionPolicy",
    "TruncatedObject",
    "UnsafeBackend",
    "UnsupportedFormatVersion",
    "apply",
    "diff",
    "open_archive",
]

try:  # re-exported only when the optional `langgraph` extra is installed
    from .integrations.langgraph import ArchiveSaver
except ImportError:  # pragma: no cover - exercised only without the extra
    pass
else:
    __all__ += ["ArchiveSaver"]
