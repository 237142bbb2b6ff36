"""LangGraph integration: ``ArchiveSaver``, a ``BaseCheckpointSaver`` on the archive (``langgraph`` extra).

graph.compile(checkpointer=ArchiveSaver.from_url("s3://bucket/agents"))
"""

from __future__ import annotations

from .maintenance import UnknownPruneStrategy
from .saver import ArchiveSaver
from .serde import InvalidAllowedType, UnreadableValue, UnsafeSerde, UnsafeValue, strict_serde

__all__ = [
    "ArchiveSaver",
    "InvalidAllowedType",
    "UnknownPruneStrategy",
    "UnreadableValue",
    "UnsafeSerde",
    "UnsafeValue",
    "strict_serde",
]
