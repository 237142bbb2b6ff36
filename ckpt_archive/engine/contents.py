"""The contents of an ``Engine``: the state cache, the prefix hashers, content digests, and contents to
``Checkpoint``.

Contents are rebuilt by the one chain replay (``chains.ChainReader``), checked against the digests
recorded at save before anyone sees them; they are cached by record version (``state_key``), so an
edit never serves a stale state.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from .. import codec
from ..delta import Delta
from ..errors import IntegrityError, MissingObject, TruncatedObject
from ..format import blobs, crypto, layout, replay
from ..format import refs as R
from ..format.content import Content, Path, state_key
from ..format.crypto import Encryption
from ..format.manifest import Manifest, Record
from ..format.objects import SegmentReader, encode_snapshot
from ..model import Checkpoint, Protection
from ..storage import ObjectStore
from .chains import ChainReader, Mode
from .root import Root

Objects = list[tuple[str, bytes]]
"""Objects to write before a commit: (key, bytes)."""
Keys = frozenset[str] | set[str]

HASHERS = 16
"""Prefix hashers kept (one per thread and name: state or messages)."""
PART_RECORDS = 4096
"""Record versions whose state parts the engine keeps (``Contents.part``): one small part each (a
LangGraph state's carried writes) for thousands of ancestors, a few large ones (a seed's messages)."""
PART_BYTES = 64 * 1024 * 1024
"""The most JSON bytes of state parts the engine keeps (``Contents.part``), whatever their count."""
REPLAYED = 256
"""Snapshot records whose replayed lists the engine keeps (``Contents.lists``): a replay through a
lineage yields the lists of every snapshot on the way, so a listing built newest first replays once."""
SEGMENT_BYTES = 16 * 1024 * 1024
"""The most bytes of parsed Parquet segments the engine keeps (``Contents.segment``): a replay reads
the lineage's segments, and the windows of a listing then read the same ones for their deltas."""


class Contents:
    """The engine's contents service: what ``ChainReader`` needs (``chains.ContentService``) and the
    caches it fills."""

    def __init__(self, root: Root, *, state_cache: int = 32) -> None:
        self.root = root
        self.states: OrderedDict[str, Content] = OrderedDict()  # by state_key
        self.state_cache = state_cache
        self._hashers: OrderedDict[tuple[str, str], codec.PrefixHasher] = OrderedDict()
        self.parts: OrderedDict[str, dict[Path, tuple[Any, int]]] = OrderedDict()  # by state_key
        self.parts_bytes = 0
        self.replayed: OrderedDict[str, dict[replay.Place, list[Any]]] = OrderedDict()  # by state_key
        # by (key, sha256): a parsed segment, or the bytes this engine wrote (parsed when first read)
        self.segments: OrderedDict[tuple[str, str], tuple[SegmentReader | bytes, int]] = OrderedDict()
        self.segments_bytes = 0
        self.store: ObjectStore = root.store
        self.encryption: Encryption | None = root.encryption

    @property
    def archive_id(self) -> str:
        return self.root.archive_id

    # -- the state cache -----------------------------------------------------------
    def cached(self, key: str) -> Content | None:
        return self.states.get(key)

    def remember(self, key: str, content: Content) -> None:
        """Cache a content (least recently used dropped first); keys come from ``state_key``."""
        self.states[key] = content
        self.states.move_to_end(key)
        while len(self.states) > self.state_cache:
            self.states.popitem(last=False)

    def forget(self, records: Iterable[Record]) -> None:
        for rec in records:
            self.states.pop(state_key(rec), None)
            self.replayed.pop(state_key(rec), None)
            self._drop_parts(state_key(rec))

    # -- what replays read and build (chains.ChainReader, strict and cached reads only) ---------
    def lists(self, key: str) -> dict[replay.Place, list[Any]] | None:
        """The replayed lists of the snapshot record ``key`` names (``state_key``), by place. They are
        what replaying its lineage's checked rows gives (the reader checks the content they fill)."""
        found = self.replayed.get(key)
        if found is not None:
            self.replayed.move_to_end(key)
        return found

    def remember_lists(self, key: str, lists: dict[replay.Place, list[Any]]) -> None:
        self.replayed.setdefault(key, {}).update(lists)
        self.replayed.move_to_end(key)
        while len(self.replayed) > REPLAYED:
            self.replayed.popitem(last=False)

    def segment(self, thread_id: str, key: str, sha256: str) -> SegmentReader | None:
        """The segment ``key`` with that digest (its ref's), checked when it was read, or written by
        this engine (then parsed here, once: a save that never merges parses nothing)."""
        found = self.segments.get((key, sha256))
        if found is None:
            return None
        self.segments.move_to_end((key, sha256))
        held, size = found
        if isinstance(held, bytes):
            held = SegmentReader(held, thread_id=thread_id, key=key)
            self.segments[(key, sha256)] = (held, size)
        return held

    def remember_segment(self, key: str, sha256: str, held: SegmentReader | bytes, size: int) -> None:
        """Keep a segment read and checked (parsed), or the bytes of one this engine wrote."""
        if (key, sha256) in self.segments or size > SEGMENT_BYTES // 4:
            return
        self.segments[(key, sha256)] = (held, size)
        self.segments_bytes += size
        while self.segments_bytes > SEGMENT_BYTES:
            self.segments_bytes -= self.segments.popitem(last=False)[1][1]

    # -- parts of states (a few paths of many states, kept longer than whole states) ---------
    def part(self, key: str, path: Path) -> tuple[bool, Any]:
        """(held, value) of one part of the content ``key`` names (``state_key``): the value at ``path``
        in its state, ``None`` when the state has none. Parts outlive the state cache (a walk over
        hundreds of ancestors needs a small part of each, ``PART_RECORDS``/``PART_BYTES``); keyed by
        record version like the states, so an edit never serves a stale part. The same cache keeps
        immutable objects beside the records whole, by storage key and the path ``()``
        (``ArchiveCheckpointer.held``: LangGraph write objects). Shared: read only."""
        held = self.parts.get(key)
        if held is None or path not in held:
            return False, None
        self.parts.move_to_end(key)
        return True, held[path][0]

    def remember_part(self, key: str, path: Path, value: Any) -> None:
        """Keep one part of a proven content (least recently used record dropped first past the bounds)."""
        size = 0 if value is None else len(codec.dumps(value))
        held = self.parts.setdefault(key, {})
        self.parts.move_to_end(key)
        if path in held:
            self.parts_bytes -= held[path][1]
        held[path] = (value, size)
        self.parts_bytes += size
        while len(self.parts) > PART_RECORDS or (self.parts_bytes > PART_BYTES and len(self.parts) > 1):
            self._drop_parts(next(iter(self.parts)))

    def _drop_parts(self, key: str) -> None:
        for _, size in self.parts.pop(key, {}).values():
            self.parts_bytes -= size

    # -- digests -------------------------------------------------------------------
    def sha256(self, thread_id: str, name: str, raw: bytes) -> str:
        """sha256 of a thread's state or messages bytes, resumed from the previous ones of that thread
        (``codec.PrefixHasher``): saving or listing a growing chat hashes what changed, not all of it."""
        key = (thread_id, name)
        hasher = self._hashers.get(key)
        if hasher is None:
            hasher = self._hashers[key] = codec.PrefixHasher()
            while len(self._hashers) > HASHERS:
                self._hashers.popitem(last=False)
        else:
            self._hashers.move_to_end(key)
        return hasher.hexdigest(raw)

    def digests(
        self,
        content: Content,
        thread_id: str,
        raws: tuple[bytes, bytes] | None = None,
        *,
        proving: Checkpoint | None = None,
    ) -> dict[str, Any]:
        """Record fields proving a content: ``state_sha256`` + ``messages_sha256``, or with encryption
        ``enc`` + keyed ``state_mac`` + ``messages_mac`` (a plain digest would let anyone confirm a guess).
        ``raws``: the canonical bytes of state and messages, when the caller has them already.
        ``proving``: the checkpoint being saved, whose protection (if any) is checked against the same
        sha256 the record stores: one digest per content, computed once (``ProtectionMismatch``)."""
        raw_state, raw_messages = raws or (codec.dumps(content[0]), codec.dumps(content[1]))
        enc = self.encryption
        shas: tuple[str, str] | None = None
        if enc is None or (proving is not None and proving.protection is not None):
            shas = self.sha256(thread_id, "state", raw_state), self.sha256(thread_id, "messages", raw_messages)
        if proving is not None:
            proving.check_protection(shas)
        if enc is None:
            assert shas is not None
            return {"state_sha256": shas[0], "messages_sha256": shas[1]}
        return {
            "enc": {"alg": crypto.ALG, "key_id": enc.active_key_id},
            "state_mac": enc.mac(enc.active_key_id, raw_state),
            "messages_mac": enc.mac(enc.active_key_id, raw_messages),
        }

    # -- blobs: large string values, stored once by content (format.blobs) -------------
    def stored(
        self, value: Any, known: Keys = frozenset(), *, most: int | None = None
    ) -> tuple[Any, list[str], Objects]:
        """The one way this engine stores a JSON value: (``value`` with its large strings replaced by
        blob references, the names it references (sorted), the blob objects to write).

        Encrypted, a blob is named by a keyed digest under the active key (a plain sha256 would let
        anyone confirm a guess of the value) and sealed like a snapshot; ``known``: keys of blobs the
        content this one is built on references (its parent chain's, or the thread's for a re-base),
        not written again (spec.md section 5, "Blobs": why that is safe against gc). ``most``: a value
        that would reference more distinct blobs keeps every string inline (its holder can list only
        that many: a LangGraph write object's name, spec.md section 11)."""
        enc = self.encryption
        if enc is None:
            out, found = blobs.encode(value, codec.sha256)
        else:
            kid = enc.active_key_id
            out, found = blobs.encode(value, lambda raw: enc.mac(kid, raw), sealed=True)
        if most is not None and len(found) > most:
            return blobs.encode(value, codec.sha256, references=False)[0], [], []
        objects: Objects = []
        for name, raw in found.items():
            key = layout.blob_key(name, sealed=enc is not None)
            if key in known:
                continue
            data = blobs.pack(raw)
            objects.append((key, data if enc is None else enc.seal(data, crypto.blob_aad(self.archive_id, name))))
        return out, sorted(found), objects

    async def unstored(self, held: list[tuple[Any, dict[str, Any], str]]) -> list[Any]:
        """``stored``'s inverse for values no record holds (LangGraph write objects): each (stored value,
        its holder -- ``{"id", "enc"?}`` as a record names them --, the key it was read from) -> the
        value, every blob fetched once in one batch (one GET each, concurrently) and checked as a load
        checks it (``crypto.open_blob``, ``blobs.unpack``). Written by someone else, so: a malformed
        reference is ``TruncatedObject``, a blob that is gone ``MissingObject``."""
        wanted: dict[str, tuple[str, int, dict[str, Any], str]] = {}  # blob key -> name, size, holder, key
        refs: list[dict[str, int]] = []
        for value, holder, key in held:
            sealed = "enc" in holder
            try:
                names = blobs.names(value, sealed=sealed)
            except IntegrityError as exc:
                raise TruncatedObject(str(exc), checkpoint_id=holder["id"], key=key) from None
            refs.append(names)
            for name, size in names.items():
                first = wanted.setdefault(layout.blob_key(name, sealed=sealed), (name, size, holder, key))
                if first[1] != size:
                    raise TruncatedObject(f"blob {name!r} referenced with two sizes", key=key)
        keys = list(wanted)
        texts: dict[str, str] = {}
        for bkey, data in zip(keys, await self.store.get_many(keys), strict=True):
            name, size, holder, key = wanted[bkey]
            if data is None:
                raise MissingObject(f"blob is gone; {key!r} references it", checkpoint_id=holder["id"], key=bkey)
            plain, check = crypto.open_blob(self.encryption, holder, self.archive_id, name, data)
            texts[bkey] = blobs.unpack(plain, name, size, check=check, checkpoint_id=holder["id"])
        out = []
        for (value, holder, _), names in zip(held, refs, strict=True):
            sealed = "enc" in holder
            found = {n: texts[layout.blob_key(n, sealed=sealed)] for n in names}
            out.append(blobs.decode(value, found, sealed=sealed))
        return out

    def stored_ops(self, ops: Delta, known: Keys = frozenset()) -> tuple[Delta, list[str], Objects]:
        """``stored`` over the values of a delta's operations (paths stay as they are)."""
        values = [op.get("value") for op in ops]
        out, names, objects = self.stored(values, known)
        if out is not values:
            ops = [op if v is op.get("value") else {**op, "value": v} for op, v in zip(ops, out, strict=True)]
        return ops, names, objects

    def snapshot(
        self,
        thread_id: str,
        checkpoint_id: str,
        key: str,
        content: Content,
        reach: Callable[[list[replay.Place]], int],
        known_blobs: Keys = frozenset(),
    ) -> tuple[dict[str, Any], list[tuple[str, bytes]], int]:
        """The one encode of a full snapshot object, for a save, a re-base or edit (maintenance) and a
        fork: (its ref, the objects to write -- the snapshot under ``key``, then its new blobs --, their
        bytes).

        Large strings become blob references first (``stored``: ``known_blobs`` are not rewritten). Long
        lists (state and messages) are stored as ``[]`` and replayed on load from the history rows of
        the record's lineage, which hold their items already (``format.replay``); ``reach(places)`` is
        how many ancestors' rows a load needs for them (``ops.history.reach``), kept in ``ref.replay``
        so a load fetches them with the snapshot. Encrypted, the object is sealed with the active key
        (the rows it replays from are sealed per op)."""
        (state, messages), names, blob_objects = self.stored([content[0], content[1]], known_blobs)
        where = replay.places((state, messages))
        stored = replay.stub((state, messages), where)
        plain = encode_snapshot(thread_id, checkpoint_id, stored[0], stored[1], replay.encode(where))
        if self.encryption is not None:
            data = self.encryption.seal(plain, crypto.aad(self.archive_id, thread_id, checkpoint_id, "snapshot"))
        else:
            data = plain
        objects = [(key, data), *blob_objects]
        ref = R.snapshot(key, data)
        if where:
            ref["replay"] = reach(where)
        if names:
            ref["blobs"] = names
        return ref, objects, sum(len(d) for _, d in objects)

    # -- contents ------------------------------------------------------------------
    def reader(
        self,
        thread_id: str,
        *,
        m: Manifest | None = None,
        mode: Mode = Mode.STRICT,
        cache: bool = True,
        walk: bool = False,
    ) -> ChainReader:
        """The one replay (``ChainReader``) over this engine's objects and cache; ``m``: the manifest
        whose records a snapshot's replayed lists are found in (None: the head hint's chain, which
        hands over to the manifest, ``NeedsManifest``, when a snapshot needs its ancestors)."""
        return ChainReader(self, thread_id, records=None if m is None else m.records, mode=mode, cache=cache, walk=walk)

    async def content_of(self, m: Manifest, checkpoint_id: str) -> Content:
        """(state, messages) of a checkpoint of ``m``, from the cache or rebuilt from its chain."""
        return await self.reader(m.thread_id, m=m).content(m.chain(checkpoint_id), m.inline)

    def checkpoint(self, thread_id: str, rec: Record, content: Content) -> Checkpoint:
        """The caller's private copy of a checkpoint (``content``: proven by the replay).

        A protected record keeps only its binding: the loaded checkpoint's ``Protection`` carries the
        record's digests, which the replay proved the content against; an encrypted record proves it
        by MACs instead, so its content's sha256 is computed here (the engine's prefix hashers)."""
        f = rec.get("fields", {})
        raws = codec.dumps(content[0]), codec.dumps(content[1])
        state, messages = codec.loads(raws[0]), codec.loads(raws[1])
        protection = f.get("protection")
        if protection is not None:
            state_sha256, messages_sha256 = rec.get("state_sha256"), rec.get("messages_sha256")
            if state_sha256 is None or messages_sha256 is None:
                state_sha256 = self.sha256(thread_id, "state", raws[0])
                messages_sha256 = self.sha256(thread_id, "messages", raws[1])
            protection = Protection(
                state_sha256=state_sha256, messages_sha256=messages_sha256, binding_sha256=protection["binding_sha256"]
            )
        return Checkpoint.model_construct(
            thread_id=thread_id,
            checkpoint_id=rec["id"],
            parent_id=rec.get("parent"),
            step=rec["step"],
            state=state,
            pending_nodes=list(f.get("pending_nodes", [])),
            metadata=dict(rec.get("metadata", {})),
            created_at=datetime.fromisoformat(rec["created_at"]),
            cleared_interrupt=f.get("cleared_interrupt"),
            attempts=dict(f.get("attempts", {})),
            child_ledger=dict(f.get("child_ledger", {})),
            run_id=f.get("run_id"),
            node_id=f.get("node_id"),
            messages=messages,
            protection=protection,
        )
