"""``get_delta_channel_history`` over the archive: the parent-chain walk of LangGraph's savers.

Semantics are InMemorySaver's: walking from the target's parent towards the root, a channel stops
at the nearest ancestor whose stored entry has a value (the *seed*); that ancestor's own writes are
still collected. A checkpoint kept by ``prune``/``delete_for_runs`` whose ancestors went away carries
the history it needed in ``state["folded"]`` (seed and writes, as blobs), which ends the walk the same
way, so pruning never silently empties a ``DeltaChannel``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...model import CheckpointInfo
from ...ops.reads import Manifest
from . import writes as W
from .reading import Reads, SaverReads, lg_ids


@dataclass
class History:
    """One channel's history as stored blobs: ``seed`` is a channel entry or None, writes oldest first."""

    seed: Any = None
    writes: list[tuple[str, str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"writes": [list(w) for w in self.writes]}
        if self.seed is not None:
            out["seed"] = self.seed
        return out

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> History:
        return cls(doc.get("seed"), [(w[0], w[1], w[2]) for w in doc.get("writes", [])])


BATCH = 16
"""Ancestors whose states and writes are read concurrently during a walk."""


def _has_value(entry: Any) -> bool:
    return entry is not None


def _ancestors(index: dict[str, CheckpointInfo], cursor: str | None) -> list[CheckpointInfo]:
    """The parent chain from the manifest records alone (LangGraph parent ids are in their metadata)."""
    out: list[CheckpointInfo] = []
    seen: set[str] = set()
    while cursor is not None and cursor not in seen:
        info = index.get(cursor)
        if info is None:
            break
        seen.add(cursor)
        out.append(info)
        cursor = lg_ids(info)[1]
    return out


def _step(
    state: dict[str, Any],
    entries: list[W.Entry],
    remaining: set[str],
    result: dict[str, History],
    newest_first: dict[str, list[tuple[str, str, Any]]],
) -> None:
    """One ancestor: collect its writes, then stop the channels it holds a value (or a fold) for."""
    stored = state.get("channels", {})
    for task_id, _, channel, blob, _ in reversed(entries):
        if channel in remaining:
            newest_first[channel].append((task_id, channel, blob))
    folded = state.get("folded") or {}
    for ch in list(remaining):
        if _has_value(stored.get(ch)):
            result[ch].seed = stored[ch]
        elif ch in folded:
            old = History.from_json(folded[ch])
            newest_first[ch].extend(reversed(old.writes))
            result[ch].seed = old.seed
        else:
            continue
        remaining.discard(ch)


async def collect_history(
    saver: SaverReads,
    at: str,
    index: dict[str, CheckpointInfo],
    target: str | None,
    channels: list[str],
    m: Manifest | None = None,
    reads: Reads | None = None,
) -> dict[str, History]:
    """``m``: the manifest ``index`` was listed from, so that the walk's batches read no other (without
    it each batch reads the thread's manifest again, as a walk over a thread being rewritten must).
    ``reads``: what the call has read (its ``infos[at]``: the whole listing, so that a fork's children
    count as carriers of their parent's writes); by default the records of ``index``.

    An ancestor's pending writes are carried by its children's states (the walk's previous checkpoint
    among them), built in the same walk as the batch; only objects no state carries are read apart,
    found by one recursive LIST of the thread for the whole walk."""
    if reads is None:
        reads = Reads(infos={at: list(index.values())})
    result = {ch: History() for ch in channels}
    remaining = set(channels)
    newest_first: dict[str, list[tuple[str, str, Any]]] = {ch: [] for ch in channels}
    info = index.get(target) if target else None
    if info is None:
        return result
    state = (await saver.states(at, [info.checkpoint_id], m)).get(info.checkpoint_id) or {}
    for ch, doc in (state.get("folded") or {}).items():
        if ch in remaining:
            result[ch] = History.from_json(doc)
            remaining.discard(ch)
    ancestors = _ancestors(index, lg_ids(info)[1])
    for start in range(0, len(ancestors), BATCH):
        if not remaining:
            break
        batch = ancestors[start : start + BATCH]  # fetched concurrently, scanned newest first
        states, objects = await saver.pending(at, batch, reads, m)
        for a in batch:
            if not remaining:
                break
            entries = W.merge(objects[lg_ids(a)[0]])
            _step(states.get(a.checkpoint_id) or {}, entries, remaining, result, newest_first)
    for ch, collected in newest_first.items():
        if collected:  # channels folded at the target itself collected nothing here
            result[ch].writes = list(reversed(collected))
    return result
