"""ArchiveCheckpointer: the facade over an ``Engine``; each method calls one operation of ``ops``.

The engine (``ckpt_archive.engine``) owns the caches, the one commit (``ThreadLog.commit``) and the
one replay (``ChainReader``); the operations (``ckpt_archive.ops``) are functions over it. The async
core (``_save``, ``_load``...) is what ``AsyncCoreCheckpointer`` turns into the sync methods and their
``a``-prefixed twins; the archive's own methods are each one ``run_sync`` / ``run_async`` of an op.
"""

from __future__ import annotations

import asyncio
import atexit
import sys
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import timedelta
from typing import Any, Unpack

from .._sync import run_async, run_sync
from ..engine import Engine, Settings
from ..engine.contents import Keys, Objects
from ..format.content import Content, Path
from ..format.crypto import Encryption
from ..format.manifest import Manifest, record_info
from ..model import Checkpoint, CheckpointInfo
from ..ops import copy, gc, maintenance, reads, save, verify
from ..ops.maintenance import PruneAllOptions
from ..ops.verify import RestoredState, VerifyReport
from ..protocol import AsyncCoreCheckpointer, Ids, Infos
from ..retention import GcReport, PruneReport, RetentionPolicy
from ..storage import ObjectStore

__all__ = ["ArchiveCheckpointer"]

_WRITERS: weakref.WeakSet[ArchiveCheckpointer] = weakref.WeakSet()
"""Archives that saved in this process and were not closed: the folds their saves' compactions still
owe, the hints owed after them and their pending idle hints are put at interpreter exit
(``_flush_at_exit``), whatever their ``hint_idle``. Weak, so that an unclosed archive does not live on
with its caches: one dropped before exit (a local of a function that returned) is collected, and what
it still owed is never put. Nothing committed is lost: readers fold the log from the older fold, and
the next compaction of the thread writes a newer one; until then gc keeps the thread's log from the
fold its hint names (``close`` puts it: a writer that stops should close)."""
_exit_hook: list[bool] = []


EXIT_FLUSH_SECONDS = 5.0
"""How long interpreter exit waits for the owed folds and hints of every archive together (a store that
stopped answering must not hold the process: each request's own retry budget is longer)."""


def _flush_at_exit() -> None:
    """Put what every open archive still owes (``idle_hints``): the fold a save's compaction left for the
    next save, then the hint naming it, and the idle hints pending. The next cold reader then starts
    from the newest fold and finds the head the hint names instead of reading and probing past an
    older one. Best effort, all archives at once within ``EXIT_FLUSH_SECONDS`` (on local disk the
    default executor is shut by now: ``storage.sync_fs.in_thread`` then writes inline): a failure is
    one line on stderr, never a traceback at exit."""
    archives = list(_WRITERS)
    if not archives:
        return

    async def flush() -> list[BaseException | None]:
        return await asyncio.gather(*(a.engine.log.idle_hints() for a in archives), return_exceptions=True)

    try:
        failed = [r for r in run_sync(asyncio.wait_for(flush(), EXIT_FLUSH_SECONDS)) if r is not None]
    except Exception as exc:  # at exit: report, never raise (a timeout, a loop already gone)
        failed = [exc]
    if failed:
        first = failed[0]
        print(
            f"ckpt_archive: owed fold or head hint not put at exit ({type(first).__name__}: {first})", file=sys.stderr
        )


def _note_writer(archive: ArchiveCheckpointer) -> None:
    """After a save: the archive may owe a fold or a hint that must not die with the process. The exit
    hook is registered after the first save, so after the storage client's own exit finalizers (atexit
    runs last-registered first): they go out while the client still works."""
    _WRITERS.add(archive)
    if not _exit_hook:
        _exit_hook.append(True)
        atexit.register(_flush_at_exit)


class ArchiveCheckpointer(AsyncCoreCheckpointer):
    """Checkpoints of many threads under one root of any fsspec filesystem.

    ``gc_grace`` is how long an object stays on storage after it stopped being
    referenced (and how old an unreferenced object must be before ``gc`` treats
    it as an orphan). A cached manifest older than half of it is re-read, so no
    instance ever acts on a manifest that ``gc`` may have cut the log under. It is the
    archive's (recorded in its marker when the archive is created), so every process
    that opens it acts on the same one.
    ``engine`` is the ``Engine`` the operations of ``ckpt_archive.ops`` take.
    """

    def __init__(self, store: ObjectStore, *, state_cache: int = 32, **settings: Unpack[Settings]) -> None:
        """``settings``: ``full_snapshot_interval`` (10), ``url``, ``gc_grace`` (a new archive's; 1 h),
        ``encryption``, ``create``, ``hint_every`` (10), ``hint_idle`` (None), ``probe_window`` (None) (as
        ``open_archive`` documents them); ``state_cache``: contents kept in memory."""
        self.engine = Engine(store, state_cache=state_cache, **settings)

    @property
    def store(self) -> ObjectStore:
        return self.engine.store

    @property
    def url(self) -> str:
        return self.engine.root.url

    @property
    def gc_grace(self) -> timedelta:
        """The archive's grace once anything has been read or saved (before: the one it was opened with)."""
        return self.engine.root.gc_grace

    @property
    def encryption(self) -> Encryption | None:
        return self.engine.encryption

    @property
    def full_snapshot_interval(self) -> int:
        return self.engine.root.full_snapshot_interval

    def flush_hints(self) -> None:
        """Put now the head hints ``hint_idle`` would put later, and the folds (then the hint naming each)
        that saves' compactions left for the next save (``close`` and interpreter exit do)."""
        run_sync(self.engine.log.idle_hints())

    async def aflush_hints(self) -> None:
        await run_async(self.engine.log.idle_hints())

    def close(self) -> None:
        """Done saving with this instance: put the idle hints it still owes (``flush_hints``), so a cold
        reader finds the current head without probing. The instance stays usable. Interpreter exit does
        the same for the instances that saved and are still alive then, not for one dropped before
        (``_WRITERS``): close a writer you are done with."""
        self.flush_hints()
        _WRITERS.discard(self)

    async def aclose(self) -> None:
        await self.aflush_hints()
        _WRITERS.discard(self)

    def __enter__(self) -> ArchiveCheckpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what this instance holds, and the head after one probe (integrations) ----
    async def asave_owned(self, checkpoint: Checkpoint) -> str:
        """``asave`` of a checkpoint whose state and messages the caller built for this save, of JSON
        types only, and never mutates (an integration's encoded values): serialised once for their
        digests, not checked and privately copied again (``ops.save.save(owned=True)``)."""
        cid = await run_async(save.save(self.engine, checkpoint, owned=True))
        _note_writer(self)
        return cid

    def known_head(self, thread_id: str) -> CheckpointInfo | None:
        """The head of the thread as this instance last saw it (no request; it may be behind: a save
        appending to it then fails with ``CheckpointConflict`` rather than committing on a stale view)."""
        return reads.cached_head(self.engine, thread_id)

    def known_blobs(self, thread_id: str, checkpoint_ids: Iterable[str | None]) -> set[str]:
        """Blob keys the chains of ``checkpoint_ids`` list, from the manifest this instance read less
        than ``manifest_ttl`` ago (no request; empty when it holds none that fresh): a writer that
        references them need not write them again (gc keeps them while such a record is in the thread)."""
        return reads.cached_blobs(self.engine, thread_id, checkpoint_ids)

    async def amanifest(
        self, thread_id: str, hint: dict[str, Any] | None = None, *, hint_read: bool = False
    ) -> tuple[Manifest, CheckpointInfo | None]:
        """The thread's up-to-date manifest and its head's listing entry, in one probe of the log when
        this instance holds the thread (O(1) in its length: no other record is built); ``hint``: the head
        hint just read (``hint_read``: even if there was none). Pass the manifest on to ``acontents``."""
        m = await run_async(reads.manifest(self.engine, thread_id, hint, hint_read=hint_read))
        return m, reads.head_info(m)

    async def ahead_guess(self, thread_id: str) -> tuple[CheckpointInfo | None, dict[str, Any] | None]:
        """The thread's head as far as it is known before its manifest is read (the manifest this
        instance holds: no request; else the head hint, one GET with the root check), and the hint read
        (``ops.reads.head_guess``): reads that depend on the head may start on it while ``amanifest``
        confirms it."""
        return await run_async(reads.head_guess(self.engine, thread_id))

    async def ahead_from_hint(self, thread_id: str, hint: dict[str, Any]) -> tuple[dict[str, Any], Content] | None:
        """The head record and its content from the hint just read, when the hint is current or trails
        the log by a run of appended deltas; None when the manifest must be read (``ops.reads.head_from_hint``)."""
        return await run_async(reads.head_from_hint(self.engine, thread_id, hint))

    async def awarm_head(self, thread_id: str, hint: dict[str, Any]) -> None:
        """Build the hint's head into the state cache, alongside ``amanifest`` (``ops.reads.warm_head``)."""
        await run_async(reads.warm_head(self.engine, thread_id, hint))

    async def alisting(self, thread_id: str) -> tuple[Manifest, list[CheckpointInfo]]:
        """``amanifest`` and every checkpoint of it as ``alist`` lists them (O(records))."""
        return await run_async(reads.listing(self.engine, thread_id))

    async def acontents(
        self, thread_id: str, checkpoint_ids: Iterable[str], m: Manifest | None = None
    ) -> dict[str, Content]:
        """(state, messages) of several checkpoints of one thread, built in one walk, each object read
        once (``ops.reads.contents``); ``m``: the manifest just read. Shared with the caches: read only."""
        return await run_async(reads.contents(self.engine, thread_id, checkpoint_ids, m))

    # -- values no record holds, stored by the archive's one encoding (integrations) -------
    @property
    def manifest_ttl(self) -> float:
        """Seconds a cached manifest serves (``engine.root.manifest_ttl``): a writer that skipped blobs
        ``known_blobs`` named writes them after all when it took over half of it (``ops.save.confirm``)."""
        return self.engine.root.manifest_ttl

    def stored(
        self, value: Any, known: Keys = frozenset(), *, most: int | None = None
    ) -> tuple[Any, list[str], Objects]:
        """The archive's one encoding of a JSON value no record holds (a LangGraph write object): the
        value with its large strings as blob references, the names it references, the blob objects to
        write before anything that references them (``Contents.stored``: ``known`` not rewritten, ``most``
        the most references its holder can list)."""
        return self.engine.contents.stored(value, known, most=most)

    async def aunstored(self, held: list[tuple[Any, dict[str, Any], str]]) -> list[Any]:
        """``stored``'s inverse: each (stored value, its holder ``{"id", "enc"?}``, the key it was read
        from) -> the value, every blob fetched once in one batch and checked (``Contents.unstored``)."""
        return await run_async(self.engine.contents.unstored(held))

    async def acheck_grace(self, grace: timedelta | None = None, *, unsafe_no_writers: bool = False) -> timedelta:
        """The grace ``gc`` would use (``ops.gc.check_grace``: the archive's marker read first, so it is the
        archive's ``gc_grace``, never below ``gc_floor`` unless ``unsafe_no_writers``; ``UnsafeGcGrace``
        otherwise): what a collector of objects beside the archive's (LangGraph's write objects) waits."""
        await run_async(self.engine.root.check())
        return gc.check_grace(self.engine, grace, unsafe_no_writers)

    async def aparts(
        self, thread_id: str, wanted: Mapping[str, Iterable[Path]], m: Manifest | None = None
    ) -> dict[str, dict[Path, Any]]:
        """Parts of the states of several checkpoints of one thread (checkpoint id -> paths in its state,
        ``("writes",)`` or ``("channels", "messages")``, -> the value there, None when absent), from the
        engine's part cache, which outlives its state cache and is keyed by record version like it; the
        states it does not hold built in one walk (``ops.reads.parts``). Shared with the cache: read only."""
        return await run_async(reads.parts(self.engine, thread_id, wanted, m))

    def held(self, key: str) -> tuple[bool, Any]:
        """(held, value) of an object beside the records that never changes under its key (a LangGraph
        write object: a fresh name per call) as ``hold`` kept it: the engine's part cache, bounded with
        the states' parts (``Contents.part``), shared by everything on this archive. Read only."""
        return self.engine.contents.part(key, ())

    def hold(self, key: str, value: Any) -> None:
        """Keep the decoded value of an immutable object beside the records (``held``), read and checked."""
        self.engine.contents.remember_part(key, (), value)

    @staticmethod
    def info_of(thread_id: str, record: dict[str, Any]) -> CheckpointInfo:
        """A manifest record (``ahead_from_hint``'s) as its listing entry."""
        return record_info(thread_id, record)

    @staticmethod
    def listed(m: Manifest) -> list[CheckpointInfo]:
        """Every checkpoint of a manifest ``amanifest`` returned, as ``alist`` lists them (O(records))."""
        return reads.infos_of(m)

    # -- the protocol's async core -----------------------------------------------
    async def _save(self, checkpoint: Checkpoint) -> str:
        cid = await save.save(self.engine, checkpoint)
        _note_writer(self)
        return cid

    async def _load(self, thread_id: str) -> Checkpoint | None:
        return await reads.load(self.engine, thread_id)

    async def _load_by_id(self, checkpoint_id: str) -> Checkpoint | None:
        return await reads.load_by_id(self.engine, checkpoint_id)

    async def _list(self, thread_id: str) -> Infos:
        return await reads.infos(self.engine, thread_id)

    async def _threads(self) -> Ids:
        return await reads.threads(self.engine)

    async def _delete(self, thread_id: str) -> None:
        await reads.delete(self.engine, thread_id)

    async def _update_state(self, checkpoint_id: str, state: dict[str, Any], expected_version: int) -> int:
        return await maintenance.update_state(self.engine, checkpoint_id, state, expected_version)

    def _history(self, thread_id: str) -> AsyncIterator[Checkpoint]:
        return reads.history(self.engine, thread_id)

    async def _remove(self, thread_id: str, checkpoint_ids: Iterable[str], dry_run: bool) -> PruneReport:
        return await maintenance.remove(self.engine, thread_id, checkpoint_ids, dry_run=dry_run)

    # -- compaction and retention ------------------------------------------------
    def compact(self, thread_id: str) -> bool:
        """Close the open segment now (end of a run): inline deltas to Parquet, every 8 consecutive
        segments of one tier merged into one of the next (spec.md section 6: a long thread's history in
        a few objects; saves never merge), fold the manifest. True when it committed anything."""
        return run_sync(save.compact(self.engine, thread_id))

    async def acompact(self, thread_id: str) -> bool:
        return await run_async(save.compact(self.engine, thread_id))

    def prune(self, thread_id: str, policy: RetentionPolicy, *, dry_run: bool = False) -> PruneReport:
        """Remove the thread's checkpoints ``policy`` does not keep (the newest always stays)."""
        return run_sync(maintenance.prune(self.engine, thread_id, policy, dry_run=dry_run))

    async def aprune(self, thread_id: str, policy: RetentionPolicy, *, dry_run: bool = False) -> PruneReport:
        return await run_async(maintenance.prune(self.engine, thread_id, policy, dry_run=dry_run))

    def prune_all(self, policy: RetentionPolicy, **options: Unpack[PruneAllOptions]) -> list[PruneReport]:
        """Prune every thread, or only shard ``(i, n)`` of them (stable, disjoint by thread-id hash);
        ``options``: ``shard``, ``concurrency`` (8 threads at a time), ``progress``, ``dry_run``."""
        return run_sync(maintenance.prune_all(self.engine, policy, **options))

    async def aprune_all(self, policy: RetentionPolicy, **options: Unpack[PruneAllOptions]) -> list[PruneReport]:
        return await run_async(maintenance.prune_all(self.engine, policy, **options))

    def gc(self, *, grace: timedelta | None = None, unsafe_no_writers: bool = False) -> GcReport:
        """Delete tombstoned, orphaned and superseded objects older than ``grace`` (default: gc_grace).

        A grace below ``gc_floor(gc_grace)`` (2 s for a gc_grace of 0, gc_grace itself from 2 s on) would
        delete what a running save is about to commit: it raises ``UnsafeGcGrace`` unless
        ``unsafe_no_writers=True`` says that no process is writing to or reading the archive."""
        return run_sync(gc.gc(self.engine, grace=grace, unsafe_no_writers=unsafe_no_writers))

    async def agc(self, *, grace: timedelta | None = None, unsafe_no_writers: bool = False) -> GcReport:
        return await run_async(gc.gc(self.engine, grace=grace, unsafe_no_writers=unsafe_no_writers))

    def pin(self, checkpoint_id: str) -> bool:
        """Mark a checkpoint pinned (``keep_pinned()`` keeps it); True if it was not pinned before."""
        return run_sync(maintenance.set_pinned(self.engine, checkpoint_id, True))

    async def apin(self, checkpoint_id: str) -> bool:
        return await run_async(maintenance.set_pinned(self.engine, checkpoint_id, True))

    def unpin(self, checkpoint_id: str) -> bool:
        return run_sync(maintenance.set_pinned(self.engine, checkpoint_id, False))

    async def aunpin(self, checkpoint_id: str) -> bool:
        return await run_async(maintenance.set_pinned(self.engine, checkpoint_id, False))

    # -- copies ----------------------------------------------------------------------
    def fork(self, checkpoint_id: str, new_thread_id: str) -> str:
        """Start a new thread at a copy of the checkpoint; returns the new checkpoint's id."""
        return run_sync(copy.fork(self.engine, checkpoint_id, new_thread_id))

    async def afork(self, checkpoint_id: str, new_thread_id: str) -> str:
        return await run_async(copy.fork(self.engine, checkpoint_id, new_thread_id))

    def copy_thread(self, src_thread_id: str, dst_thread_id: str) -> dict[str, str]:
        """Copy a whole thread (server-side object copies); returns {old checkpoint id: new id}."""
        return run_sync(copy.copy_thread(self.engine, src_thread_id, dst_thread_id))

    async def acopy_thread(self, src_thread_id: str, dst_thread_id: str) -> dict[str, str]:
        return await run_async(copy.copy_thread(self.engine, src_thread_id, dst_thread_id))

    # -- integrity -------------------------------------------------------------------
    def verify(self, thread_id: str | None = None) -> VerifyReport:
        """Check every object of the archive (or one thread); reports *every* problem, raises none."""
        return run_sync(verify.verify_archive(self.engine, thread_id))

    async def averify(self, thread_id: str | None = None) -> VerifyReport:
        return await run_async(verify.verify_archive(self.engine, thread_id))

    def validate_integrity(self, checkpoint_id: str) -> None:
        """Prove one checkpoint: every object of its chain re-read, digest-checked, and its state rebuilt
        and compared with the digest recorded at save. Raises the typed ``IntegrityError``
        (``DigestMismatch``, ``TruncatedObject``, ``MissingObject``, ``BrokenChain``, ``CorruptManifest``)
        or ``CheckpointNotFound``."""
        run_sync(verify.validate(self.engine, checkpoint_id))

    async def avalidate_integrity(self, checkpoint_id: str) -> None:
        await run_async(verify.validate(self.engine, checkpoint_id))

    def try_restore_state(self, checkpoint_id: str) -> dict[str, Any]:
        """The checkpoint's state, only once proven as ``validate_integrity`` does; raises otherwise."""
        return run_sync(verify.validate(self.engine, checkpoint_id))

    async def atry_restore_state(self, checkpoint_id: str) -> dict[str, Any]:
        return await run_async(verify.validate(self.engine, checkpoint_id))

    def restore_state(self, checkpoint_id: str) -> RestoredState:
        """Explicitly lenient: the state even when digest or size checks fail, with ``unproven`` saying
        which. Still raises when the state cannot be decoded at all (missing object, broken chain,
        garbage bytes): it never invents or empties a state."""
        return run_sync(verify.restore(self.engine, checkpoint_id))

    async def arestore_state(self, checkpoint_id: str) -> RestoredState:
        return await run_async(verify.restore(self.engine, checkpoint_id))
