"""delete_thread, delete_for_runs, copy_thread and prune for ArchiveSaver.

Removing some checkpoints of an archive thread *rewrites* that thread: the states of the kept
checkpoints are read, the thread is deleted and they are saved again in their order under their
own archive ids (a fresh snapshot plus deltas). A kept checkpoint whose LangGraph parent is removed
first gets the DeltaChannel history it would have replayed through the removed ancestors folded into
its state (``state["folded"]``, see ``history.py``), so pruning never silently empties a channel.

Not atomic: a crash between the delete and the re-saves loses the kept checkpoints of that thread.
When the archive offers the chain-aware retention API (``aremove``, ``aupdate_state``,
``acopy_thread``), it is used instead: folds are written with ``aupdate_state`` first, then the removed
checkpoints go with ``aremove`` (and copies are server-side), so nothing is ever rewritten.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import CheckpointError
from ...model import Checkpoint, CheckpointInfo, uuid7
from . import writes as W
from .encoding import SerdeCodec, archive_thread, split_thread
from .history import _has_value, collect_history

if TYPE_CHECKING:
    from .saver import ArchiveSaver

STRATEGIES = ("keep_latest", "delete")


class UnknownPruneStrategy(CheckpointError, ValueError):
    """``prune`` was given a strategy other than ``keep_latest`` or ``delete``."""


def _unvalued_channels(codec: SerdeCodec, state: dict[str, Any]) -> list[str]:
    skeleton = state["checkpoint"] if "checkpoint" in state else codec.loads(state["checkpoint_typed"])
    stored = state.get("channels", {})
    return [ch for ch in skeleton.get("channel_versions", {}) if not _has_value(stored.get(ch))]


class Maintenance:
    def __init__(self, saver: ArchiveSaver) -> None:
        self.saver = saver

    async def drop_thread(self, at: str) -> None:
        infos = await self.saver.archive.alist(at)
        await self.saver.archive.adelete(at)
        await W.delete_thread(self.saver.store, at)
        self.saver.forget(at, [i.checkpoint_id for i in infos])

    async def _fold(self, at: str, index: dict[str, CheckpointInfo], lg_id: str) -> dict[str, Any]:
        state = await self.saver.state(index[lg_id].checkpoint_id) or {}
        channels = _unvalued_channels(self.saver.codec, state)
        history = await collect_history(self.saver, at, index, lg_id, channels)
        return {ch: h.to_json() for ch, h in history.items() if h.seed is not None or h.writes}

    async def _rewrite(self, at: str, keep: list[CheckpointInfo], folds: dict[str, dict[str, Any]]) -> None:
        states = []
        for info in keep:
            state = await self.saver.state(info.checkpoint_id)
            if state is None:
                raise CheckpointError(f"checkpoint {info.checkpoint_id!r} of thread {at!r} vanished while rewriting")
            if info.checkpoint_id in folds:
                state = {**state, "folded": folds[info.checkpoint_id]}
            states.append(state)
        before = await self.saver.archive.alist(at)
        await self.saver.archive.adelete(at)
        self.saver.forget(at, [i.checkpoint_id for i in before])
        for step, (info, state) in enumerate(zip(keep, states, strict=True)):
            record = Checkpoint(
                thread_id=at,
                checkpoint_id=info.checkpoint_id,
                step=step,
                state=state,
                metadata=info.metadata,
                created_at=info.created_at,
            )
            await self.saver.archive.asave(record)
            self.saver.remember(info.checkpoint_id, state)

    async def _remove(self, at: str, infos: list[CheckpointInfo], removed: list[CheckpointInfo]) -> None:
        from .saver import by_lg_id, lg_ids

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
        archive: Any = self.saver.archive
        if hasattr(archive, "aremove") and hasattr(archive, "aupdate_state"):  # chain-aware retention
            for info in keep:
                if info.checkpoint_id in folds:
                    state = {**(await self.saver.state(info.checkpoint_id) or {}), "folded": folds[info.checkpoint_id]}
                    await archive.aupdate_state(info.checkpoint_id, state, info.version)
                    self.saver.remember(info.checkpoint_id, state)
            await archive.aremove(at, [i.checkpoint_id for i in removed])
            self.saver.forget(at, [i.checkpoint_id for i in removed])
        else:
            await self._rewrite(at, keep, folds)
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
        from .saver import by_lg_id

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

    async def copy_thread(self, source: str, target: str) -> None:
        from .saver import lg_ids

        archive: Any = self.saver.archive
        for at in await self.saver.thread_ids(source):
            dst = archive_thread(target, split_thread(at)[1])
            existing = await self.saver.archive.alist(dst)
            step = existing[-1].step + 1 if existing else 0
            infos = await self.saver.archive.alist(at)
            if not existing and hasattr(archive, "acopy_thread"):  # server-side copies of the objects
                await archive.acopy_thread(at, dst)
                infos_to_save: list[CheckpointInfo] = []
            else:
                infos_to_save = infos
            for info in infos_to_save:
                state = await self.saver.state(info.checkpoint_id)
                if state is None:
                    continue
                record = Checkpoint(
                    thread_id=dst,
                    checkpoint_id=uuid7(),
                    step=step,
                    state=state,
                    metadata=info.metadata,
                    created_at=info.created_at,
                )
                await self.saver.archive.asave(record)
                self.saver.remember(record.checkpoint_id, state)
                step += 1
            for lg_id in dict.fromkeys(lg_ids(i)[0] for i in infos):
                await W.copy_entries(self.saver.store, at, dst, lg_id)
