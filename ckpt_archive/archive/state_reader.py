"""Reconstructing a checkpoint's content (state and messages) from its chain, and checking it.

A chain is a snapshot (possibly paged, possibly encrypted) followed by deltas
(inline in the manifest or in Parquet segments); the rebuilt content must match
the digests recorded at save before anyone sees it. Rebuilt contents are cached
by record version, so an edit never serves a stale state.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import codec
from ..delta import MESSAGES, Delta, apply_checkpoint
from ..errors import BrokenChain, CorruptManifest, MissingObject, ProtectionMismatch, TruncatedObject
from ..model import Checkpoint, Protection, content_digest
from . import crypto, pages
from .batch import Prefetched
from .content import Content, state_key
from .manifest import Manifest, Record, ref_keys
from .manifest_reader import ManifestReader
from .objects import SegmentReader, check_content, decode_snapshot_content, verify


class StateReader(ManifestReader):
    """The state layer of ``ArchiveCheckpointer``: chains to contents, contents to ``Checkpoint``."""

    def _remember(self, checkpoint_id: str, content: Content) -> None:
        """Cache a content (least recently used dropped first); keys come from ``state_key``."""
        self._states[checkpoint_id] = content
        self._states.move_to_end(checkpoint_id)
        while len(self._states) > self._state_cache:
            self._states.popitem(last=False)

    def _cached_prefix(self, chain: list[Record]) -> tuple[int, Content | None]:
        """(index after the newest record of ``chain`` whose content is cached, that content)."""
        for i in range(len(chain) - 1, -1, -1):
            cached = self._states.get(state_key(chain[i]))
            if cached is not None:
                return i + 1, cached
        return 0, None

    @staticmethod
    def chain_keys(records: list[Record]) -> list[str]:
        """The objects (snapshots, pages, segments) that ``records`` need, each once."""
        return sorted({key for rec in records for key in ref_keys(rec)})

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
        start, cached = self._cached_prefix(chain)
        state, messages = cached if cached is not None else (None, [])
        todo = chain[start:]
        keys = self.chain_keys(todo)
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
        check_content(content, rec, thread_id, lambda name, raw: self._sha256(thread_id, name, raw))
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
