"""Saving: payloads, then the put-if-absent commit (``ThreadLog.commit``, the one commit) with its hint.

Save protocol (docs/format/spec.md has the normative version):

1. payload objects are written first (a snapshot; at a snapshot, the thread's
   inline deltas compacted into one Parquet segment, with the snapshot's own history rows, its
   change against its parent: ``history``, spec.md section 4); a plain delta has none, its ops are inline
   in the commit entry. No id index is written: a minted checkpoint id names its thread
   (``ids.mint_checkpoint_id``, spec.md section 8);
2. the commit entry ``_log/<seq+1>.json.zst`` is created put-if-absent. Losing that
   race means another writer committed first: a save that appends to the head
   raises ``CheckpointConflict``; an explicit fork (``parent_id``) re-reads the
   log and retries at the next seq. Payloads of a lost save are never
   referenced, so readers cannot see them;
3. a plain delta save is then done: one object, in one round trip. The head hint goes with it only
   once the newest hint is ``hint_every`` commits behind (``hint_due``; docs/design/005-head-hint.md),
   at the same time as the commit (best effort; readers probe past it anyway, and check that the
   entry it names is the one committed). A save's compaction owes its fold to the writer's next
   save, which puts it beside its commit; the hint naming that fold goes with the save after, once
   the fold has landed (``Fold.NEXT_COMMIT``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .. import codec, limits
from ..chain import snapshot_due
from ..delta import diff_checkpoint
from ..engine import COMPACT, SAVE, Engine, Plan
from ..errors import CheckpointConflict, CheckpointNotFound, DuplicateCheckpointId, IntegrityError
from ..format import actions as A
from ..format import crypto, layout
from ..format import refs as R
from ..format.content import Content, state_key
from ..format.manifest import Manifest, Record, now_iso, ref_keys
from ..model import Checkpoint, check_identifier, is_resave
from . import history as hist
from .history import (
    EMPTY,
    INLINE,
    absorb,
    base_of,
    fits_inline,
    history_rows,
    merge_plan,
    moved,
    new_segment,
    newest,
    place,
    reach,
    tiers,
    updates,
)
from .history import size as rows_size


async def save(engine: Engine, checkpoint: Checkpoint, *, detached: bool = False, owned: bool = False) -> str:
    """``detached`` (a restore, ``transfer.replay``): the checkpoint starts a chain of its own, as a
    full snapshot, and its ``parent_id`` is recorded as it is without being looked up (None, or a
    checkpoint that retention removed in the archive it came from: the lineage a prune leaves,
    spec.md section 10). A plain save requires the parent to be in the thread.

    ``owned``: the caller built the state and messages for this save, of JSON types only (values it
    checked exact when it encoded them), and never mutates them (``ArchiveSaver``'s states, made of
    cells): they are serialised once for their digests (``codec.canonical``), not checked and copied
    again; the archive's caches then hold them as they are."""
    # checked and privately copied once, whatever the number of commit attempts
    if owned:
        state, messages = checkpoint.state, checkpoint.messages
        raw_state, raw_messages = codec.canonical(state, "state"), codec.canonical(messages, "messages")
    else:
        (state, raw_state), (messages, raw_messages) = (
            codec.json_copy_raw(checkpoint.state, "state", series=checkpoint.thread_id),
            codec.json_copy_raw(checkpoint.messages, "messages", series=checkpoint.thread_id),
        )
    content: Content = (state, messages)
    limits.check_state(raw_state, raw_messages)
    thread_id, cid = checkpoint.thread_id, checkpoint.checkpoint_id
    layout.thread_dir(thread_id)
    check_identifier(cid, "checkpoint_id")
    named = layout.minted_thread_dir(cid)
    if named is not None and named != layout.thread_dir(thread_id):  # refused before anything is read
        raise DuplicateCheckpointId(
            f"checkpoint id {cid!r} was minted for the thread of folder {named!r}, not {thread_id!r} (an id names "
            "its thread, so load_by_id finds it): save it there, or give the checkpoint a new id (Checkpoint.new)"
        )
    # every field of the record is checked here, before anything is written (no orphans); a protected
    # checkpoint is proven against the digests its record stores (``Contents.digests``)
    digests = engine.contents.digests(content, thread_id, (raw_state, raw_messages), proving=checkpoint)
    fields = checkpoint.record_fields(digests)
    codec.check_json(fields, "checkpoint")  # e.g. a step beyond 64 bits, set by model_copy(update=...)
    explicit = checkpoint.parent_id is not None or detached
    started = 0.0
    parent_id: str | None = None

    async def known_head() -> Manifest:
        # The writer's cached view is its "known head": no read before the commit, whose
        # put-if-absent detects anyone who committed since.
        nonlocal started
        seen = engine.log.hint_heads.pop(thread_id, None)
        cached = engine.log.cached(thread_id)
        m = cached if cached is not None else await engine.root.rooted(engine.log.manifest(thread_id))
        await engine.root.check(create=True)  # the first commit creates the archive, before any payload
        if not engine.log.fresh(thread_id):  # too old to commit against (gc may have cut the log): re-read
            seen, m = m.head, await engine.log.manifest(thread_id)
        started = time.monotonic()  # the manifest is at most manifest_ttl old, and no payload written
        if committed(m, checkpoint, fields):
            return m
        if not explicit and seen is not None and seen != m.head:  # last read via the hint: moved on since
            raise CheckpointConflict(
                f"thread {thread_id!r} moved on (head {m.head!r}) since this writer last read it "
                f"(head {seen!r}); reload and save again, or pass parent_id to fork"
            )
        if explicit and not detached and checkpoint.parent_id not in m.records:
            m = await engine.log.manifest(thread_id)
        return m

    async def plan(m: Manifest, attempt: int) -> Plan[None]:
        nonlocal parent_id
        if committed(m, checkpoint, fields):  # by this save's own earlier attempt, or a twin
            return Plan([], None)
        if attempt and not explicit and m.head != parent_id:  # maintenance commits (prune, pin...) keep the head
            raise CheckpointConflict(
                f"thread {thread_id!r} moved on (now at commit {m.seq}, head {m.head!r}) since this "
                "writer last read it; reload and save again, or pass parent_id to fork"
            )
        parent_id = checkpoint.parent_id if explicit else m.head
        if not detached and parent_id is not None and parent_id not in m.records:
            raise CheckpointNotFound(f"parent {parent_id!r} is not a checkpoint of thread {thread_id!r}")
        actions, objects = await prepare(engine, m, checkpoint, parent_id, content, fields, detached=detached)

        async def landed(new: Manifest) -> None:
            if time.monotonic() - started > engine.root.manifest_ttl / 2:
                await confirm(engine, thread_id, cid, new.seq, objects)
            engine.contents.remember(state_key(new.records[cid]), content)

        return Plan(actions, None, objects=objects, landed=landed)

    await engine.log.commit(thread_id, plan, SAVE.known_head(known_head))
    return cid


def committed(m: Manifest, ckpt: Checkpoint, fields: Record) -> bool:
    """Is ``ckpt`` committed in ``m`` already (``fields``: its ``record_fields``)? A re-save (after
    ``CommitOutcomeUnknown``, say) of the same checkpoint is (``is_resave``, by the content digests the
    record holds: no content is loaded); the same id with anything else is refused."""
    rec = m.records.get(ckpt.checkpoint_id)
    if rec is None:
        return False
    if is_resave({**fields, "parent": ckpt.parent_id}, rec):
        return True
    raise DuplicateCheckpointId(
        f"checkpoint {ckpt.checkpoint_id!r} is already in thread {m.thread_id!r} with other content; "
        "give the new checkpoint a new id"
    )


async def confirm(
    engine: Engine, thread_id: str, checkpoint_id: str, seq: int, objects: list[tuple[str, bytes]]
) -> None:
    """After a slow save (over half a ``manifest_ttl``) committed at ``seq``: make sure its checkpoint
    is whole.

    gc keeps what a commit names only if the commit landed before gc read the manifest, or the
    payloads are younger than its grace (at least ``gc_floor``): a save this slow may have had its
    payloads collected as orphans, or committed into a log cut under its cached view (below a fold).
    Re-read afresh from the listing of the log (its newest fold and the commits after it), not from
    the head hint: this save may have put the hint itself, naming its own commit below the fold. A
    checkpoint that is not there is seen by no reader that lists (``CheckpointConflict``; its hint is
    taken back, so none is led to it either); otherwise put its objects again (the same bytes under
    the same keys). Slow saves only: one LIST more, never on a plain save's path."""
    m = await engine.log.manifest(thread_id, hint_read=True, cache=False)
    if checkpoint_id not in m.records:
        hint = await engine.log.read_hint(thread_id)
        if hint is not None and hint["seq"] == seq:  # this save's, naming its commit below the fold
            await engine.store.delete([layout.head_key(thread_id)])
        raise CheckpointConflict(
            f"checkpoint {checkpoint_id!r} of thread {thread_id!r} is not in the thread after a save that "
            "took longer than gc's grace period allows; reload and save again"
        )
    await asyncio.gather(*(engine.store.put(key, data) for key, data in objects))


async def prepare(
    engine: Engine,
    m: Manifest,
    ckpt: Checkpoint,
    parent_id: str | None,
    content: Content,
    fields: Record,
    *,
    detached: bool = False,
) -> tuple[list[A.Action], list[tuple[str, bytes]]]:
    """Actions of the commit and payload objects (key, bytes) to write before it (``fields``: the
    checked ``Checkpoint.record_fields`` of ``ckpt``). ``parent_id`` is recorded; unless ``detached`` it is also the
    base a delta is taken against."""
    state, messages = content
    base = None if detached else parent_id
    parent = m.records.get(base) if base else None
    depth = None if parent is None else int(parent["depth"])
    record: Record = {**fields, "fields": dict(fields["fields"]), "parent": parent_id}
    enc = engine.encryption
    objects: list[tuple[str, bytes]] = []
    actions: list[A.Action] = []
    ops = None
    # a delta stays inline in commit entries, hints and folds: a thread holds at most
    # MAX_INLINE_DELTAS of them, of at most INLINE_OPS_BYTES each and INLINE_TOTAL_BYTES together
    # (limits), or it is a snapshot
    full = base is None or snapshot_due(ckpt.step, depth, engine.root.full_snapshot_interval)
    known_blobs = parent_blobs(m, base)
    names: list[str] = []
    blob_objects: list[tuple[str, bytes]] = []
    history: list[dict[str, Any]] | None = None  # the record's history rows, once computed
    if not full and len(m.inline) < limits.MAX_INLINE_DELTAS:
        assert base is not None
        ops = diff_checkpoint(*await engine.contents.content_of(m, base), state, messages)
        ops, names, blob_objects = engine.contents.stored_ops(ops, known_blobs)
        if enc is not None:
            ops = crypto.seal_ops(enc, engine.root.archive_id, m.thread_id, ckpt.checkpoint_id, ops)
        stored_ops = len(codec.dumps(ops))
        if stored_ops > limits.INLINE_OPS_BYTES or stored_ops + inline_bytes(m) > limits.INLINE_TOTAL_BYTES:
            history, ops = ops, None  # against the parent, a record of this manifest: its history rows
    if ops is None:
        rows_base = parent_id if parent_id is not None and parent_id in m.records else None
        if history is None:  # against the parent when it is a record of this manifest, else the empty content
            base_content = EMPTY if rows_base is None else await engine.contents.content_of(m, rows_base)
            history = history_rows(engine, m.thread_id, ckpt.checkpoint_id, base_content, content)
        own = history
        key = layout.snapshot_key(m.thread_id, ckpt.step, ckpt.checkpoint_id)
        ref, written, size = engine.contents.snapshot(
            m.thread_id,
            ckpt.checkpoint_id,
            key,
            content,
            lambda where: reach(m.records, m.inline, rows_base, own, where),
            known_blobs,
        )
        objects.extend(written)
        record.update(kind="full", depth=0, ref=ref, bytes=size)
        # the rows go into the segment this snapshot's compaction writes anyway, or stay inline in
        # this commit (until the next compaction), or, too big for either, to a segment of their own
        compact = await save_compaction(engine, m, (ckpt.checkpoint_id, ckpt.step, rows_base, history))
        joined = compact[2] if compact is not None else None
        inline_rows = None
        if joined is not None:
            record["rows"] = joined
        elif not history:
            record["rows"] = R.empty()
        elif compact is None and fits_inline(history, 0, 0):
            record["rows"], inline_rows = R.inline(), history
        else:
            refs, written = place(m.thread_id, [(ckpt.checkpoint_id, ckpt.step, rows_base, history)])
            record["rows"] = refs[ckpt.checkpoint_id]
            objects.extend(written)
        actions.append(A.add(record, inline_rows))
        if compact is not None:
            compacted, segment, _ = compact
            objects.extend(segment)
            actions.extend(compacted)
            for segment_key, data in segment:  # this writer's next merge at a save reads it from here
                engine.contents.remember_segment(segment_key, codec.sha256(data), data, len(data))
    else:
        assert depth is not None
        record.update(kind="delta", depth=depth + 1)
        if ops:
            record.update(ref=R.inline(names), bytes=stored_ops)
            actions.append(A.add(record, ops))
            objects.extend(blob_objects)
        else:
            record.update(ref=R.empty(), bytes=0)
            actions.append(A.add(record))
    return actions, objects


async def save_compaction(
    engine: Engine, m: Manifest, new: tuple[str, int, str | None, list[dict[str, Any]]]
) -> Compaction | None:
    """A save's compaction (``compact_action``): the thread's inline rows and ``new`` into one segment;
    or, when that segment completes a run of ``SEGMENT_FANOUT`` segments of a tier (``merge_plan``)
    and this engine holds every segment the merge absorbs (parsed and checked: it wrote or read them,
    ``Contents.segment``), the merged segment in its place, reading nothing. The save then writes as
    many objects as without the merge (its ``update``s re-point the absorbed records, its tombstone
    names the absorbed segments), and a thread its writer keeps open holds at most
    ``SEGMENT_FANOUT - 1`` segments a tier without waiting for ``compact``: what a cold load of its
    head fetches, and what its head hint lists. A writer that does not hold them leaves it to
    ``compact``."""
    merge = None
    if m.inline:
        planned = merge_plan(m, (INLINE, 0, inline_bytes(m), len(m.inline)))
        merge = next(((keys, level) for keys, level in planned if INLINE in keys), None)
    if merge is None:
        return compact_action(m, new)
    keys = [k for k in merge[0] if k != INLINE]
    reader = engine.contents.reader(m.thread_id, m=m)
    if not reader.take_held(keys):
        return compact_action(m, new)
    made = compact_action(m, new, await absorb(reader, m, keys), merge[1])
    if made is None:
        return compact_action(m, new)
    sizes = {key: weight for key, _, weight, _ in tiers(m)}
    return [*made[0], A.tombstone({k: sizes[k] for k in keys}, now_iso())], made[1], made[2]


def inline_bytes(m: Manifest) -> int:
    """The thread's inline ops together: each delta's ``bytes`` (its ops as stored), and the history
    rows a full record keeps inline (at most a few: a compaction moves them all)."""
    total = 0
    for cid, ops in m.inline.items():
        rec = m.records.get(cid)
        if rec is not None:
            total += int(rec.get("bytes", 0)) if rec["kind"] == "delta" else rows_size(ops)
    return total


def parent_blobs(m: Manifest, parent_id: str | None) -> set[str]:
    """Keys of the blobs the parent's content may reference: those its chain's records list. Not
    written again: while the new record is committed against this manifest, those records are in
    the thread, and gc keeps every blob a record of a thread it read lists (spec.md section 5)."""
    if parent_id is None:
        return set()
    return {key for rec in m.chain(parent_id) for key in ref_keys(rec) if layout.is_blob_key(key)}


Compaction = tuple[list[A.Action], list[tuple[str, bytes]], dict[str, Any] | None]
"""A compaction's actions (``compact``, and for a merge the ``update``s re-pointing the records whose
rows it moved), the objects to write first, and the ``rows`` ref of the full record it joined."""


def compact_action(
    m: Manifest,
    new: tuple[str, int, str | None, list[dict[str, Any]]] | None = None,
    absorbed: list[tuple[Record, list[dict[str, Any]]]] | None = None,
    level: int = 0,
    *,
    inline: bool = True,
) -> Compaction | None:
    """Move every inline delta of the thread (and the history rows full records keep inline) into one
    Parquet segment (``history.new_segment``); None when nothing is inline. ``new``: (id, step, history
    rows) of the full record this commit adds, written into the same segment (as its last checkpoint)
    when they fit the inline bounds beside the others: the last item is then their ``rows`` ref (else
    None). ``absorbed`` (maintenance only, ``compact``): records of segments merged into the same
    segment, of tier ``level``, with their rows as stored; None when such a merge would pass the
    bounds a reader checks on a delta segment. ``inline=False``: the merge alone (no ``compact``
    action; the inline rows stay where they are)."""
    source = m.inline if inline else {}
    if not source and not absorbed:
        return None
    held = {rec["id"]: ops for rec, ops in absorbed or []}
    entries: list[tuple[str, int, str | None, list[dict[str, Any]]]] = []
    ids = source.keys() | held.keys()
    # in record order (commit order, as a row group holds them), found from the newest back
    for rec in newest(m, lambda rec: rec["id"] in ids, sum(1 for cid in ids if cid in m.records)):
        cid = rec["id"]
        entries.append((cid, int(rec["step"]), base_of(m, rec), source.get(cid, held.get(cid, []))))
    joined = new is not None and bool(new[3]) and fits_inline(new[3], inline_bytes(m), 0)
    if joined:
        assert new is not None
        entries.append(new)
    key, data, groups = new_segment(m.thread_id, entries, level=level)
    if held and not fits_segment(data, groups):
        return None
    actions: list[A.Action] = []
    if source:
        row_groups = {cid: placed for cid, placed in groups.items() if cid in source}
        empty = [cid for cid, _, _, ops in entries if not ops and cid in source]
        actions.append(A.compact(key, codec.sha256(data), len(data), row_groups, empty))
    changes = {
        rec["id"]: moved(rec, R.segment(key, data, groups[rec["id"]][0]), groups[rec["id"]][1])
        for rec, ops in absorbed or []
        if ops
    }
    actions += updates(changes)
    rows = R.segment(key, data, groups[new[0]][0]) if joined and new is not None else None
    return actions, [(key, data)], rows


def fits_segment(data: bytes, groups: dict[str, tuple[int, int]]) -> bool:
    """Is a merged segment within what a reader accepts of a delta segment (its stored size, and its
    row groups within the footer's bound)?"""
    return len(data) <= limits.LIMITS["delta segment"] and len({g for g, _ in groups.values()}) <= limits.FOOTER_ITEMS


async def merges(engine: Engine, m: Manifest) -> tuple[list[A.Action], list[tuple[str, bytes]]] | None:
    """Maintenance's compaction (``compact``; never a save's, so a save's requests stay bounded): the
    inline rows into one segment, and tiered merges of the thread's segments (``merge_plan``,
    spec.md section 6) in the same commit, the records whose rows moved re-pointed by ``update``s and
    the merged-away segments tombstoned for gc. A merge whose segments cannot be read as a load checks
    them (gone, corrupt), whose segment would pass a reader's bounds, or past ``MERGE_RECORDS`` records
    re-pointed by this commit (``history.MERGE_RECORDS``), is not made: the rest is.
    None when there is nothing to do."""
    inline = (INLINE, 0, inline_bytes(m), len(m.inline)) if m.inline else None
    plan = merge_plan(m, inline)
    reader = engine.contents.reader(m.thread_id, m=m, walk=True)
    await reader.fetch(sorted({key for keys, _ in plan for key in keys if key != INLINE}))
    actions: list[A.Action] = []
    objects: list[tuple[str, bytes]] = []
    gone: dict[str, int] = {}
    order = tiers(m)
    sizes = {key: weight for key, _, weight, _ in order}
    counts = {key: n for key, _, _, n in order}
    compacted, repointed = False, 0
    for keys, level in plan:
        records = sum(counts.get(key, 0) for key in keys)
        if repointed + records > hist.MERGE_RECORDS:
            continue
        try:
            absorbed = await absorb(reader, m, [k for k in keys if k != INLINE])
        except IntegrityError:
            continue
        made = compact_action(m, None, absorbed, level, inline=INLINE in keys)
        if made is None:
            continue
        compacted, repointed = compacted or INLINE in keys, repointed + records
        acts, written, _ = made
        actions += acts
        objects += written
        gone.update((key, sizes[key]) for key in keys if key != INLINE)
    if not compacted and m.inline:
        made = compact_action(m)
        assert made is not None
        actions[:0], objects[:0] = made[0], made[1]
    if gone:
        actions.append(A.tombstone(gone, now_iso()))
    return (actions, objects) if actions else None


async def compact(engine: Engine, thread_id: str) -> bool:
    """Close the open segment now (end of a run): inline deltas to Parquet, the thread's segments
    merged by tier (``merges``), fold the manifest."""

    async def plan(m: Manifest, attempt: int) -> Plan[bool]:
        made = await merges(engine, m)
        if made is None:
            return Plan([], False)
        actions, objects = made
        return Plan(actions, True, objects=objects)

    return await engine.log.commit(thread_id, plan, COMPACT)
