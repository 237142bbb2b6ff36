"""History rows: every record's ops against its base, in the thread's Parquet segments once.

The invariant (docs/format/spec.md sections 4, 5 and 10): every record R of a manifest has its
*history rows* in exactly one place, ``diff(base(R), content(R))``, where ``base(R)`` is the content of
R's parent when the parent is a record of the same manifest, else the empty content (``{}``, ``[]``);
no row of the thread's segments belongs to anything else. A delta's ops are its history rows (its
``ref``); a full record says where its own are in ``rows``. So a reader of the Parquet files alone
finds every checkpoint's change, snapshots included, once.

This module is the one place that computes history rows (``history_rows``), places them (``place``:
inline in the commit, or segments through the one segment writer, ``encode_segment``) and rewrites
segments when records leave or change (``Rewrite``: prune, remove, re-base, edit), so the
invariant holds after every commit that changes records.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .. import codec, limits
from ..delta import Delta, diff_checkpoint
from ..engine import Engine
from ..engine.chains import ChainReader
from ..format import actions as A
from ..format import crypto, layout, parts, replay
from ..format import refs as R
from ..format.content import Content
from ..format.holders import held_in
from ..format.manifest import Manifest, Record, history_ref
from ..format.objects import GROUP_CHECKPOINTS, encode_segment

EMPTY: Content = ({}, [])
"""The base of a record whose parent is not a record of its manifest (a chain root, a fork, a copy's
first record, a record whose parent was pruned)."""

Entry = tuple[str, int, str | None, Delta]
"""(checkpoint id, step, base id: the record its rows are against or None, history rows as stored)."""


def history_rows(engine: Engine, thread_id: str, checkpoint_id: str, base: Content, content: Content) -> Delta:
    """The record's history rows as stored: ``diff_checkpoint(base, content)``, large strings as blob
    references (the record's snapshot writes and lists those blobs: none is written here) and, in
    an encrypted archive, sealed like a delta's ops (``crypto.seal_ops``)."""
    ops = diff_checkpoint(*base, *content)
    ops, _, _ = engine.contents.stored_ops(ops, frozenset())
    if engine.encryption is not None:
        ops = crypto.seal_ops(engine.encryption, engine.root.archive_id, thread_id, checkpoint_id, ops)
    return ops


def reach(
    records: Mapping[str, Record],
    inline: Mapping[str, Delta],
    parent_id: str | None,
    own: Delta,
    where: list[replay.Place],
) -> int:
    """How many ancestors' history rows a load of a new snapshot (its parent ``parent_id``, its own
    rows ``own``) replays the lists at ``where`` through (``ref.replay``): up to the nearest record whose
    rows define each whole (``replay.touches``), or the lineage's root. Rows held inline are looked at;
    at the first record whose rows are not (in a segment), the bound is that record's own ``replay``
    from there (a save's snapshot: the previous snapshot of its chain) or, without one, its distance to
    the root. A bound that falls short costs a load one round trip more, never a wrong list: the
    replay goes on up the lineage and the content is checked against its digests."""
    todo = [p for p in where if not replay.touches(own, p)]
    d, at = 0, records.get(parent_id) if parent_id is not None else None
    while todo and at is not None and d <= len(records):
        d += 1
        held = history_ref(at)
        if R.kind(held) == R.EMPTY:
            rows: Delta | None = []
        elif R.kind(held) == R.INLINE and at["id"] in inline:
            rows = inline[at["id"]]
        else:
            rows = None
        parent = records.get(at["parent"]) if at.get("parent") is not None else None
        if rows is None:
            if "replay" in at["ref"]:
                return d + int(at["ref"]["replay"])
            while parent is not None and d <= len(records):  # the root is where every list is defined
                d += 1
                parent = records.get(parent["parent"]) if parent.get("parent") is not None else None
            return d
        todo = [p for p in todo if not replay.touches(rows, p)]
        at = parent
    return d


def size(ops: Delta) -> int:
    """The rows' canonical JSON, as stored: what the inline bounds (``limits``) measure."""
    return len(codec.dumps(ops))


def base_of(m: Manifest, rec: Record) -> str | None:
    """The record whose content ``rec``'s history rows are taken against (None: the empty content)."""
    return base_in(m.records, rec)


def base_in(records: Mapping[str, Record], rec: Record) -> str | None:
    """``base_of`` among ``records`` (the records a plan leaves)."""
    parent = rec.get("parent")
    return parent if parent is not None and parent in records and parent != rec["id"] else None


def fits_inline(ops: Delta, inline_bytes: int, inline_count: int) -> bool:
    """May these rows stay inline in a commit entry, next to the thread's other inline ops (the bounds
    a delta stays inline within, so hints, folds and segments stay within theirs)?"""
    n = size(ops)
    return (
        n <= limits.INLINE_OPS_BYTES
        and n + inline_bytes <= limits.INLINE_TOTAL_BYTES
        and inline_count < limits.MAX_INLINE_DELTAS
    )


def new_segment(
    thread_id: str, entries: Sequence[Entry], *, history: bool = False, level: int = 0
) -> tuple[str, bytes, dict[str, tuple[int, int]]]:
    """The one way a segment is made: ``encode_segment`` of ``entries`` under a fresh key named by its
    first step (a history segment's when ``history``, else a delta segment of tier ``level``, spec.md
    section 6): (key, bytes, {id: (row group, bytes)})."""
    data, placed = encode_segment(thread_id, entries)
    token = uuid.uuid4().hex[:16]
    step = int(entries[0][1])
    if history:
        key = layout.history_segment_key(thread_id, step, token)
    else:
        key = layout.segment_key(thread_id, step, token, level)
    return key, data, placed


def place(thread_id: str, entries: Sequence[Entry]) -> tuple[dict[str, dict[str, Any]], list[tuple[str, bytes]]]:
    """``rows`` refs for these records' history rows, written to new segments now: ({id: rows ref},
    objects to put). Empty rows need none (``{"type": "empty"}``). Rows within a delta segment's
    bounds share segments of at most ``INLINE_TOTAL_BYTES`` of ops (as a compaction's); bigger ones
    (a chain root of a long thread) get a history segment of their own (``layout.HISTORY_SUFFIX``)."""
    refs: dict[str, dict[str, Any]] = {}
    objects: list[tuple[str, bytes]] = []
    batch: list[Entry] = []
    weight = 0

    def flush() -> None:
        nonlocal batch, weight
        if batch:
            key, data, placed = new_segment(thread_id, batch)
            objects.append((key, data))
            refs.update((cid, R.segment(key, data, placed[cid][0])) for cid, _, _, _ in batch)
        batch, weight = [], 0

    for cid, step, base, ops in entries:
        if not ops:
            refs[cid] = R.empty()
            continue
        n = size(ops)
        if n > limits.INLINE_TOTAL_BYTES:
            key, data, placed = new_segment(thread_id, [(cid, step, base, ops)], history=True)
            objects.append((key, data))
            refs[cid] = R.segment(key, data, placed[cid][0])
            continue
        if weight + n > limits.INLINE_TOTAL_BYTES or len(batch) >= limits.MAX_INLINE_DELTAS:
            flush()
        batch.append((cid, step, base, ops))
        weight += n
    flush()
    return refs, objects


def _holder(rec: Record) -> str | None:
    """The segment key holding ``rec``'s history rows (None: inline, empty, or none): the one test the
    manifest's segment counts use (``holders.held_in``)."""
    found = held_in(rec)
    return None if found is None else found[0]


def reencode(
    thread_id: str, items: Sequence[tuple[Record, str, str | None, Delta]], level: int = 0
) -> tuple[dict[str, dict[str, Any]], tuple[str, bytes]]:
    """The history rows of ``items`` (record, id it gets, base id, rows as stored), read from one segment,
    written again as one segment of thread ``thread_id`` (the one segment writer) of tier ``level``
    (the tier of the segment it replaces): ({new id: record changes}, (key, bytes)). What a
    maintenance commit does to a segment that held stale rows, and what ``copy_thread`` does to every
    segment (rows under the copy's thread and ids)."""
    big = any(size(ops) > limits.INLINE_TOTAL_BYTES for _, _, _, ops in items)  # a history segment's one record
    entries = [(new_id, int(rec["step"]), base, ops) for rec, new_id, base, ops in items]
    key, data, placed = new_segment(thread_id, entries, history=big, level=level)
    changes = {
        new_id: moved(rec, R.segment(key, data, placed[new_id][0]), placed[new_id][1]) for rec, new_id, _, _ in items
    }
    return changes, (key, data)


def moved(rec: Record, ref: dict[str, Any], share: int) -> dict[str, Any]:
    """The changes of a record whose history rows are now at segment ``ref`` (``share``: its part of the
    row group's bytes): a full record's ``rows``; a delta's ``ref`` (keeping the blobs its ops list:
    the ops moved, the blobs did not) and ``bytes``."""
    if rec["kind"] == "full":
        return {"rows": ref}
    if rec["ref"].get("blobs"):
        ref = {**ref, "blobs": rec["ref"]["blobs"]}
    return {"ref": ref, "bytes": share}


def updates(changes: dict[str, dict[str, Any]]) -> list[A.UpdateAction]:
    """The ``update`` actions that re-point records as ``reencode``/``moved`` changed them."""
    return [
        A.rows(cid, change["rows"]) if "rows" in change else A.repoint(cid, change["ref"], change["bytes"])
        for cid, change in changes.items()
    ]


def level_of(key: str) -> int:
    """The tier a segment written again in place of ``key`` keeps (0 for a history segment)."""
    return layout.segment_level(key) or 0


Tier = tuple[str, int, int, int]
"""One delta segment of a thread: (key, level, stored size, records holding rows in it)."""


def tiers(m: Manifest) -> list[Tier]:
    """The thread's delta segments (history segments are never merged), in the order of their keys
    (first step, then token: spec.md section 6), from the manifest's count of them (O(segments): a
    save's compaction plans its merges from it)."""
    out: list[Tier] = []
    for key, (count, weight) in sorted(m.segments.items()):
        level = layout.segment_level(key)
        if level is not None:
            out.append((key, level, weight, count))
    return out


SEGMENT_FANOUT = parts.FANOUT
"""How many consecutive segments of one tier a merge takes (``merge_plan``): as many as manifest parts."""

MERGE_RECORDS = 20_000
"""The most records one ``compact`` re-points (its ``update`` actions, ~10 values each, stay well within a
commit entry's values bound, ``limits.VALUES``); merges past it wait for the next ``compact``."""

INLINE = ""
"""The unit of ``merge_plan`` standing for the thread's inline rows (the compaction's new segment)."""


def merge_plan(m: Manifest, inline: Tier | None = None) -> list[tuple[list[str], int]]:
    """The segments maintenance's compaction (``save.compact``, never a save) merges: ``carry`` over the
    thread's delta segments in order (``tiers``), then ``inline`` (the compaction's own new segment, key
    ``INLINE``, tier 0)."""
    return carry([*tiers(m), *([inline] if inline is not None else [])])


def carry(order: Sequence[Tier]) -> list[tuple[list[str], int]]:
    """Like manifest parts (``parts.FANOUT``): every ``SEGMENT_FANOUT`` consecutive segments of one tier
    become one segment of the next tier, lowest tier first and again until no such run is left (a
    carry, planned at once: each row is written once per call), so a thread keeps at most
    ``SEGMENT_FANOUT - 1`` segments per tier. Returns each new segment as (the keys it absorbs, in
    order, and its tier); a merge whose segments' stored sizes pass half a delta segment's bound
    (``limits.LIMITS``), or whose row groups could pass the footer's, is not planned: those stay."""
    units: list[tuple[list[str], int, int, int]] = [([key], level, weight, n) for key, level, weight, n in order]
    width = SEGMENT_FANOUT
    merged = True
    while merged:
        merged = False
        for level in sorted({u[1] for u in units}):
            out: list[tuple[list[str], int, int, int]] = []
            i = 0
            while i < len(units):
                run = units[i : i + width]
                if (
                    len(run) == width
                    and all(u[1] == level for u in run)
                    and sum(u[2] for u in run) <= limits.LIMITS["delta segment"] // 2
                    and sum(u[3] for u in run) <= GROUP_CHECKPOINTS * limits.FOOTER_ITEMS // 2
                ):
                    out.append(
                        ([k for u in run for k in u[0]], level + 1, sum(u[2] for u in run), sum(u[3] for u in run))
                    )
                    i += width
                    merged = True
                else:
                    out.append(units[i])
                    i += 1
            units = out
            if merged:
                break
    return [(keys, level) for keys, level, _, _ in units if len(keys) > 1]


async def absorb(reader: ChainReader, m: Manifest, keys: Iterable[str]) -> list[tuple[Record, Delta]]:
    """The records holding history rows in ``keys``, with their rows as stored (checked as a load
    checks them), in record order; the segments fetched in one concurrent batch."""
    wanted = set(keys)
    await reader.fetch(sorted(wanted))
    return [(rec, await reader.history_ops(rec, m.inline)) for rec in held_by(m, wanted)]


def held_by(m: Manifest, keys: set[str]) -> list[Record]:
    """The records holding history rows in the segments ``keys``, in record order. Found from the
    newest back, stopping once the manifest's count of them is met: the segments a merge absorbs are
    the newest of their tier, so a save's merge visits about the records it moves, not the thread."""
    due = sum(m.segments[key][0] for key in keys if key in m.segments)
    return newest(m, lambda rec: _holder(rec) in keys, due)


def newest(m: Manifest, wanted: Callable[[Record], bool], due: int) -> list[Record]:
    """The ``due`` records of ``m`` that are ``wanted``, in record order, found from the newest back:
    what a save compacts or merges is its thread's newest records, so it visits about those alone."""
    found: list[Record] = []
    for rec in reversed(m.records.values()):
        if len(found) >= due:
            break
        if wanted(rec):
            found.append(rec)
    found.reverse()
    return found


def holders(m: Manifest) -> dict[str, list[Record]]:
    """The records of ``m`` whose history rows each segment holds, in record order."""
    out: dict[str, list[Record]] = {}
    for rec in m.records.values():
        key = _holder(rec)
        if key is not None:
            out.setdefault(key, []).append(rec)
    return out


class Rewrite:
    """The history-row changes of one maintenance plan, in the commit that changes the records.

    ``replace(rec, base, content)``: the record's history rows become ``diff(base, content)`` (a re-base,
    an edit, a kept record whose parent left the manifest); ``actions(after)``: the updates that
    re-point records to their rows once every record's change is planned, and the objects to write
    first. Every segment holding rows of a record that left the manifest, or whose rows were replaced,
    is re-encoded without them (its kept records' rows are read through the plan's replay, checked
    as a load checks them, and written again with the one segment writer), so no stale row survives;
    the old segment is then referenced by no record and the commit's tombstone names it.
    """

    def __init__(self, engine: Engine, m: Manifest, reader: ChainReader) -> None:
        self.engine, self.m, self.reader = engine, m, reader
        self.replaced: dict[str, Delta] = {}

    def replace(self, rec: Record, base: Content, content: Content) -> None:
        self.replaced[rec["id"]] = history_rows(self.engine, self.m.thread_id, rec["id"], base, content)

    async def actions(
        self, after: dict[str, Record], removed: Iterable[str]
    ) -> tuple[list[A.UpdateAction], list[tuple[str, bytes]]]:
        """(update actions, objects to write) so that ``after`` (the records once the plan's other
        actions applied, in order) holds every history row once. Updates it makes are applied to
        ``after`` too, so the caller's tombstone sees the records as they will be."""
        m, thread_id = self.m, self.m.thread_id
        stale = set(removed) | set(self.replaced)
        rewrite = {key for cid in stale if cid in m.records for key in [_holder(m.records[cid])] if key is not None}
        # records whose rows must be written again: the replaced ones, and the kept rows of each
        # segment that held a stale row (a delta whose ref stays a segment, a full record's rows)
        rewritten: dict[str, list[tuple[Record, Delta]]] = {}
        for cid, rec in after.items():
            key = _holder(rec) if cid not in self.replaced else None
            if key is not None and key in rewrite:
                rewritten.setdefault(key, []).append((rec, await self.reader.history_ops(rec, m.inline)))
        actions: list[A.UpdateAction] = []
        objects: list[tuple[str, bytes]] = []
        for key, recs in rewritten.items():
            items = [(rec, rec["id"], base_in(after, rec), ops) for rec, ops in recs]
            changes, segment = reencode(thread_id, items, level_of(key))
            objects.append(segment)
            actions += updates(changes)
            for cid, change in changes.items():
                after[cid] = {**after[cid], **change}
        entries = [
            (cid, int(after[cid]["step"]), base_in(after, after[cid]), ops)
            for cid, ops in self.replaced.items()
            if cid in after
        ]
        refs, written = place(thread_id, entries)
        objects += written
        for cid, ref in refs.items():
            actions.append(A.rows(cid, ref))
            after[cid] = {**after[cid], "rows": ref}
        return actions, objects
