"""``ThreadLog.commit(thread_id, plan, policy)``: one named ``CommitPolicy`` per kind of commit (``SAVE``,
``COMPACT``, ``MAINTENANCE``, ``GC``) instead of separate retry, fold, cache and callback arguments, each
doing what its caller did before (a lost race retried as the preset says, gc's read leaving the cache
alone, a plan's ``landed`` run once, after its commit landed)."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

import ckpt_archive as ca
from ckpt_archive._sync import run_sync
from ckpt_archive.engine import COMPACT, GC, MAINTENANCE, SAVE, CommitPolicy, Fold, Plan, ThreadLog
from ckpt_archive.errors import CheckpointConflict
from ckpt_archive.format import actions as A
from ckpt_archive.format.manifest import Manifest
from ckpt_archive.ops.save import save


def test_commit_takes_a_plan_and_a_policy() -> None:
    assert list(inspect.signature(ThreadLog.commit).parameters) == ["self", "thread_id", "plan", "policy"]


def test_the_presets() -> None:
    """What each caller passed before, now named in one place."""
    assert (SAVE.attempts, SAVE.backoff, SAVE.fold, SAVE.cache) == (None, False, Fold.NEXT_COMMIT, True)
    assert (COMPACT.attempts, COMPACT.backoff, COMPACT.fold, COMPACT.cache) == (16, True, Fold.IF_COMPACTED, True)
    assert (MAINTENANCE.attempts, MAINTENANCE.backoff, MAINTENANCE.fold) == (16, True, Fold.FIRST)
    assert (GC.attempts, GC.backoff, GC.fold, GC.cache) == (16, True, Fold.WITH_HINT, False)
    assert GC.gave_up == MAINTENANCE.gave_up and "compacting" in COMPACT.gave_up
    assert all(p.first_read is None for p in (SAVE, COMPACT, MAINTENANCE, GC))
    with pytest.raises(dataclasses.FrozenInstanceError):
        SAVE.attempts = 3  # type: ignore[misc]

    async def head() -> Manifest:
        return Manifest("t")

    known = SAVE.known_head(head)
    assert known.first_read is head and dataclasses.replace(known, first_read=None) == SAVE
    assert SAVE.first_read is None  # the preset itself is unchanged


def racing(url: str, policy: CommitPolicy) -> tuple[list[int], BaseException | None, ca.ArchiveCheckpointer]:
    """Pin the thread's first checkpoint under ``policy`` while another writer commits before every
    attempt: (attempts made, what the commit raised, the archive)."""
    archive = ca.open_archive(url, create=True)
    first = ca.Checkpoint.new("t", {"n": 0})
    archive.save(first)
    other = ca.open_archive(url)
    attempts: list[int] = []

    async def plan(m: Manifest, attempt: int) -> Plan[bool]:
        attempts.append(attempt)
        head = m.head
        await save(other.engine, ca.Checkpoint.new("t", {"n": len(attempts)}, step=len(attempts), parent_id=head))
        return Plan([A.pin(first.checkpoint_id, {"ckpt_archive.pinned": True})], True)

    try:
        run_sync(archive.engine.log.commit("t", plan, policy))
    except CheckpointConflict as exc:
        return attempts, exc, archive
    return attempts, None, archive


@pytest.mark.parametrize(
    ("policy", "attempts", "message"),
    [
        (dataclasses.replace(COMPACT, attempts=2), [0, 1], "changed while compacting"),
        (dataclasses.replace(MAINTENANCE, attempts=3), [0, 1, 2], "kept changing during maintenance"),
        (dataclasses.replace(GC, attempts=2), [0, 1], "kept changing during maintenance"),
    ],
    ids=["compact", "maintenance", "gc"],
)
def test_a_lost_race_is_retried_as_the_policy_says(
    tmp_path: Any, policy: CommitPolicy, attempts: list[int], message: str
) -> None:
    made, raised, _ = racing(str(tmp_path / "a"), policy)
    assert made == attempts
    assert isinstance(raised, CheckpointConflict) and message in str(raised)


def test_gc_reads_afresh_and_leaves_the_cached_view(tmp_path: Any) -> None:
    archive = ca.open_archive(str(tmp_path / "a"), create=True)
    first = ca.Checkpoint.new("t", {"n": 0})
    archive.save(first)
    cached = archive.engine.log.manifests["t"]

    async def plan(m: Manifest, attempt: int) -> Plan[None]:
        assert m is not cached
        return Plan([A.pin(first.checkpoint_id, {"ckpt_archive.pinned": True})], None)

    run_sync(archive.engine.log.commit("t", plan, GC))
    assert archive.engine.log.manifests["t"] is cached  # a save after it still detects the pin as another's
    run_sync(archive.engine.log.commit("t", plan, MAINTENANCE))
    assert archive.engine.log.manifests["t"] is not cached


def test_landed_runs_once_after_its_commit_landed(tmp_path: Any) -> None:
    archive = ca.open_archive(str(tmp_path / "a"), create=True)
    first = ca.Checkpoint.new("t", {"n": 0})
    archive.save(first)
    other = ca.open_archive(str(tmp_path / "a"))
    seen: list[tuple[int, int]] = []

    async def plan(m: Manifest, attempt: int) -> Plan[str]:
        if attempt == 0:  # this attempt loses: its landed must not run
            await save(other.engine, ca.Checkpoint.new("t", {"n": 1}, step=1, parent_id=m.head))

        async def landed(new: Manifest) -> None:
            seen.append((attempt, new.seq))

        return Plan([A.pin(first.checkpoint_id, {"ckpt_archive.pinned": True})], "done", landed=landed)

    assert run_sync(archive.engine.log.commit("t", plan, MAINTENANCE)) == "done"
    assert seen == [(1, 3)]
