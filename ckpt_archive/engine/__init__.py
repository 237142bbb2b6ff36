"""The archive engine: one object (``Engine``) owning a root, its threads' logs (with the one commit,
``ThreadLog.commit``) and contents (with the one replay, ``chains.ChainReader``)."""

from __future__ import annotations

from .chains import ChainReader, Mode
from .core import Engine
from .log import ThreadLog
from .plan import COMPACT, GC, MAINTENANCE, SAVE, CommitPolicy, Fold, Plan, Planner
from .root import DEFAULT_GC_GRACE, Settings, gc_floor, manifest_ttl

__all__ = [
    "COMPACT",
    "DEFAULT_GC_GRACE",
    "GC",
    "MAINTENANCE",
    "SAVE",
    "ChainReader",
    "CommitPolicy",
    "Engine",
    "Fold",
    "Mode",
    "Plan",
    "Planner",
    "Settings",
    "ThreadLog",
    "gc_floor",
    "manifest_ttl",
]
