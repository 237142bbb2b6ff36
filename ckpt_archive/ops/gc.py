"""Garbage collection: the second phase of every deletion, plus leftovers of crashes.

``gc`` lists the archive once and deletes, for every thread it can read:

* tombstoned objects (recorded by prune/remove/edit) whose tombstone is older
  than the grace period, then commits a ``purge`` so the manifest forgets them
  (a tombstone names only payloads of its thread and blobs, ``format.schema``);
* orphans: snapshots/segments no record references and no tombstone names
  (payloads of saves that lost a race or crashed), once their mtime is older
  than the grace period;
* manifest objects a newer folded manifest supersedes: commit entries up to
  the newest folded manifest (when it reads whole), older folded manifests and
  sealed parts no fold that stays names (again only when older than the grace
  period, see docs/format/spec.md for why that is safe), except a commit entry
  created after a fold above it was written (``ThreadLog.lost_commits``): it
  landed where an earlier gc cut the log, it is the only copy of its save, and it
  is reported;
* temporary files of interrupted local writes in the archive's own folders, and S3
  multipart uploads of the archive's keys started before the grace period;
* blobs (``_blobs/``, large values shared archive-wide) no record of any thread
  lists, no LangGraph write object's name lists and no thread dropped within the
  grace period, once older than it, and only when every thread was read
  (``_collect_blobs``).

Anything gc cannot account for (an unreadable manifest, an unknown file) is
left alone and reported; gc never deletes a file outside the archive's layout.

Why a commit never loses its objects: the listing comes first, every manifest is
read afresh after it, and only listed objects older than the cutoff (taken before
the listing) that no record of that manifest references are deleted. A commit
that landed before the manifest was read keeps its objects; one that lands after
it belongs to a save that wrote its payloads before the cutoff, so it has taken
longer than the grace period, and such a save checks its objects after committing
(``ops.save.confirm``). The grace period must therefore be at least
``gc_floor`` while anyone may be writing (``UnsafeGcGrace`` otherwise); a shorter
one, down to 0, is for an archive nobody writes to (``unsafe_no_writers=True``).
"""

from __future__ import annotations

import contextlib
import posixpath
from datetime import UTC, datetime, timedelta
from typing import Any

from ..engine import GC, Engine, Plan, gc_floor
from ..engine.folds import read_folded
from ..errors import CheckpointError, CorruptManifest, MissingObject, UnsafeGcGrace
from ..format import actions as A
from ..format import layout
from ..format.manifest import Manifest
from ..format.parts import checked_part_refs
from ..retention import GcReport
from . import reads


def _old(info: dict[str, Any], cutoff: datetime) -> bool:
    mtime = info.get("mtime")
    return mtime is not None and mtime <= cutoff


def _superseded(names: dict[str, dict[str, Any]], keep_from: int) -> list[str]:
    """Log objects before ``keep_from`` (the oldest folded manifest still in use).

    Commit 1 always stays: a reader with no usable hint tells a new thread from an existing one by it.
    Commit ``keep_from`` stays too: a head hint written with that fold (``compact``, maintenance) names
    it, and a reader takes the hint only once that entry's sha256 is the hint's ``entry_sha256``.
    """
    out = []
    for key in names:
        kind, seq = layout.log_name(posixpath.basename(key)) or ("", 0)
        if (kind == "fold" and seq < keep_from) or (kind == "commit" and 1 < seq < keep_from):
            out.append(key)
    return out


async def _thread_gc(
    engine: Engine,
    thread_id: str,
    objects: dict[str, dict[str, Any]],
    mine: dict[str, dict[str, Any]],
    cutoff: datetime,
    report: GcReport,
    forget: set[str],
    live_blobs: set[str],
    protected_blobs: set[str],
) -> list[str]:
    """Collect one thread; returns the keys to delete (and updates the report). ``objects``: everything
    listed; ``mine``: those under the thread's folder. Blobs are never deleted here: the thread adds
    those it references to ``live_blobs`` and those it stopped referencing less than the grace ago to
    ``protected_blobs``."""
    # afresh, after the listing (see the module doc); the hint read first is never newer than the
    # manifest, so the folds it keeps (``keep_from`` below) are never fewer than the manifest needs
    hint = await engine.log.read_hint(thread_id)
    m = await engine.log.manifest(thread_id, hint=hint, hint_read=True, cache=False)
    refs = m.referenced_keys()
    doomed: list[str] = []
    live_blobs.update(k for k in refs if layout.is_blob_key(k))
    for key, tomb in m.tombstones.items():  # each names a payload of this thread or a blob (schema)
        at = datetime.fromisoformat(tomb["at"])
        mtime = objects.get(key, {}).get("mtime")
        if layout.is_blob_key(key):  # archive-wide: deleted only by the blob rule (``_collect_blobs``)
            if key in refs or at <= cutoff:
                forget.add(key)
            else:
                report.pending += 1
                protected_blobs.add(key)  # the thread dropped it less than the grace ago
            continue
        if key in refs or (mtime is not None and mtime > at):
            # needed again, or rewritten since (a shared page with the same content): not a tombstone
            # any more; if nothing references it, the orphan rule collects it after the grace period
            forget.add(key)
            continue
        if at <= cutoff:
            forget.add(key)  # deleted now: the purge commit drops it
            if key in objects:
                report.bytes_freed += objects[key]["size"]
                report.tombstones_purged += 1
            doomed.append(key)
        else:
            report.pending += 1
    prefix = layout.thread_dir(thread_id) + "/"
    logs = {k: v for k, v in mine.items() if layout.folder_of(k[len(prefix) :]) == layout.LOG}
    folds = {k: entry[1] for k in logs if (entry := layout.log_name(posixpath.basename(k))) and entry[0] == "fold"}
    folded = list(folds.values())
    in_use = [s for s in folded if s <= m.seq]
    # a hint sends readers to the fold it names, or (naming none) to commit 1: while it names none, the
    # whole log stays (a save's fold is named by the hint of the save after it: spec.md section 7)
    named = [int(hint["manifest_seq"] or 0)] if hint else []
    keep_from = min([max(in_use, default=0), *named])
    lost = await engine.log.lost_commits(thread_id, logs, m.records)
    for exc in lost:  # the only copy of a save no reader sees: kept, and reported
        report.errors.append(f"thread {thread_id!r}: kept {exc.key!r}: {exc}")
    kept_lost = {exc.key for exc in lost}
    read: dict[str, bytes | None] = {}
    if keep_from and (base := layout.manifest_key(thread_id, keep_from)) in folds:
        # the log below a fold is only collected when that fold reads whole: a corrupt one is replaced
        # by replaying the commits it folds (engine.log), which must then stay
        read[base] = data = await engine.store.get_or_none(base)
        try:
            if data is not None:
                await read_folded(engine.store, thread_id, data, f"manifest {keep_from}", key=base, seq=keep_from)
        except (CorruptManifest, MissingObject) as exc:
            report.errors.append(f"thread {thread_id!r}: log kept whole, its fold {keep_from} does not read: {exc}")
            keep_from = 0
    superseded = [key for key in _superseded(logs, keep_from) if _old(logs[key], cutoff) and key not in kept_lost]
    for key in superseded:
        doomed.append(key)
        report.manifests += 1
        report.bytes_freed += logs[key]["size"]
    # every fold that stays names parts that must stay too: those from ``keep_from`` on, and a superseded
    # one younger than the grace (it names parts as old as the thread, which a newer fold may have merged
    # away or re-sealed: keeping only the newer folds' parts left it naming deleted ones)
    gone = set(superseded)
    kept = [key for key in folds if key not in gone]
    parts = {p["key"] for p in m.parts}
    unread = [key for key in kept if key not in read]
    read.update(zip(unread, await engine.store.get_many(unread), strict=True))
    for key in kept:
        if (data := read[key]) is not None:  # gone since the listing: it names nothing any more
            what = f"folded manifest {key!r}"
            parts.update(p["key"] for p in checked_part_refs(data, what, thread_id=thread_id, key=key))
    for key, info in mine.items():
        rel = key[len(prefix) :]
        if key in refs or key in m.tombstones or key in parts or not _old(info, cutoff):
            continue
        if layout.own_temp(key):
            report.temp_files += 1
        elif layout.folder_of(rel) == layout.PARTS:  # sealed parts of a superseded fold
            report.manifests += 1
        elif layout.folder_of(rel) in layout.PAYLOAD_FOLDERS:  # not deeper: gc leaves that alone
            report.orphans += 1
        else:
            continue
        doomed.append(key)
        report.bytes_freed += info["size"]
    return doomed


async def _collect_blobs(
    engine: Engine,
    objects: dict[str, dict[str, Any]],
    cutoff: datetime,
    kept: set[str],
    every_thread_read: bool,
    report: GcReport,
) -> None:
    """Delete the blobs (``_blobs/``) no record of any thread lists (``kept``: those some record lists,
    and those a thread stopped referencing less than the grace ago: a copy or fork may have committed
    a reference to one since, without writing it), older than the cutoff. Only when every thread's
    manifest was read: a blob an unreadable thread references is not known.

    The blob folder is listed again just before deleting and a blob written since the first listing is
    kept: a save that introduces a value writes its blob even when it exists (the same bytes under the
    same key), so its new modification time protects it unless the write lands between that second
    listing and the delete (spec.md section 10, rule 5, says what this leaves open)."""
    candidates = [
        key
        for key, info in objects.items()
        if layout.blob_of(key) is not None and key not in kept and _old(info, cutoff)
    ]
    if not candidates:
        return
    if not every_thread_read:
        report.errors.append(
            f"kept {len(candidates)} unreferenced blob(s): not every thread could be read (see the errors above)"
        )
        return
    again = await engine.store.find(layout.BLOBS)
    doomed = [key for key in candidates if key in again and _old(again[key], cutoff)]
    await engine.store.delete(doomed)
    report.blobs += len(doomed)
    report.bytes_freed += sum(objects[key]["size"] for key in doomed)
    report.deleted += doomed


async def _purge(engine: Engine, thread_id: str, keys: set[str]) -> None:
    async def plan(m: Manifest, attempt: int) -> Plan[None]:
        gone = sorted(k for k in keys if k in m.tombstones)
        return Plan([A.purge(gone)] if gone else [], None)

    await engine.log.commit(thread_id, plan, GC)


def _owned_upload(key: str) -> bool:
    """Is an upload's key (under the root) one of the archive's own? gc aborts only those."""
    return layout.root_name(key.split("/", 1)[0])


def check_grace(engine: Engine, grace: timedelta | None, unsafe_no_writers: bool) -> timedelta:
    """The grace gc uses: ``grace``, by default the archive's ``gc_grace`` but never below ``gc_floor``;
    one below the floor only with ``unsafe_no_writers`` (like Delta Lake's VACUUM retention check).
    The archive's grace is its marker's (``Root.check`` must have read it), whatever this process was
    opened with: a maintenance process cannot collect what another's cached manifest still relies on."""
    gc_grace = engine.root.gc_grace
    floor = gc_floor(gc_grace)
    if grace is None:
        return max(gc_grace, floor)
    if grace < timedelta(0):
        raise ValueError("grace must not be negative")
    if grace < floor and not unsafe_no_writers:
        raise UnsafeGcGrace(
            f"gc grace {grace.total_seconds():g} s is below {floor.total_seconds():g} s, the least that keeps "
            f"running saves and reads of this archive (gc_grace {gc_grace.total_seconds():g} s) whole: pass "
            "a longer grace, or unsafe_no_writers=True if no process is writing to or reading the archive"
        )
    return grace


async def gc(engine: Engine, *, grace: timedelta | None = None, unsafe_no_writers: bool = False) -> GcReport:
    """Delete what no manifest needs and the grace period no longer protects; see the module doc."""
    await engine.root.check()  # first: the grace and its floor are the archive's (its marker's)
    grace = check_grace(engine, grace, unsafe_no_writers)
    cutoff = datetime.now(UTC) - grace
    report = GcReport()
    objects = await engine.store.find("")
    threads = await reads.threads(engine)
    dirs = {layout.thread_dir(t) for t in threads}
    unknown_dirs = {k.split("/", 1)[0] for k in objects if k.startswith(layout.THREAD_PREFIX)} - dirs
    live_blobs: set[str] = set()
    kept_blobs: set[str] = set()
    every_thread_read = not unknown_dirs
    by_dir: dict[str, dict[str, dict[str, Any]]] = {}  # once: filtering the listing per thread was quadratic
    for key, info in objects.items():
        folder, sep, _ = key.partition("/")
        if sep:
            by_dir.setdefault(folder, {})[key] = info
    for thread_id in threads:
        try:
            forget: set[str] = set()
            mine = by_dir.get(layout.thread_dir(thread_id), {})
            sets = forget, live_blobs, kept_blobs
            doomed = await _thread_gc(engine, thread_id, objects, mine, cutoff, report, *sets)
        except CheckpointError as exc:
            report.errors.append(f"thread {thread_id!r} skipped: {exc}")
            every_thread_read = False
            continue
        report.threads += 1
        await engine.store.delete(doomed)
        report.deleted += [k for k in doomed if k in objects]
        if forget:  # a purge commit only when a tombstone is to go: an orphan or a fold has none
            try:
                await _purge(engine, thread_id, forget)
            except CheckpointError as exc:  # the next gc purges them (deleting is idempotent)
                report.errors.append(f"thread {thread_id!r}: purge not committed: {exc}")
    loose = []
    for key, info in objects.items():
        if key.startswith(layout.THREAD_PREFIX) or not _old(info, cutoff) or not layout.own_temp(key):
            continue
        report.temp_files += 1
        loose.append(key)
        report.bytes_freed += info["size"]
    await engine.store.delete(loose)
    report.deleted += loose
    # a LangGraph write object is no record: the blobs it references are listed in its name (spec.md
    # section 11), read from this listing, so keeping them costs no request
    written = {blob for key in objects for blob in layout.writes_blob_keys(key)}
    await _collect_blobs(engine, objects, cutoff, live_blobs | kept_blobs | written, every_thread_read, report)
    if unknown_dirs:
        report.errors.append(f"left alone (no readable thread id): {sorted(unknown_dirs)}")
    with contextlib.suppress(NotImplementedError):
        report.multipart_aborted += await engine.store.abort_stale_uploads(cutoff, owned=_owned_upload)
    return report
