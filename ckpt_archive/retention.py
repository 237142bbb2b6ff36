"""Retention policies and the reports of pruning and garbage collection (pure logic, no I/O).

A policy looks at a thread's listing (``CheckpointInfo``, oldest first) and says
which checkpoints it keeps and why. Policies combine as "kept if any policy
keeps it" (``a | b`` or ``RetentionPolicy.any_of(a, b, c)``). Whatever the
policy, the newest checkpoint of a thread (the last one listed) is kept.

``evaluate(policy, infos)`` is the whole decision; the checkpointers only carry
it out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from .model import RESERVED_PREFIX, CheckpointInfo

PINNED_KEY = RESERVED_PREFIX + "pinned"
"""Reserved metadata key marking a pinned checkpoint (set by ``pin``/``unpin``)."""

Kept = dict[str, list[str]]
Rule = Callable[[Sequence[CheckpointInfo], datetime], Kept]
CustomFn = Callable[[CheckpointInfo], "bool | str"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _td(value: timedelta) -> str:
    seconds = value.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


@dataclass(frozen=True)
class RetentionPolicy:
    """Which checkpoints of a thread to keep. Build with the constructors, combine with ``|``."""

    rules: tuple[tuple[str, Rule], ...]

    # -- constructors ------------------------------------------------------------
    @classmethod
    def keep_last(cls, n: int) -> RetentionPolicy:
        """The ``n`` most recent checkpoints (``n`` below 1 is raised to 1)."""
        n = max(int(n), 1)
        name = f"keep_last({n})"

        def rule(infos: Sequence[CheckpointInfo], now: datetime) -> Kept:
            return {i.checkpoint_id: [name] for i in infos[-n:]}

        return cls(((name, rule),))

    @classmethod
    def max_age(cls, age: timedelta) -> RetentionPolicy:
        """Checkpoints created less than ``age`` ago."""
        if age < timedelta(0):
            raise ValueError("max_age must not be negative")
        name = f"max_age({_td(age)})"

        def rule(infos: Sequence[CheckpointInfo], now: datetime) -> Kept:
            return {i.checkpoint_id: [name] for i in infos if now - i.created_at <= age}

        return cls(((name, rule),))

    @classmethod
    def keep_every(cls, n_steps: int) -> RetentionPolicy:
        """Checkpoints whose step is a multiple of ``n_steps``."""
        if n_steps < 1:
            raise ValueError("keep_every needs n_steps >= 1")
        name = f"keep_every({n_steps})"

        def rule(infos: Sequence[CheckpointInfo], now: datetime) -> Kept:
            return {i.checkpoint_id: [name] for i in infos if i.step % n_steps == 0}

        return cls(((name, rule),))

    @classmethod
    def keep_interval(cls, period: timedelta) -> RetentionPolicy:
        """One checkpoint per ``period`` of wall-clock time (the newest of each period, UTC-aligned)."""
        if period <= timedelta(0):
            raise ValueError("keep_interval needs a positive period")
        name = f"keep_interval({_td(period)})"

        def rule(infos: Sequence[CheckpointInfo], now: datetime) -> Kept:
            newest: dict[int, str] = {}
            for i in infos:  # oldest first: the last one seen in a bucket is its newest
                newest[(i.created_at - _EPOCH) // period] = i.checkpoint_id
            return {cid: [name] for cid in newest.values()}

        return cls(((name, rule),))

    @classmethod
    def keep_pinned(cls) -> RetentionPolicy:
        """Checkpoints pinned with ``pin(checkpoint_id)`` (metadata ``ckpt_archive.pinned``)."""

        def rule(infos: Sequence[CheckpointInfo], now: datetime) -> Kept:
            return {i.checkpoint_id: ["pinned"] for i in infos if i.metadata.get(PINNED_KEY)}

        return cls((("keep_pinned()", rule),))

    @classmethod
    def custom(cls, fn: CustomFn, name: str | None = None) -> RetentionPolicy:
        """Keep where ``fn(info)`` is truthy; a string result is used as the reason."""
        label = name or f"custom({getattr(fn, '__name__', 'fn')})"

        def rule(infos: Sequence[CheckpointInfo], now: datetime) -> Kept:
            out: Kept = {}
            for i in infos:
                verdict = fn(i)
                if verdict:
                    out[i.checkpoint_id] = [verdict if isinstance(verdict, str) else label]
            return out

        return cls(((label, rule),))

    @classmethod
    def any_of(cls, *policies: RetentionPolicy) -> RetentionPolicy:
        """Kept if any of ``policies`` keeps it (no policy at all keeps only the newest)."""
        return cls(tuple(rule for p in policies for rule in p.rules))

    def __or__(self, other: RetentionPolicy) -> RetentionPolicy:
        if not isinstance(other, RetentionPolicy):
            return NotImplemented
        return RetentionPolicy.any_of(self, other)

    def __repr__(self) -> str:
        return " | ".join(name for name, _ in self.rules) or "RetentionPolicy()"


def evaluate(policy: RetentionPolicy, infos: Sequence[CheckpointInfo], now: datetime | None = None) -> Kept:
    """``{checkpoint_id: [reasons]}`` of the checkpoints ``policy`` keeps among ``infos`` (oldest first).

    The last entry (the thread's newest checkpoint) is always kept, reason ``"newest"``.
    """
    now = now or datetime.now(UTC)
    kept: Kept = {}
    for _, rule in policy.rules:
        for cid, reasons in rule(infos, now).items():
            kept.setdefault(cid, []).extend(reasons)
    if infos:
        kept.setdefault(infos[-1].checkpoint_id, []).insert(0, "newest")
    order = {i.checkpoint_id: n for n, i in enumerate(infos)}
    return {cid: kept[cid] for cid in sorted(kept, key=lambda c: order.get(c, -1)) if cid in order}


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` (``0 <= i < n``) as ``(i, n)``; a ``ValueError`` of one line otherwise."""
    head, sep, tail = text.strip().partition("/")
    if not sep or not head.isdigit() or not tail.isdigit():
        raise ValueError(f"shard must be i/n (e.g. 0/4), got {text!r}")
    i, n = int(head), int(tail)
    if not 0 <= i < n:
        raise ValueError(f"shard must be i/n with 0 <= i < n, got {text!r}")
    return i, n


def in_shard(thread_id: str, shard: tuple[int, int] | None) -> bool:
    """Stable, disjoint split of threads into ``n`` shards by a hash of the thread id."""
    if shard is None:
        return True
    i, n = shard
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"shard must be (i, n) with 0 <= i < n, got {shard!r}")
    digest = hashlib.sha256(thread_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % n == i


@dataclass
class PruneReport:
    """What a prune (or an explicit ``remove``) did, or would do with ``dry_run=True``.

    ``objects_freed``/``bytes_freed`` count the payload objects (snapshots,
    Parquet segments) that no kept checkpoint needs any more: they are
    tombstoned by the prune and physically deleted by ``gc`` after the grace
    period. ``rebased`` are kept deltas that got a full snapshot of their own
    (``bytes_written`` their size). Blobs count as objects with 0 bytes here
    (the manifest records no blob sizes); ``GcReport`` has the bytes actually
    deleted.
    """

    thread_id: str
    removed: list[str] = field(default_factory=list)
    kept: dict[str, list[str]] = field(default_factory=dict)
    rebased: list[str] = field(default_factory=list)
    objects_freed: int = 0
    bytes_freed: int = 0
    bytes_written: int = 0
    dry_run: bool = False

    def summary(self) -> str:
        verb = "would remove" if self.dry_run else "removed"
        return (
            f"{self.thread_id}: {verb} {len(self.removed)}, kept {len(self.kept)}, rebased "
            f"{len(self.rebased)}, {self.objects_freed} objects / {self.bytes_freed} bytes freed"
        )


@dataclass
class GcReport:
    """What ``gc`` deleted (and what it left for later because the grace period has not passed)."""

    deleted: list[str] = field(default_factory=list)
    bytes_freed: int = 0
    tombstones_purged: int = 0
    orphans: int = 0
    manifests: int = 0
    temp_files: int = 0
    blobs: int = 0
    """Archive-wide blobs deleted: referenced by no record of any thread (``_blobs/``)."""
    multipart_aborted: int = 0
    pending: int = 0
    threads: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def objects_deleted(self) -> int:
        return len(self.deleted)
