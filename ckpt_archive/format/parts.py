"""Sealed manifest parts: keep each fold small however long a thread grows.

A folded manifest would otherwise rewrite every record of the thread at every
compaction (O(n) bytes per fold, O(n^2) over a thread's life). Instead, the
oldest records are *sealed* into immutable part objects
(``thread_id=<enc>/_parts/<token>.json.zst``); a fold then holds the part
references (key, sha256, size, count, level), the records after the last part,
the sealed records changed since (overrides, in place) and the sealed ids
removed since. When those changes grow past a quarter of the sealed records (a
big prune), the next fold re-seals from scratch and the old parts become
garbage for ``gc``.

Parts are tiered like an LSM tree: records are sealed ``PART_SIZE`` at a time
(level 0) so a fold never carries more than about one small part's worth of
records, and ``FANOUT`` consecutive parts of one level are merged into one part
of the next level, so a full read stays at most ``FANOUT - 1`` parts per level
(1,000 or 10,000 records: 8 parts) while each record is rewritten only
once per level.

Pure logic over ``Manifest`` plus the part codec; the checkpointer writes and
reads the objects.
"""

from __future__ import annotations

import uuid
from typing import Any

from .. import codec, limits
from ..errors import CorruptManifest, MissingObject
from . import layout
from .manifest import Manifest, Record, holds_inline, seal, unseal
from .schema import check_object_key

PART_SIZE = 32
"""Records per level-0 sealed part. A fold re-carries every record no part holds yet, so smaller parts
make smaller folds: W1 (1,000 saves) wrote 366 KB of folds with parts of 64, 225 KB with 32, for a part
PUT every ~3 snapshot saves instead of ~6 and 10 parts per full read instead of 8 (design note 009)."""
FANOUT = 8
"""Consecutive parts of one level merged into one part of the next."""


def seal_parts(m: Manifest, part_size: int | None = None) -> list[tuple[str, bytes]]:
    """Seal full parts off the start of the unsealed records, then merge full levels; returns the
    objects to write first.

    Mutates ``m`` (its ``parts``/``part_ids``/``sealed``/``dirty``); call right before folding it.
    """
    size = part_size or PART_SIZE
    out: list[tuple[str, bytes]] = []
    _refresh(m, out)
    if m.parts and len(m.dirty) > max(size, len(m.sealed) // 4):
        m.parts, m.part_ids, m.sealed, m.dirty = [], [], set(), set()
    tail = [rec for cid, rec in m.records.items() if cid not in m.sealed]
    while len(tail) >= size + size // 8 + 1:  # the newest records stay unsealed: they still change
        chunk, tail = tail[:size], tail[size:]
        if any(holds_inline(rec) for rec in chunk):
            break
        out.append(_new_part(m, chunk, 0))
    while len(m.parts) >= FANOUT and len({_level(p) for p in m.parts[-FANOUT:]}) == 1:
        level = _level(m.parts[-1])
        ids = [cid for group in m.part_ids[-FANOUT:] for cid in group]
        gone = {cid for cid in ids if cid not in m.records}
        records = [m.records[cid] for cid in ids if cid not in gone]
        raw = _part_doc(m, records)
        if not limits.fits("manifest part", raw):
            break  # the parts stay as they are (a reader reads any number of them)
        del m.parts[-FANOUT:], m.part_ids[-FANOUT:]
        m.sealed -= gone
        m.dirty -= set(ids)  # the merged part holds their current version
        out.append(_new_part(m, records, level + 1, raw))
    return out


def _refresh(m: Manifest, out: list[tuple[str, bytes]]) -> None:
    """Write again, in place and at its level, each part most of whose records changed since sealing
    (a segment merge re-points a run of consecutive records, spec.md section 6): one part object
    instead of carrying those records as overrides in every fold until the part merges."""
    for index in range(len(m.part_ids)):
        ids = m.part_ids[index]
        changed = sum(1 for cid in ids if cid in m.dirty or cid not in m.records)
        if changed * 2 <= len(ids):
            continue
        records = [m.records[cid] for cid in ids if cid in m.records]
        if not records:
            continue
        raw = _part_doc(m, records)
        if not limits.fits("manifest part", raw):
            continue
        level = _level(m.parts[index])
        m.sealed -= {cid for cid in ids if cid not in m.records}
        m.dirty -= set(ids)
        out.append(_new_part(m, records, level, raw))
        ref, new_ids = m.parts.pop(), m.part_ids.pop()  # appended: put in its place
        m.parts[index], m.part_ids[index] = ref, new_ids


def _level(ref: dict[str, Any]) -> int:
    level = ref.get("level", 0)
    return level if type(level) is int else 0


def _part_doc(m: Manifest, records: list[Record]) -> bytes:
    return seal({"type": "manifest-part", "thread_id": m.thread_id, "records": records})


def _new_part(m: Manifest, records: list[Record], level: int, raw: bytes | None = None) -> tuple[str, bytes]:
    raw = _part_doc(m, records) if raw is None else raw
    limits.check_written("manifest part", raw, f"manifest part of thread {m.thread_id!r}")
    data = codec.compress(raw, "manifest part")
    key = layout.part_key(m.thread_id, uuid.uuid4().hex)
    ref = {"key": key, "sha256": codec.sha256(data), "size": len(data), "count": len(records), "level": level}
    m.parts.append(ref)
    m.part_ids.append([rec["id"] for rec in records])
    m.sealed.update(rec["id"] for rec in records)
    return key, data


def decode_part(data: bytes | None, ref: dict[str, Any], thread_id: str) -> list[Record]:
    key = ref["key"]
    if data is None:
        raise MissingObject("sealed manifest part is missing", thread_id=thread_id, key=key)
    if len(data) != ref.get("size", len(data)) or codec.sha256(data) != ref.get("sha256"):
        raise CorruptManifest(f"sealed manifest part {key!r} of thread {thread_id!r} fails its digest check")
    doc = unseal(data, f"manifest part {key!r}", kind="manifest part")
    if doc.get("type") != "manifest-part" or doc.get("thread_id") != thread_id:
        raise CorruptManifest(f"{key!r} is not a manifest part of thread {thread_id!r}")
    records = doc.get("records")
    if not isinstance(records, list):
        raise CorruptManifest(f"manifest part {key!r} has no records", thread_id=thread_id, key=key)
    return records


def checked_part_refs(data: bytes, what: str, *, thread_id: str, key: str | None = None) -> list[dict[str, Any]]:
    """The sealed parts a folded manifest names, each checked to be a part of its own thread."""
    refs = Manifest.part_refs(data, what, thread_id=thread_id, key=key)
    if not all(isinstance(r, dict) and isinstance(r.get("key"), str) for r in refs):
        raise CorruptManifest(f"{what} has malformed part references", thread_id=thread_id, key=key)
    for ref in refs:
        check_object_key(ref["key"], thread_id, layout.PARTS)
    return refs


def with_parts(
    data: bytes,
    what: str,
    refs: list[dict[str, Any]],
    datas: list[bytes | None],
    *,
    thread_id: str,
    key: str | None = None,
    seq: int | None = None,
) -> Manifest:
    """The folded manifest ``data`` with its parts (``datas``, read for ``refs``) decoded and checked."""
    parts = [decode_part(d, ref, thread_id) for d, ref in zip(datas, refs, strict=True)]
    return Manifest.from_folded(data, what, parts, thread_id=thread_id, key=key, seq=seq)
