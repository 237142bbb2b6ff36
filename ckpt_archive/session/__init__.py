"""Session checkpoints: an event log and a run state recorded together, flushed append-only."""

from __future__ import annotations

from .events import (
    MessageEvent,
    RunState,
    SessionEvent,
    SessionStatus,
    StatusChanged,
    ToolCall,
    ToolResult,
)
from .manager import CheckpointManager
from .stores import (
    ArchiveManagedStateStore,
    Durability,
    FlushBatch,
    InMemoryManagedStateStore,
    ManagedStateStore,
    StoredSession,
)

__all__ = [
    "ArchiveManagedStateStore",
    "CheckpointManager",
    "Durability",
    "FlushBatch",
    "InMemoryManagedStateStore",
    "ManagedStateStore",
    "MessageEvent",
    "RunState",
    "SessionEvent",
    "SessionStatus",
    "StatusChanged",
    "StoredSession",
    "ToolCall",
    "ToolResult",
]
