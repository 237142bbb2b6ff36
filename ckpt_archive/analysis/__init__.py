"""Offline analysis of an archive: pyarrow datasets, pandas/polars frames, reconstructed states.

``open_dataset`` reads the Parquet delta segments directly (``thread_id`` is a
column of each file, never inferred from its folder): deltas of a thread's still-open segment live inline in the
commit log and appear there only after the next full snapshot or
``archive.compact(thread_id)``. ``checkpoints_frame``, ``changes_frame`` and
``states`` go through the archive API and are always complete; ``messages_frame`` is a thread's
conversation (role, text, tool calls, tool results), a LangGraph thread's included (a ``DeltaChannel``'s
messages rebuilt between its snapshots, ``Views``; a checkpoint named by its LangGraph id, ``load_named``).
"""

from __future__ import annotations

from .conversation import MESSAGE_SCHEMA, message_row, view
from .dataset import DELTA_GLOB, delta_glob, open_dataset
from .frames import (
    Backend,
    changes_frame,
    changes_table,
    checkpoints_frame,
    checkpoints_table,
    messages_frame,
    messages_table,
    states,
)
from .replay import Views, load_named

__all__ = [
    "DELTA_GLOB",
    "MESSAGE_SCHEMA",
    "Backend",
    "Views",
    "changes_frame",
    "changes_table",
    "checkpoints_frame",
    "checkpoints_table",
    "delta_glob",
    "load_named",
    "message_row",
    "messages_frame",
    "messages_table",
    "open_dataset",
    "states",
    "view",
]
