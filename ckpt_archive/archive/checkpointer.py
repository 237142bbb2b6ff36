"""ArchiveCheckpointer: the async core over an ObjectStore, with the sync facade inherited.

Save protocol (docs/FORMAT.md has the normative version):

1. payload objects are written first (a snapshot; at a snapshot, the thread's
   inline deltas compacted into one Parquet segment), together with the
   ``_ids/`` entry that makes ``load_by_id`` work without a thread id;
2. the commit entry ``_log/<seq+1>.json`` is created put-if-absent. Losing that
   race means another writer committed first: a save that appends to the head
   raises ``CheckpointConflict``; an explicit fork (``parent_id``) re-reads the
   log and retries at the next seq. Payloads of a lost save are never
   referenced, so readers cannot see them;
3. the head hint is rewritten (best effort; readers probe ``seq+1`` anyway).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from .. import codec
from .._sync import run_async, run_sync
from ..chain import snapshot_due
from ..checkpointer import AsyncCoreCheckpointer, Ids, Infos
from ..delta import MESSAGES, Delta, apply_checkpoint, diff_checkpoint
from ..errors import (
    BrokenChain,
    CheckpointConflict,
    CheckpointNotFound,
    CorruptManifest,
    DuplicateCheckpointId,
    MissingObject,
    ProtectionMismatch,
    TruncatedObject,
    UnsupportedFormatVersion,
)
from ..model import Checkpoint, Protection, content_digest
from . import crypto, layout, pages
from .batch import Prefetched
from .content import Content, paged_snapshot, state_key
from .crypto import Encryption
from .integrity_api import IntegrityMixin
from .maintenance_api import MaintenanceMixin
from .manifest import Manifest, Record, hint_chain, now_iso, seal, unseal
from .manifest import record_info as _info
from .objects import SegmentReader, check_content, decode_snapshot_content, encode_segment, encode_snapshot, verify
from .parts import read_folded, seal_parts
from .schema import check_hint, id_entry_thread
from .store import ObjectStore

T = TypeVar("T")

DEFAULT_GC_GRACE = timedelta(hours=1)


class ArchiveCheckpointer(IntegrityMixin, MaintenanceMixin, AsyncCoreCheckpointer):
    """Checkpoints of many threads under one root of any fsspec filesystem.

    ``gc_grace`` is how long an object stays on storage after it stopped being
    referenced (and how old an unreferenced object must be before ``gc`` treats
    it as an orphan). A cached manifest older than half of it is re-read, so no
    instance ever acts on a manifest that ``gc`` may have cut the log under.
    """

    def __init__(
        self,
        store: ObjectStore,
        *,
        full_snapshot_interval: int = 10,
        url: str | None = None,
        state_cache: int = 32,
        gc_grace: timedelta = DEFAULT_GC_GRACE,
        encryption: Encryption | None = None,
    ) -> None:
        if full_snapshot_interval < 1:
            raise ValueError("full_snapshot_interval must be >= 1")
        if gc_grace < timedelta(0):
            raise ValueError("gc_grace must not be negative")
        self.gc_grace = gc_grace
        self._read_at: dict[str, float] = {}
        self._hint_heads: dict[str, str] = {}
        self.store = store
        self.url = url or store.root
        self.full_snapshot_interval = full_snapshot_interval
        self._manifests: dict[str, Manifest] = {}
        self._folded_seq: dict[str, int | None] = {}
        self._states: OrderedDict[str, Content] = OrderedDict()
        self._state_cache = state_cache
        self._locks: dict[str, asyncio.Lock] = {}
        self._checked_root = False
        self.encryption = encryption
        self._archive_id = ""  # digest of the archive marker: binds ciphertexts to this archive

    # -- small helpers -----------------------------------------------------------
    def _lock(self, thread_id: str) -> asyncio.Lock:
        lock = self._locks.get(thread_id)
        if lock is None:
            lock = self._locks[thread_id] = asyncio.Lock()
        return lock

    def _remember(self, checkpoint_id: str, content: Content) -> None:
        self._states[checkpoint_id] = content
        self._states.move_to_end(checkpoint_id)
        while len(self._states) > self._state_cache:
            self._states.popitem(last=False)

    async def _check_root(self) -> None:
        """Create or check the archive marker once per instance (format version of the archive)."""
        if self._checked_root:
            return
        data = await self.store.get_or_none(layout.ARCHIVE_MARKER)
        if data is None:
            marker = seal({"type": "archive", "created_at": now_iso()})
            if not await self.store.put_if_absent(layout.ARCHIVE_MARKER, marker):
                marker = await self.store.get(layout.ARCHIVE_MARKER)
            data = marker
        self._archive_id = str(unseal(data, "archive marker", key=layout.ARCHIVE_MARKER)["digest"])
        self._checked_root = True

    async def _rooted(self, read: Awaitable[T]) -> T:
        """Run ``read`` alongside the root check; an archive-level error wins over the read's.

        Both run at once (one round trip, not two); which fails first is a race, so the
        error is chosen here: a bad marker explains everything below it.
        """
        root, out = await asyncio.gather(self._check_root(), read, return_exceptions=True)
        if isinstance(root, BaseException):
            if isinstance(out, BaseException):
                raise root from out
            raise root
        if isinstance(out, BaseException):
            raise out
        return out

    # -- reading the manifest ----------------------------------------------------
    async def _fold_forward(self, m: Manifest) -> Manifest:
        """Apply commits after ``m.seq`` until the first absent one (normally one 404)."""
        while True:
            data = await self.store.get_or_none(layout.log_key(m.thread_id, m.seq + 1))
            if data is None:
                return m
            if m is self._manifests.get(m.thread_id):
                m = m.copy()
            key = layout.log_key(m.thread_id, m.seq + 1)
            m.apply_entry(unseal(data, f"commit {m.seq + 1}", thread_id=m.thread_id, key=key))

    async def _read_hint(self, thread_id: str) -> dict[str, Any] | None:
        data = await self.store.get_or_none(layout.head_key(thread_id))
        if data is None:
            return None
        try:
            doc = unseal(data, "head hint", thread_id=thread_id)
            check_hint(doc, thread_id)
            return doc
        except (CorruptManifest, UnsupportedFormatVersion):
            return None  # only a hint: fall back to the log itself

    async def _manifest(self, thread_id: str, *, hint: dict[str, Any] | None = None) -> Manifest:
        """The thread's manifest, up to date with every commit made so far."""
        self._hint_heads.pop(thread_id, None)  # the caller now sees the newest head
        cached = self._manifests.get(thread_id)
        if cached is not None and not self._fresh(thread_id):
            cached = None  # too old to trust: gc may have removed log entries after it
        if cached is not None:
            m = await self._fold_forward(cached)
        else:
            if hint is None:
                hint = await self._read_hint(thread_id)
            m = await self._rebuild(thread_id, hint)
        self._manifests[thread_id] = m
        self._read_at[thread_id] = time.monotonic()
        return m

    def _fresh(self, thread_id: str) -> bool:
        """Was the cached manifest read (or written) within half the gc grace period?"""
        ttl = max(self.gc_grace.total_seconds() / 2, 1.0)
        return time.monotonic() - self._read_at.get(thread_id, 0.0) <= ttl

    async def _rebuild(self, thread_id: str, hint: dict[str, Any] | None) -> Manifest:
        if hint is not None:
            base_seq, last = hint.get("manifest_seq"), int(hint["seq"])
        else:  # no usable hint: one LIST of the log (recovery path only)
            names = await self.store.list_dir(f"{layout.thread_dir(thread_id)}/_log")
            folded = [int(n.split(".")[0]) for n in names if n.endswith(".manifest.json.zst")]
            commits = [int(n.split(".")[0]) for n in names if n.endswith(".json") and n[:20].isdigit()]
            base_seq = max(folded) if folded else None
            last = max(commits) if commits else 0
        start = base_seq or 0
        keys = [layout.log_key(thread_id, s) for s in range(start + 1, last + 1)]
        if base_seq:
            keys.insert(0, layout.manifest_key(thread_id, base_seq))
        # the commit after the last one known is fetched with the others: usually absent, and then
        # the manifest is known to be current without a second round trip
        datas = await self.store.get_many([*keys, layout.log_key(thread_id, last + 1)])
        probe = datas.pop()
        if base_seq:
            data = datas.pop(0)
            if data is None:  # folded manifest gone (gc): start over from the listing
                return await self._rebuild(thread_id, None) if hint is not None else Manifest(thread_id)
            key = layout.manifest_key(thread_id, base_seq)
            try:
                m = await read_folded(self.store, thread_id, data, f"manifest {base_seq}", key=key, seq=base_seq)
            except MissingObject:  # a part of an older fold already collected: use the newest fold
                if hint is None:
                    raise
                return await self._rebuild(thread_id, None)
            except CorruptManifest as exc:
                m, base_seq = await self._replay_to(thread_id, base_seq, exc)
        else:
            m = Manifest(thread_id)
        for seq, data in zip(range(start + 1, last + 1), datas, strict=True):
            key = layout.log_key(thread_id, seq)
            if data is None:
                if hint is not None:
                    return await self._rebuild(thread_id, None)
                raise MissingObject("commit entry is missing from the log", thread_id=thread_id, key=key)
            m.apply_entry(unseal(data, f"commit {seq}", thread_id=thread_id, key=key))
        self._folded_seq[thread_id] = base_seq
        if probe is None:
            return m
        m.apply_entry(unseal(probe, f"commit {last + 1}", thread_id=thread_id, key=layout.log_key(thread_id, last + 1)))
        return await self._fold_forward(m)

    async def _replay_to(self, thread_id: str, seq: int, error: CorruptManifest) -> tuple[Manifest, int | None]:
        """The manifest as of ``seq`` without its (corrupt) folded copy, where that is provably safe.

        Commit entries are immutable and individually sealed, so an older good folded
        manifest (or none) plus *every* commit up to ``seq`` gives exactly the state the
        corrupt copy held. If any of those commits is gone, nothing is guessed: ``error``.
        """
        names = await self.store.list_dir(f"{layout.thread_dir(thread_id)}/_log")
        bases = sorted(int(n[:20]) for n in names if n.endswith(".manifest.json.zst") and int(n[:20]) < seq)
        for base in [*reversed(bases), 0]:
            keys = [layout.log_key(thread_id, s) for s in range(base + 1, seq + 1)]
            if base:
                keys.insert(0, layout.manifest_key(thread_id, base))
            datas = await self.store.get_many(keys)
            if any(d is None for d in datas):
                continue
            try:
                if base:
                    first = datas.pop(0)
                    assert first is not None
                    what = f"manifest {base}"
                    m = await read_folded(self.store, thread_id, first, what, key=keys[0], seq=base)
                else:
                    m = Manifest(thread_id)
                for s, data in zip(range(base + 1, seq + 1), datas, strict=True):
                    assert data is not None
                    key = layout.log_key(thread_id, s)
                    m.apply_entry(unseal(data, f"commit {s}", thread_id=thread_id, key=key))
            except (CorruptManifest, MissingObject):
                continue
            return m, base or None
        raise error

    # -- reconstructing states ---------------------------------------------------
    async def _materialize(self, thread_id: str, chain: list[Record], inline: dict[str, Delta]) -> dict[str, Any]:
        """The state at the end of ``chain`` (``_materialize_content`` has the messages too)."""
        return (await self._materialize_content(thread_id, chain, inline))[0]

    async def _materialize_content(
        self,
        thread_id: str,
        chain: list[Record],
        inline: dict[str, Delta],
        prefetched: Prefetched | None = None,
    ) -> Content:
        """``prefetched`` carries objects (and parsed segments) shared by the chains of a batch."""
        messages: list[Any] = []
        start, state = 0, None
        for i in range(len(chain) - 1, -1, -1):
            cached = self._states.get(state_key(chain[i]))
            if cached is not None:
                start, (state, messages) = i + 1, cached
                break
        todo = chain[start:]
        page_refs = {p["digest"]: p for r in todo if r["ref"]["type"] == "snapshot" for p in r["ref"].get("pages", [])}
        keys = sorted({r["ref"]["key"] for r in todo if r["ref"]["type"] in ("snapshot", "segment")})
        keys += [p["key"] for p in page_refs.values()]
        pre = prefetched if prefetched is not None else Prefetched()
        missing = [k for k in keys if k not in pre.datas]
        datas = {k: pre.datas[k] for k in keys if k in pre.datas}
        datas.update(zip(missing, await self.store.get_many(missing), strict=True))
        readers = pre.readers
        for rec in todo:
            ref, cid = rec["ref"], rec["id"]
            if ref["type"] in ("snapshot", "segment"):
                data = self._fetched(datas, ref["key"], thread_id, cid)
                if ref["key"] not in readers and ref["type"] == "segment":
                    verify(data, ref, thread_id=thread_id, checkpoint_id=cid)
                    readers[ref["key"]] = SegmentReader(data, thread_id=thread_id, key=ref["key"])
            if ref["type"] == "snapshot":
                verify(data, ref, thread_id=thread_id, checkpoint_id=cid)
                state, messages = await self._snapshot_content(rec, data, thread_id, datas)
                continue
            if state is None:
                raise CorruptManifest(f"chain of thread {thread_id!r} does not start with a snapshot")
            if ref["type"] == "segment":
                ops = readers[ref["key"]].ops(ref.get("origin", cid), ref["row_group"])
            elif ref["type"] == "inline":
                ops = inline.get(cid, [])
            else:
                ops = []
            state, messages = apply_checkpoint(state, messages, self._plain_ops(rec, ops, thread_id))
        if state is None:
            raise CorruptManifest(f"empty chain in thread {thread_id!r}")
        self._check_content((state, messages), chain[-1], thread_id)
        self._remember(state_key(chain[-1]), (state, messages))
        return state, messages

    # -- payload decoding (encryption at rest, when configured) -------------------
    async def _snapshot_content(
        self, rec: Record, data: bytes, thread_id: str, datas: dict[str, bytes | None] | None = None
    ) -> Content:
        """Content of a snapshot record: decrypted (when encrypted), its pages (state's and messages')
        fetched and joined."""
        cid = rec["id"]
        origin = rec["ref"].get("origin", cid)  # a copied snapshot names the checkpoint it was taken of
        data = crypto.open_snapshot(self.encryption, rec, self._archive_id, thread_id, data)
        state, table, messages, message_table = decode_snapshot_content(
            data, thread_id=thread_id, checkpoint_id=origin, key=rec["ref"]["key"]
        )
        if not table and not message_table:
            return state, messages
        refs = {p["digest"]: p for p in rec["ref"].get("pages", [])}
        needed = {d for t in (table, message_table) for ds in t.values() for d in ds}
        if not needed <= refs.keys():
            raise BrokenChain("snapshot names a page its record does not", thread_id=thread_id, checkpoint_id=cid)
        datas = dict(datas or {})
        missing = [refs[d]["key"] for d in needed if refs[d]["key"] not in datas]
        datas.update(zip(missing, await self.store.get_many(missing), strict=True))
        items = {
            d: pages.decode_page(
                self._fetched(datas, refs[d]["key"], thread_id, cid), refs[d], thread_id=thread_id, checkpoint_id=cid
            )
            for d in needed
        }
        try:
            state = pages.join(state, table, items)
            messages = pages.join({MESSAGES: messages}, message_table, items)[MESSAGES]
        except (KeyError, TypeError, IndexError, AttributeError):
            raise TruncatedObject(
                "snapshot's page table does not fit its content", thread_id=thread_id, checkpoint_id=cid
            ) from None
        return state, messages

    def _plain_ops(self, rec: Record, ops: Delta, thread_id: str) -> Delta:
        return crypto.open_ops(self.encryption, rec, self._archive_id, thread_id, ops)

    def _check_content(self, content: Content, rec: Record, thread_id: str) -> None:
        """The rebuilt content must match the digests (or, encrypted, the MACs) recorded at save.

        A protected record's own digests (``fields.protection``) are compared first, so a forgery of a
        protected checkpoint is reported as the ``ProtectionMismatch`` its protection promises."""
        protection = rec.get("fields", {}).get("protection")
        if isinstance(protection, dict):
            where = {"thread_id": thread_id, "checkpoint_id": rec["id"]}
            for name, value in (("state", content[0]), ("messages", content[1])):
                if protection.get(f"{name}_sha256") != content_digest(value):
                    raise ProtectionMismatch(f"{name} differs from the digest recorded at creation", **where)
        check_content(content, rec, thread_id)
        crypto.check_mac(self.encryption, rec, thread_id, content)

    @staticmethod
    def _fetched(datas: dict[str, bytes | None], key: str, thread_id: str, checkpoint_id: str) -> bytes:
        data = datas.get(key)
        if data is None:
            raise MissingObject(
                "object referenced by the manifest is missing",
                thread_id=thread_id,
                checkpoint_id=checkpoint_id,
                key=key,
            )
        return data

    def _checkpoint(self, thread_id: str, rec: Record, content: Content) -> Checkpoint:
        """The caller's private copy of a checkpoint; its protection, when present, is checked."""
        f = rec.get("fields", {})
        state, messages = codec.loads(codec.dumps(content))
        protection = f.get("protection")
        ckpt = Checkpoint.model_construct(
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
            protection=None if protection is None else Protection.model_validate(protection),
        )
        ckpt.check_protection()
        return ckpt

    async def _content_of(self, m: Manifest, checkpoint_id: str) -> Content:
        """(state, messages) of a checkpoint of ``m``, from the cache or rebuilt from its chain."""
        rec = m.records.get(checkpoint_id)
        cached = self._states.get(state_key(rec)) if rec is not None else None
        if cached is not None:
            return cached
        return await self._materialize_content(m.thread_id, m.chain(checkpoint_id), m.inline)

    # -- the protocol ------------------------------------------------------------
    async def _load(self, thread_id: str) -> Checkpoint | None:
        layout.thread_dir(thread_id)  # validates the id
        cached = self._manifests.get(thread_id)
        if cached is None:
            hint = await self._rooted(self._read_hint(thread_id))
            if hint is not None and hint.get("chain"):
                chain, inline = hint_chain(hint)
                probe, content = await asyncio.gather(
                    self.store.get_or_none(layout.log_key(thread_id, int(hint["seq"]) + 1)),
                    self._materialize_content(thread_id, chain, inline),
                )
                if probe is None:
                    self._hint_heads[thread_id] = chain[-1]["id"]  # the head this writer last read
                    return self._checkpoint(thread_id, chain[-1], content)
            m = await self._manifest(thread_id, hint=hint)
        else:
            await self._check_root()
            m = await self._manifest(thread_id)
        if m.head is None:
            return None
        rec = m.records[m.head]
        return self._checkpoint(thread_id, rec, await self._content_of(m, m.head))

    async def _load_by_id(self, checkpoint_id: str) -> Checkpoint | None:
        data = await self._rooted(self.store.get_or_none(layout.id_key(checkpoint_id)))
        if data is None:
            return None
        thread_id = id_entry_thread(data, checkpoint_id)
        m = await self._manifest(thread_id)
        rec = m.records.get(checkpoint_id)
        if rec is None:
            return None
        return self._checkpoint(thread_id, rec, await self._content_of(m, checkpoint_id))

    async def _list(self, thread_id: str) -> Infos:
        layout.thread_dir(thread_id)
        m = await self._rooted(self._manifest(thread_id))
        return [_info(thread_id, rec) for rec in m.records.values()]

    async def _threads(self) -> Ids:
        await self._check_root()
        out = []
        for name in await self.store.list_dir(""):
            if not name.startswith(layout.THREAD_PREFIX):
                continue
            thread = layout.decode_id(name[len(layout.THREAD_PREFIX) :])
            if thread is None:  # hashed long id: the hint knows it
                data = await self.store.get_or_none(f"{name}/_head.json")
                if data is None:
                    continue
                thread = unseal(data, f"head hint in {name!r}")["thread_id"]
            out.append(thread)
        return sorted(out)

    async def _delete(self, thread_id: str) -> None:
        await self._check_root()
        m = await self._manifest(thread_id)
        await self.store.delete([layout.id_key(cid) for cid in m.records])
        await self.store.delete_prefix(layout.thread_dir(thread_id))
        self._manifests.pop(thread_id, None)
        self._folded_seq.pop(thread_id, None)
        for rec in m.records.values():
            self._states.pop(state_key(rec), None)

    async def _save(self, checkpoint: Checkpoint) -> str:
        # checked and privately copied once, whatever the number of commit attempts
        content: Content = (codec.json_copy(checkpoint.state), codec.json_copy(checkpoint.messages, "messages"))
        checkpoint.check_protection()
        thread_id, cid = checkpoint.thread_id, checkpoint.checkpoint_id
        layout.thread_dir(thread_id)
        layout.id_key(cid)
        await self._check_root()
        async with self._lock(thread_id):
            # The writer's cached view is its "known head": no read before the commit, whose
            # put-if-absent detects anyone who committed since.
            seen = self._hint_heads.pop(thread_id, None)
            m = self._manifests.get(thread_id) or await self._manifest(thread_id)
            explicit = checkpoint.parent_id is not None
            if not self._fresh(thread_id):  # too old to commit against (gc may have cut the log): re-read
                seen, m = m.head, await self._manifest(thread_id)
            if not explicit and seen is not None and seen != m.head:  # last read via the hint: moved on since
                raise CheckpointConflict(
                    f"thread {thread_id!r} moved on (head {m.head!r}) since this writer last read it "
                    f"(head {seen!r}); reload and save again, or pass parent_id to fork"
                )
            if explicit and checkpoint.parent_id not in m.records:
                m = await self._manifest(thread_id)
            index_written = False
            while True:
                if cid in m.records:
                    raise DuplicateCheckpointId(f"checkpoint {cid!r} is already in thread {thread_id!r}")
                parent_id = checkpoint.parent_id if explicit else m.head
                if parent_id is not None and parent_id not in m.records:
                    raise CheckpointNotFound(f"parent {parent_id!r} is not a checkpoint of thread {thread_id!r}")
                actions, writes, content = await self._prepare(m, checkpoint, parent_id, content)
                if not index_written:
                    writes.append(self._write_index(thread_id, cid))
                    index_written = True
                await asyncio.gather(*writes)
                entry = m.commit_entry(actions)
                if await self.store.put_if_absent(layout.log_key(thread_id, m.seq + 1), entry):
                    break
                m = await self._manifest(thread_id)
                if not explicit and m.head != parent_id:  # maintenance commits (prune, pin...) keep the head
                    raise CheckpointConflict(
                        f"thread {thread_id!r} moved on (now at commit {m.seq}, head {m.head!r}) since this "
                        "writer last read it; reload and save again, or pass parent_id to fork"
                    )
            new = m.copy()
            new.apply_entry(unseal(entry, "own commit"))
            self._manifests[thread_id] = new
            self._read_at[thread_id] = time.monotonic()
            self._remember(f"{cid}@1", content)
            await self._publish(new, compacted=any(a["action"] == "compact" for a in actions))
        return cid

    async def _prepare(
        self, m: Manifest, ckpt: Checkpoint, parent_id: str | None, content: Content
    ) -> tuple[list[dict[str, Any]], list[Any], Content]:
        """Actions of the commit, payload writes to run before it, and the new content."""
        state, messages = content
        parent = m.records.get(parent_id) if parent_id else None
        depth = None if parent is None else int(parent["depth"])
        record: Record = {
            "id": ckpt.checkpoint_id,
            "parent": parent_id,
            "step": ckpt.step,
            "created_at": ckpt.created_at.isoformat(),
            "metadata": ckpt.metadata,
            "fields": {
                "pending_nodes": ckpt.pending_nodes,
                "cleared_interrupt": ckpt.cleared_interrupt,
                "attempts": ckpt.attempts,
                "child_ledger": ckpt.child_ledger,
            },
            "version": 1,
        }
        enc = self.encryption
        record.update(self.content_digests((state, messages)))
        for name in ("run_id", "node_id"):  # written only when set: legacy records stay unchanged
            if getattr(ckpt, name) is not None:
                record["fields"][name] = getattr(ckpt, name)
        if ckpt.protection is not None:
            record["fields"]["protection"] = ckpt.protection.model_dump()
        writes: list[Any] = []
        actions: list[dict[str, Any]] = []
        if parent_id is None or snapshot_due(ckpt.step, depth, self.full_snapshot_interval):
            key = layout.snapshot_key(m.thread_id, ckpt.step, ckpt.checkpoint_id)
            new_pages: list[tuple[str, bytes]] = []
            page_refs: list[dict[str, Any]] = []
            if enc is not None:  # no shared pages (of state or messages): their names would be digests of plaintext
                data = self.seal_snapshot(m.thread_id, ckpt.checkpoint_id, (state, messages))
            else:
                known = self._known_pages(m, parent_id)
                data, new_pages, page_refs = paged_snapshot(m.thread_id, ckpt.checkpoint_id, (state, messages), known)
            writes.append(self.store.put(key, data))
            writes.extend(self.store.put(k, d) for k, d in new_pages)
            ref = {"type": "snapshot", "key": key, "sha256": codec.sha256(data), "size": len(data)}
            if page_refs:
                ref["pages"] = page_refs
            record.update(kind="full", depth=0, ref=ref, bytes=len(data) + sum(len(d) for _, d in new_pages))
            compact = self._compact_action(m)
            if compact is not None:
                action, segment_key, segment = compact
                writes.append(self.store.put(segment_key, segment))
                actions.append(action)
            actions.insert(0, {"action": "add", "record": record})
        else:
            ops = diff_checkpoint(*await self._content_of(m, parent_id), state, messages)
            if enc is not None:
                ops = crypto.seal_ops(enc, self._archive_id, m.thread_id, ckpt.checkpoint_id, ops)
            assert depth is not None
            record.update(kind="delta", depth=depth + 1)
            if ops:
                record.update(ref={"type": "inline"}, bytes=len(codec.dumps(ops)))
                actions.append({"action": "add", "record": record, "ops": ops})
            else:
                record.update(ref={"type": "empty"}, bytes=0)
                actions.append({"action": "add", "record": record})
        return actions, writes, (state, messages)

    def content_digests(self, content: Content) -> dict[str, Any]:
        """Record fields proving a content: ``state_sha256`` + ``messages_sha256``, or with encryption
        ``enc`` + keyed ``state_mac`` + ``messages_mac`` (a plain digest would let anyone confirm a guess)."""
        raw_state, raw_messages = codec.dumps(content[0]), codec.dumps(content[1])
        enc = self.encryption
        if enc is None:
            return {"state_sha256": codec.sha256(raw_state), "messages_sha256": codec.sha256(raw_messages)}
        return {
            "enc": {"alg": crypto.ALG, "key_id": enc.active_key_id},
            "state_mac": enc.mac(enc.active_key_id, raw_state),
            "messages_mac": enc.mac(enc.active_key_id, raw_messages),
        }

    def seal_snapshot(self, thread_id: str, checkpoint_id: str, content: Content) -> bytes:
        """An encrypted, unpaged snapshot object of state *and* messages; needs ``encryption``."""
        assert self.encryption is not None
        state, messages = content
        data = encode_snapshot(thread_id, checkpoint_id, state, messages=messages)
        return self.encryption.seal(data, crypto.aad(self._archive_id, thread_id, checkpoint_id, "snapshot"))

    @staticmethod
    def _known_pages(m: Manifest, parent_id: str | None) -> dict[str, dict[str, Any]]:
        """Pages already stored that the new snapshot may reuse: those of the parent chain's snapshot."""
        if parent_id is None:
            return {}
        base = m.chain(parent_id)[0]["ref"]
        return {p["digest"]: p for p in base.get("pages", [])}

    def _compact_action(self, m: Manifest) -> tuple[dict[str, Any], str, bytes] | None:
        """Move every inline delta of the thread into one Parquet segment (a row group each)."""
        if not m.inline:
            return None
        entries = [(cid, m.records[cid]["step"], m.inline[cid]) for cid in m.records if cid in m.inline]
        data, groups = encode_segment(m.thread_id, entries)
        key = layout.segment_key(m.thread_id, entries[0][1], uuid.uuid4().hex[:16])
        sizes = _row_group_sizes(data, len(groups))
        action = {
            "action": "compact",
            "key": key,
            "sha256": codec.sha256(data),
            "size": len(data),
            "row_groups": {cid: {"row_group": g, "bytes": sizes[g]} for cid, g in groups.items()},
            "empty": [cid for cid, _, ops in entries if not ops],
        }
        return action, key, data

    async def _write_index(self, thread_id: str, checkpoint_id: str) -> None:
        key = layout.id_key(checkpoint_id)
        doc = seal({"type": "id", "thread_id": thread_id, "checkpoint_id": checkpoint_id})
        if await self.store.put_if_absent(key, doc):
            return
        existing = unseal(await self.store.get(key), f"id entry of {checkpoint_id!r}", key=key)
        owner = existing.get("thread_id")
        if isinstance(owner, str) and owner != thread_id:
            other = await self._manifest(owner)
            if checkpoint_id in other.records:
                raise DuplicateCheckpointId(f"checkpoint {checkpoint_id!r} is already in thread {owner!r}")
            await self.store.put(key, doc)  # left over from a save that never committed

    async def _publish(self, m: Manifest, *, compacted: bool) -> None:
        """After a commit: rewrite the hint; after a compaction also fold the manifest."""
        # The commit already landed: a failed hint, part or fold only costs readers a few more
        # reads (they probe past the hint and rebuild from the log), so none of it is an error.
        tasks = [self.store.put(layout.head_key(m.thread_id), m.hint(self._folded_seq.get(m.thread_id)))]
        if compacted:  # sealed parts first: the fold that names them must never exist without them
            before = (list(m.parts), set(m.sealed), set(m.dirty))
            written = await asyncio.gather(
                *(self.store.put(key, data) for key, data in seal_parts(m)), return_exceptions=True
            )
            failed = [r for r in written if isinstance(r, BaseException)]
            if failed:
                m.parts, m.sealed, m.dirty = before  # no fold may name a part that was not written
                compacted = False
                if not all(isinstance(r, Exception) for r in failed):
                    raise next(r for r in failed if not isinstance(r, Exception))
            else:
                tasks.append(self.store.put(layout.manifest_key(m.thread_id, m.seq), m.folded()))
        results = await asyncio.gather(*tasks, return_exceptions=True)
        if compacted and not isinstance(results[-1], BaseException):
            self._folded_seq[m.thread_id] = m.seq
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result  # a crash/cancellation is not swallowed

    # -- maintenance -------------------------------------------------------------
    async def _compact(self, thread_id: str) -> bool:
        """Close the open segment now (end of a run): inline deltas to Parquet, fold the manifest."""
        async with self._lock(thread_id):
            m = await self._manifest(thread_id)
            compact = self._compact_action(m)
            if compact is None:
                return False
            action, key, data = compact
            await self.store.put(key, data)
            entry = m.commit_entry([action])
            if not await self.store.put_if_absent(layout.log_key(thread_id, m.seq + 1), entry):
                raise CheckpointConflict(f"thread {thread_id!r} changed while compacting; try again")
            new = m.copy()
            new.apply_entry(unseal(entry, "own commit"))
            self._manifests[thread_id] = new
            await self._publish(new, compacted=True)
            return True

    def compact(self, thread_id: str) -> bool:
        return run_sync(self._compact(thread_id))

    async def acompact(self, thread_id: str) -> bool:
        return await run_async(self._compact(thread_id))


def _row_group_sizes(data: bytes, n: int) -> list[int]:
    import io

    import pyarrow.parquet as pq

    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    return [meta.row_group(i).total_byte_size for i in range(n)]
