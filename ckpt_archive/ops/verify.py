"""Proving what an archive holds: ``verify`` (whole archive, every problem), one checkpoint, restores.

* ``verify_archive`` reads every commit entry, folded manifest, hint and payload object
  of the threads it checks, rebuilds every checkpoint's content (state
  and messages) and compares it with the ``state_sha256``/``messages_sha256`` (or, encrypted,
  ``state_mac``/``messages_mac``) recorded at save. It collects *every* problem
  into a ``VerifyReport`` instead of stopping at the first; among them a commit entry younger than
  a folded manifest above it (``LostCommit``: put where gc had cut the log, seen by no reader).
* Contents are rebuilt by the one chain replay (``chains.ChainReader``) in its
  ``REPORT`` mode, from freshly read objects (no cache); the integrity API
  (``validate``, ``restore``) uses its ``STRICT`` and ``LENIENT`` modes for one checkpoint.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .. import codec
from ..delta import apply_checkpoint
from ..engine import Engine, Mode
from ..engine.chains import ChainReader
from ..engine.folds import read_folded
from ..errors import (
    BrokenChain,
    CheckpointError,
    CorruptManifest,
    MissingCommit,
    MissingObject,
    MissingRows,
    ObjectTooLarge,
    StaleRows,
    UnsupportedFormatVersion,
)
from ..format import layout
from ..format.content import Content
from ..format.manifest import Manifest, Record, history_ref, unseal
from ..format.schema import check_hint
from . import history
from .reads import locate, thread_folders


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing ``verify`` could not prove; ``kind`` is the name of the typed error it amounts to."""

    kind: str
    message: str
    thread_id: str | None = None
    checkpoint_id: str | None = None
    key: str | None = None

    @classmethod
    def of(cls, exc: CheckpointError, thread_id: str | None = None) -> Problem:
        return cls(
            kind=type(exc).__name__,
            message=str(exc),
            thread_id=getattr(exc, "thread_id", None) or thread_id,
            checkpoint_id=getattr(exc, "checkpoint_id", None),
            key=getattr(exc, "key", None),
        )


@dataclass
class VerifyReport:
    """What ``ArchiveCheckpointer.verify`` checked and every problem it found (``ok`` when none)."""

    threads: int = 0
    checkpoints: int = 0
    objects: int = 0
    problems: list[Problem] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)  # unreferenced leftovers of lost saves: not an error

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        head = (
            f"{self.threads} threads, {self.checkpoints} checkpoints, {self.objects} objects checked: "
            f"{len(self.problems)} problems, {len(self.orphans)} orphan objects"
        )
        return "\n".join([head, *(f"  {p.kind}: {p.message}" for p in self.problems)])


@dataclass(frozen=True, slots=True)
class RestoredState:
    """Result of the lenient ``restore_state``: the state (and messages) and what could not be proven."""

    thread_id: str
    checkpoint_id: str
    state: dict[str, Any]
    unproven: tuple[str, ...] = ()
    messages: list[Any] = field(default_factory=list)

    @property
    def proven(self) -> bool:
        return not self.unproven


# -- one checkpoint ---------------------------------------------------------------
async def replayed(engine: Engine, checkpoint_id: str, mode: Mode) -> RestoredState:
    """The checkpoint rebuilt from freshly read objects (the state cache neither serves nor keeps it)."""
    m, thread_id = await locate(engine, checkpoint_id)
    reader = engine.contents.reader(thread_id, m=m, mode=mode, cache=False)
    state, messages = await reader.content(m.chain(checkpoint_id), m.inline)
    return RestoredState(thread_id, checkpoint_id, state, tuple(reader.notes), messages)


async def validate(engine: Engine, checkpoint_id: str) -> dict[str, Any]:
    """The state of a checkpoint proven strictly (``validate_integrity``, ``try_restore_state``)."""
    return (await replayed(engine, checkpoint_id, Mode.STRICT)).state


async def restore(engine: Engine, checkpoint_id: str) -> RestoredState:
    """The state of a checkpoint, leniently (``restore_state``)."""
    return await replayed(engine, checkpoint_id, Mode.LENIENT)


# -- the whole archive ------------------------------------------------------------
async def verify_archive(engine: Engine, thread_id: str | None = None) -> VerifyReport:
    report = VerifyReport()
    try:
        await engine.root.check()
    except CheckpointError as exc:
        report.problems.append(Problem.of(exc))
        return report
    if thread_id is not None:
        layout.thread_dir(thread_id)
        threads = [thread_id]
    else:
        try:
            threads, unnamed = await thread_folders(engine)
        except CheckpointError as exc:
            report.problems.append(Problem.of(exc))
            return report
        for folder in sorted(unnamed):  # not even its id can be read: nothing else can be checked
            report.threads += 1
            report.problems.append(Problem.of(unnamed[folder]))
        threads.sort()
    for thread in threads:
        report.threads += 1
        await _verify_thread(engine, thread, report)
    return report


async def _verify_thread(engine: Engine, thread_id: str, report: VerifyReport) -> None:
    tdir = layout.thread_dir(thread_id)
    found = await engine.store.find(tdir)
    m = await _fold_log(engine, thread_id, found, report)
    log_dir = layout.log_dir(thread_id) + "/"
    log = {k: v for k, v in found.items() if k.startswith(log_dir)}
    lost = await engine.log.lost_commits(thread_id, log, () if m is None else m.records)
    report.problems += [Problem.of(exc, thread_id) for exc in lost]
    if m is None:
        return
    try:  # an oversized hint is refused by the store itself, before it is read
        hint = await engine.store.get_or_none(layout.head_key(thread_id))
        if hint is not None:
            doc = unseal(hint, "head hint", thread_id=thread_id, key=layout.head_key(thread_id), kind="head hint")
            await _check_hint(engine, doc, m)
    except (CorruptManifest, UnsupportedFormatVersion, MissingCommit, ObjectTooLarge) as exc:
        report.problems.append(Problem.of(exc, thread_id))
    referenced = set(m.referenced_keys())
    report.objects += len(referenced)
    awaiting_gc = set(m.tombstones)  # unreferenced on purpose: gc deletes them after the grace period
    report.orphans += sorted(
        k
        for k in found
        if k not in referenced
        and k not in awaiting_gc
        and f"/{layout.LOG}/" not in k
        and f"/{layout.PARTS}/" not in k
        and k != layout.head_key(thread_id)
    )
    await _verify_states(engine, m, report)


async def _check_hint(engine: Engine, doc: dict[str, Any], m: Manifest) -> None:
    """A hint may trail the log (a writer's ``hint_every``, or two writers), never lead it: a hint naming a commit
    past the newest one is the only trace a crashed save or a deleted newest commit leaves (unless
    that commit landed while this verify ran: it is looked for once more)."""
    check_hint(doc, m.thread_id)
    seq = int(doc["seq"])
    if seq > m.seq and await engine.store.get_or_none(layout.log_key(m.thread_id, seq)) is None:
        chain = doc.get("chain") or [{}]
        raise MissingCommit(
            f"head hint names commit {seq}, but the log ends at {m.seq}: either a save crashed after "
            "putting its hint (nothing committed is lost) or commit entries were deleted (the thread now "
            "reads as of the older commit; restore them from a backup if so)",
            thread_id=m.thread_id,
            checkpoint_id=chain[-1].get("id"),
            key=layout.log_key(m.thread_id, seq),
        )


async def _fold_log(engine: Engine, thread_id: str, found: dict[str, Any], report: VerifyReport) -> Manifest | None:
    """Fold every commit entry; check each folded manifest against the fold of the commits."""
    log_dir = layout.log_dir(thread_id) + "/"
    names = [k[len(log_dir) :] for k in found if k.startswith(log_dir)]
    commits, folded = layout.log_seqs(names)
    if not commits and not folded:
        return Manifest(thread_id)
    last = max(commits + folded)
    # only the entries listed are read (gc deletes those below a folded manifest, commit 1 aside: a
    # long thread must not cost a GET per seq it ever had); of a run of absent seqs, the first one
    # is where the fold below loses its manifest or reports the gap, the others change nothing
    present = set(commits)
    seqs = sorted(present | {s + 1 for s in [0, *commits] if s + 1 <= last and s + 1 not in present})
    entry_keys = [layout.log_key(thread_id, s) for s in commits]
    fold_keys = [layout.manifest_key(thread_id, s) for s in folded]
    datas = await engine.store.get_each(entry_keys + fold_keys)  # one refused unread is reported below
    entries = dict(zip(commits, datas[: len(entry_keys)], strict=True))
    folds = dict(zip(folded, datas[len(entry_keys) :], strict=True))
    good_folds: dict[int, Manifest] = {}
    for s, data in folds.items():
        key = layout.manifest_key(thread_id, s)
        try:
            if data is None:
                raise MissingObject("folded manifest vanished while verifying", thread_id=thread_id, key=key)
            if isinstance(data, CheckpointError):
                raise data
            good_folds[s] = await read_folded(engine.store, thread_id, data, f"manifest {s}", key=key, seq=s)
        except CheckpointError as exc:
            report.problems.append(Problem.of(exc, thread_id))
    m: Manifest | None = Manifest(thread_id)
    for s in seqs:
        key, data = layout.log_key(thread_id, s), entries.get(s)
        if m is not None and s - 1 in good_folds and _records(good_folds[s - 1]) != _records(m):
            report.problems.append(
                Problem(
                    "CorruptManifest",
                    "folded manifest differs from the fold of its commits",
                    thread_id,
                    key=key,
                )
            )
        if data is None:
            # below a good folded manifest, maintenance may have removed commits (never commit 1, by which
            # a reader with no usable hint tells the thread exists); above it they are needed
            if s == 1:
                report.problems.append(Problem("MissingObject", _NO_COMMIT_1, thread_id, key=key))
            elif m is not None and not any(f >= s for f in good_folds):
                report.problems.append(Problem("MissingObject", "commit entry is missing", thread_id, key=key))
            m = None
            continue
        try:
            if isinstance(data, CheckpointError):
                raise data
            doc = unseal(data, f"commit {s}", thread_id=thread_id, key=key, kind="commit entry")
            if m is None:
                base = max((f for f in good_folds if f < s), default=None)
                if base is None or base != s - 1:
                    continue
                m = good_folds[base].copy()
            m.apply_entry(doc)
        except CheckpointError as exc:
            report.problems.append(Problem.of(exc, thread_id))
            m = None
    if m is None and last in good_folds:
        m = good_folds[last].copy()
    if m is None:
        report.problems.append(
            Problem("CorruptManifest", "the thread's manifest cannot be rebuilt from its log", thread_id)
        )
    return m


_NO_COMMIT_1 = (
    "commit 1 is missing (gc never deletes it): a reader without a usable head hint takes the thread for a "
    "new one, and a save there starts a new history over it; restore the commit from a backup, or delete "
    "the thread again if deleting it was interrupted"
)


def _records(m: Manifest) -> Any:
    return codec.dumps([m.head, dict(m.records)])


async def _verify_states(engine: Engine, m: Manifest, report: VerifyReport) -> None:
    """Rebuild every checkpoint, parent before child, from objects read once (one batch) and checked
    once: a damaged object is reported once (as what it is), and every checkpoint that needs it,
    directly or through its chain, as a ``BrokenChain``."""
    reader = engine.contents.reader(m.thread_id, m=m, mode=Mode.REPORT, cache=False, walk=True)
    await reader.fetch(reader.needed(_chains(m)))
    async for rec, content in reader.each(m):
        report.checkpoints += 1
        if content is not None and rec["kind"] == "full":  # a delta's rows are its ops: the replay proved them
            try:
                await _check_rows(reader, m, rec, content)
            except CheckpointError as exc:  # in order with the others: a damaged object is reported once
                reader.problems.append(exc)
    report.problems += [Problem.of(exc, m.thread_id) for exc in reader.problems]
    report.problems += [Problem.of(exc, m.thread_id) for exc in await _stale_rows(reader, m)]


async def _check_rows(reader: ChainReader, m: Manifest, rec: Record, content: Content) -> None:
    """A full record's history rows (``rows``) turn its base (its parent's content when the parent is a
    record of the thread, else the empty content) into its content: ``MissingRows`` otherwise (also
    when it has none). Their segment is read and checked as a load checks one."""
    where = {"thread_id": m.thread_id, "checkpoint_id": rec["id"]}
    if history_ref(rec) is None:
        raise MissingRows(
            "full record has no history rows (rows): a reader of the Parquet files alone misses this "
            "checkpoint (loads are unaffected); copy the thread to write them",
            **where,
        )
    base_id = history.base_of(m, rec)
    base = history.EMPTY if base_id is None else await reader.content(m.chain(base_id), m.inline)
    rebuilt = apply_checkpoint(*base, await reader.history(rec, m.inline))
    if codec.dumps(rebuilt) != codec.dumps(content):
        raise MissingRows(
            "full record's history rows do not turn its base into its content: a reader of the Parquet "
            "files alone misreads this checkpoint (loads are unaffected); copy the thread to write them again",
            key=(history_ref(rec) or {}).get("key"),
            **where,
        )


async def _stale_rows(reader: ChainReader, m: Manifest) -> list[CheckpointError]:
    """Rows of the segments the records reference that belong to no record's history, or name another
    base than the record's (``StaleRows``): a reader of the files alone would count them, or walk a
    wrong lineage. Each segment is read and checked once."""
    out: list[CheckpointError] = []
    for key, recs in history.holders(m).items():
        expected = {(int((history_ref(rec) or {})["row_group"]), rec["id"]) for rec in recs}
        try:
            segment = await reader.history_segment(recs[0])
            assert segment is not None
            found = [(g, cid) for g in range(segment.row_groups) for cid in segment.checkpoint_ids(g)]
            bases = {g: segment.bases(g) for g in {g for g, _ in found}}
        except CheckpointError as exc:  # reported by the checkpoints that need it too
            if not any(getattr(p, "key", None) == key for p in reader.problems):
                out.append(exc)
            continue
        for group, cid in found:
            if (group, cid) in expected and bases[group][cid] != history.base_of(m, m.records[cid]):
                out.append(
                    StaleRows(
                        f"row group {group} says the rows of checkpoint {cid!r} are against "
                        f"{bases[group][cid]!r}, not its base {history.base_of(m, m.records[cid])!r}: a reader "
                        "walking the segments misreads its lineage; copy the thread to write them again",
                        thread_id=m.thread_id,
                        checkpoint_id=cid,
                        key=key,
                    )
                )
            if (group, cid) not in expected:
                what = "no record" if cid not in m.records else "a record whose history rows are elsewhere"
                out.append(
                    StaleRows(
                        f"row group {group} holds rows of checkpoint {cid!r}, {what}: a reader of the Parquet "
                        "files alone counts them; prune the thread again or copy it",
                        thread_id=m.thread_id,
                        checkpoint_id=cid,
                        key=key,
                    )
                )
    return out


def _chains(m: Manifest) -> Iterator[list[Record]]:
    """The chain of every checkpoint that has one (``each`` reports those that do not)."""
    for cid in m.records:
        with contextlib.suppress(BrokenChain):
            yield m.chain(cid)
