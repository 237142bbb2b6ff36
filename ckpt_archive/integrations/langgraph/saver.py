"""ArchiveSaver: LangGraph's ``BaseCheckpointSaver`` on a ckpt_archive archive (any fsspec URL).

Each LangGraph checkpoint is one archive checkpoint of the archive thread of its
``(thread_id, checkpoint_ns)`` (mapping in ``encoding.py``); its LangGraph id and parent id live in
the record's metadata under ``ckpt_archive.langgraph``, next to the JSON part of LangGraph's metadata,
so listing and filtering never read a state. Archive checkpoint ids are fresh uuid7s, so the same
LangGraph id may exist in two threads (``copy_thread``). Pending writes are small objects
(``writes.py``). Every method is async at the core (running on fsspec's I/O loop); the sync methods
are thin ``run_sync`` wrappers.
"""

from __future__ import annotations

import asyncio
import random
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.base import Checkpoint as LGCheckpoint
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ..._sync import run_async, run_sync
from ...archive import ArchiveCheckpointer, open_archive
from ...archive.batch import contents, head_guess, listing, warm_head
from ...archive.manifest import Manifest
from ...archive.store import ObjectStore
from ...errors import CheckpointNotFound, InvalidIdentifier
from ...model import Checkpoint, CheckpointInfo, uuid7
from . import writes as W
from .encoding import (
    LG_KEY,
    SerdeCodec,
    archive_thread,
    build_state,
    restore_checkpoint,
    restore_metadata,
    split_metadata,
    split_thread,
)
from .history import History, collect_history
from .maintenance import Maintenance

Selected = tuple[str, CheckpointInfo]


@dataclass
class Reads:
    """What one ``get_tuple``/``list`` call has read so far, so that it is read once: each archive
    thread's manifest, and (``INDEX_FROM`` checkpoints of a thread on) the index of its writes."""

    manifests: dict[str, Manifest] = field(default_factory=dict)
    writes: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    early: dict[tuple[str, str], asyncio.Task[list[W.Entry]]] = field(default_factory=dict)
    raw: dict[str, bytes] = field(default_factory=dict)
    """Decoded base64 of the values seen so far (``SerdeCodec.raw``)."""
    """Pending-write reads started before the checkpoint was confirmed (``_get_tuple``)."""

    def start_writes(self, store: ObjectStore, at: str, lg_id: str) -> None:
        self.early[(at, lg_id)] = asyncio.ensure_future(W.read_entries(store, at, lg_id))

    def cancel(self) -> None:
        """Drop the early reads nobody used (a wrong guess); their errors were about nothing asked for."""
        for task in self.early.values():
            if task.done() and not task.cancelled():
                task.exception()  # retrieved, so asyncio does not log it
            task.cancel()


def target(config: RunnableConfig | None) -> tuple[str, str, dict[str, Any]]:
    """``(thread_id, checkpoint_ns, configurable)`` of a config, with a typed error when it names no thread."""
    conf = (config or {}).get("configurable") or {}
    if conf.get("thread_id") in (None, ""):
        raise InvalidIdentifier("config['configurable']['thread_id'] is required by ArchiveSaver")
    return str(conf["thread_id"]), str(conf.get("checkpoint_ns") or ""), conf


def lg_ids(info: CheckpointInfo) -> tuple[str, str | None]:
    meta = info.metadata.get(LG_KEY) or {}
    return str(meta.get("id", info.checkpoint_id)), meta.get("parent")


def by_lg_id(infos: Sequence[CheckpointInfo]) -> dict[str, CheckpointInfo]:
    """LangGraph id -> its record (a later put of the same id replaces the earlier one)."""
    return {lg_ids(i)[0]: i for i in infos}


_WINDOWS = (8, 64)
"""Listed checkpoints built together: a small first window (a caller may stop early), then larger ones."""
INDEX_FROM = 3
"""From this many checkpoints of one archive thread in a call, its write objects are found with one
recursive LIST for the whole call instead of one LIST per checkpoint."""


def _windows(selected: list[Selected]) -> Iterator[list[Selected]]:
    start, size = 0, _WINDOWS[0]
    while start < len(selected):
        yield selected[start : start + size]
        start, size = start + size, _WINDOWS[1]


class ArchiveSaver(BaseCheckpointSaver[Any]):
    """Drop-in LangGraph checkpointer: ``graph.compile(checkpointer=ArchiveSaver.from_url(url))``."""

    def __init__(
        self, archive: ArchiveCheckpointer, *, serde: SerializerProtocol | None = None, state_cache: int = 64
    ) -> None:
        super().__init__(serde=serde or JsonPlusSerializer(pickle_fallback=False))
        self.archive = archive
        self.store = archive.store
        self._states: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._state_cache = state_cache
        self._known: dict[str, dict[str, tuple[str, int]]] = {}  # archive thread -> lg id -> (archive id, step)

    @classmethod
    def from_url(
        cls,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        serde: SerializerProtocol | None = None,
        full_snapshot_interval: int = 10,
        single_writer: bool = False,
        **kw: Any,
    ) -> ArchiveSaver:
        """A saver on the archive at ``url`` (path, file://, memory://, s3://, gs://, az://)."""
        archive = open_archive(
            url, storage_options, full_snapshot_interval=full_snapshot_interval, single_writer=single_writer
        )
        return cls(archive, serde=serde, **kw)

    @property
    def maintenance(self) -> Maintenance:
        """Built on access: ``with_allowlist`` clones the saver, and the clone must use its own serde."""
        return Maintenance(self)

    @property
    def codec(self) -> SerdeCodec:
        return SerdeCodec(self.serde)

    # -- states (immutable per archive checkpoint id, so caching them is always safe) -------------
    def remember(self, checkpoint_id: str, state: dict[str, Any]) -> None:
        self._states[checkpoint_id] = state
        self._states.move_to_end(checkpoint_id)
        while len(self._states) > self._state_cache:
            self._states.popitem(last=False)

    def forget(self, at: str, checkpoint_ids: Sequence[str]) -> None:
        """Drop what this saver remembers of an archive thread that is being rewritten or deleted."""
        self._known.pop(at, None)
        for cid in checkpoint_ids:
            self._states.pop(cid, None)

    async def state(self, checkpoint_id: str, at: str | None = None) -> dict[str, Any] | None:
        """The archive state of a checkpoint (of archive thread ``at`` when known: no index read)."""
        cached = self._states.get(checkpoint_id)
        if cached is not None:
            return cached
        if at is not None:
            return (await self.states(at, [checkpoint_id])).get(checkpoint_id)
        ckpt = await self.archive.aload_by_id(checkpoint_id)
        if ckpt is None:
            return None
        self.remember(checkpoint_id, ckpt.state)
        return ckpt.state

    async def infos(self, at: str, reads: Reads) -> list[CheckpointInfo]:
        """An archive thread's listing; its manifest is kept in ``reads`` for the states read next."""
        m, infos = await listing(self.archive, at)
        reads.manifests[at] = m
        return infos

    async def states(
        self, at: str, checkpoint_ids: Sequence[str], m: Manifest | None = None
    ) -> dict[str, dict[str, Any]]:
        """States of several checkpoints of one archive thread, built in one walk (``archive.batch``).

        States are shared with the archive's cache and never mutated: ``build_state`` makes new
        dicts and ``restore_checkpoint`` copies what it hands to LangGraph."""
        out = {c: self._states[c] for c in checkpoint_ids if c in self._states}
        missing = [c for c in checkpoint_ids if c not in out]
        if missing:
            for cid, (state, _) in (await contents(self.archive, at, missing, m)).items():
                self.remember(cid, state)
                out[cid] = state
        return out

    async def thread_ids(self, thread_id: str | None = None) -> list[str]:
        """Archive threads (all, or every namespace of one LangGraph thread)."""
        names = await self.archive.athreads()
        if thread_id is None:
            return names
        return [n for n in names if split_thread(n)[0] == thread_id]

    # -- the async core ---------------------------------------------------------------------------
    async def _put(
        self,
        config: RunnableConfig,
        checkpoint: LGCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id, ns, conf = target(config)
        lg_parent = conf.get("checkpoint_id")
        at = archive_thread(thread_id, ns)
        known = self._known.get(at, {})
        parent_cid: str | None
        if lg_parent and lg_parent in known:  # this saver wrote or read the parent: no manifest read
            parent_cid, step = known[lg_parent][0], known[lg_parent][1] + 1
        else:
            infos = await self.archive.alist(at)
            parent = by_lg_id(infos).get(lg_parent) if lg_parent else None
            base = parent if parent is not None else (infos[-1] if infos else None)
            parent_cid = None if parent is None else parent.checkpoint_id
            step = 0 if base is None else base.step + 1
        parent_state = await self.state(parent_cid, at) if parent_cid is not None else None
        codec = self.codec
        plain, typed = split_metadata(codec, dict(get_checkpoint_metadata(config, metadata)))
        state = build_state(codec, dict(checkpoint), dict(new_versions), parent_state, typed)
        lg: dict[str, Any] = {"id": checkpoint["id"], "parent": lg_parent}
        if typed:
            lg["typed"] = True
        record = Checkpoint(
            thread_id=at,
            checkpoint_id=uuid7(),
            parent_id=parent_cid,
            step=step,
            state=state,
            metadata={**plain, LG_KEY: lg},
        )
        try:
            await self.archive.asave(record)
        except CheckpointNotFound:
            if parent_cid is None or lg_parent not in known:
                raise
            self._known.pop(at, None)  # the parent went away behind this saver's back: look again
            return await self._put(config, checkpoint, metadata, new_versions)
        self.remember(record.checkpoint_id, state)
        self._known.setdefault(at, {})[checkpoint["id"]] = (record.checkpoint_id, step)
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    async def _put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> None:
        thread_id, ns, conf = target(config)
        at = archive_thread(thread_id, ns)
        if not conf.get("checkpoint_id"):
            raise InvalidIdentifier("put_writes needs config['configurable']['checkpoint_id']")
        codec = self.codec
        regular: list[list[Any]] = []
        special: list[list[Any]] = []
        for idx, (channel, value) in enumerate(writes):
            if channel in WRITES_IDX_MAP:
                special.append([WRITES_IDX_MAP[channel], channel, codec.dumps(value)])
            else:
                regular.append([idx, channel, codec.dumps(value)])
        await W.put_writes(self.store, at, str(conf["checkpoint_id"]), task_id, task_path, regular, special)

    async def tuples(self, selected: Sequence[Selected], reads: Reads) -> list[CheckpointTuple]:
        """Tuples of listed checkpoints, in the given order: per archive thread, the states are built
        in one walk while the pending writes are read alongside."""
        codec = SerdeCodec(self.serde, reads.raw)
        by_at: dict[str, list[CheckpointInfo]] = {}
        for at, info in selected:
            by_at.setdefault(at, []).append(info)

        async def writes_of(at: str, lg: list[str]) -> dict[str, list[W.Entry]]:
            early = reads.early.pop((at, lg[0]), None) if len(lg) == 1 else None
            if early is not None:
                return {lg[0]: await early}
            if at not in reads.writes and len(lg) >= INDEX_FROM:
                reads.writes[at] = await W.index_thread(self.store, at)
            return await W.read_many(self.store, at, lg, reads.writes.get(at))

        async def one(at: str, infos: list[CheckpointInfo]) -> tuple[dict[str, Any], dict[str, list[W.Entry]]]:
            states, entries = await asyncio.gather(
                self.states(at, [i.checkpoint_id for i in infos], reads.manifests.get(at)),
                writes_of(at, sorted({lg_ids(i)[0] for i in infos})),
            )
            return states, entries

        done = dict(zip(by_at, await asyncio.gather(*(one(at, infos) for at, infos in by_at.items())), strict=True))
        out: list[CheckpointTuple] = []
        for at, info in selected:
            states, entries = done[at]
            state = states.get(info.checkpoint_id)
            if state is not None:
                out.append(self._tuple(at, info, state, entries[lg_ids(info)[0]], codec))
        return out

    def _tuple(
        self, at: str, info: CheckpointInfo, state: dict[str, Any], entries: list[W.Entry], codec: SerdeCodec
    ) -> CheckpointTuple:
        thread_id, ns = split_thread(at)
        lg_id, lg_parent = lg_ids(info)
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": lg_id}},
            checkpoint=restore_checkpoint(codec, state),  # type: ignore[arg-type]
            metadata=restore_metadata(codec, info.metadata, state),  # type: ignore[arg-type]
            parent_config=(
                {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": lg_parent}}
                if lg_parent
                else None
            ),
            pending_writes=W.decode(codec, entries),
        )

    async def _get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """One checkpoint, in three sequential round trips on an object store: the pending writes of
        the wanted checkpoint (or of the head the hint names) are read while the manifest is."""
        at = archive_thread(*target(config)[:2])
        reads = Reads()
        wanted = get_checkpoint_id(config)
        try:
            hint = None
            if wanted:
                reads.start_writes(self.store, at, wanted)
            else:
                head, hint = await head_guess(self.archive, at)
                if head is not None:
                    reads.start_writes(self.store, at, lg_ids(head)[0])
            if hint is not None:
                (m, infos), _ = await asyncio.gather(listing(self.archive, at, hint), warm_head(self.archive, at, hint))
            else:
                m, infos = await listing(self.archive, at)
            reads.manifests[at] = m
            index = by_lg_id(infos)
            info = index.get(wanted) if wanted else (index[max(index)] if index else None)
            if info is None:
                return None
            found = await self.tuples([(at, info)], reads)
            return found[0] if found else None
        finally:
            reads.cancel()

    async def _select(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
        reads: Reads,
    ) -> list[Selected]:
        conf = (config or {}).get("configurable", {})
        thread_id = conf.get("thread_id")
        ns = conf.get("checkpoint_ns")
        if thread_id is not None and ns is not None:
            ats = [archive_thread(str(thread_id), ns)]
        else:
            ats = await self.thread_ids(None if thread_id is None else str(thread_id))
        wanted = conf.get("checkpoint_id")
        before_id = get_checkpoint_id(before) if before else None
        out: list[Selected] = []
        for at in ats:
            index = by_lg_id(await self.infos(at, reads))
            for lg_id in sorted(index, reverse=True):
                if limit is not None and len(out) >= limit:
                    return out
                info = index[lg_id]
                if (wanted and lg_id != wanted) or (before_id and lg_id >= before_id):
                    continue
                if filter and not await self._matches(info, filter):
                    continue
                out.append((at, info))
        return out

    async def _matches(self, info: CheckpointInfo, filter: dict[str, Any]) -> bool:
        meta = info.metadata
        if all(k in meta and meta[k] == v for k, v in filter.items()):
            return True
        if not (meta.get(LG_KEY) or {}).get("typed"):
            return False
        full = restore_metadata(self.codec, meta, await self.state(info.checkpoint_id))
        return all(full.get(k) == v for k, v in filter.items())

    async def _delete_thread(self, thread_id: str) -> None:
        for at in await self.thread_ids(str(thread_id)):
            await self.maintenance.drop_thread(at)

    async def _history(self, config: RunnableConfig, channels: Sequence[str]) -> dict[str, DeltaChannelHistory]:
        at = archive_thread(*target(config)[:2])
        index = by_lg_id(await self.archive.alist(at))
        wanted = get_checkpoint_id(config) or (max(index) if index else None)
        history: dict[str, History] = await collect_history(self, at, index, wanted, list(channels))
        codec = self.codec
        out: dict[str, DeltaChannelHistory] = {}
        for ch in channels:
            h = history[ch]
            entry: DeltaChannelHistory = {"writes": [(t, c, codec.loads(b)) for t, c, b in h.writes]}
            if h.seed is not None:
                entry["seed"] = codec.decode_channel(h.seed)
            out[ch] = entry
        return out

    # -- sync facade ------------------------------------------------------------------------------
    def put(
        self,
        config: RunnableConfig,
        checkpoint: LGCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return run_sync(self._put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        run_sync(self._put_writes(config, writes, task_id, task_path))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return run_sync(self._get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        reads = Reads()
        for window in _windows(run_sync(self._select(config, filter, before, limit, reads))):
            yield from run_sync(self.tuples(window, reads))

    def delete_thread(self, thread_id: str) -> None:
        run_sync(self._delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        run_sync(self.maintenance.delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        run_sync(self.maintenance.copy_thread(str(source_thread_id), str(target_thread_id)))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        run_sync(self.maintenance.prune([str(t) for t in thread_ids], strategy))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return {} if not channels else run_sync(self._history(config, channels))

    # -- async API --------------------------------------------------------------------------------
    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: LGCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await run_async(self._put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await run_async(self._put_writes(config, writes, task_id, task_path))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await run_async(self._get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        reads = Reads()
        for window in _windows(await run_async(self._select(config, filter, before, limit, reads))):
            for tup in await run_async(self.tuples(window, reads)):
                yield tup

    async def adelete_thread(self, thread_id: str) -> None:
        await run_async(self._delete_thread(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await run_async(self.maintenance.delete_for_runs(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await run_async(self.maintenance.copy_thread(str(source_thread_id), str(target_thread_id)))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await run_async(self.maintenance.prune([str(t) for t in thread_ids], strategy))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return {} if not channels else await run_async(self._history(config, channels))

    def get_next_version(self, current: Any, channel: None) -> Any:
        """Integer versions (small in every delta); a string version (``"<n>.<rest>"``) stays a string."""
        if current is None:
            return 1
        if isinstance(current, str):
            return f"{int(current.split('.')[0]) + 1:032}.{random.random():016}"
        return int(current) + 1
