"""The one replay of a checkpoint chain: a snapshot (maybe encrypted, its long lists replayed from its
lineage's history rows) followed by deltas (inline, in Parquet segments, or empty), rebuilt into a
content checked against the digests recorded at save.

Every reader of contents goes through ``ChainReader``: loads (the head hint, ``load_by_id``, batch
reads, ``ops.reads``), ``history``, the integrity API and ``verify``. They differ only in what a failed check does
(``Mode``), in whether the instance's state cache may serve and keep contents (the integrity API and
``verify`` re-read every object), and in how much a walk over a whole thread keeps in memory. So a
rule of the format (a copied delta's rows are named by its ``origin``, a copied snapshot names the
checkpoint it was taken of) is applied in one place, and every reader sees the same contents.
"""

from __future__ import annotations

import enum
import functools
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ..delta import Delta, apply_checkpoint
from ..errors import (
    BrokenChain,
    CheckpointError,
    IntegrityError,
    MissingObject,
    NeedsManifest,
    ObjectTooLarge,
    ProtectionMismatch,
    TruncatedObject,
)
from ..format import blobs, crypto, layout, replay
from ..format import refs as R
from ..format.content import Content, state_key
from ..format.crypto import Encryption
from ..format.manifest import Manifest, Record, history_ref, ref_keys
from ..format.objects import SegmentReader, check_content, decode_snapshot_content, verify
from ..storage import ObjectStore
from .lists import Replays, rows_keys

T = TypeVar("T")

_KEEP_STATES = 64
_KEEP_SEGMENTS = 4
_KEEP_BLOBS = 64
"""What a walk over a whole thread (``walk=True``) keeps: the contents a child may be built on, and
parsed segments (a thread's deltas are in commit order, so neighbours share a segment), and decoded
blobs (a value re-sent in many turns is fetched once)."""


class ContentService(Protocol):
    """What a replay needs of the engine (``contents.Contents``): the store, the keys and the state cache."""

    @property
    def store(self) -> ObjectStore: ...
    @property
    def encryption(self) -> Encryption | None: ...
    @property
    def archive_id(self) -> str: ...
    def cached(self, key: str) -> Content | None: ...
    def remember(self, key: str, content: Content) -> None: ...
    def lists(self, key: str) -> dict[replay.Place, list[Any]] | None: ...
    def remember_lists(self, key: str, lists: dict[replay.Place, list[Any]]) -> None: ...
    def segment(self, thread_id: str, key: str, sha256: str) -> SegmentReader | None: ...
    def remember_segment(self, key: str, sha256: str, held: SegmentReader | bytes, size: int) -> None: ...
    def sha256(self, thread_id: str, name: str, raw: bytes) -> str: ...


class Mode(enum.Enum):
    """What a failed check does."""

    STRICT = "strict"
    """Raise its typed ``IntegrityError`` (loads, history, ``validate_integrity``)."""
    LENIENT = "lenient"
    """A size, digest or MAC check becomes a note in ``notes`` and the replay goes on; what cannot be
    decoded at all still raises, so no state is ever invented (``restore_state``)."""
    REPORT = "report"
    """``each`` keeps every checkpoint's failure in ``problems`` and goes on with the next checkpoint;
    a damaged object is reported once, by the first checkpoint that needs it, and every other
    checkpoint that needs it (directly or through its chain) as a ``BrokenChain`` (``verify``)."""


def origin(rec: Record) -> str:
    """The checkpoint id a record's stored object was written for: a copied snapshot or segment
    (``copy_thread``, ``fork``) names its source checkpoint, whose id the object holds."""
    return str(rec["ref"].get("origin", rec["id"]))


class ChainReader:
    """Rebuilds contents of one thread's checkpoints; one instance per read (or batch, or walk), so
    the objects it fetched, the segments it parsed and the contents it built are shared by the
    chains it replays.

    ``records``: the manifest's records, where a snapshot's replayed lists find their lineage
    (None: such a snapshot raises ``NeedsManifest``). ``cache``: serve from and fill the archive's
    state cache (by ``state_key``: an edit never serves a stale content). ``walk``: a pass over a
    whole thread, which keeps at most ``_KEEP_STATES`` contents and ``_KEEP_SEGMENTS`` parsed
    segments and drops a snapshot's bytes once decoded (a dropped object needed again is fetched
    again).
    """

    def __init__(
        self,
        service: ContentService,
        thread_id: str,
        *,
        records: dict[str, Record] | None = None,
        mode: Mode = Mode.STRICT,
        cache: bool = True,
        walk: bool = False,
    ) -> None:
        self.service, self.thread_id, self.mode, self.cache, self.walk = service, thread_id, mode, cache, walk
        self.records = records
        self.partial = False
        """``records`` are what the head hint and the segments it names tell (``hinted``), not a manifest:
        a lineage that leaves them hands over to the manifest, and nothing replayed is shared."""
        # fetched (None: absent; an error: refused by the store, raised when it is needed); not yet consumed
        self.objects: dict[str, bytes | ObjectTooLarge | None] = {}
        self.readers: OrderedDict[str, SegmentReader] = OrderedDict()
        self.states: OrderedDict[str, Content] = OrderedDict()  # by state_key
        self.failed: set[str] = set()  # state keys of checkpoints that could not be rebuilt (REPORT)
        self.damaged: set[str] = set()  # objects that failed a check (REPORT)
        self.notes: list[str] = []  # what could not be proven (LENIENT)
        self.problems: list[CheckpointError] = []  # every checkpoint's failure (REPORT)
        self.texts: OrderedDict[str, str] = OrderedDict()  # decoded blobs, by key
        self.ids: OrderedDict[str, str] = OrderedDict()  # checkpoint id -> state key of the content kept
        self.built: dict[str, int] = {"snapshots": 0, "rows": 0, "deltas": 0, "replayed": 0}
        """What this instance replayed: snapshots decoded, full records built from their parent and
        history rows (``_from_rows``), deltas applied, ancestors' rows a snapshot's lists were
        replayed through (what a profile of a read counts)."""
        self.replays = Replays(self, service if cache and mode is Mode.STRICT else None, self.built)
        """This read's list replays (``engine.lists``): through this reader's records and rows."""

    # -- what to fetch ------------------------------------------------------------
    def known(self, rec: Record) -> Content | None:
        key = state_key(rec)
        found = self.states.get(key)
        if found is not None:
            self.states.move_to_end(key)
            return found
        return self.service.cached(key) if self.cache else None

    def take_held(self, keys: Iterable[str]) -> bool:
        """Take the segments ``keys`` from the engine, where it holds them (it read or wrote them),
        for this reader's replays; True when it holds every one (nothing is fetched here)."""
        wanted = set(keys) - self.readers.keys()
        for rec in reversed((self.records or {}).values()):  # a merge takes the newest segments of a tier
            if not wanted:
                break
            held = history_ref(rec)
            if held is None or held["type"] != R.SEGMENT or held["key"] not in wanted:
                continue
            reader = self._engine_segment(held)
            if reader is not None:
                self.readers[held["key"]] = reader
                wanted.discard(held["key"])
        return not wanted

    def _engine_segment(self, ref: dict[str, Any]) -> SegmentReader | None:
        if not (self.cache and self.mode is Mode.STRICT):  # only a strict, cached read shares them
            return None
        return self.service.segment(self.thread_id, ref["key"], str(ref.get("sha256")))

    def holds(self, rec: Record) -> bool:
        """Is ``rec``'s content known to this reader (built, or in the state cache)?"""
        return self.known(rec) is not None

    def _start(self, chain: list[Record]) -> tuple[int, Content | None]:
        """(index after the newest record of ``chain`` whose content is known, that content)."""
        for i in range(len(chain) - 1, -1, -1):
            if state_key(chain[i]) in self.failed:
                raise BrokenChain(
                    f"it is built on {chain[i]['id']!r}, which cannot be rebuilt",
                    thread_id=self.thread_id,
                    checkpoint_id=chain[-1]["id"],
                )
            known = self.known(chain[i])
            if known is not None:
                return i + 1, known
        return 0, None

    def needed(self, chains: Iterable[list[Record]]) -> list[str]:
        """The objects that replaying ``chains`` (in this order) reads, beyond what is held, cached, or
        built by an earlier chain of them; each once."""
        keys: set[str] = set()
        building: set[str] = set()
        for chain in chains:
            for rec in reversed(chain):
                if rec["id"] in building or (state_key(rec) not in self.failed and self.known(rec) is not None):
                    break
                if (
                    rec is chain[0]
                    and self._rows_usable(rec)
                    and (rec.get("parent") in building or self._base(rec) is not None)
                ):
                    keys.update(rows_keys(rec))  # built from its parent, built first: no snapshot read
                else:
                    keys.update(ref_keys(rec, rows=False))
                    if rec["ref"]["type"] == R.SNAPSHOT and "replay" in rec["ref"]:
                        keys.update(self.replays.prefetch(rec))
            if chain:
                building.add(chain[-1]["id"])
        return sorted(k for k in keys if k not in self.objects and k not in self.readers and k not in self.texts)

    def object(self, key: str) -> bytes | ObjectTooLarge | None:
        """A fetched object as held (None: absent or not fetched)."""
        return self.objects.get(key)

    def hold(self, keys: list[str], datas: Sequence[bytes | ObjectTooLarge | None]) -> None:
        """Objects fetched by the caller (alongside other requests), for the replays to come."""
        self.objects.update(zip(keys, datas, strict=True))

    async def fetch(self, keys: list[str]) -> None:
        """One concurrent batch of GETs; nothing when ``keys`` is empty."""
        missing = [k for k in keys if k not in self.objects and k not in self.readers]
        if missing:
            self.hold(missing, await self.service.store.get_each(missing))

    # -- replay -------------------------------------------------------------------
    async def content(self, chain: list[Record], inline: dict[str, Delta]) -> Content:
        """(state, messages) at the end of ``chain`` (from a full snapshot to the wanted checkpoint),
        built on the newest content of it already known; raises on a failed check except in LENIENT."""
        start, content = self._start(chain)
        if start == len(chain) and content is not None:
            return content
        if start == 0 and (base := self._base(chain[0])) is not None:
            built = await self._from_rows(chain[0], base, inline)
            if built is not None:
                start, content = 1, built
                if len(chain) == 1:
                    return built
        await self.fetch(self.needed([chain[start:]]))
        for rec in chain[start:]:
            content = await self._step(rec, content, inline)
        if content is None:
            raise BrokenChain("empty chain", thread_id=self.thread_id)
        rec = chain[-1]
        self._lenient(lambda: self._check(content, rec))
        if self.mode is Mode.LENIENT and not any(k in rec for k in ("state_sha256", "state_mac")):
            self.notes.append(
                "no state_sha256 recorded for this checkpoint: its objects were checked, the state was not"
            )
        self._keep(rec, content)
        return content

    async def each(self, m: Manifest) -> AsyncIterator[tuple[Record, Content | None]]:
        """Every checkpoint of ``m`` in commit order, each built on the content it was saved against
        (usually the one just built: n checkpoints cost n delta applications, not n replays). In
        REPORT mode a checkpoint that cannot be rebuilt is yielded with None, its failure kept."""
        if self.records is None:
            self.records = m.records
        for rec in list(m.records.values()):
            try:
                content: Content | None = await self.content(m.chain(rec["id"]), m.inline)
            except CheckpointError as exc:
                if self.mode is not Mode.REPORT:
                    raise
                self.failed.add(state_key(rec))
                self.problems.append(exc)
                content = None
            yield rec, content

    def _keep(self, rec: Record, content: Content) -> None:
        key = state_key(rec)
        self.states[key] = content
        self.ids[rec["id"]] = key
        self.ids.move_to_end(rec["id"])
        while self.walk and len(self.states) > _KEEP_STATES:
            self.states.popitem(last=False)
        while self.walk and len(self.ids) > _KEEP_STATES:
            self.ids.popitem(last=False)
        if self.cache and self.mode is Mode.STRICT:  # only a proven content is ever served from the cache
            self.service.remember(state_key(rec), content)

    # -- a full record from its parent: a walk reads no snapshot it can do without -----------------
    def _rows_usable(self, rec: Record) -> bool:
        """May ``rec`` be built from its parent's content and its history rows (spec.md section 4:
        ``diff(parent, content)``)? Only by a strict, cached read (loads, batches, history walks):
        ``verify`` and the integrity API read and prove every snapshot itself, and ``restore_state``
        (lenient) wants the snapshot as stored."""
        if self.mode is not Mode.STRICT or not self.cache or rec["kind"] != "full" or rec.get("parent") is None:
            return False
        held = history_ref(rec)
        return R.kind(held) in (R.SEGMENT, R.INLINE, R.EMPTY)

    def _base(self, rec: Record) -> Content | None:
        """The content of ``rec``'s parent that this instance built (or the state cache holds for it),
        when ``rec`` may be built from it (``_rows_usable``)."""
        if not self._rows_usable(rec):
            return None
        key = self.ids.get(str(rec["parent"]))
        return None if key is None else self.states.get(key)

    async def _from_rows(self, rec: Record, base: Content, inline: dict[str, Delta]) -> Content | None:
        """``rec``'s content as its parent's plus its history rows, checked against the digests
        recorded at save and kept; None (the caller reads the snapshot) when the rows cannot be read
        or do not rebuild it: a load never fails on rows it could do without."""
        damaged = set(self.damaged)
        try:
            content = apply_checkpoint(*base, await self.history(rec, inline))
            self._check(content, rec)
        except CheckpointError:
            self.damaged = damaged  # what the snapshot's chain needs is judged when it is read
            return None
        self.built["rows"] += 1
        self._keep(rec, content)
        return content

    async def _step(self, rec: Record, content: Content | None, inline: dict[str, Delta]) -> Content:
        ref, cid = rec["ref"], rec["id"]
        if ref["type"] == R.SNAPSHOT:
            self.built["snapshots"] += 1
            return await self._snapshot(rec, inline)
        if content is None:
            raise BrokenChain("chain does not start with a snapshot", thread_id=self.thread_id, checkpoint_id=cid)
        self.built["deltas"] += 1
        ops: Delta = []
        if ref["type"] == R.SEGMENT:
            ops = await self.segment_ops(rec)
        elif ref["type"] == R.INLINE:
            ops = inline.get(cid, [])
        plain = crypto.open_ops(self.service.encryption, rec, self.service.archive_id, self.thread_id, ops)
        values = [op.get("value") for op in plain]
        decoded = await self._unblob(rec, values)
        if decoded is not values:
            plain = [{**op, "value": v} for op, v in zip(plain, decoded, strict=True)]
        return apply_checkpoint(*content, plain)

    async def segment_ops(self, rec: Record) -> Delta:
        """A segment record's ops as stored (sealed when encrypted, blob references unresolved), its
        segment checked: what a replay applies, and what ``copy_thread`` re-encodes for the copy."""
        return (await self._segment(rec)).ops(origin(rec), rec["ref"]["row_group"])

    async def history_ops(self, rec: Record, inline: dict[str, Delta], within: replay.Scope | None = None) -> Delta:
        """A record's history rows as stored (``history_ref``: a delta's ops, a full record's ``rows``),
        their segment checked like a load checks one: what maintenance and ``copy_thread`` re-encode
        and verify proves. ``BrokenChain`` for a full record without ``rows``."""
        held = history_ref(rec)
        if held is None:
            raise BrokenChain("full record has no history rows", thread_id=self.thread_id, checkpoint_id=rec["id"])
        if held["type"] == R.INLINE:
            ops = inline.get(rec["id"], [])
            return [op for op in ops if within(op.get("target"), op.get("path"))] if within else list(ops)
        if held["type"] == R.EMPTY:
            return []
        reader = await self._segment(rec, held)
        return reader.ops(rec["id"] if rec["kind"] == "full" else origin(rec), held["row_group"], within)

    async def history_segment(self, rec: Record) -> SegmentReader | None:
        """The parsed, checked segment holding ``rec``'s history rows (None: they are not in one)."""
        held = history_ref(rec)
        if held is None or held["type"] != R.SEGMENT:
            return None
        return await self._segment(rec, held)

    async def history(self, rec: Record, inline: dict[str, Delta], within: replay.Scope | None = None) -> Delta:
        """A record's history rows as plain ops: opened (encrypted), their blob references resolved
        (they may reference only blobs the record lists); ``within``: only those ops (a sealed value is
        bound to its op's index, so an encrypted record's are all opened, then taken)."""
        sealed = "enc" in rec
        stored = await self.history_ops(rec, inline, None if sealed else within)
        plain = crypto.open_ops(self.service.encryption, rec, self.service.archive_id, self.thread_id, stored)
        if sealed and within is not None:
            plain = [op for op in plain if within(op.get("target"), op.get("path"))]
        values = [op.get("value") for op in plain]
        decoded = await self._unblob(rec, values, subset=True)
        if decoded is not values:
            plain = [{**op, "value": v} for op, v in zip(plain, decoded, strict=True)]
        return plain

    async def _unblob(self, rec: Record, value: Any, *, subset: bool = False) -> Any:
        """A stored value of ``rec`` (its snapshot's content, or its ops' values) with its blob
        references replaced by the blobs' text (``blobs.decode``). The blobs it references must be
        exactly those the record lists (``ref.blobs``: what gc and copies know it needs); each is
        fetched once per replay (prefetched with the record's other objects: ``ref_keys``)."""
        listed = rec["ref"].get("blobs", [])
        if not listed and not blobs.marked(value):
            return value
        sealed, cid = "enc" in rec, rec["id"]
        try:
            wanted = blobs.names(value, sealed=sealed)
        except IntegrityError as exc:
            raise TruncatedObject(str(exc), thread_id=self.thread_id, checkpoint_id=cid) from None
        if not set(wanted) <= set(listed) if subset else sorted(wanted) != sorted(listed):
            raise BrokenChain(
                "stored content references other blobs than its record lists",
                thread_id=self.thread_id,
                checkpoint_id=cid,
            )
        texts = {}
        for name, size in wanted.items():
            key = layout.blob_key(name, sealed=sealed)
            text = self.texts.get(key)
            if text is None:
                data = await self._object(key, rec)
                text = self._decoded(key, functools.partial(self._blob, rec, name, size, data))
                self.texts[key] = text
                while self.walk and len(self.texts) > _KEEP_BLOBS:
                    self.texts.popitem(last=False)
            texts[name] = text
            self.objects.pop(key, None)
        return blobs.decode(value, texts, sealed=sealed)

    def _blob(self, rec: Record, name: str, size: int, data: bytes) -> str:
        where = {"thread_id": self.thread_id, "checkpoint_id": rec["id"]}
        plain, check = crypto.open_blob(self.service.encryption, rec, self.service.archive_id, name, data)
        return blobs.unpack(plain, name, size, check=check, **where)

    # -- objects ------------------------------------------------------------------
    async def _object(self, key: str, rec: Record) -> bytes:
        """A fetched object's bytes (fetched now if no batch did); absent is a ``MissingObject``."""
        if key in self.damaged:
            raise BrokenChain(f"needs damaged object {key!r}", thread_id=self.thread_id, checkpoint_id=rec["id"])
        if key not in self.objects:
            await self.fetch([key])
        data = self.objects[key]
        if isinstance(data, ObjectTooLarge):
            self.damaged.add(key)
            raise data
        if data is None:
            self.damaged.add(key)
            raise MissingObject(
                "object referenced by the manifest is missing",
                thread_id=self.thread_id,
                checkpoint_id=rec["id"],
                key=key,
            )
        return data

    def _decoded(self, key: str, decode: Callable[[], T]) -> T:
        """``decode()``; an object that fails a check is marked damaged (its other users: BrokenChain)."""
        try:
            return decode()
        except IntegrityError:
            self.damaged.add(key)
            raise

    def _lenient(self, check: Callable[[], None]) -> None:
        try:
            check()
        except IntegrityError as exc:
            if self.mode is not Mode.LENIENT:
                raise
            self.notes.append(f"{type(exc).__name__}: {exc}")

    def _verified(self, data: bytes, rec: Record, ref: dict[str, Any] | None = None) -> None:
        held = rec["ref"] if ref is None else ref
        self._lenient(lambda: verify(data, held, thread_id=self.thread_id, checkpoint_id=rec["id"]))

    async def _segment(self, rec: Record, ref: dict[str, Any] | None = None) -> SegmentReader:
        """The parsed segment of a segment record (or of ``ref``: a full record's ``rows``), its size
        and sha256 checked once per instance."""
        held = rec["ref"] if ref is None else ref
        key = held["key"]
        reader = self.readers.get(key)
        if reader is not None:
            self.readers.move_to_end(key)
            return reader
        reader = self._engine_segment(held)  # the engine's segments, checked once
        if reader is None:
            data = await self._object(key, rec)

            def parse() -> SegmentReader:
                self._verified(data, rec, ref)
                return SegmentReader(data, thread_id=self.thread_id, key=key)

            reader = self._decoded(key, parse)
            del self.objects[key]  # the reader holds it
            if self.cache and self.mode is Mode.STRICT:
                self.service.remember_segment(key, str(held.get("sha256")), reader, len(data))
        else:
            self.objects.pop(key, None)
        self.readers[key] = reader
        while self.walk and len(self.readers) > _KEEP_SEGMENTS:
            self.readers.popitem(last=False)
        return self.readers[key]

    async def _snapshot(self, rec: Record, inline: dict[str, Delta]) -> Content:
        """Content of a snapshot record: checked, decrypted (when encrypted), its lists replayed."""
        ref, cid, key = rec["ref"], rec["id"], rec["ref"]["key"]
        data = await self._object(key, rec)

        def decode() -> tuple[Content, list[replay.Place]]:
            self._verified(data, rec)
            plain = crypto.open_snapshot(self.service.encryption, rec, self.service.archive_id, self.thread_id, data)
            state, messages, raw = decode_snapshot_content(
                plain, thread_id=self.thread_id, checkpoint_id=origin(rec), key=key
            )
            where = replay.decode(raw, (state, messages), thread_id=self.thread_id, checkpoint_id=cid)
            return (state, messages), where

        (state, messages), where = self._decoded(key, decode)
        if self.walk:
            self.objects.pop(key, None)
        if bool(where) != ("replay" in ref):
            raise BrokenChain(
                "snapshot replays other lists than its record says", thread_id=self.thread_id, checkpoint_id=cid
            )
        state, messages = await self._unblob(rec, [state, messages], subset=bool(where))
        if not where:
            return state, messages
        held = self.replays.held(rec)
        if held is None or not set(where) <= held.keys():
            held = await self.replays.replay(rec, where, inline)
        return replay.fill((state, messages), {place: held[place] for place in where})

    # -- the head hint's segments as this reader's records (a cold reader's lineage) -----------
    def hinted(
        self,
        chain: Iterable[Record],
        segments: Mapping[str, bytes | ObjectTooLarge | None],
        enc: dict[str, Any] | None = None,
    ) -> None:
        """Take the lineage from the head hint's records and the segments it names (fetched with its
        chain): each row group's checkpoints stand for records of their rows (``base_id``: the parent
        the rows are against). The segments are not checked against a record's digest (the hint
        names none): what they replay is checked against the head's digests (or MACs), and a reader
        that fails here reads the manifest (``NeedsManifest``, or the failed check). ``enc``: the head
        snapshot's, taken for the rows' records in an encrypted thread (a sealed value names its own
        key and is bound to its checkpoint and op: one sealed otherwise does not open, and the
        manifest is read)."""
        records: dict[str, Record] = {}
        for key, data in segments.items():
            if not isinstance(data, bytes):
                raise NeedsManifest(f"segment {key!r} the head hint names cannot be read", thread_id=self.thread_id)
            reader = SegmentReader(data, thread_id=self.thread_id, key=key)
            for group in range(reader.row_groups):
                for cid, base in reader.bases(group).items():
                    ref = {"type": R.SEGMENT, "key": key, "row_group": group}  # no digest: checked by the replay
                    records[cid] = {"id": cid, "kind": "delta", "parent": base, "ref": ref}
                    if enc is not None:
                        records[cid]["enc"] = enc
            self.readers[key] = reader
        records.update((rec["id"], rec) for rec in chain)
        self.records, self.partial = records, True

    def _check(self, content: Content, rec: Record) -> None:
        """The rebuilt content must match the digests (or, encrypted, the MACs) recorded at save.

        They are also what proves a protected checkpoint (its ``fields.protection`` holds only the
        binding), so a mismatch of a protected record is the ``ProtectionMismatch`` its protection
        promises, naming the state or the messages."""
        thread_id = self.thread_id
        protected = rec.get("fields", {}).get("protection") is not None
        digest = functools.partial(self.service.sha256, thread_id)
        if protected:
            check_content(content, rec, thread_id, digest, ProtectionMismatch)
            crypto.check_mac(self.service.encryption, rec, thread_id, content, ProtectionMismatch)
        else:
            check_content(content, rec, thread_id, digest)
            crypto.check_mac(self.service.encryption, rec, thread_id, content)
