"""The save path of ``ArchiveCheckpointer``: payloads, the put-if-absent commit, then the hint.

Save protocol (docs/FORMAT.md has the normative version):

1. payload objects are written first (a snapshot; at a snapshot, the thread's
   inline deltas compacted into one Parquet segment), together with the
   ``_ids/`` entry that makes ``load_by_id`` work without a thread id;
2. the commit entry ``_log/<seq+1>.json`` is created put-if-absent. Losing that
   race means another writer committed first: a save that appends to the head
   raises ``CheckpointConflict``; an explicit fork (``parent_id``) re-reads the
   log and retries at the next seq. Payloads of a lost save are never
   referenced, so readers cannot see them;
3. the head hint is rewritten at the same time as the commit is created (best effort; readers
   probe past it anyway, and check that the entry it names is the one committed), except after a
   plain delta at an even seq (``hint_due``): such a save costs two writes instead of three. After
   a compaction the manifest is folded once the commit has landed.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import math
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .. import codec, limits
from .._sync import run_async, run_sync
from ..chain import snapshot_due
from ..delta import diff_checkpoint
from ..errors import (
    AccessDenied,
    BucketNotFound,
    CheckpointConflict,
    CheckpointNotFound,
    CommitOutcomeUnknown,
    DuplicateCheckpointId,
    ReadOnlyStorage,
    StateTooLarge,
    StorageFull,
)
from ..model import Checkpoint
from . import crypto, layout
from .content import Content, paged_snapshot, state_key
from .manifest import Manifest, Record, hint_due, seal, unseal
from .objects import encode_segment, encode_snapshot
from .parts import seal_parts
from .root import manifest_ttl
from .state_reader import StateReader

T = TypeVar("T")

_REFUSED = (StorageFull, ReadOnlyStorage, AccessDenied, BucketNotFound)
"""Storage errors that mean the request was refused, so a commit that raises one did not land."""


@dataclass
class Plan(Generic[T]):
    """What a planner returns for one commit attempt: the commit's ``actions`` (none: nothing is
    committed and ``result`` is returned as it is, e.g. an idempotent re-save or a dry run), what to
    write before the commit (``objects`` put, server-side ``copies`` {from: to}, ``_ids`` entries of
    checkpoint ``ids`` of the thread), and the caller's ``result``. Payloads are data, not coroutines,
    so a plan that is not committed leaves nothing to close."""

    actions: list[dict[str, Any]]
    result: T
    objects: list[tuple[str, bytes]] = field(default_factory=list)
    copies: dict[str, str] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)


Planner = Callable[[Manifest, int], Awaitable[Plan[T]]]
"""Plans one attempt against the manifest as read (``attempt`` counts from 0)."""


@dataclass(frozen=True)
class Retry:
    """What a lost commit race does: re-read and re-plan at most ``attempts`` times (None: until the
    planner returns nothing or raises), after a jittered sleep with the lock released (``backoff``)
    or at once under the lock; once used up, ``CheckpointConflict(gave_up)``."""

    attempts: int | None
    backoff: bool
    gave_up: str = ""


SAVE = Retry(None, backoff=False)
"""A save retries at once; its planner raises ``CheckpointConflict`` when the head moved."""
ONCE = Retry(1, backoff=False, gave_up="thread {thread!r} changed while compacting; try again")
MAINTENANCE = Retry(16, backoff=True, gave_up="thread {thread!r} kept changing during maintenance; try again later")
"""Between attempts maintenance backs off (full jitter, 5 ms doubling up to 0.5 s), so a writer saving
in a tight loop cannot win every race for as long as the attempts last."""


class Fold(enum.Enum):
    """What a landed commit publishes besides itself."""

    IF_COMPACTED = "if-compacted"
    """Save and compaction: the hint when ``hint_due`` (beside the commit in a version 2 archive), and
    a fold of the manifest after a compaction."""
    FIRST = "first"
    """Maintenance: the fold, then the hint that names it, so the log before it is collectable at once."""
    WITH_HINT = "with-hint"
    """gc's own purge: fold and hint together (it would otherwise leave the fold it supersedes)."""


class ArchiveWriter(StateReader):
    """The write layer of ``ArchiveCheckpointer``: save, compaction and what a commit publishes."""

    async def _save(self, checkpoint: Checkpoint, *, detached: bool = False) -> str:
        """``detached`` (a restore, ``transfer.replay``): the checkpoint starts a chain of its own, as a
        full snapshot, and its ``parent_id`` is recorded as it is without being looked up (None, or a
        checkpoint that retention removed in the archive it came from: the lineage a prune leaves,
        FORMAT.md section 10). A plain save requires the parent to be in the thread."""
        # checked and privately copied once, whatever the number of commit attempts
        (state, raw_state), (messages, raw_messages) = (
            codec.json_copy_raw(checkpoint.state, "state", series=checkpoint.thread_id),
            codec.json_copy_raw(checkpoint.messages, "messages", series=checkpoint.thread_id),
        )
        content: Content = (state, messages)
        limits.check_state(len(raw_state) + len(raw_messages))
        checkpoint.check_protection()
        thread_id, cid = checkpoint.thread_id, checkpoint.checkpoint_id
        layout.thread_dir(thread_id)
        layout.id_key(cid)
        # every field of the record is checked here, before anything is written (no orphans)
        fields = self._record(checkpoint, self.content_digests(content, thread_id, (raw_state, raw_messages)))
        explicit = checkpoint.parent_id is not None or detached
        started = 0.0
        parent_id: str | None = None

        async def known_head() -> Manifest:
            # The writer's cached view is its "known head": no read before the commit, whose
            # put-if-absent detects anyone who committed since.
            nonlocal started
            seen = self._hint_heads.pop(thread_id, None)
            cached = self._manifests.get(thread_id)
            m = cached if cached is not None else await self._rooted(self._manifest(thread_id))
            await self._check_root(create=True)  # the first commit creates the archive, before any payload
            if not self._fresh(thread_id):  # too old to commit against (gc may have cut the log): re-read
                seen, m = m.head, await self._manifest(thread_id)
            started = time.monotonic()  # the manifest is at most manifest_ttl old, and no payload written
            if self._committed(m, checkpoint, fields):
                return m
            if not explicit and seen is not None and seen != m.head:  # last read via the hint: moved on since
                raise CheckpointConflict(
                    f"thread {thread_id!r} moved on (head {m.head!r}) since this writer last read it "
                    f"(head {seen!r}); reload and save again, or pass parent_id to fork"
                )
            if explicit and not detached and checkpoint.parent_id not in m.records:
                m = await self._manifest(thread_id)
            return m

        async def plan(m: Manifest, attempt: int) -> Plan[None]:
            nonlocal parent_id
            if self._committed(m, checkpoint, fields):  # by this save's own earlier attempt, or a twin
                return Plan([], None)
            if attempt and not explicit and m.head != parent_id:  # maintenance commits (prune, pin...) keep the head
                raise CheckpointConflict(
                    f"thread {thread_id!r} moved on (now at commit {m.seq}, head {m.head!r}) since this "
                    "writer last read it; reload and save again, or pass parent_id to fork"
                )
            parent_id = checkpoint.parent_id if explicit else m.head
            if not detached and parent_id is not None and parent_id not in m.records:
                raise CheckpointNotFound(f"parent {parent_id!r} is not a checkpoint of thread {thread_id!r}")
            actions, objects = await self._prepare(m, checkpoint, parent_id, content, fields, detached=detached)
            return Plan(actions, None, objects=objects, ids=[] if attempt else [cid])  # the _ids entry once

        async def landed(new: Manifest, done: Plan[None]) -> None:
            if time.monotonic() - started > manifest_ttl(self.gc_grace).total_seconds() / 2:
                await self._confirm(thread_id, cid, done.objects)
            self._remember(state_key(new.records[cid]), content)

        await self.commit(thread_id, plan, retry=SAVE, fold=Fold.IF_COMPACTED, first_read=known_head, landed=landed)
        return cid

    @staticmethod
    def _committed(m: Manifest, ckpt: Checkpoint, base: Record) -> bool:
        """Is ``ckpt`` committed in ``m`` already? A re-save (after ``CommitOutcomeUnknown``, say) of the
        same checkpoint -- its record has the same content digests, step, time, metadata and fields, and
        the same parent if one is named -- is; the same id with anything else is refused."""
        rec = m.records.get(ckpt.checkpoint_id)
        if rec is None:
            return False
        same = all(rec.get(k) == v for k, v in base.items())
        if same and (ckpt.parent_id is None or rec.get("parent") == ckpt.parent_id):
            return True
        raise DuplicateCheckpointId(
            f"checkpoint {ckpt.checkpoint_id!r} is already in thread {m.thread_id!r} with other content; "
            "give the new checkpoint a new id"
        )

    async def _confirm(self, thread_id: str, checkpoint_id: str, objects: list[tuple[str, bytes]]) -> None:
        """After a slow save (over half a ``manifest_ttl``): make sure its committed checkpoint is whole.

        gc keeps what a commit names only if the commit landed before gc read the manifest, or the
        payloads are younger than its grace (at least ``gc_floor``): a save this slow may have had its
        payloads collected as orphans, or committed into a log cut under its cached view. Re-read
        afresh; a checkpoint that is not there was never visible (``CheckpointConflict``); otherwise
        put its objects again (the same bytes under the same keys)."""
        m = await self._manifest(thread_id, cache=False)
        if checkpoint_id not in m.records:
            raise CheckpointConflict(
                f"checkpoint {checkpoint_id!r} of thread {thread_id!r} is not in the thread after a save that "
                "took longer than gc's grace period allows; reload and save again"
            )
        await asyncio.gather(
            *(self.store.put(key, data) for key, data in objects), self._write_index(thread_id, checkpoint_id)
        )

    async def commit(
        self,
        thread_id: str,
        plan: Planner[T],
        *,
        retry: Retry = MAINTENANCE,
        cache: bool = True,
        fold: Fold = Fold.FIRST,
        first_read: Callable[[], Awaitable[Manifest]] | None = None,
        landed: Callable[[Manifest, Plan[T]], Awaitable[None]] | None = None,
    ) -> T:
        """THE commit of a thread (save, compaction and every maintenance action): under the thread's
        lock, read the manifest (``first_read`` for the first attempt: a save's known head), ``plan``
        against it, build the commit entry (``StateTooLarge`` before anything is written), write the
        payloads, create the entry put-if-absent; once it landed, ``landed`` (a slow save's check),
        the caches and what ``fold`` publishes. A lost race re-reads and re-plans as ``retry`` says.

        ``cache=False`` (gc): the manifest is read afresh and this instance's view of the thread is
        left as it was, so its next save still detects the commits of other writers."""
        attempt = 0
        while True:
            async with self._lock(thread_id):
                while True:
                    if attempt == 0 and first_read is not None:
                        m = await first_read()
                    else:
                        m = await self._manifest(thread_id, cache=cache)
                    planned = await plan(m, attempt)
                    if not planned.actions:
                        return planned.result
                    routine = fold is Fold.IF_COMPACTED
                    hint = not routine or hint_due(m.seq + 1, planned.actions)
                    done = await self._attempt(m, planned, hint=hint and routine, cache=cache)
                    if done is not None:
                        new, stored, beside = done
                        if landed is not None:
                            await landed(new, planned)
                        if cache:
                            self._manifests[thread_id] = new
                            self._read_at[thread_id] = time.monotonic()
                        compacted = not routine or any(a["action"] == "compact" for a in planned.actions)
                        await self._publish(
                            new, stored, compacted=compacted, hint=hint and not beside, fold_first=fold is Fold.FIRST
                        )
                        return planned.result
                    attempt += 1
                    if retry.attempts is not None and attempt >= retry.attempts:
                        raise CheckpointConflict(retry.gave_up.format(thread=thread_id))
                    if retry.backoff:
                        break  # sleep with the lock released
            await asyncio.sleep(random.uniform(0, min(0.5, 0.005 * 2**attempt)))

    async def _attempt(
        self, m: Manifest, planned: Plan[Any], *, hint: bool, cache: bool
    ) -> tuple[Manifest, bytes, bool] | None:
        """One attempt: (new manifest, stored entry, hint put beside it) once it landed, None if it lost.

        ``hint``: a due hint may go out with the commit; in an archive with a version 2 marker it does
        (one round trip, not two), else ``_publish`` puts it once the commit has landed."""
        thread_id = m.thread_id
        entry = m.commit_entry(planned.actions)  # refused (StateTooLarge) before any payload is written
        await asyncio.gather(
            *(self.store.put(key, data) for key, data in planned.objects),
            *(self.store.copy(src, dst) for src, dst in planned.copies.items()),
            *(self._write_index(thread_id, cid) for cid in planned.ids),
        )
        stored = await self._stored_commit(entry)
        new = m.copy()
        new.apply_entry(unseal(entry, "own commit", kind="commit entry"))
        beside = hint and self._hint_with_commit
        try:
            landed = await self._put_commit(new, stored, hint=beside)
        except CommitOutcomeUnknown:
            # the next save re-reads the log first (as after a long pause, keeping the known head): a
            # re-save of this checkpoint then finds it, before writing anything
            if cache:
                self._read_at[thread_id] = -math.inf
            raise
        return (new, stored, beside) if landed else None

    async def _put_commit(self, new: Manifest, stored: bytes, *, hint: bool) -> bool:
        """Create commit ``new.seq`` (put-if-absent of ``stored``), with the head hint put at the same
        time when ``hint``. A hint whose commit loses the race names an entry that is not the one at
        its ``seq``: readers check ``entry_sha256`` and ignore it (FORMAT.md section 7); the next hint
        replaces it.

        A failure that may have come after the entry landed (a lost reply, retries used up) raises
        ``CommitOutcomeUnknown``; only a refusal (full, read-only, denied, no bucket) is definite."""
        commit = self._create_commit(new, stored)
        if not hint:
            return await commit
        put_hint = asyncio.ensure_future(self._put_hint(new, stored))
        try:
            return await commit
        finally:
            await put_hint

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

    async def _put_hint(self, m: Manifest, stored: bytes) -> None:
        """Best effort: a hint that failed only costs readers a few more reads (they probe past it)."""
        with contextlib.suppress(Exception):  # not a crash or cancellation (BaseException)
            await self.store.put(layout.head_key(m.thread_id), m.hint(self._folded_seq.get(m.thread_id), stored))

    @staticmethod
    def _record(ckpt: Checkpoint, digests: dict[str, Any]) -> Record:
        """The fields of ``ckpt``'s record that do not depend on where it is committed (``digests``: its
        ``content_digests``); refused (``InvalidState``) unless every one can be sealed."""
        record: Record = {
            "id": ckpt.checkpoint_id,
            "step": ckpt.step,
            "created_at": ckpt.created_at.isoformat(),
            "metadata": ckpt.metadata,
            "fields": {
                "pending_nodes": ckpt.pending_nodes,
                "cleared_interrupt": ckpt.cleared_interrupt,
                "attempts": ckpt.attempts,
                "child_ledger": ckpt.child_ledger,
            },
            "version": 1,
            **digests,
        }
        for name in ("run_id", "node_id"):  # written only when set: legacy records stay unchanged
            if getattr(ckpt, name) is not None:
                record["fields"][name] = getattr(ckpt, name)
        if ckpt.protection is not None:
            record["fields"]["protection"] = ckpt.protection.model_dump()
        codec.check_json(record, "checkpoint")  # e.g. a step beyond 64 bits, set by model_copy(update=...)
        return record

    async def _prepare(
        self,
        m: Manifest,
        ckpt: Checkpoint,
        parent_id: str | None,
        content: Content,
        fields: Record,
        *,
        detached: bool = False,
    ) -> tuple[list[dict[str, Any]], list[tuple[str, bytes]]]:
        """Actions of the commit and payload objects (key, bytes) to write before it (``fields``: the
        checked ``_record`` of ``ckpt``). ``parent_id`` is recorded; unless ``detached`` it is also the
        base a delta is taken against."""
        state, messages = content
        base = None if detached else parent_id
        parent = m.records.get(base) if base else None
        depth = None if parent is None else int(parent["depth"])
        record: Record = {**fields, "fields": dict(fields["fields"]), "parent": parent_id}
        enc = self.encryption
        objects: list[tuple[str, bytes]] = []
        actions: list[dict[str, Any]] = []
        ops = None
        # a delta stays inline in commit entries, hints and folds: a thread holds at most
        # MAX_INLINE_DELTAS of them, of at most INLINE_OPS_BYTES each (limits), or it is a snapshot
        full = base is None or snapshot_due(ckpt.step, depth, self.full_snapshot_interval)
        if not full and len(m.inline) < limits.MAX_INLINE_DELTAS:
            assert base is not None
            ops = diff_checkpoint(*await self._content_of(m, base), state, messages)
            if enc is not None:
                ops = crypto.seal_ops(enc, self._archive_id, m.thread_id, ckpt.checkpoint_id, ops)
            stored_ops = len(codec.dumps(ops))
            if stored_ops > limits.INLINE_OPS_BYTES:
                ops = None
        if ops is None:
            key = layout.snapshot_key(m.thread_id, ckpt.step, ckpt.checkpoint_id)
            new_pages: list[tuple[str, bytes]] = []
            page_refs: list[dict[str, Any]] = []
            if enc is not None:  # no shared pages (of state or messages): their names would be digests of plaintext
                data = self.seal_snapshot(m.thread_id, ckpt.checkpoint_id, (state, messages))
            else:
                known = self._known_pages(m, base)
                data, new_pages, page_refs = paged_snapshot(m.thread_id, ckpt.checkpoint_id, (state, messages), known)
            objects.append((key, data))
            objects.extend(new_pages)
            ref = {"type": "snapshot", "key": key, "sha256": codec.sha256(data), "size": len(data)}
            if page_refs:
                ref["pages"] = page_refs
            record.update(kind="full", depth=0, ref=ref, bytes=len(data) + sum(len(d) for _, d in new_pages))
            compact = self._compact_action(m)
            if compact is not None:
                action, segment_key, segment = compact
                objects.append((segment_key, segment))
                actions.append(action)
            actions.insert(0, {"action": "add", "record": record})
        else:
            assert depth is not None
            record.update(kind="delta", depth=depth + 1)
            if ops:
                record.update(ref={"type": "inline"}, bytes=stored_ops)
                actions.append({"action": "add", "record": record, "ops": ops})
            else:
                record.update(ref={"type": "empty"}, bytes=0)
                actions.append({"action": "add", "record": record})
        return actions, objects

    def content_digests(
        self, content: Content, thread_id: str, raws: tuple[bytes, bytes] | None = None
    ) -> dict[str, Any]:
        """Record fields proving a content: ``state_sha256`` + ``messages_sha256``, or with encryption
        ``enc`` + keyed ``state_mac`` + ``messages_mac`` (a plain digest would let anyone confirm a guess).
        ``raws``: the canonical bytes of state and messages, when the caller has them already."""
        raw_state, raw_messages = raws or (codec.dumps(content[0]), codec.dumps(content[1]))
        enc = self.encryption
        if enc is None:
            return {
                "state_sha256": self._sha256(thread_id, "state", raw_state),
                "messages_sha256": self._sha256(thread_id, "messages", raw_messages),
            }
        return {
            "enc": {"alg": crypto.ALG, "key_id": enc.active_key_id},
            "state_mac": enc.mac(enc.active_key_id, raw_state),
            "messages_mac": enc.mac(enc.active_key_id, raw_messages),
        }

    def seal_snapshot(self, thread_id: str, checkpoint_id: str, content: Content) -> bytes:
        """An encrypted, unpaged snapshot object of state *and* messages; needs ``encryption``."""
        assert self.encryption is not None
        state, messages = content
        data = encode_snapshot(thread_id, checkpoint_id, state, messages=messages)
        return self.encryption.seal(data, crypto.aad(self._archive_id, thread_id, checkpoint_id, "snapshot"))

    @staticmethod
    def _known_pages(m: Manifest, parent_id: str | None) -> dict[str, dict[str, Any]]:
        """Pages already stored that the new snapshot may reuse: those of the parent chain's snapshot."""
        if parent_id is None:
            return {}
        base = m.chain(parent_id)[0]["ref"]
        return {p["digest"]: p for p in base.get("pages", [])}

    def _compact_action(self, m: Manifest) -> tuple[dict[str, Any], str, bytes] | None:
        """Move every inline delta of the thread into one Parquet segment (``encode_segment``)."""
        if not m.inline:
            return None
        entries = [(cid, m.records[cid]["step"], m.inline[cid]) for cid in m.records if cid in m.inline]
        data, groups = encode_segment(m.thread_id, entries)
        key = layout.segment_key(m.thread_id, entries[0][1], uuid.uuid4().hex[:16])
        action = {
            "action": "compact",
            "key": key,
            "sha256": codec.sha256(data),
            "size": len(data),
            "row_groups": {cid: {"row_group": g, "bytes": size} for cid, (g, size) in groups.items()},
            "empty": [cid for cid, _, ops in entries if not ops],
        }
        return action, key, data

    async def _write_index(self, thread_id: str, checkpoint_id: str) -> None:
        key = layout.id_key(checkpoint_id)
        doc = seal({"type": "id", "thread_id": thread_id, "checkpoint_id": checkpoint_id})
        if await self.store.put_if_absent(key, doc):
            return
        existing = unseal(await self.store.get(key), f"id entry of {checkpoint_id!r}", key=key, kind="id entry")
        owner = existing.get("thread_id")
        if isinstance(owner, str) and owner != thread_id:
            other = await self._manifest(owner)
            if checkpoint_id in other.records:
                raise DuplicateCheckpointId(f"checkpoint {checkpoint_id!r} is already in thread {owner!r}")
            await self.store.put(key, doc)  # left over from a save that never committed

    async def _publish(
        self, m: Manifest, entry: bytes, *, compacted: bool, hint: bool = True, fold_first: bool = False
    ) -> None:
        """After commit ``m.seq`` (stored as ``entry``): rewrite the hint unless ``hint`` is False (it
        went with the commit, or ``hint_due`` says the next commit's will cover it); after a compaction
        also fold the manifest. ``fold_first`` (maintenance, where latency does not matter): the hint
        then names the new fold, so a gc run right after can collect the log before it."""
        # The commit already landed: a failed hint, part or fold only costs readers a few more
        # reads (they probe past the hint and rebuild from the log), so none of it is an error.
        if not (hint or compacted):
            return
        results: list[Any] = []
        if compacted and fold_first:
            results += await asyncio.gather(self._fold(m), return_exceptions=True)
        tasks: list[Any] = []
        if hint:  # built now: it names the newest fold written so far
            tasks.append(self._put_hint(m, entry))
        if compacted and not fold_first:
            tasks.append(self._fold(m))
        results += await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result  # a crash/cancellation is not swallowed

    async def _fold(self, m: Manifest) -> None:
        """Seal parts, then write the folded manifest; on success readers may start from it."""
        before = (list(m.parts), list(m.part_ids), set(m.sealed), set(m.dirty))
        try:  # a part or a fold over its bound (limits) is refused: readers fold the log instead
            objects, folded = seal_parts(m), m.folded()
        except StateTooLarge:
            m.parts, m.part_ids, m.sealed, m.dirty = before
            raise
        written = await asyncio.gather(*(self.store.put(key, data) for key, data in objects), return_exceptions=True)
        failed = [r for r in written if isinstance(r, BaseException)]
        if failed:  # sealed parts first: the fold that names them must never exist without them
            m.parts, m.part_ids, m.sealed, m.dirty = before
            raise next((r for r in failed if not isinstance(r, Exception)), failed[0])
        await self.store.put(layout.manifest_key(m.thread_id, m.seq), folded)
        self._folded_seq[m.thread_id] = m.seq

    # -- maintenance -------------------------------------------------------------
    async def _compact(self, thread_id: str) -> bool:
        """Close the open segment now (end of a run): inline deltas to Parquet, fold the manifest."""

        async def plan(m: Manifest, attempt: int) -> Plan[bool]:
            compact = self._compact_action(m)
            if compact is None:
                return Plan([], False)
            action, key, data = compact
            return Plan([action], True, objects=[(key, data)])

        return await self.commit(thread_id, plan, retry=ONCE, fold=Fold.IF_COMPACTED)

    def compact(self, thread_id: str) -> bool:
        return run_sync(self._compact(thread_id))

    async def acompact(self, thread_id: str) -> bool:
        return await run_async(self._compact(thread_id))
