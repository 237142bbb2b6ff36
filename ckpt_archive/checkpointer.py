"""The checkpointer protocol, the in-memory reference and the delta wrapper, under one import.

Each lives in a module of its own (``protocol``, ``memory``, ``delta_checkpointer``);
this module keeps ``from ckpt_archive.checkpointer import X`` working for all of them.
``MemoryCheckpointer`` is the executable specification the contract tests run
against every other implementation. ``DeltaCheckpointer`` wraps *any*
checkpointer and stores deltas through it, using the same delta engine and
chain policy as the archive.
"""

from __future__ import annotations

from .delta_checkpointer import DeltaCheckpointer
from .memory import MemoryCheckpointer
from .protocol import AsyncCoreCheckpointer, Checkpointer, Ids, Infos

__all__ = ["AsyncCoreCheckpointer", "Checkpointer", "DeltaCheckpointer", "Ids", "Infos", "MemoryCheckpointer"]
