"""Manifest-driven maintenance of an archive: prune, remove, re-base, edit, pin.

Every operation here is one *maintenance commit* on the thread's log, made by
the one commit a save makes too (``ThreadLog.commit``): the plan is built
from the manifest as read, new payloads (re-based snapshots) are written first,
then the commit entry is created; losing the race re-reads the log and plans
again (``MAINTENANCE``: with backoff). Nothing is
deleted here: objects that no record needs any more are recorded as
tombstones (with the time) and deleted by ``gc`` after the grace period, so a
reader holding an older manifest still finds every object it references.

Chain rule: a kept delta whose parent is removed gets a full snapshot of its
own (an ``update`` of its ref), so the removed segment rows are no longer needed. Deltas
further down that chain then hang off the re-based checkpoint unchanged.

History rule (``history.Rewrite``, spec.md section 10): every record keeps its history rows
once, in the same commit that changes the records: a kept record whose parent is removed
(re-based or already full) gets rows against the empty content, an edited checkpoint rows
against its parent and its children rows against the edited content, and each segment that
held a row of a removed or replaced record is written again without it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypedDict

from .. import codec, limits
from ..engine import MAINTENANCE, Engine, Plan
from ..errors import CheckpointNotFound, CheckpointVersionConflict, InvalidState
from ..format import actions as A
from ..format import layout
from ..format.content import Content, state_key
from ..format.manifest import Manifest, Record, now_iso, record_info, ref_keys
from ..retention import PINNED_KEY, Kept, PruneReport, RetentionPolicy, evaluate, in_shard
from . import history, reads


class Rebase:
    """The new full snapshots of one maintenance plan (re-based deltas, an edited checkpoint).

    One replay (``ChainReader``) rebuilds every content the plan needs, so an object two chains share
    (a snapshot, a Parquet segment) is fetched once, not once per re-based record.
    """

    def __init__(self, engine: Engine, m: Manifest) -> None:
        self.engine, self.m = engine, m
        self.reader = engine.contents.reader(m.thread_id, m=m)
        # blobs the thread references: a new snapshot of a content it holds needs none written (the
        # records that list them are in the manifest this commit is put against: spec.md section 5)
        self.known_blobs = {key for key in m.referenced_keys() if layout.is_blob_key(key)}
        self.writes: list[tuple[str, bytes]] = []

    async def prefetch(self, checkpoint_ids: Iterable[str]) -> None:
        """What rebuilding these checkpoints (in this order) reads, in one concurrent batch."""
        await self.reader.fetch(self.reader.needed(self.m.chain(cid) for cid in checkpoint_ids))

    async def content(self, checkpoint_id: str) -> Content:
        return await self.reader.content(self.m.chain(checkpoint_id), self.m.inline)

    def full(self, rec: Record, content: Content, records: Mapping[str, Record]) -> tuple[dict[str, Any], int]:
        """Plan a new full snapshot of ``content`` for ``rec`` (its objects added to ``writes``): (record
        changes, bytes written). ``records``: the thread's records after this plan, where its lists'
        lineage is (a record whose parent leaves is a root: its own rows hold them; otherwise the
        bound is its parent's, ``history.reach``: the rows this plan rewrites are not looked at).

        The changes carry the content's digests (or, encrypted, its key id and MACs) so the record stays provable.
        """
        thread_id = self.m.thread_id
        key = layout.rewrite_snapshot_key(thread_id, rec["step"], rec["id"])
        parent = rec.get("parent")
        ref, objects, size = self.engine.contents.snapshot(
            thread_id,
            rec["id"],
            key,
            content,
            lambda where: history.reach(records, {}, parent, [], where),
            self.known_blobs,
        )
        self.known_blobs.update(k for k, _ in objects if layout.is_blob_key(k))
        self.writes.extend(objects)
        digest = self.engine.contents.digests(content, thread_id)
        # an update merges into the record: a plain digest of the old content must not survive its encryption
        digest.update(
            {name: None for name in ("state_sha256", "messages_sha256") if name in rec and name not in digest}
        )
        return A.snapshot_fields(ref, size, digest), size


def _tombstone(before: dict[str, int], after: Iterable[Record]) -> A.TombstoneAction | None:
    still = {key for r in after for key in ref_keys(r)}
    objects = {k: s for k, s in before.items() if k not in still}
    return A.tombstone(objects, now_iso()) if objects else None


async def plan_removal(
    engine: Engine, m: Manifest, remove: set[str], kept: Kept, *, dry_run: bool
) -> Plan[PruneReport]:
    """Actions removing ``remove`` from ``m`` chain-safely, and the report of it."""
    thread_id = m.thread_id
    removed = [cid for cid in m.records if cid in remove]
    report = PruneReport(thread_id, removed=removed, kept=kept, dry_run=dry_run)
    if not removed:
        return Plan([], report)
    after = {cid: rec for cid, rec in m.records.items() if cid not in remove}
    actions: list[A.Action] = [A.remove(removed)]
    rebase = Rebase(engine, m)
    rows = history.Rewrite(engine, m, rebase.reader)
    # every kept record whose parent leaves: a new chain root, its history rows its whole content
    roots = [cid for cid, rec in after.items() if rec.get("parent") in remove]
    await rebase.prefetch(roots)
    for cid in roots:
        rec = after[cid]
        content = await rebase.content(cid)
        if rec["kind"] == "delta":
            change, size = rebase.full(rec, content, after)
            actions.append(A.rebase(cid, change))
            after[cid] = {**rec, **change}
            report.rebased.append(cid)
            report.bytes_written += size
        rows.replace(after[cid], history.EMPTY, content)
    updates, written = await rows.actions(after, removed)
    actions += updates
    rebase.writes += written
    report.bytes_written += sum(len(data) for _, data in written)
    before = m.referenced_keys()
    tomb = _tombstone(before, after.values())
    if tomb is not None:
        actions.append(tomb)
        report.objects_freed, report.bytes_freed = len(tomb["objects"]), sum(tomb["objects"].values())
    return Plan([] if dry_run else actions, report, objects=rebase.writes)


async def prune(engine: Engine, thread_id: str, policy: RetentionPolicy, *, dry_run: bool = False) -> PruneReport:
    layout.thread_dir(thread_id)
    await engine.root.check()

    async def plan(m: Manifest, attempt: int) -> Plan[PruneReport]:
        infos = [record_info(thread_id, rec) for rec in m.records.values()]
        kept = evaluate(policy, infos, datetime.now(UTC))
        return await plan_removal(engine, m, set(m.records) - set(kept), kept, dry_run=dry_run)

    return await engine.log.commit(thread_id, plan, MAINTENANCE)


async def remove(
    engine: Engine, thread_id: str, checkpoint_ids: Iterable[str], *, dry_run: bool = False
) -> PruneReport:
    """Remove exactly these checkpoints (ids not in the thread are ignored), keeping the rest loadable."""
    layout.thread_dir(thread_id)
    await engine.root.check()
    wanted = set(checkpoint_ids)

    async def plan(m: Manifest, attempt: int) -> Plan[PruneReport]:
        kept = {cid: ["not named"] for cid in m.records if cid not in wanted}
        return await plan_removal(engine, m, wanted & set(m.records), kept, dry_run=dry_run)

    return await engine.log.commit(thread_id, plan, MAINTENANCE)


Progress = Callable[[int, int, PruneReport], None]


class PruneAllOptions(TypedDict, total=False):
    """The options of ``prune_all`` (each with its default there), as the facade passes them on."""

    shard: tuple[int, int] | None
    concurrency: int
    progress: Progress | None
    dry_run: bool


async def prune_all(
    engine: Engine,
    policy: RetentionPolicy,
    *,
    shard: tuple[int, int] | None = None,
    concurrency: int = 8,
    progress: Progress | None = None,
    dry_run: bool = False,
) -> list[PruneReport]:
    """Prune every thread (of one shard), ``concurrency`` threads at a time; reports in thread order."""
    threads = [t for t in await reads.threads(engine) if in_shard(t, shard)]
    gate = asyncio.Semaphore(max(concurrency, 1))
    done = 0

    async def one(thread_id: str) -> PruneReport:
        nonlocal done
        async with gate:
            report = await prune(engine, thread_id, policy, dry_run=dry_run)
        done += 1
        if progress is not None:
            progress(done, len(threads), report)
        return report

    return list(await asyncio.gather(*(one(t) for t in threads)))


def _record(m: Manifest, checkpoint_id: str) -> Record:
    rec = m.records.get(checkpoint_id)
    if rec is None:
        raise CheckpointNotFound(f"checkpoint {checkpoint_id!r} is no longer in thread {m.thread_id!r}")
    return rec


async def update_state(engine: Engine, checkpoint_id: str, state: dict[str, Any], expected_version: int) -> int:
    """Replace a checkpoint's state if its version is still ``expected_version``; returns the new version.

    The edited checkpoint gets a full snapshot of its own; its direct delta
    children are re-based onto full snapshots of their recorded states first, so
    every other checkpoint still loads exactly what it loaded before.
    """
    if not isinstance(state, dict):
        raise InvalidState(f"state must be a dict, got {type(state).__name__}")
    codec.check_json(state)
    raw = codec.dumps(state)
    limits.check_state(raw)  # with the messages too: the snapshot's own check (limits)
    state = codec.loads(raw)
    _, thread_id = await reads.locate(engine, checkpoint_id)

    async def plan(m: Manifest, attempt: int) -> Plan[tuple[int, list[Any]]]:
        rec = _record(m, checkpoint_id)
        version = int(rec.get("version", 1))
        if version != expected_version:
            raise CheckpointVersionConflict(
                f"checkpoint {checkpoint_id!r} is at version {version}, not {expected_version}; nothing changed"
            )
        actions: list[A.Action] = []
        after = dict(m.records)
        rebase = Rebase(engine, m)
        rows = history.Rewrite(engine, m, rebase.reader)
        children = [cid for cid, c in m.records.items() if c.get("parent") == checkpoint_id and cid != checkpoint_id]
        base = history.base_of(m, rec)
        await rebase.prefetch([*children, checkpoint_id, *([base] if base is not None else [])])
        messages = (await rebase.content(checkpoint_id))[1]  # an edit replaces the state only
        edited = (state, messages)
        for cid in children:  # their history rows are against the edited content now
            content = await rebase.content(cid)
            if m.records[cid]["kind"] == "delta":
                change, _ = rebase.full(m.records[cid], content, after)
                actions.append(A.rebase(cid, change))
                after[cid] = {**m.records[cid], **change}
            rows.replace(after[cid], edited, content)
        change, _ = rebase.full(rec, edited, after)
        edit = A.edit(checkpoint_id, change, version + 1)  # its new digests (``Rebase.full``) prove it anew
        actions.append(edit)
        after[checkpoint_id] = {**rec, **edit["set"]}
        rows.replace(after[checkpoint_id], history.EMPTY if base is None else await rebase.content(base), edited)
        updates, written = await rows.actions(after, ())
        actions += updates
        rebase.writes += written
        tomb = _tombstone(m.referenced_keys(), after.values())
        if tomb is not None:
            actions.append(tomb)
        return Plan(actions, (version + 1, messages), objects=rebase.writes)

    new_version, messages = await engine.log.commit(thread_id, plan, MAINTENANCE)
    engine.contents.remember(state_key(engine.log.manifests[thread_id].records[checkpoint_id]), (state, messages))
    return new_version


async def set_pinned(engine: Engine, checkpoint_id: str, pinned: bool) -> bool:
    """Pin or unpin (a metadata-only commit; the state and its version are untouched). True if changed."""
    _, thread_id = await reads.locate(engine, checkpoint_id)

    async def plan(m: Manifest, attempt: int) -> Plan[bool]:
        rec = _record(m, checkpoint_id)
        meta = dict(rec.get("metadata", {}))
        if bool(meta.get(PINNED_KEY)) == pinned:
            return Plan([], False)
        if pinned:
            meta[PINNED_KEY] = True
        else:
            meta.pop(PINNED_KEY, None)
        return Plan([A.pin(checkpoint_id, meta)], True)

    return await engine.log.commit(thread_id, plan, MAINTENANCE)
