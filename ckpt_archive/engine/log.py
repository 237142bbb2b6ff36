"""A thread's log in an ``Engine``: reading its manifest (head hint, folded manifest, the commits after
it), the per-thread caches and locks, and THE commit (``ThreadLog.commit``): save, compaction and every
maintenance action go through it.

A cached manifest is brought up to date by probing ``seq+1`` (normally one 404);
without one it is rebuilt from the hint (no LIST) and the commits it may trail by,
or from one LIST of the log when the hint is missing or unusable.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import Awaitable, Collection, Sequence
from typing import Any, TypeVar

from .. import codec
from ..errors import (
    AccessDenied,
    BucketNotFound,
    CheckpointConflict,
    CheckpointError,
    CommitOutcomeUnknown,
    CorruptManifest,
    LostCommit,
    MissingObject,
    ObjectTooLarge,
    ReadOnlyStorage,
    StateTooLarge,
    StorageFull,
    UnsupportedFormatVersion,
)
from ..format import actions as A
from ..format import layout
from ..format.manifest import (
    Manifest,
    hint_appends,
    hint_due,
    hint_lags,
    hint_probes,
    is_plain,
    next_window,
    unseal,
)
from ..format.parts import seal_parts
from ..format.schema import check_commit, check_hint
from ..storage import ObjectStore
from .folds import read_folded
from .plan import CommitPolicy, Fold, Plan, Planner
from .root import Root

T = TypeVar("T")

FOUND_IDS = 4096
"""How many foreign ids an engine remembers the thread of (``ThreadLog.found``)."""

_REFUSED = (StorageFull, ReadOnlyStorage, AccessDenied, BucketNotFound)
"""Storage errors that mean the request was refused, so a commit that raises one did not land."""


class ThreadLog:
    """The threads' logs of one archive: cached manifests (with when each was read, and the seq of the
    newest fold), the head each writer last read from a hint, a lock per thread, and the commit."""

    def __init__(self, root: Root) -> None:
        self.root = root
        self.manifests: dict[str, Manifest] = {}
        self.read_at: dict[str, float] = {}
        self.folded_seq: dict[str, int | None] = {}
        self.hint_heads: dict[str, str] = {}  # the head a load last read from the hint (a save's known head)
        self.unusable_hints: set[str] = set()  # threads whose hint was there but unusable when last read
        self.hinted: dict[str, int] = {}
        """Thread -> seq of the newest head hint this writer put or read: a plain delta commit puts the
        hint beside it only when that one is ``Root.hint_every`` commits behind (``hint_due``)."""
        self.owed: dict[str, int] = {}
        """Thread -> seq of a save's compaction whose fold this writer has not put yet (``Fold.NEXT_COMMIT``):
        its next plain commit of the thread, its idle timer or ``idle_hints`` puts it. Cleared in one place,
        ``_folded``, where a fold at or after it is written or read."""
        self.hint_stale: set[str] = set()
        """Threads whose newest fold this writer put with a save's commit and no hint names yet: the hint
        naming it goes with the writer's next save of the thread (or its idle timer, ``idle_hints``), never
        beside the fold itself, so no hint ever names a fold that has not landed (spec.md section 7)."""
        self._owed_head: dict[str, tuple[int, bytes]] = {}
        """Thread (owing a fold or a hint) -> (seq, stored entry) of this writer's newest commit of it: what
        the hint that ``idle_hints`` puts after the owed fold names."""
        self.found_ids: dict[str, str] = {}
        """Foreign checkpoint id -> the thread a look-up by id alone found it in (``ops.reads.find``), at
        most ``FOUND_IDS`` of them: the next look-up reads that thread, not every thread."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._idle: dict[str, tuple[asyncio.TimerHandle, Manifest, bytes]] = {}
        """Thread -> its pending idle hint (``hint_when_idle``): the timer, the commit's manifest and entry."""
        self._idle_puts: set[asyncio.Task[None]] = set()

    @property
    def store(self) -> ObjectStore:
        return self.root.store

    def lock(self, thread_id: str) -> asyncio.Lock:
        lock = self._locks.get(thread_id)
        if lock is None:
            lock = self._locks[thread_id] = asyncio.Lock()
        return lock

    def cached(self, thread_id: str) -> Manifest | None:
        """The manifest this instance holds for the thread (no request; it may be behind or stale)."""
        return self.manifests.get(thread_id)

    def found(self, checkpoint_id: str, thread_id: str) -> None:
        """Remember where a look-up by id alone found ``checkpoint_id`` (the oldest forgotten first)."""
        self.found_ids.pop(checkpoint_id, None)
        self.found_ids[checkpoint_id] = thread_id
        while len(self.found_ids) > FOUND_IDS:
            del self.found_ids[next(iter(self.found_ids))]

    def forget(self, thread_id: str) -> None:
        """Drop the cached view of a deleted thread."""
        self.manifests.pop(thread_id, None)
        self.folded_seq.pop(thread_id, None)
        self.owed.pop(thread_id, None)
        self.hint_stale.discard(thread_id)
        self._owed_head.pop(thread_id, None)
        self._cancel_idle(thread_id)

    # -- reading ---------------------------------------------------------------------
    async def _fold_forward(self, m: Manifest, window: int = 1) -> Manifest:
        """Apply commits after ``m.seq`` until the first absent one, probing ``window`` of them in the first
        round trip (a cached manifest: 1, normally one 404; past a whole window of a hint's probes: the
        next), then ``next_window`` of that."""
        first = True
        while True:
            if not first:
                window = next_window(window)
            first = False
            keys = [layout.log_key(m.thread_id, m.seq + i) for i in range(1, window + 1)]
            for key, data in zip(keys, await self.store.get_many(keys), strict=True):
                if data is None:
                    return m
                if m is self.manifests.get(m.thread_id):
                    m = m.copy()
                what = f"commit {m.seq + 1}"
                m.apply_entry(unseal(data, what, thread_id=m.thread_id, key=key, kind="commit entry"))

    @staticmethod
    async def _no_hint() -> None:
        return None

    async def read_hint(self, thread_id: str) -> dict[str, Any] | None:
        """The thread's head hint, or None when there is none or it is unusable (``unusable_hints`` says
        which: such a thread has a log, which ``manifest`` then lists)."""
        self.unusable_hints.discard(thread_id)
        try:
            data = await self.store.get_or_none(layout.head_key(thread_id))
            if data is None:
                return None
            doc = unseal(data, "head hint", thread_id=thread_id, kind="head hint")
            check_hint(doc, thread_id)
            self.hinted[thread_id] = int(doc["seq"])
            return doc
        except (CorruptManifest, UnsupportedFormatVersion, ObjectTooLarge):
            self.unusable_hints.add(thread_id)
            return None  # only a hint: fall back to the log itself (verify reports it)

    async def manifest(
        self, thread_id: str, *, hint: dict[str, Any] | None = None, hint_read: bool = False, cache: bool = True
    ) -> Manifest:
        """The thread's manifest, up to date with every commit made so far.

        ``hint``: the head hint the caller has just read; ``hint_read``: it read it, even if there was
        none (so it is not read twice). ``cache=False``: read it afresh and leave this instance's view of
        the thread as it was (gc, which reads every thread, and a save's check of its own commit)."""
        if cache:
            self.hint_heads.pop(thread_id, None)  # the caller now sees the newest head
        cached = self.manifests.get(thread_id) if cache else None
        if cached is not None and not self.fresh(thread_id):
            cached = None  # too old to trust: gc may have removed log entries after it
        if cached is not None:
            m = await self._fold_forward(cached)
        elif hint is not None:
            m = await self._rebuild(thread_id, hint, cache=cache)
        else:
            # Commit 1 is never collected (spec.md §6), so no hint and no commit 1 means a thread
            # nobody has committed to: no LIST of the log for the first save of every thread. A hint
            # that is there but unusable says the thread has a log: it is listed, so a thread whose
            # commit 1 is gone reads from its newest fold (or fails), never as a new one.
            read_hint = self._no_hint() if hint_read else self.read_hint(thread_id)
            hint, first = await asyncio.gather(read_hint, self.store.get_or_none(layout.log_key(thread_id, 1)))
            empty = hint is None and first is None and thread_id not in self.unusable_hints
            m = Manifest(thread_id) if empty else await self._rebuild(thread_id, hint, cache=cache)
        if not cache:
            return m
        self.manifests[thread_id] = m
        self.read_at[thread_id] = time.monotonic()
        return m

    def fresh(self, thread_id: str) -> bool:
        """Was the cached manifest read (or written) within half the gc grace period?"""
        return time.monotonic() - self.read_at.get(thread_id, 0.0) <= self.root.manifest_ttl

    async def _rebuild(
        self, thread_id: str, hint: dict[str, Any] | None, *, cache: bool = True, relisted: bool = False
    ) -> Manifest:
        """The manifest from the hint (no LIST), or from one LIST of the log; ``relisted``: this is the
        second listing, after a fold the first one named was collected meanwhile. A hint's ``appends``
        stand for the entries after its fold but its own (``hint_appends``): only that one is read, and
        they are used once its sha256 is the hint's ``entry_sha256``."""
        appends: list[dict[str, Any]] = []
        if hint is not None:
            base_seq, last = hint.get("manifest_seq"), int(hint["seq"])
            appends = hint_appends(hint, thread_id)
        else:  # no usable hint: one LIST of the log (recovery path only)
            names = await self.store.list_dir(layout.log_dir(thread_id))
            commits, folded = layout.log_seqs(names)
            base_seq = max(folded) if folded else None
            last = max(commits) if commits else 0
        start = (base_seq or 0) + len(appends)  # the log is read after the appends
        keys = [layout.log_key(thread_id, s) for s in range(start + 1, last + 1)]
        if base_seq:
            keys.insert(0, layout.manifest_key(thread_id, base_seq))
        # a window of the commits past the hint is fetched with the others: one of them is usually absent,
        # and then the manifest is known to be current without another round trip (when all are there,
        # the next window is probed: how far a hint trails is the writer's choice, never a reader's limit)
        ahead = hint_probes(last, self.root.probe_window)[1:] if hint is not None else [last + 1]
        datas = await self.store.get_many([*keys, *(layout.log_key(thread_id, s) for s in ahead)])
        probes = datas[len(keys) :]
        del datas[len(keys) :]
        if base_seq:
            data = datas.pop(0)
            if data is None:  # folded manifest gone since it was named (gc wrote a newer one): list again
                if hint is None and relisted:
                    raise MissingObject(
                        "folded manifest vanished twice after listing",
                        thread_id=thread_id,
                        key=layout.manifest_key(thread_id, base_seq),
                    )
                return await self._rebuild(thread_id, None, cache=cache, relisted=hint is None)
            key = layout.manifest_key(thread_id, base_seq)
            try:
                m = await read_folded(self.store, thread_id, data, f"manifest {base_seq}", key=key, seq=base_seq)
            except MissingObject:  # a part of an older fold already collected: use the newest fold
                if hint is None:
                    raise
                return await self._rebuild(thread_id, None, cache=cache)
            except (CorruptManifest, ObjectTooLarge) as exc:  # a fold is optional: the log replaces it
                m, base_seq = await self._replay_to(thread_id, base_seq, exc)
        else:
            m = Manifest(thread_id)
        if appends and hint is not None and datas[-1] is not None and codec.sha256(datas[-1]) != hint["entry_sha256"]:
            # the hint's commit lost the race: its chain says nothing of the log (an absent one: listed below)
            return await self._rebuild(thread_id, {k: v for k, v in hint.items() if k != "appends"}, cache=cache)
        for doc in appends:
            m.apply_entry(doc)
        for seq, data in zip(range(start + 1, last + 1), datas, strict=True):
            key = layout.log_key(thread_id, seq)
            if data is None:
                if hint is not None:
                    return await self._rebuild(thread_id, None, cache=cache)
                raise MissingObject("commit entry is missing from the log", thread_id=thread_id, key=key)
            m.apply_entry(unseal(data, f"commit {seq}", thread_id=thread_id, key=key, kind="commit entry"))
        if cache:
            self._folded(thread_id, base_seq, read=True)
        for seq, data in zip(ahead, probes, strict=True):
            if data is None:
                return m
            m.apply_entry(
                unseal(
                    data, f"commit {seq}", thread_id=thread_id, key=layout.log_key(thread_id, seq), kind="commit entry"
                )
            )
        return await self._fold_forward(m, next_window(len(ahead)))

    async def _replay_to(self, thread_id: str, seq: int, error: CheckpointError) -> tuple[Manifest, int | None]:
        """The manifest as of ``seq`` without its (corrupt) folded copy, where that is provably safe.

        Commit entries are immutable and individually sealed, so an older good folded
        manifest (or none) plus *every* commit up to ``seq`` gives exactly the state the
        corrupt copy held. If any of those commits is gone, nothing is guessed: ``error``.
        """
        names = await self.store.list_dir(layout.log_dir(thread_id))
        bases = [s for s in layout.log_seqs(names)[1] if s < seq]
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
                    m.apply_entry(unseal(data, f"commit {s}", thread_id=thread_id, key=key, kind="commit entry"))
            except (CorruptManifest, MissingObject):
                continue
            return m, base or None
        raise error

    async def lost_commits(
        self, thread_id: str, log: dict[str, dict[str, Any]], known: Collection[str] = ()
    ) -> list[LostCommit]:
        """The commits of ``log`` (the thread's ``_log/`` objects as listed) that landed below a fold
        after it was written (``layout.below_fold``), one ``LostCommit`` per checkpoint each adds: what
        verify reports and gc keeps (the entry is the only copy of those saves). Reads only those
        entries (normally none), to name their checkpoints. An entry all of whose checkpoints are ``known``
        (the thread's manifest holds them) lost nothing: it was rewritten after its fold, not committed
        into a gap, and is not reported."""
        lost = layout.below_fold(log)
        datas = await self.store.get_each(list(lost))  # one refused unread (a FIFO) is named, not raised
        out = []
        for (key, seq), data in zip(lost.items(), datas, strict=True):
            ids: list[str | None] = []
            with contextlib.suppress(CheckpointError):  # a damaged entry is reported as such apart
                if isinstance(data, bytes):
                    doc = unseal(data, f"commit {seq}", thread_id=thread_id, key=key, kind="commit entry")
                    check_commit(doc, thread_id, key)
                    ids = [a["record"]["id"] for a in doc["actions"] if a.get("action") == A.ADD]
                    if ids and all(cid in known for cid in ids):
                        continue
            for cid in ids or [None]:
                out.append(
                    LostCommit(
                        f"commit {seq} was created after a folded manifest at or above it was written: it landed "
                        "where gc had cut the log, and no reader sees it (a writer outlived the grace gc used); "
                        "gc keeps it: if its checkpoint is wanted, save it again, then delete the entry",
                        thread_id=thread_id,
                        checkpoint_id=cid,
                        key=key,
                    )
                )
        return out

    # -- the commit ------------------------------------------------------------------
    async def commit(self, thread_id: str, plan: Planner[T], policy: CommitPolicy) -> T:
        """THE commit of a thread (save, compaction and every maintenance action), as ``policy`` (a
        preset of ``plan.py``) says: under the thread's lock, read the manifest (``policy.first_read``
        for the first attempt: a save's known head), ``plan`` against it, build the commit entry
        (``StateTooLarge`` before anything is written), write the payloads, create the entry
        put-if-absent; once it landed, the plan's ``landed`` (a slow save's check), the caches and what
        ``policy.fold`` publishes. A lost race re-reads and re-plans as the policy says."""
        cache, fold, first_read = policy.cache, policy.fold, policy.first_read
        routine = fold in (Fold.IF_COMPACTED, Fold.NEXT_COMMIT)  # the hint goes beside the commit when due
        deferred, attempt = fold is Fold.NEXT_COMMIT, 0
        while True:
            async with self.lock(thread_id):
                while True:
                    if attempt == 0 and first_read is not None:
                        m = await first_read()
                    else:
                        m = await self.manifest(thread_id, cache=cache)
                    planned = await plan(m, attempt)
                    if not planned.actions:
                        return planned.result
                    compacts = any(a["action"] == A.COMPACT for a in planned.actions)
                    seq, hinted = m.seq + 1, self.hinted.get(thread_id)
                    due = routine and hint_due(seq, planned.actions, self.root.hint_every, hinted)
                    # a save's compaction owes its fold to the next plain commit, which puts it beside its
                    # own entry; the hint naming it goes with the save after that (``hint_stale``), once
                    # the fold has landed: a hint beside a commit names only a fold already there
                    folds = deferred and self.owes_fold(m) and is_plain(planned.actions)
                    if deferred and compacts:
                        due = hint_lags(seq, self.root.hint_every, hinted)
                    elif deferred:
                        due = due or thread_id in self.hint_stale
                    hint = due and (deferred or not compacts)  # compact's compaction: after its fold (_publish)
                    done = await self._attempt(m, planned, hint=hint, cache=cache, fold=folds)
                    if done is not None:
                        new, stored = done
                        if planned.landed is not None:
                            await planned.landed(new)
                        if cache:
                            self.manifests[thread_id] = new
                            self.read_at[thread_id] = time.monotonic()
                        if deferred and compacts:
                            self.owed[thread_id] = new.seq
                        if thread_id in self.owed or thread_id in self.hint_stale:
                            self._owed_head[thread_id] = (new.seq, stored)
                        if not deferred:
                            await self._publish(
                                new,
                                stored,
                                compacted=not routine or compacts,
                                hint=not routine or (due and compacts),
                                fold_first=fold is not Fold.WITH_HINT,
                            )
                        self._cancel_idle(thread_id)
                        left = not due or self.owes_fold(new) or thread_id in self.hint_stale
                        if routine and cache and left:  # left behind: once idle
                            self.hint_when_idle(new, stored)
                        return planned.result
                    attempt += 1
                    if policy.attempts is not None and attempt >= policy.attempts:
                        raise CheckpointConflict(policy.gave_up.format(thread=thread_id))
                    if policy.backoff:
                        break  # sleep with the lock released
            await asyncio.sleep(random.uniform(0, min(0.5, 0.005 * 2**attempt)))

    def owes_fold(self, m: Manifest) -> bool:
        """Does this writer owe the fold of a save's compaction that ``m`` holds (``Fold.NEXT_COMMIT``)?
        A query: the debt is cleared where a fold at or after it is written or read (``_folded``)."""
        owed = self.owed.get(m.thread_id)
        return owed is not None and owed <= m.seq

    def _folded(self, thread_id: str, seq: int | None, *, read: bool = False) -> None:
        """Fold ``seq`` of the thread landed (this writer put it) or was read (``read``: the one a rebuild
        started from, None for none): the newest fold a hint may name (``folded_seq``), the one place an
        owed fold at or before it is forgotten, and (put) a hint owed that names it (``hint_stale``)."""
        if read:
            self.folded_seq[thread_id] = seq
        elif seq is not None:
            self.folded_seq[thread_id] = max(seq, self.folded_seq.get(thread_id) or 0)
            self.hint_stale.add(thread_id)
        owed = self.owed.get(thread_id)
        if owed is not None and seq is not None and owed <= seq:
            del self.owed[thread_id]
        self._settle(thread_id)

    def _settle(self, thread_id: str) -> None:
        """Drop the newest commit kept for ``idle_hints`` once the thread owes neither a fold nor a hint."""
        if thread_id not in self.owed and thread_id not in self.hint_stale:
            self._owed_head.pop(thread_id, None)

    def hint_when_idle(self, m: Manifest, stored: bytes) -> None:
        """Put the head hint of commit ``m.seq`` (stored as ``stored``) ``Root.hint_idle`` seconds from
        now, unless this writer committed to the thread again meanwhile (that commit decides anew) or
        put a hint at that seq since. Best effort, off the save's path: a hint that never goes out (the
        process ended first) only costs a cold reader the probes past the older one."""
        delay = self.root.hint_idle
        if delay is None:
            return
        self._cancel_idle(m.thread_id)
        timer = asyncio.get_running_loop().call_later(delay, self._idle_due, m, stored)
        self._idle[m.thread_id] = (timer, m, stored)

    def _cancel_idle(self, thread_id: str) -> None:
        pending = self._idle.pop(thread_id, None)
        if pending is not None:
            pending[0].cancel()

    def _idle_due(self, m: Manifest, stored: bytes) -> None:
        self._idle.pop(m.thread_id, None)
        task = asyncio.ensure_future(self._idle_hint(m, stored))
        self._idle_puts.add(task)  # held until done (the loop keeps only a weak reference)
        task.add_done_callback(self._idle_puts.discard)

    async def _idle_hint(self, m: Manifest, stored: bytes) -> None:
        async with self.lock(m.thread_id):  # never beside a commit of the thread: it would trail it anyway
            current = self.manifests.get(m.thread_id)
            if current is None or current.seq != m.seq:
                return
            if self.owes_fold(current):  # a save's compaction left its fold: it goes now, then the hint naming it
                await self._publish(current, stored, compacted=True, hint=True, fold_first=True)
            elif self.hinted.get(m.thread_id, -1) < m.seq or m.thread_id in self.hint_stale:
                await self._put_hint(m, stored)

    async def settle(self, thread_id: str) -> None:
        """No idle hint of the thread pending or being put: before its folder is deleted, so none lands
        in the folder afterwards."""
        self._cancel_idle(thread_id)
        await asyncio.gather(*list(self._idle_puts), return_exceptions=True)

    async def idle_hints(self) -> None:
        """Put every pending idle hint now (``hint_when_idle``), and every fold a save's compaction left
        owed (``Fold.NEXT_COMMIT``), then the hint naming it (or the hint owed for a fold put with a
        save: ``hint_stale``): at ``close``, before a process ends, or in a test."""
        for timer, m, stored in list(self._idle.values()):
            timer.cancel()
            self._idle_due(m, stored)
        await asyncio.gather(*list(self._idle_puts))
        for thread_id in [*self.owed, *(t for t in self.hint_stale if t not in self.owed)]:
            async with self.lock(thread_id):
                current, head = self.manifests.get(thread_id), self._owed_head.get(thread_id)
                if current is None or head is None:
                    continue
                folds, (seq, entry) = self.owes_fold(current), head
                hint = seq == current.seq and (folds or thread_id in self.hint_stale)
                await self._publish(current, entry, compacted=folds, hint=hint, fold_first=True)

    async def _attempt(
        self, m: Manifest, planned: Plan[Any], *, hint: bool, cache: bool, fold: bool = False
    ) -> tuple[Manifest, bytes] | None:
        """One attempt: (new manifest, stored entry) once it landed, None if it lost.

        ``hint``: a due hint goes out with the commit (one round trip, not two); readers check the
        ``entry_sha256`` it carries, so one whose commit lost the race is ignored. ``fold``: the fold of
        ``m`` (seq ``m.seq``, landed: true whoever wins this commit) goes out with it too; a hint beside
        it names the fold before (the one that has landed), the next save's names this one
        (``hint_stale``); when that fold seals a part, the part goes first and the fold after it, in this save
        (a part left for a later save would be collectable by gc until then). The new manifest carries
        the parts sealed."""
        thread_id = m.thread_id
        # refused (StateTooLarge) before any payload is written; ``doc``: the entry as readers unseal it
        doc, stored = m.sealed_commit(planned.actions)
        await asyncio.gather(
            self.store.put_many(planned.objects),  # on local disk one executor job (``batched_puts``)
            *(self.store.copy(src, dst) for src, dst in planned.copies.items()),
        )
        await self.root.check(create=True)  # the first commit creates the archive marker
        new = m.copy()
        new.apply_entry(doc)
        folding, beside = None, []
        if fold:
            folded = m.copy()  # sealed on a copy: ``m`` and ``new`` keep the parts the newest fold names
            with contextlib.suppress(StateTooLarge):  # a fold over its bound is not written: readers fold the log
                folding = folded, self._prepare_fold(folded)
        if folding is not None:
            folded, (objects, data, before) = folding
            # the parts it seals, then the fold, in this save: a part left for a later save's fold would be
            # an unreferenced object until then, and gc (its grace passed, or ``grace=0``) collects it
            beside = [self._write_fold(folded, objects, data, before)]
        try:
            landed, results = await self._put_commit(new, stored, hint=hint, beside=beside)
        except CommitOutcomeUnknown:
            # the next save re-reads the log first (as after a long pause, keeping the known head): a
            # re-save of this checkpoint then finds it, before writing anything
            if cache:
                self.read_at[thread_id] = -math.inf
            raise
        if landed and folding is not None and not any(isinstance(r, BaseException) for r in results):
            new = folding[0]  # the fold or its parts landed: the manifest goes on with its parts sealed
            new.apply_entry(doc)
        return (new, stored) if landed else None

    async def _put_commit(
        self,
        new: Manifest,
        stored: bytes,
        *,
        hint: bool,
        beside: Sequence[Awaitable[None]] = (),
    ) -> tuple[bool, list[Any]]:
        """Create commit ``new.seq`` (put-if-absent of ``stored``), with the head hint (naming the newest
        fold landed before it: never one of ``beside``) put at the same time when ``hint``, and the best-effort
        writes ``beside`` (a fold or a part: their results, an exception for a failed one, are
        returned with whether the commit landed). A hint whose commit loses the race names an entry
        that is not the one at its ``seq``: readers check ``entry_sha256`` and ignore it (spec.md
        section 7); the next hint replaces it.

        A failure that may have come after the entry landed (a lost reply, retries used up) raises
        ``CommitOutcomeUnknown``; only a refusal (full, read-only, denied, no bucket) is definite."""
        others = [*beside, *([self._put_hint(new, stored)] if hint else [])]
        if not others:
            return await self._create_commit(new, stored), []
        pending = asyncio.ensure_future(asyncio.gather(*others, return_exceptions=True))
        try:
            landed = await self._create_commit(new, stored)
        finally:
            results = list(await pending)
            _reraise(results)
        return landed, results[: len(beside)]

    async def _create_commit(self, new: Manifest, stored: bytes) -> bool:
        try:
            return await self.store.put_if_absent(layout.log_key(new.thread_id, new.seq), stored)
        except _REFUSED:
            raise
        except OSError as exc:  # StorageError (typed by the store) or raw, from a wrapping store
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise CommitOutcomeUnknown(
                f"commit {new.seq} of thread {new.thread_id!r} may or may not have landed ({reason}): "
                "save the same checkpoint again to find out (a re-save, like a re-run of maintenance, is idempotent)"
            ) from exc

    def _put_hint(self, m: Manifest, stored: bytes) -> Awaitable[None]:
        """Put the head hint of commit ``m.seq``, naming the newest fold that has landed (or was read) as
        of this call: never a fold still being written beside it (spec.md section 7). Best effort: a hint
        that failed only costs readers a few more reads (they probe past it)."""
        return self._put_hint_naming(m, stored, self.folded_seq.get(m.thread_id))

    async def _put_hint_naming(self, m: Manifest, stored: bytes, names: int | None) -> None:
        with contextlib.suppress(Exception):  # not a crash or cancellation (BaseException)
            await self.store.put(layout.head_key(m.thread_id), m.hint(names, stored))
            self.hinted[m.thread_id] = m.seq
            if names == self.folded_seq.get(m.thread_id):  # it names the newest fold: none owed any more
                self.hint_stale.discard(m.thread_id)
                self._settle(m.thread_id)

    async def _publish(self, m: Manifest, entry: bytes, *, compacted: bool, hint: bool, fold_first: bool) -> None:
        """After commit ``m.seq`` (stored as ``entry``): rewrite the hint unless ``hint`` is False (it
        went with the commit, or ``hint_due`` said a plain delta need not write it); after a compaction
        also fold the manifest. ``fold_first`` (maintenance, ``compact``, the idle timer, ``idle_hints``):
        the fold, then the hint naming it, so no reader is sent to a fold not there yet and a gc run
        right after can collect the log before it. Otherwise (gc's purge) both at once, the hint naming
        the fold before (landed); the writer's next save names the new one (``hint_stale``)."""
        # The commit already landed: a failed hint, part or fold only costs readers a few more
        # reads (they probe past the hint and rebuild from the log), so none of it is an error.
        if not (hint or compacted):
            return
        if fold_first:
            results = await asyncio.gather(*([self._fold(m)] if compacted else []), return_exceptions=True)
            if hint:  # called now: it names the fold just put, if it landed
                results += await asyncio.gather(self._put_hint(m, entry), return_exceptions=True)
        else:
            both = [*([self._fold(m)] if compacted else []), *([self._put_hint(m, entry)] if hint else [])]
            results = await asyncio.gather(*both, return_exceptions=True)
        _reraise(list(results))

    def _prepare_fold(self, m: Manifest) -> tuple[list[tuple[str, bytes]], bytes, tuple[Any, ...]]:
        """Seal the parts and build the folded manifest, with ``m``'s parts as they were before (to put
        back if the write fails); ``StateTooLarge`` over a bound, ``m`` as it was."""
        before = (list(m.parts), list(m.part_ids), set(m.sealed), set(m.dirty))
        try:  # a part or a fold over its bound (limits) is refused: readers fold the log instead
            return seal_parts(m), m.folded(), before
        except StateTooLarge:
            m.parts, m.part_ids, m.sealed, m.dirty = before
            raise

    async def _fold(self, m: Manifest) -> None:
        """Seal parts, then write the folded manifest; on success readers may start from it."""
        await self._write_fold(m, *self._prepare_fold(m))

    async def _write_fold(
        self, m: Manifest, objects: list[tuple[str, bytes]], folded: bytes, before: tuple[Any, ...]
    ) -> None:
        """The parts a fold of ``m`` sealed, then the fold naming them: never a fold without its parts,
        and (a save's owed fold) never a part that no fold names past the save that sealed it."""
        await self._put_parts(m, objects, before)
        await self._put_fold(m, folded)

    async def _put_parts(self, m: Manifest, objects: list[tuple[str, bytes]], before: tuple[Any, ...]) -> None:
        """Put the parts a fold of ``m`` sealed; if one fails, ``m``'s parts as they were (``before``)."""
        written = await asyncio.gather(*(self.store.put(key, data) for key, data in objects), return_exceptions=True)
        failed = [r for r in written if isinstance(r, BaseException)]
        if failed:  # sealed parts first: the fold that names them must never exist without them
            m.parts, m.part_ids, m.sealed, m.dirty = before
            raise next((r for r in failed if not isinstance(r, Exception)), failed[0])

    async def _put_fold(self, m: Manifest, folded: bytes) -> None:
        """Put the folded manifest of ``m`` (its parts already written); readers may start from it."""
        await self.store.put(layout.manifest_key(m.thread_id, m.seq), folded)
        self._folded(m.thread_id, m.seq)


def _reraise(results: list[Any]) -> None:
    """A crash or cancellation among best-effort results is not swallowed (an ``Exception`` is)."""
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, Exception):
            raise result
