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
    ArchiveMarkerMissing,
    ArchiveNotFound,
    BindingMismatch,
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
    ProtectionError,
    ProtectionMismatch,
    ReservedMetadataKey,
    SessionFlushConflict,
    StateValidationError,
    TruncatedObject,
    UnprovableCheckpoint,
    UnsafeBackend,
    UnsafeGcGrace,
    UnsupportedFormatVersion,
)
from .model import Checkpoint, CheckpointInfo, IntegrityStatus, Protection, binding_digest, content_digest
from .retention import GcReport, PruneReport, RetentionPolicy
from .session import (
    ArchiveManagedStateStore,
    CheckpointManager,
    Durability,
    InMemoryManagedStateStore,
    ManagedStateStore,
    MessageEvent,
    RunState,
    SessionEvent,
    SessionStatus,
    StatusChanged,
    ToolCall,
    ToolResult,
)
from .settings import ArchiveSettings, ConfigError
from .transfer import InvalidExport
from .typed import TypedCheckpointer, TypedSnapshot

__version__ = "0.1.0"

__all__ = [
    "ArchiveCheckpointer",
    "ArchiveManagedStateStore",
    "ArchiveMarkerMissing",
    "ArchiveNotFound",
    "ArchiveSettings",
    "BindingMismatch",
    "BrokenChain",
    "Checkpoint",
    "CheckpointConflict",
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointManager",
    "CheckpointNotFound",
    "CheckpointVersionConflict",
    "Checkpointer",
    "ConfigError",
    "CorruptManifest",
    "DecryptionFailed",
    "DeltaCheckpointer",
    "DeltaConfig",
    "DigestMismatch",
    "DuplicateCheckpointId",
    "Durability",
    "Encryption",
    "EncryptionError",
    "GcReport",
    "InMemoryManagedStateStore",
    "IntegrityError",
    "IntegrityStatus",
    "InvalidExport",
    "InvalidIdentifier",
    "InvalidState",
    "KeyUnavailable",
    "ManagedStateStore",
    "MemoryCheckpointer",
    "MessageEvent",
    "MissingObject",
    "ObjectStore",
    "PlaintextRefused",
    "Problem",
    "Protection",
    "ProtectionError",
    "ProtectionMismatch",
    "PruneReport",
    "ReservedMetadataKey",
    "RestoredState",
    "RetentionPolicy",
    "RunState",
    "SessionEvent",
    "SessionFlushConflict",
    "SessionStatus",
    "StateValidationError",
    "StatusChanged",
    "ToolCall",
    "ToolResult",
    "TruncatedObject",
    "TypedCheckpointer",
    "TypedSnapshot",
    "UnprovableCheckpoint",
    "UnsafeBackend",
    "UnsafeGcGrace",
    "UnsupportedFormatVersion",
    "VerifyReport",
    "apply",
    "binding_digest",
    "content_digest",
    "diff",
    "open_archive",
]

try:  # re-exported only when the optional `langgraph` extra is installed
    from .integrations.langgraph import ArchiveSaver
except ImportError:  # pragma: no cover - exercised only without the extra
    pass
else:
    __all__ += ["ArchiveSaver"]
