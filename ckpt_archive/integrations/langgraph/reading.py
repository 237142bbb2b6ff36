"""The read side of ``ArchiveSaver``: states, listings and tuples, read with as few round trips as it can.

A ``get_tuple`` or ``list`` call carries a ``Reads``: each archive thread's manifest is read once, the
states of the checkpoints it returns (and of their children, which carry their pending writes:
``writes.py``) are built in one walk (``ArchiveCheckpointer.acontents``), and only the write objects no state
carries are read: found by one recursive LIST per thread (or, for a single checkpoint, one LIST of its
folder while the manifest is read). States are immutable per archive checkpoint id, so caching them is
always safe.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id
from langgraph.checkpoint.serde.base import SerializerProtocol

from ...archive import ArchiveCheckpointer
from ...errors import InvalidIdentifier
from ...format import layout
from ...format.langgraph import Lineage, lg_of
from ...format.langgraph import record_lg_ids as record_lg_ids
from ...format.manifest import Manifest
from ...model import CheckpointInfo
from ...storage import ObjectStore
from . import writes as W
from .encoding import LG_KEY, SerdeCodec, archive_thread, restore_checkpoint, restore_metadata, split_thread
from .writes import Contents

Selected = tuple[str, CheckpointInfo]


@dataclass
class Reads:
    """What one ``get_tuple``/``list`` call has read so far, so that it is read once: each archive
    thread's manifest and listing (the index of its writes is the saver's: ``write_names``)."""

    manifests: dict[str, Manifest] = field(default_factory=dict)
    infos: dict[str, list[CheckpointInfo]] = field(default_factory=dict)
    """Each archive thread's listing (its children show which states carry a checkpoint's writes)."""
    listed: set[str] = field(default_factory=set)
    """Archive threads whose write objects this call listed (``write_names``: once per call)."""
    early: dict[tuple[str, str], asyncio.Task[W.Objects]] = field(default_factory=dict)
    """Pending-write reads started before the checkpoint was confirmed (``_get_tuple``)."""
    raw: dict[str, bytes] = field(default_factory=dict)
    """Decoded base64 of the values seen so far (``SerdeCodec.raw``)."""
    selected: dict[str, int] = field(default_factory=dict)
    """How many checkpoints of each archive thread the call lists (``INDEX_SHARE``)."""

    def start_writes(self, contents: Contents, at: str, lg_id: str) -> None:
        self.early[(at, lg_id)] = asyncio.ensure_future(W.read_folder(contents, at, lg_id))

    kids: dict[str, dict[str, list[CheckpointInfo]]] = field(default_factory=dict)
    ids: dict[tuple[str, int], tuple[str, str | None]] = field(default_factory=dict)
    """(checkpoint id, version) -> the record's LangGraph ids (``lg``): read once per call, where a
    listing asks them of each record about 11 times (its children, grandchildren, objects, tuple)."""

    def lg(self, info: CheckpointInfo) -> tuple[str, str | None]:
        """``lg_ids`` of a record, read once per call."""
        key = (info.checkpoint_id, info.version)
        got = self.ids.get(key)
        if got is None:
            got = self.ids[key] = lg_ids(info)
        return got

    def children(self, at: str) -> dict[str, list[CheckpointInfo]]:
        """LangGraph id -> the records whose LangGraph parent it is (every record, replaced ones too)."""
        if at not in self.kids:
            out: dict[str, list[CheckpointInfo]] = {}
            for info in self.infos.get(at, []):
                parent = self.lg(info)[1]
                if parent is not None:
                    out.setdefault(parent, []).append(info)
            self.kids[at] = out
        return self.kids[at]

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
    return lg_of(info.metadata, info.checkpoint_id)


def is_top(info: CheckpointInfo) -> bool:
    """Committed as the greatest LangGraph id of its thread (``ArchiveSaver._put``)."""
    return bool((info.metadata.get(LG_KEY) or {}).get("top"))


def by_lg_id(
    infos: Sequence[CheckpointInfo], ids: Callable[[CheckpointInfo], tuple[str, str | None]] | None = None
) -> dict[str, CheckpointInfo]:
    """LangGraph id -> its record (a later put of the same id replaces the earlier one); ``ids``: how a
    record's LangGraph ids are read (``Reads.lg``, once per call), ``lg_ids`` by default."""
    of = lg_ids if ids is None else ids
    return {of(i)[0]: i for i in infos}


_WINDOWS = (8, 64)
"""Listed checkpoints built together: a small first window (a caller may stop early), then larger ones."""
INDEX_FROM = 3
"""From this many checkpoints of one archive thread in a call, its write objects are found with one
recursive LIST for the whole call instead of one LIST per checkpoint..."""
INDEX_SHARE = 8
"""...when the call lists at least one in this many of the thread's checkpoints: that LIST walks every
checkpoint's folder (on S3 one request per 1,000 objects, in turn), so a call listing ten of a long
thread's checkpoints (``get_state_history(limit=10)``) lists their ten folders at once instead, and
its cost does not grow with the thread."""
WRITES_KEPT = 64
"""Checkpoints whose write objects a saver keeps for the put of their child to carry."""


MEMOS = ("index", "lineage", "seeds")
"""What a saver keeps of what it read (``SaverReads._memo``): each archive thread's write objects'
names (``write_names``), a listing kept current by the saver's own writes (``known_writes``), the
lineage its last history walk built (``lineage``: the next walk extends it), and the newest
``DeltaChannel`` snapshot entry of each channel it put or a walk found (``note_seeds``: the next
snapshot's prior, ``encoding.build_state``). What
walks read of states (carried writes, seeds) and the write objects read apart are the archive's
(``ArchiveCheckpointer.aparts``, ``held``: one bounded cache for every saver on it)."""
MEMO_THREADS = 64
"""Archive threads whose write objects' names a saver keeps (from one LIST of each, then kept up to date)."""


def remember(memo: OrderedDict[tuple[str, ...], Any], key: tuple[str, ...], value: Any, most: int) -> None:
    """Keep ``value`` in one of the ``_memo`` maps, the least recently used dropped past ``most``."""
    memo[key] = value
    memo.move_to_end(key)
    while len(memo) > most:
        memo.popitem(last=False)


def windows(selected: list[Selected]) -> Iterator[list[Selected]]:
    """``selected`` (newest first) in windows of at most ``_WINDOWS`` checkpoints, each but the last cut
    (by at most half its size) to end at a full record: the next window's states then need no object
    this one read (a snapshot's history rows sit in the segment of the deltas before it, which the
    older window reads), and the states of this window that carry the next one's writes are still in
    the saver's cache (``state_cache``, 64), so a listing parses each segment once."""
    start, size = 0, _WINDOWS[0]
    while start < len(selected):
        end = min(start + size, len(selected))
        if end < len(selected):
            cut = next((e for e in range(end, start + size // 2, -1) if selected[e - 1][1].kind == "full"), end)
            end = cut
        yield selected[start:end]
        start, size = end, _WINDOWS[1]


class SaverReads:
    """Mixin of ``ArchiveSaver`` (which sets these attributes)."""

    archive: ArchiveCheckpointer
    store: ObjectStore
    serde: SerializerProtocol
    _states: OrderedDict[str, dict[str, Any]]
    _state_cache: int
    _known: dict[str, dict[str, tuple[str, int]]]
    _writes: OrderedDict[tuple[str, str], tuple[str | None, W.Objects]]
    _messages: dict[Any, Any]
    """Messages this saver validated, by their cell's JSON text (``SerdeCodec.messages``): handed out
    as fresh copies only, so reads share no object with each other."""
    _memo: dict[str, OrderedDict[tuple[str, ...], Any]]
    """What history walks learnt of objects beside the records (``MEMOS``)."""

    @property
    def codec(self) -> SerdeCodec:
        return SerdeCodec(self.serde)

    def read_codec(self, reads: Reads) -> SerdeCodec:
        """The codec a read decodes with: the call's base64 cache and the saver's message memo
        (``_messages``), so each message is validated once per saver, whichever read meets it (a
        listing, or the head's tuple at the start of every LangGraph turn), and handed out as a fresh
        copy, sharing no object with any other tuple."""
        return SerdeCodec(self.serde, reads.raw, messages=self._messages)

    @property
    def contents(self) -> Contents:
        """The archive's one encoding of stored values (blobs), which write objects go through too: the
        archive's public methods (``ArchiveCheckpointer.stored``/``aunstored``), never its engine."""
        return self.archive

    # -- states (immutable per archive checkpoint id, so caching them is always safe) -------------
    def remember(self, checkpoint_id: str, state: dict[str, Any]) -> None:
        self._states[checkpoint_id] = state
        self._states.move_to_end(checkpoint_id)
        while len(self._states) > self._state_cache:
            self._states.popitem(last=False)

    def known_writes(self, at: str, lg_id: str, parent: str | None, objects: W.Objects) -> None:
        """Write objects of a checkpoint that landed and no commit carries yet (put or read by this
        saver): the next put of its child or grandchild carries them (``carry``)."""
        index = self._memo["index"].get((at,))
        if index is not None:  # the names history walks know of (history.py): this object too
            folder = layout.writes_dir(at, lg_id)
            index[folder] = tuple(sorted({*index.get(folder, ()), *objects}))
        key = (at, lg_id)
        old_parent, held = self._writes.pop(key, (parent, {}))
        self._writes[key] = (parent if parent is not None else old_parent, {**held, **objects})
        while len(self._writes) > WRITES_KEPT:
            self._writes.popitem(last=False)

    def note_seeds(self, at: str, entries: dict[str, Any]) -> None:
        """Keep the ``DeltaChannel`` snapshot entries of archive thread ``at`` that a put stored or a
        history walk found (channel -> stored entry, ``encoding.is_seed``), the newest per channel."""
        if entries:
            memo = self._memo["seeds"]
            remember(memo, (at,), {**memo.get((at,), {}), **entries}, MEMO_THREADS)

    def seeds(self, at: str) -> dict[str, Any] | None:
        """The snapshot entries ``note_seeds`` kept of archive thread ``at`` (None: none)."""
        return self._memo["seeds"].get((at,))

    def carry(self, at: str, lg_parent: str | None) -> dict[str, W.Objects]:
        """What a put of a child of ``lg_parent`` carries: the uncarried objects of its parent and
        grandparent (LangGraph puts a step's writes concurrently with its next checkpoint, so a
        parent's may land only during the put of its child; the grandchild carries those), within
        ``W.CARRY_BYTES``."""
        out: dict[str, W.Objects] = {}
        size = 0
        cursor, depth = lg_parent, 0
        while cursor is not None and depth < 2:
            parent, held = self._writes.get((at, cursor), (None, {}))
            size += W.carry_size(held)
            if held and size <= W.CARRY_BYTES:
                out[cursor] = dict(held)
            cursor, depth = parent, depth + 1
        return out

    def carried_away(self, at: str, carried: dict[str, W.Objects]) -> None:
        """The objects a landed commit carries: no later put carries them again."""
        for lg_id, objects in carried.items():
            parent, held = self._writes.get((at, lg_id), (None, {}))
            if held:
                self._writes[(at, lg_id)] = (parent, {n: o for n, o in held.items() if n not in objects})

    def forget(self, at: str, checkpoint_ids: Sequence[str]) -> None:
        """Drop what this saver remembers of an archive thread that is being rewritten or deleted."""
        self._known.pop(at, None)
        for key in [k for k in self._writes if k[0] == at]:
            del self._writes[key]
        for memo in self._memo.values():
            for memo_key in [k for k in memo if k[0] == at]:
                del memo[memo_key]
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
        m, infos = await self.archive.alisting(at)
        reads.manifests[at], reads.infos[at] = m, infos
        reads.kids.pop(at, None)
        return infos

    async def states(
        self, at: str, checkpoint_ids: Sequence[str], m: Manifest | None = None
    ) -> dict[str, dict[str, Any]]:
        """States of several checkpoints of one archive thread, built in one walk (``ArchiveCheckpointer.acontents``).

        States are shared with the archive's cache and never mutated: ``build_state`` makes new
        dicts and ``restore_checkpoint`` copies what it hands to LangGraph."""
        out = {c: self._states[c] for c in checkpoint_ids if c in self._states}
        missing = [c for c in checkpoint_ids if c not in out]
        if missing:
            for cid, (state, _) in (await self.archive.acontents(at, missing, m)).items():
                self.remember(cid, state)
                out[cid] = state
        return out

    async def write_names(
        self, at: str, lg_ids: Sequence[str], recent: Sequence[str], fresh: bool = False
    ) -> dict[str, list[str]]:
        """The write objects' names of LangGraph checkpoints ``lg_ids`` of archive thread ``at``: the
        folders of ``recent`` (checkpoints without a grandchild: no record carries the writes that land
        while their child is put) are listed, concurrently; the others' objects are those the states
        carry and those this saver wrote or read since (``known_writes``), kept (``_memo["index"]``).
        ``fresh``, or no ``recent`` and nothing kept: one recursive LIST of the thread instead, every
        object of every checkpoint (a call of ``list``, the exact walk of a prune)."""
        memo = self._memo["index"]
        if fresh or (not recent and (at,) not in memo):
            found = await W.index_thread(self.store, at)
            # sorted tuples, not sets: a thousand folders' names kept, none an object the gc tracks
            remember(memo, (at,), {f: tuple(ns) for f, ns in found.items()}, MEMO_THREADS)
            return {x: found.get(layout.writes_dir(at, x), []) for x in lg_ids}
        if (at,) not in memo:
            remember(memo, (at,), {}, MEMO_THREADS)
        index = memo[(at,)]
        memo.move_to_end((at,))
        listed = await asyncio.gather(*(W.names(self.store, at, x) for x in recent))
        for x, names in zip(recent, listed, strict=True):
            index[layout.writes_dir(at, x)] = tuple(sorted(names))
        return {x: list(index.get(layout.writes_dir(at, x), ())) for x in lg_ids}

    def lineage(self, at: str, m: Manifest) -> Lineage:
        """The LangGraph lineage of archive thread ``at`` as of manifest ``m``: the one the last walk of
        this saver built, extended by the records committed since (``Lineage``'s ``base``), so a walk at
        the start of each turn reads the new records only, not every record of the thread again."""
        memo = self._memo["lineage"]
        built = Lineage(m, memo.get((at,)))
        remember(memo, (at,), built, MEMO_THREADS)
        return built

    async def thread_ids(self, thread_id: str | None = None) -> list[str]:
        """Archive threads (all, or every namespace of one LangGraph thread)."""
        names = await self.archive.athreads()
        if thread_id is None:
            return names
        return [n for n in names if split_thread(n)[0] == thread_id]

    async def pending(
        self, at: str, infos: Sequence[CheckpointInfo], reads: Reads, m: Manifest | None = None
    ) -> tuple[dict[str, dict[str, Any]], dict[str, W.Objects]]:
        """States of ``infos`` (one archive thread) and the write objects of their LangGraph ids.

        A checkpoint's objects are those its own state and its children's carry, plus the objects
        found under its folder that none carries (read apart: the head's, or writes that landed after
        the child was put). The states are built in one walk while the objects are listed; the objects
        of a checkpoint without children (nothing can carry them) are read while the states are built,
        the others' once the states say which are carried."""
        kids, ids = reads.children(at), reads.lg
        lg_parent = dict(ids(i) for i in infos)
        lg = sorted(lg_parent)

        def grandkids(x: str) -> list[CheckpointInfo]:
            return [g for k in kids.get(x, []) for g in kids.get(ids(k)[0], [])]

        def carriers(x: str) -> list[str]:
            return [k.checkpoint_id for k in kids.get(x, []) + grandkids(x)]

        need = list(dict.fromkeys([i.checkpoint_id for i in infos] + [c for x in lg for c in carriers(x)]))

        async def listed() -> dict[str, tuple[list[str], W.Objects]]:
            early = {x: reads.early.pop((at, x)) for x in lg if (at, x) in reads.early}
            rest = [x for x in lg if x not in early]
            share = reads.selected.get(at, len(rest)) * INDEX_SHARE >= len(reads.infos.get(at, ()))
            if at in reads.listed or (len(rest) >= INDEX_FROM and share):  # one LIST of the thread per call
                names = await self.write_names(at, rest, [], fresh=at not in reads.listed)
                reads.listed.add(at)
            else:
                names = dict(zip(rest, await asyncio.gather(*(W.names(self.store, at, x) for x in rest)), strict=True))
            leaves = [x for x in names if not grandkids(x)]  # likely carried by no state: read now
            got = await asyncio.gather(*(W.fetch(self.contents, at, x, names[x]) for x in leaves))
            out: dict[str, tuple[list[str], W.Objects]] = {x: (names[x], {}) for x in names}
            out.update({x: (names[x], objs) for x, objs in zip(leaves, got, strict=True)})
            for x, task in early.items():
                objs = await task
                out[x] = (list(objs), objs)
            return out

        states, found = await asyncio.gather(self.states(at, need, m), listed())
        by_lg: dict[str, list[str]] = {}
        for info in infos:
            by_lg.setdefault(ids(info)[0], []).append(info.checkpoint_id)
        objects: dict[str, W.Objects] = {}
        apart: dict[str, W.Objects] = {}  # read as objects: carried by no state
        todo: dict[str, list[str]] = {}
        for x in lg:
            names, read = found[x]
            held: W.Objects = {}
            for cid in by_lg[x] + carriers(x):
                held.update(W.carried(states.get(cid), x, f"checkpoint {cid!r} of thread {at!r}"))
            apart[x] = {n: o for n, o in read.items() if n not in held}
            objects[x] = {**read, **held}
            if rest := [n for n in names if n not in objects[x]]:
                todo[x] = rest
        got = await asyncio.gather(*(W.fetch(self.contents, at, x, ns) for x, ns in todo.items()))
        for x, objs in zip(todo, got, strict=True):
            objects[x].update(objs)
            apart[x].update(objs)
        for x in lg:
            if apart[x] and not grandkids(x):  # the next put of a (grand)child of the head carries these
                self.known_writes(at, x, lg_parent.get(x), apart[x])
        return states, objects

    async def tuples(self, selected: Sequence[Selected], reads: Reads) -> list[CheckpointTuple]:
        """Tuples of listed checkpoints, in the given order: per archive thread, the states are built
        in one walk while the pending writes no state carries are read alongside."""
        codec = self.read_codec(reads)
        by_at: dict[str, list[CheckpointInfo]] = {}
        for at, info in selected:
            by_at.setdefault(at, []).append(info)
        jobs = (self.pending(at, infos, reads, reads.manifests.get(at)) for at, infos in by_at.items())
        done = dict(zip(by_at, await asyncio.gather(*jobs), strict=True))
        out: list[CheckpointTuple] = []
        for at, info in selected:
            states, objects = done[at]
            state = states.get(info.checkpoint_id)
            if state is not None:
                ids = reads.lg(info)
                out.append(self._tuple(at, info, state, W.merge(objects[ids[0]]), codec, ids))
        return out

    def _tuple(
        self,
        at: str,
        info: CheckpointInfo,
        state: dict[str, Any],
        entries: list[W.Entry],
        codec: SerdeCodec,
        ids: tuple[str, str | None],
    ) -> CheckpointTuple:
        """``ids``: the record's LangGraph ids, as the caller read them (``Reads.lg``)."""
        thread_id, ns = split_thread(at)
        lg_id, lg_parent = ids
        codec = codec.at(thread_id, ns, lg_id)
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
        the wanted checkpoint (or of the head the hint names) are read while the manifest is. The
        latest checkpoint (or the one named, when it is the head) is answered from the head alone, in
        O(1) of the thread's length: a head committed as ``top`` holds the greatest LangGraph id, so no
        other record is its child and none is listed; anything else lists the thread."""
        at = archive_thread(*target(config)[:2])
        reads = Reads()
        wanted = get_checkpoint_id(config)
        try:
            hint, hint_read = None, False
            if wanted:
                reads.start_writes(self.contents, at, wanted)
            else:
                head, hint = await self.archive.ahead_guess(at)
                hint_read = True  # or the manifest is cached, which makes the hint moot
                if head is not None:
                    reads.start_writes(self.contents, at, lg_ids(head)[0])
                if hint is not None and head is not None and is_top(head):
                    # the hint's head is LangGraph's latest if no commit followed it: no manifest read
                    fast = await self.archive.ahead_from_hint(at, hint)
                    if fast is not None and is_top(top := self.archive.info_of(at, fast[0])):
                        self.remember(top.checkpoint_id, fast[1][0])
                        return await self._head_tuple(at, top, fast[1][0], reads)
            if hint is not None:
                (m, head), _ = await asyncio.gather(self.archive.amanifest(at, hint), self.archive.awarm_head(at, hint))
            else:
                m, head = await self.archive.amanifest(at, hint_read=hint_read)
            reads.manifests[at] = m
            if head is not None and is_top(head) and (not wanted or lg_ids(head)[0] == wanted):
                state = (await self.states(at, [head.checkpoint_id], m)).get(head.checkpoint_id)
                if state is not None:
                    return await self._head_tuple(at, head, state, reads)
            infos = reads.infos[at] = self.archive.listed(m)
            index = by_lg_id(infos, reads.lg)
            info = index.get(wanted) if wanted else (index[max(index)] if index else None)
            if info is None:
                return None
            found = await self.tuples([(at, info)], reads)
            return found[0] if found else None
        finally:
            reads.cancel()

    async def _head_tuple(self, at: str, top: CheckpointInfo, state: dict[str, Any], reads: Reads) -> CheckpointTuple:
        """The tuple of a head committed as ``top``: no record is its child, so its pending writes are
        the objects under its folder (read while the manifest was, or now) and what its own state
        carries; the next put (of its child) carries them."""
        lg, lg_parent = ids = reads.lg(top)
        if (at, lg) not in reads.early:  # the hint or the cached manifest named another head
            reads.start_writes(self.contents, at, lg)
        objects = {**await reads.early.pop((at, lg)), **W.carried(state, lg, f"thread {at!r}")}
        self.known_writes(at, lg, lg_parent, objects)
        return self._tuple(at, top, state, W.merge(objects), self.read_codec(reads), ids)

    async def _latest_only(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> list[CheckpointTuple] | None:
        """``list(config, limit=1)`` of one namespace of one thread, unfiltered, is ``get_tuple(config)``
        (the greatest LangGraph id, or the one named): answered from the head hint, without reading the
        manifest. None when the call asks for more than that."""
        conf = (config or {}).get("configurable") or {}
        if limit != 1 or filter or before or conf.get("thread_id") in (None, "") or conf.get("checkpoint_ns") is None:
            return None
        assert config is not None
        found = await self._get_tuple(config)
        return [] if found is None else [found]

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
            index = by_lg_id(await self.infos(at, reads), reads.lg)
            for lg_id in sorted(index, reverse=True):
                if limit is not None and len(out) >= limit:
                    return out
                info = index[lg_id]
                if (wanted and lg_id != wanted) or (before_id and lg_id >= before_id):
                    continue
                if filter and not await self._matches(info, filter):
                    continue
                out.append((at, info))
                reads.selected[at] = reads.selected.get(at, 0) + 1
        return out

    async def _matches(self, info: CheckpointInfo, filter: dict[str, Any]) -> bool:
        meta = info.metadata
        if all(k in meta and meta[k] == v for k, v in filter.items()):
            return True
        if not (meta.get(LG_KEY) or {}).get("typed"):
            return False
        codec = self.codec.at(*split_thread(info.thread_id), lg_ids(info)[0])
        full = restore_metadata(codec, meta, await self.state(info.checkpoint_id))
        return all(full.get(k) == v for k, v in filter.items())
