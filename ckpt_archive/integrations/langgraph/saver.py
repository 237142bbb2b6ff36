"""ArchiveSaver: LangGraph's ``BaseCheckpointSaver`` on a ckpt_archive archive (any fsspec URL).

Each LangGraph checkpoint is one archive checkpoint of the archive thread of its
``(thread_id, checkpoint_ns)`` (mapping in ``encoding.py``); its LangGraph id and parent id live in
the record's metadata under ``ckpt_archive.langgraph``, next to the JSON part of LangGraph's metadata,
so listing and filtering never read a state. Archive checkpoint ids are minted for their archive thread
(``ids.mint_checkpoint_id``), so the same LangGraph id may exist in two threads (``copy_thread``).
Pending writes are one object per ``put_writes`` call, carried by the next put's state (``writes.py``);
the read side (states, listings, tuples) is ``reading.py``. Every method is async at the core (running
on fsspec's I/O loop); the sync methods are thin ``run_sync`` wrappers.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
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

from ..._sync import run_async, run_sync
from ...archive import ArchiveCheckpointer, open_archive
from ...errors import CheckpointConflict, CheckpointNotFound, CommitOutcomeUnknown, InvalidIdentifier
from ...model import Checkpoint
from ...settings import ArchiveSettings
from . import writes as W
from .encoding import (
    LG_KEY,
    SerdeCodec,
    archive_thread,
    build_state,
    is_seed,
    split_metadata,
)
from .held import Lists
from .history import History, collect_history
from .maintenance import Maintenance
from .reading import MEMOS, Reads, SaverReads, by_lg_id, is_top, lg_ids, target, windows
from .reading import record_lg_ids as lg_ids_of
from .serde import AllowedTypes, check_serde, keys_of, strict_serde
from .values import Texts

SAVER_SNAPSHOT_INTERVAL = 30
"""``from_url``'s ``full_snapshot_interval``: a snapshot every 30 LangGraph steps (a put each; the
``put_writes`` between them never snapshot), where ``open_archive``'s default is 10. What a durable call
pays beyond its one object is the snapshots' snapshot, segment, fold and hint: at 10 that was 1.22 PUTs
per durable call on ``benchmarks/bench_durable.py`` (12 turns: 72 puts, 84 ``put_writes``; 8 snapshots,
7 segments, 7 folds), at 30 it is 1.09 (issue 20's target: 1.1). A cold ``get_tuple`` still reads the
snapshot and the hint's chain (its deltas inline in the hint) in one round trip; the chain is up to 29
deltas applied instead of 9, and the hint carries them (a few KB each for W1's ~1 KB messages)."""
SAVER_HINT_EVERY = SAVER_SNAPSHOT_INTERVAL + 2
"""``from_url``'s ``hint_every`` (``open_archive``): a plain put writes its commit entry alone (1 PUT, one
file); the hint goes with the put after a snapshot, beside the snapshot's fold (``Fold.NEXT_COMMIT``; the
put after that when a manifest part seals first), and otherwise only once this many commits passed
without one (a backstop for a larger interval). The interval plus 2, so that neither the snapshot (30
commits after the thread's first hint) nor a part's put (30 after the fold's) adds a hint of its own:
one hint per interval in a burst (``bench_durable.py``: 170 PUTs, 1.09 per durable call; with
the interval itself 172, 1.10).
Behind a trailing hint a cold ``get_tuple`` learns the head only from the probes of the log, and lists
its pending writes one round trip later: ``SAVER_HINT_IDLE`` keeps that off idle threads."""
SAVER_HINT_IDLE = 1.0
"""``from_url``'s ``hint_idle`` (seconds, ``open_archive``): the hint a burst of puts left behind goes out
once the thread has had no put for this long, so a cold ``get_tuple`` of a thread nobody is writing to
is as cheap as with a hint at every put (2 round trips, 3 with pending writes), at one PUT per burst
instead of one per put (docs/design/005-head-hint.md has the figures). ``None``: ``hint_every`` alone;
``hint_every=1``: a hint with every put (2 PUTs each). A saver built on an archive object uses that
archive's policy."""
SAVER_PROBE_WINDOW = 1
"""``from_url``'s ``probe_window`` (``open_archive``): a cold reader probes the one commit past the hint
beside the chain (``SAVER_HINT_IDLE`` makes the hint current once the writer is idle, when cold readers
come), 4 GETs fewer than the default window of 5; a hint a busy writer left further behind costs a
round trip per window (``next_window``), never a wrong head."""
PUT_RAW_LIMIT = 20_000
"""Values whose serialised bytes the saver keeps between puts, each under its base64 text (for 1 KB
messages about 2.4 KB an entry, ~50 MB when full)."""


class ArchiveSaver(SaverReads, BaseCheckpointSaver[Any]):
    """Drop-in LangGraph checkpointer: ``graph.compile(checkpointer=ArchiveSaver.from_url(url))``.

    Reading never runs code named by the archive (which someone else may have written): by default a
    stored value constructs only LangChain messages, LangGraph's own types (``Send``, ``Interrupt``,
    ``Command``...), the standard value types LangGraph knows, and ``allowed_types``: your state's own
    classes (pydantic models, dataclasses, enums), or ``(module, name)`` pairs. A value of any other
    type comes back as its plain data (a dict or list), never constructed; pickle is refused
    (``UnsafeValue``). See ``serde.py`` and docs/guides/langgraph.md.

    A ``serde`` you pass is used as given (``allowed_types`` extends its allowlist by LangGraph's
    ``with_allowlist``), except LangGraph's permissive ``JsonPlusSerializer`` -- ``JsonPlusSerializer()``
    with ``LANGGRAPH_STRICT_MSGPACK`` unset, or ``EncryptedSerializer(cipher)``, which decodes unencrypted
    values with one -- is refused (``UnsafeSerde``) unless ``unsafe_any_type=True``: to encrypt, pass
    ``EncryptedSerializer(cipher, strict_serde())``.
    """

    def __init__(
        self,
        archive: ArchiveCheckpointer,
        *,
        serde: SerializerProtocol | None = None,
        allowed_types: AllowedTypes = (),
        unsafe_any_type: bool = False,
        state_cache: int = 64,
    ) -> None:
        if serde is not None and not unsafe_any_type:
            check_serde(serde)
        super().__init__(serde=serde or strict_serde())
        self.archive = archive
        self.store = archive.store
        self._states: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._state_cache = state_cache
        self._known: dict[str, dict[str, tuple[str, int]]] = {}  # archive thread -> lg id -> (archive id, step)
        self._put_raw: dict[str, bytes] = {}  # base64 text -> bytes of the values last put (encode_channel)
        self._put_texts: Texts = {}  # id of a json cell put -> (cell, its canonical text) (values.plain_cell)
        self._put_lists: Lists = {}  # id of a list of cells put -> (cells, text, views, ...) (held.Lists)
        if keys := keys_of(allowed_types):  # the mechanism compile() uses for a graph's schema types
            self.serde = self.with_allowlist(keys).serde
        self._writes: OrderedDict[tuple[str, str], tuple[str | None, W.Objects]] = OrderedDict()
        # (archive thread, lg id) -> (its lg parent, its write objects that landed and no commit carries yet)
        self._messages: dict[Any, Any] = {}  # SerdeCodec.messages: validated once, copied afresh
        self._memo: dict[str, OrderedDict[tuple[str, ...], Any]] = {k: OrderedDict() for k in MEMOS}
        # history.py: what walks learnt of records that never change (carried writes, seed entries)
        self._unsure: dict[tuple[str, str], Checkpoint] = {}  # (archive thread, lg id) -> record whose commit
        # raised CommitOutcomeUnknown: the same put again saves that record again, which the archive
        # recognises (its own commit) instead of adding a second record for one LangGraph checkpoint

    @classmethod
    def from_url(
        cls,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        serde: SerializerProtocol | None = None,
        allowed_types: AllowedTypes = (),
        full_snapshot_interval: int = SAVER_SNAPSHOT_INTERVAL,
        single_writer: bool = False,
        hint_every: int = SAVER_HINT_EVERY,
        hint_idle: float | None = SAVER_HINT_IDLE,
        probe_window: int | None = SAVER_PROBE_WINDOW,
        **kw: Any,
    ) -> ArchiveSaver:
        """A saver on the archive at ``url`` (path, file://, memory://, s3://, gs://, az://).

        ``full_snapshot_interval`` is ``SAVER_SNAPSHOT_INTERVAL`` by default; ``hint_every``,
        ``hint_idle`` and ``probe_window`` are ``open_archive``'s head hint policy, here by default
        ``SAVER_HINT_EVERY``, ``SAVER_HINT_IDLE`` and ``SAVER_PROBE_WINDOW``."""
        archive = open_archive(
            url,
            storage_options,
            full_snapshot_interval=full_snapshot_interval,
            single_writer=single_writer,
            hint_every=hint_every,
            hint_idle=hint_idle,
            probe_window=probe_window,
        )
        return cls(archive, serde=serde, allowed_types=allowed_types, **kw)

    @classmethod
    def from_settings(
        cls,
        settings: ArchiveSettings,
        *,
        serde: SerializerProtocol | None = None,
        allowed_types: AllowedTypes = (),
        hint_idle: float | None = SAVER_HINT_IDLE,
        probe_window: int | None = SAVER_PROBE_WINDOW,
        **kw: Any,
    ) -> ArchiveSaver:
        """A saver on the archive ``settings`` describe, with everything they set: storage options,
        ``gc_grace``, the encryption key, ``single_writer``. The snapshot interval and the head hint
        policy are ``from_url``'s defaults unless the settings set them."""
        archive = settings.open(
            defaults={"full_snapshot_interval": SAVER_SNAPSHOT_INTERVAL, "hint_every": SAVER_HINT_EVERY},
            hint_idle=hint_idle,
            probe_window=probe_window,
        )
        return cls(archive, serde=serde, allowed_types=allowed_types, **kw)

    @classmethod
    def from_config(cls, path: str | Path | None = None, **kw: Any) -> ArchiveSaver:
        """``from_settings`` of the config file at ``path`` (TOML, as the CLI's ``--config``) and the
        environment (``CKPT_ARCHIVE_*``): one deployment's archive settings for the CLI and the saver."""
        return cls.from_settings(ArchiveSettings.load(path), **kw)

    def close(self) -> None:
        """Done with this saver: put the head hint ``hint_idle`` would put later (``ArchiveCheckpointer.close``),
        so the next cold ``get_tuple`` reads the head in 2-3 round trips. Interpreter exit does the same."""
        self.archive.close()

    async def aclose(self) -> None:
        await self.archive.aclose()

    def __enter__(self) -> ArchiveSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ArchiveSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def maintenance(self) -> Maintenance:
        """Built on access: ``with_allowlist`` clones the saver, and the clone must use its own serde."""
        return Maintenance(self)

    # -- the async core ---------------------------------------------------------------------------
    async def _put(
        self,
        config: RunnableConfig,
        checkpoint: LGCheckpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        attempt: int = 0,
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
        codec = SerdeCodec(self.serde, self._put_raw, PUT_RAW_LIMIT, texts=self._put_texts, lists=self._put_lists)
        plain, typed = split_metadata(codec, dict(get_checkpoint_metadata(config, metadata)))
        state = build_state(codec, dict(checkpoint), dict(new_versions), parent_state, typed, self.seeds(at))
        if carried := self.carry(at, lg_parent):  # earlier steps' writes, in this commit
            state["writes"] = carried
        lg: dict[str, Any] = {"id": checkpoint["id"], "parent": lg_parent, "values": sorted(state["channels"])}
        # ``values``: the channels this record stores a value for, so a ``DeltaChannel`` history walk
        # finds its seed from the manifest (history.py) without building any ancestor's state
        if typed:
            lg["typed"] = True
        # Appending to the head (the usual step) is saved as an append, which fails with a conflict
        # if the thread moved on, so ``top`` -- "no checkpoint of the thread has a greater LangGraph
        # id" -- is exact when committed; a fork never claims it (see reading.py, get_tuple).
        head = self.archive.known_head(at)
        appending = head.checkpoint_id == parent_cid if head is not None else parent_cid is None
        if appending and (head is None or (is_top(head) and checkpoint["id"] > lg_ids(head)[0])):
            lg["top"] = True
        record = Checkpoint._checked_at_save(  # the state is JSON by construction (build_state)
            thread_id=at,
            parent_id=None if appending else parent_cid,
            step=step,
            state=state,
            metadata={**plain, LG_KEY: lg},
        )
        unsure = self._unsure.pop((at, checkpoint["id"]), None)
        if unsure is not None and _same_put(unsure, record):
            record = unsure  # the same put, retried: the archive finds its commit, or makes it now
        try:
            await self.archive.asave_owned(record)  # its state is this put's cells: not checked and copied again
        except CommitOutcomeUnknown:
            if len(self._unsure) >= 64:
                self._unsure.pop(next(iter(self._unsure)))
            self._unsure[(at, checkpoint["id"])] = record
            raise
        except (CheckpointNotFound, CheckpointConflict):
            if (parent_cid is None and not appending) or attempt >= 8:
                raise
            self._known.pop(at, None)  # the thread changed behind this saver's back: the retry lists it
            return await self._put(config, checkpoint, metadata, new_versions, attempt + 1)
        self.remember(record.checkpoint_id, state)
        self.note_seeds(at, {ch: e for ch, e in state["channels"].items() if is_seed(e)})
        self.carried_away(at, record.state.get("writes") or {})
        self.known_writes(at, checkpoint["id"], lg_parent, {})  # its lineage, for the put of its grandchild
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
        entries = [[WRITES_IDX_MAP.get(ch, idx), ch, codec.encode_value(v)] for idx, (ch, v) in enumerate(writes)]
        lg_id = str(conf["checkpoint_id"])
        name, obj = await W.put(self.contents, at, lg_id, task_id, task_path, entries, self._chain_blobs(at, lg_id))
        self.known_writes(at, lg_id, None, {name: obj})  # landed: the next put of a (grand)child carries it

    def _chain_blobs(self, at: str, lg_id: str) -> set[str]:
        """Blob keys listed by the chains of ``lg_id``'s record and of the thread's head in the manifest
        this saver holds, if it was read less than ``manifest_ttl`` ago (no request): a write object need
        not write them first (``writes.put`` says why that is safe: any record of the thread listing
        them would do). The head's, because LangGraph puts a step's writes while the checkpoint they
        belong to may still be being put (``durability="async"``). Empty when unknown: all are written."""
        cid = self._known.get(at, {}).get(lg_id, (None, 0))[0]
        head = self.archive.known_head(at)
        return self.archive.known_blobs(at, [cid, None if head is None else head.checkpoint_id])

    async def _delete_thread(self, thread_id: str) -> None:
        for at in await self.thread_ids(str(thread_id)):
            await self.maintenance.drop_thread(at)

    async def _history(self, config: RunnableConfig, channels: Sequence[str]) -> dict[str, DeltaChannelHistory]:
        at = archive_thread(*target(config)[:2])
        m = (await self.archive.amanifest(at))[0]  # one manifest read for the whole walk
        wanted = get_checkpoint_id(config) or max((lg_ids_of(r)[0] for r in m.records.values()), default=None)
        history: dict[str, History] = await collect_history(self, at, m, wanted, channels)
        self.note_seeds(at, {ch: h.seed for ch, h in history.items() if is_seed(h.seed)})
        codec = SerdeCodec(self.serde, messages=self._messages).at(*target(config)[:2], wanted)
        out: dict[str, DeltaChannelHistory] = {}
        for ch in channels:
            h = history[ch]
            entry: DeltaChannelHistory = {"writes": [(t, c, codec.decode_value(b)) for t, c, b in h.writes]}
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
        latest = run_sync(self._latest_only(config, filter, before, limit))
        if latest is not None:
            yield from latest
            return
        reads = Reads()
        for window in windows(run_sync(self._select(config, filter, before, limit, reads))):
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
        latest = await run_async(self._latest_only(config, filter, before, limit))
        if latest is not None:
            for tup in latest:
                yield tup
            return
        reads = Reads()
        for window in windows(await run_async(self._select(config, filter, before, limit, reads))):
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


def _same_put(earlier: Checkpoint, record: Checkpoint) -> bool:
    """Is ``record`` the put of ``earlier`` again? Compared on what the put itself gives (state, step,
    metadata), not on what this saver derived from the head it had cached (the archive parent and the
    ``top`` mark): once the thread was re-read, that head is ``earlier`` itself if it landed."""

    def given(c: Checkpoint) -> tuple[Any, ...]:
        lg = {k: v for k, v in c.metadata.get(LG_KEY, {}).items() if k != "top"}
        state = {k: v for k, v in c.state.items() if k != "writes"}  # more parent writes may have landed since
        return state, c.step, {**c.metadata, LG_KEY: lg}

    return given(earlier) == given(record)
