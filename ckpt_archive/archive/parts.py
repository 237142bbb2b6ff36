"""Sealed manifest parts: keep each fold small however long a thread grows.

A folded manifest would otherwise rewrite every record of the thread at every
compaction (O(n) bytes per fold, O(n^2) over a thread's life). Instead, the
oldest records are *sealed* into immutable part objects of ``PART_SIZE``
records (``thread_id=<enc>/_parts/<token>.json.zst``); a fold then holds the
part references (key, sha256, size), the records after the last part, the
sealed records changed since (overrides, in place) and the sealed ids removed
since. When those changes grow past a quarter of the sealed records (a big
prune), the next fold re-seals from scratch and the old parts become garbage
for ``gc``.

Pure logic over ``Manifest`` plus the part codec; the checkpointer writes and
reads the objects.
"""

from __future__ import annotations

import uuid
from typing import Any

from .. import codec
from ..errors import CorruptManifest, MissingObject
from . import layout
from .manifest import Manifest, Record, seal, unseal
from .schema import check_object_key

PART_SIZE = 500
"""Records per sealed part."""


def part_key(thread_id: str, token: str) -> str:
    return f"{layout.thread_dir(thread_id)}/_parts/{token}.json.zst"


def seal_parts(m: Manifest, part_size: int | None = None) -> list[tuple[str, bytes]]:
    """Seal full parts off the start of the unsealed records; returns the objects to write first.

    Mutates ``m`` (its ``parts``/``sealed``/``dirty``); call right before folding it.
    """
    size = part_size or PART_SIZE
    if m.parts and len(m.dirty) > max(size, len(m.sealed) // 4):
        m.parts, m.sealed, m.dirty = [], set(), set()
    tail = [rec for cid, rec in m.records.items() if cid not in m.sealed]
    out: list[tuple[str, bytes]] = []
    while len(tail) >= size + size // 8 + 1:  # the newest records stay unsealed: they still change
        chunk, tail = tail[:size], tail[size:]
        if any(rec["ref"]["type"] == "inline" for rec in chunk):
            break
        data = codec.compress(seal({"type": "manifest-part", "thread_id": m.thread_id, "records": chunk}))
        key = part_key(m.thread_id, uuid.uuid4().hex)
        m.parts.append({"key": key, "sha256": codec.sha256(data), "size": len(data), "count": len(chunk)})
        m.sealed.update(rec["id"] for rec in chunk)
        out.append((key, data))
    return out


def decode_part(data: bytes | None, ref: dict[str, Any], thread_id: str) -> list[Record]:
    key = ref["key"]
    if data is None:
        raise MissingObject("sealed manifest part is missing", thread_id=thread_id, key=key)
    if len(data) != ref.get("size", len(data)) or codec.sha256(data) != ref.get("sha256"):
        raise CorruptManifest(f"sealed manifest part {key!r} of thread {thread_id!r} fails its digest check")
    doc = unseal(data, f"manifest part {key!r}", compressed=True)
    if doc.get("type") != "manifest-part" or doc.get("thread_id") != thread_id:
        raise CorruptManifest(f"{key!r} is not a manifest part of thread {thread_id!r}")
    records = doc.get("records")
    if not isinstance(records, list):
        raise CorruptManifest(f"manifest part {key!r} has no records", thread_id=thread_id, key=key)
    return records


async def read_folded(
    store: Any, thread_id: str, data: bytes, what: str, *, key: str | None = None, seq: int | None = None
) -> Manifest:
    """A folded manifest with its sealed parts read (in parallel) and checked."""
    refs = Manifest.part_refs(data, what, thread_id=thread_id, key=key)
    if not all(isinstance(r, dict) and isinstance(r.get("key"), str) for r in refs):
        raise CorruptManifest(f"{what} has malformed part references", thread_id=thread_id, key=key)
    for ref in refs:
        check_object_key(ref["key"], thread_id, "_parts")
    datas = await store.get_many([ref["key"] for ref in refs]) if refs else []
    parts = [decode_part(d, ref, thread_id) for d, ref in zip(datas, refs, strict=True)]
    return Manifest.from_folded(data, what, parts, thread_id=thread_id, key=key, seq=seq)
