"""The chain policy both delta checkpointers share: when a checkpoint is stored as a full snapshot.

A checkpoint is stored as a full snapshot when it starts a thread (no parent),
when ``step`` is 0 or a multiple of ``full_snapshot_interval``, or when a delta
would make the chain back to its snapshot longer than the interval (forks and
irregular steps included). So a load never replays more than ``interval - 1``
deltas.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeltaConfig:
    full_snapshot_interval: int = 10

    def __post_init__(self) -> None:
        if self.full_snapshot_interval < 1:
            raise ValueError("full_snapshot_interval must be >= 1")


def snapshot_due(step: int, parent_depth: int | None, interval: int) -> bool:
    """True when this checkpoint must be a full snapshot.

    ``parent_depth`` is the parent's distance from its snapshot (0 for a
    snapshot), or None when there is no parent.
    """
    if parent_depth is None or interval <= 1 or step <= 0 or step % interval == 0:
        return True
    return parent_depth + 1 >= interval
