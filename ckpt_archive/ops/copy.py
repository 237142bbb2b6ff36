"""Copying checkpoints into new threads (fork, copy_thread), each one commit (``ThreadLog.commit``).

Snapshots are copied server-side (``fs.copy``: S3 CopyObject...)
under the new thread, and their references record the ``origin`` checkpoint id
the object was written for, so nothing is decoded and re-encoded. Parquet
segments are re-encoded instead (``encode_segment``), because their rows name
their thread and checkpoints (``thread_id``, ``checkpoint_id`` columns) and a
reader of the files alone must see the copy's ids, never the source's: one GET
and one PUT per segment (``history.reencode``), the rows of checkpoints no longer in
the source dropped; a full record's history rows (``rows``) are re-encoded with the
deltas. A fork that starts at a delta writes one full snapshot of that checkpoint;
a fork's record has no parent in its thread, so its history rows are its whole
content (inline in the commit when they fit, as a save's).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..engine import MAINTENANCE, Engine, Plan
from ..errors import CheckpointConflict, EncryptionError
from ..format import actions as A
from ..format import layout
from ..format import refs as R
from ..format.manifest import Manifest, Record, holds_inline
from ..ids import mint_checkpoint_id
from ..model import RESERVED_PREFIX
from ..retention import PINNED_KEY
from . import history
from .reads import locate

FORKED_FROM = RESERVED_PREFIX + "forked_from"


def _copied_ref(dst: str, rec: Record, new_id: str, copies: dict[str, str]) -> Any:
    """The reference for ``rec`` in thread ``dst``; records the server-side copies to make in ``copies``."""
    ref = dict(rec["ref"])
    if ref["type"] == R.SNAPSHOT:
        key = layout.rewrite_snapshot_key(dst, rec["step"], new_id)
        copies[ref["key"]] = key
    else:
        return ref
    return {**ref, "key": key, "origin": ref.get("origin", rec["id"])}


async def _segments_for(
    engine: Engine, src: Manifest, dst: str, mapping: dict[str, str]
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, bytes]]]:
    """Each segment holding history rows of ``src``'s records (a delta's ops, a full record's ``rows``),
    re-encoded for thread ``dst`` with the copy's checkpoint ids (``mapping``, ``history.reencode``):
    ({source id: record changes}, objects to put). Each source segment is read (and checked) once,
    through the one replay's reader."""
    reader = engine.contents.reader(src.thread_id, m=src, cache=False, walk=True)
    changes: dict[str, dict[str, Any]] = {}
    objects: list[tuple[str, bytes]] = []
    for key, recs in history.holders(src).items():
        items = []
        for rec in recs:
            base = history.base_of(src, rec)
            items.append(
                (
                    rec,
                    mapping[rec["id"]],
                    None if base is None else mapping[base],
                    await reader.history_ops(rec, src.inline),
                )
            )
        made, written = history.reencode(dst, items, history.level_of(key))
        objects.append(written)
        changes.update((rec["id"], made[mapping[rec["id"]]]) for rec in recs)
    return changes, objects


def _into_new(dst: str, m: Manifest) -> None:
    if m.records:
        raise CheckpointConflict(f"thread {dst!r} already has checkpoints; copy into a new thread id")


def _refuse_encrypted(engine: Engine, what: str) -> None:
    # ciphertexts are bound to their thread and checkpoint: a server-side copy would not decrypt
    if engine.encryption is not None:
        raise EncryptionError(f"{what} of an encrypted archive is not supported yet (it would need re-encryption)")


async def fork(engine: Engine, checkpoint_id: str, new_thread_id: str) -> str:
    """Start thread ``new_thread_id`` at a copy of ``checkpoint_id`` (a new id, no parent); returns its id."""
    _refuse_encrypted(engine, "fork")
    layout.thread_dir(new_thread_id)
    src, src_thread = await locate(engine, checkpoint_id)
    rec = src.records[checkpoint_id]
    new_id = mint_checkpoint_id(new_thread_id)

    async def plan(m: Manifest, attempt: int) -> Plan[str]:
        copies: dict[str, str] = {}
        objects: list[tuple[str, bytes]] = []
        content = await engine.contents.content_of(src, checkpoint_id)  # its history rows: all of it
        if rec["ref"]["type"] == R.SNAPSHOT:
            ref = _copied_ref(new_thread_id, rec, new_id, copies)
            if "replay" in ref:  # a chain root: its own rows (against the empty content) hold every list
                ref["replay"] = 0
            size = int(ref.get("size", 0))
        else:
            key = layout.rewrite_snapshot_key(new_thread_id, rec["step"], new_id)
            ref, objects, size = engine.contents.snapshot(new_thread_id, new_id, key, content, lambda _: 0)
        rows = history.history_rows(engine, new_thread_id, new_id, history.EMPTY, content)
        meta = {k: v for k, v in rec.get("metadata", {}).items() if k != PINNED_KEY}
        meta[FORKED_FROM] = {"thread_id": src_thread, "checkpoint_id": checkpoint_id}
        record = {
            **rec,
            "id": new_id,
            "parent": None,
            "kind": "full",
            "depth": 0,
            "ref": ref,
            "bytes": size,
            "created_at": datetime.now(UTC).isoformat(),
            "metadata": meta,
            "version": 1,
        }
        inline_rows = None
        if not rows:
            record["rows"] = R.empty()
        elif history.fits_inline(rows, 0, 0):
            record["rows"], inline_rows = R.inline(), rows
        else:
            refs, written = history.place(new_thread_id, [(new_id, int(rec["step"]), None, rows)])
            record["rows"] = refs[new_id]
            objects = [*objects, *written]
        _into_new(new_thread_id, m)
        return Plan([A.add(record, inline_rows)], new_id, objects=objects, copies=copies)

    return await engine.log.commit(new_thread_id, plan, MAINTENANCE)


async def copy_thread(engine: Engine, src_thread: str, dst_thread: str) -> dict[str, str]:
    """Copy every checkpoint of ``src_thread`` into the new thread ``dst_thread``: {old id: new id}.

    Only objects the kept records reference are copied (snapshots server-side, segments
    re-encoded with the copy's ids), never tombstoned ones or the old log; the copy is one commit.
    """
    _refuse_encrypted(engine, "copy_thread")
    layout.thread_dir(dst_thread)
    await engine.root.check()
    src = await engine.log.manifest(src_thread)
    mapping = {cid: mint_checkpoint_id(dst_thread) for cid in src.records}
    segments, objects = await _segments_for(engine, src, dst_thread, mapping)

    async def plan(m: Manifest, attempt: int) -> Plan[dict[str, str]]:
        copies: dict[str, str] = {}
        actions: list[A.Action] = []
        for cid, rec in src.records.items():
            new_id = mapping[cid]
            parent = rec.get("parent")
            record = {
                **rec,
                "id": new_id,
                "parent": mapping.get(parent) if parent is not None else None,
                "ref": _copied_ref(dst_thread, rec, new_id, copies),
            }
            record.update(segments.get(cid, {}))
            inline = holds_inline(rec)  # a delta's ops, or a full record's history rows, still inline
            actions.append(A.add(record, src.inline.get(cid, []) if inline else None))
        _into_new(dst_thread, m)
        return Plan(actions, mapping, objects=objects, copies=copies)

    if not src.records:
        return {}
    return await engine.log.commit(dst_thread, plan, MAINTENANCE)
