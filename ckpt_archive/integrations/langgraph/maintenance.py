"""delete_thread, delete_for_runs, copy_thread and prune for SaverReads, on the archive's retention API.

Removing checkpoints uses the archive's chain-aware ``aremove`` (every kept checkpoint still loads to
the same state). Before that, a kept checkpoint whose LangGraph parent is removed gets the DeltaChannel
history it would have replayed through the removed ancestors folded into its state with
``aupdate_state`` (``state["folded"]``, see ``history.py``), so pruning never silently empties a channel;
the fold is committed before the removal, so a crash in between loses nothing. ``copy_thread`` is the
archive's server-side ``acopy_thread`` (records keep their LangGraph ids), plus the pending writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ...errors import CheckpointError
from ...format import layout
from ...format.langgraph import has_value
from ...model import Checkpoint, CheckpointInfo
from . import writes as W
from .encoding import LG_KEY, SerdeCodec, archive_thread, split_thread
from .history import collect_history
from .reading import Reads, SaverReads, by_lg_id, lg_ids

STRATEGIES = ("keep_latest", "delete")


class UnknownPruneStrategy(CheckpointError, ValueError):
    """``prune`` was given a strategy other than ``keep_latest`` or ``delete``."""


def _unvalued_channels(codec: SerdeCodec, state: dict[str, Any]) -> list[str]:
    skeleton = state["checkpoint"] if "checkpoint" in state else codec.loads(state["checkpoint_typed"])
    stored = state.get("channels", {})
    return [ch for ch in skeleton.get("channel_versions", {}) if not has_value(stored.get(ch))]


class Maintenance:
    def __init__(self, saver: SaverReads) -> None:
        self.saver = saver

    async def drop_thread(self, at: str) -> None:
        infos = await self.saver.archive.alist(at)
        await self.saver.archive.adelete(at)
        await W.delete_thread(self.saver.store, at)
        self.saver.forget(at, [i.checkpoint_id for i in infos])

    async def _fold(self, at: str, index: dict[str, CheckpointInfo], lg_id: str) -> dict[str, Any]:
        state = await self.saver.state(index[lg_id].checkpoint_id, at) or {}
        channels = _unvalued_channels(self.saver.codec, state)
        m = (await self.saver.archive.amanifest(at))[0]
        history = await collect_history(self.saver, at, m, lg_id, channels, exact=True)
        return {ch: h.to_json() for ch, h in history.items() if h.seed is not None or h.writes}

    async def _remove(self, at: str, infos: list[CheckpointInfo], removed: list[CheckpointInfo]) -> None:
        gone = {i.checkpoint_id for i in removed}
        keep = [i for i in infos if i.checkpoint_id not in gone]
        if not keep:
            await self.drop_thread(at)
            return
        index = by_lg_id(infos)
        removed_lg = {lg_ids(i)[0] for i in removed} - {lg_ids(i)[0] for i in keep}
        folds = {}
        for info in keep:
            lg_id, parent = lg_ids(info)
            if parent is not None and parent in removed_lg:
                folds[info.checkpoint_id] = await self._fold(at, index, lg_id)
        # a kept checkpoint whose children go takes the writes they carried for it into its own state
        reads = Reads(infos={at: infos})
        kids = reads.children(at)
        own: dict[str, W.Objects] = {}
        for info in keep:
            lg_id = lg_ids(info)[0]
            if any(k.checkpoint_id in gone for k in kids.get(lg_id, [])):
                objects = (await self.saver.pending(at, [info], reads))[1][lg_id]
                if objects:
                    own[info.checkpoint_id] = objects
        archive = self.saver.archive
        for info in keep:  # folds first: if the removal never happens, nothing was lost
            if info.checkpoint_id in folds or info.checkpoint_id in own:
                state = dict(await self.saver.state(info.checkpoint_id, at) or {})
                if info.checkpoint_id in folds:
                    state["folded"] = folds[info.checkpoint_id]
                if info.checkpoint_id in own:
                    held = {k: v for k, v in (state.get("writes") or {}).items() if k not in removed_lg}
                    state["writes"] = {**held, lg_ids(info)[0]: own[info.checkpoint_id]}
                await archive.aupdate_state(info.checkpoint_id, state, info.version)
                self.saver.remember(info.checkpoint_id, state)
        await archive.aremove(at, [i.checkpoint_id for i in removed])
        self.saver.forget(at, [i.checkpoint_id for i in removed])
        for lg_id in removed_lg:
            await W.delete_checkpoint(self.saver.store, at, lg_id)

    async def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        runs = set(run_ids)
        if not runs:
            return
        for at in await self.saver.thread_ids():
            infos = await self.saver.archive.alist(at)
            removed = [i for i in infos if i.metadata.get("run_id") in runs]
            if removed:
                await self._remove(at, infos, removed)

    async def prune(self, thread_ids: Sequence[str], strategy: str) -> None:
        if strategy not in STRATEGIES:
            raise UnknownPruneStrategy(f"unknown prune strategy {strategy!r}; use one of {STRATEGIES}")
        for thread_id in thread_ids:
            for at in await self.saver.thread_ids(thread_id):
                if strategy == "delete":
                    await self.drop_thread(at)
                    continue
                infos = await self.saver.archive.alist(at)
                index = by_lg_id(infos)
                if len(infos) <= 1:
                    continue
                latest = index[max(index)]
                await self._remove(at, infos, [i for i in infos if i.checkpoint_id != latest.checkpoint_id])

    async def collect_writes(self, grace: timedelta | None = None, *, unsafe_no_writers: bool = False) -> int:
        """Delete the write objects a committed checkpoint's state carries (``writes.py``) once that
        checkpoint is older than the grace (the archive's ``gc_grace`` by default, as ``gc``): a reader
        that listed its thread before the carrying commit may still read the object until then. Objects
        nothing carries are never deleted here. How many were deleted."""
        grace = await self.saver.archive.acheck_grace(grace, unsafe_no_writers=unsafe_no_writers)
        cutoff = datetime.now(UTC) - grace
        deleted = 0
        for at in await self.saver.thread_ids():
            infos = await self.saver.archive.alist(at)
            old = [i for i in infos if i.created_at < cutoff]
            index = await W.index_thread(self.saver.store, at)
            if not old or not index:
                continue
            states = await self.saver.states(at, [i.checkpoint_id for i in old])
            keys: set[str] = set()
            for info in old:
                for lg_id in (states.get(info.checkpoint_id) or {}).get("writes") or {}:
                    carried = W.carried(states[info.checkpoint_id], lg_id, f"checkpoint {info.checkpoint_id!r}")
                    folder = layout.writes_dir(at, lg_id)
                    keys.update(layout.writes_key(at, lg_id, n) for n in carried if n in index.get(folder, ()))
            await self.saver.store.delete(sorted(keys))
            deleted += len(keys)
        return deleted

    async def copy_thread(self, source: str, target: str) -> None:
        for at in await self.saver.thread_ids(source):
            dst = archive_thread(target, split_thread(at)[1])
            existing = await self.saver.archive.alist(dst)
            infos = await self.saver.archive.alist(at)
            if not existing:  # one commit, server-side copies of the objects
                await self.saver.archive.acopy_thread(at, dst)
            else:  # appending to a thread that has checkpoints: save copies after its head
                await self._append_copies(dst, existing[-1].step + 1, infos)
            for lg_id in dict.fromkeys(lg_ids(i)[0] for i in infos):
                await W.copy_entries(self.saver.store, at, dst, lg_id)

    async def _append_copies(self, dst: str, step: int, infos: list[CheckpointInfo]) -> None:
        for info in infos:
            state = await self.saver.state(info.checkpoint_id)
            if state is None:
                continue
            record = Checkpoint(
                thread_id=dst,
                step=step,
                state=state,
                metadata={**info.metadata, LG_KEY: _not_top(info.metadata.get(LG_KEY))},
                created_at=info.created_at,
            )
            await self.saver.archive.asave(record)
            self.saver.remember(record.checkpoint_id, state)
            step += 1


def _not_top(lg: Any) -> Any:
    """A copy appended after other checkpoints cannot claim to hold the thread's greatest id."""
    return {k: v for k, v in lg.items() if k != "top"} if isinstance(lg, dict) else lg
