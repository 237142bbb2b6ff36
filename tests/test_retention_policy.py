"""RetentionPolicy as pure logic over listings: no storage involved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckpt_archive import CheckpointInfo, RetentionPolicy
from ckpt_archive.retention import PINNED_KEY, evaluate, in_shard

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def infos(
    n: int, *, every: timedelta = timedelta(minutes=10), pinned: frozenset[int] = frozenset()
) -> list[CheckpointInfo]:
    start = NOW - every * (n - 1)
    return [
        CheckpointInfo(
            thread_id="t",
            checkpoint_id=f"c{i:03d}",
            parent_id=f"c{i - 1:03d}" if i else None,
            step=i,
            kind="full",
            created_at=start + every * i,
            stored_bytes=10,
            metadata={PINNED_KEY: True} if i in pinned else {},
        )
        for i in range(n)
    ]


def kept_steps(policy: RetentionPolicy, items: list[CheckpointInfo]) -> list[int]:
    kept = evaluate(policy, items, NOW)
    return [i.step for i in items if i.checkpoint_id in kept]


def test_keep_last_raises_zero_to_one() -> None:
    items = infos(10)
    assert kept_steps(RetentionPolicy.keep_last(0), items) == [9]
    assert kept_steps(RetentionPolicy.keep_last(-5), items) == [9]
    assert kept_steps(RetentionPolicy.keep_last(3), items) == [7, 8, 9]
    assert kept_steps(RetentionPolicy.keep_last(50), items) == list(range(10))


def test_max_age_keep_every_interval_pinned() -> None:
    items = infos(10, pinned=frozenset({2}))
    assert kept_steps(RetentionPolicy.max_age(timedelta(minutes=25)), items) == [7, 8, 9]
    assert kept_steps(RetentionPolicy.keep_every(4), items) == [0, 4, 8, 9]
    # one per hour: 10-minute spacing ending at 12:00 -> buckets 10:xx and 11:xx and 12:00
    assert kept_steps(RetentionPolicy.keep_interval(timedelta(hours=1)), items) == [2, 8, 9]
    assert kept_steps(RetentionPolicy.keep_pinned(), items) == [2, 9]


def test_custom_and_reasons() -> None:
    items = infos(6)
    policy = RetentionPolicy.custom(lambda i: "odd step" if i.step % 2 else False) | RetentionPolicy.keep_last(2)
    kept = evaluate(policy, items, NOW)
    assert kept == {
        "c001": ["odd step"],
        "c003": ["odd step"],
        "c004": ["keep_last(2)"],
        "c005": ["newest", "odd step", "keep_last(2)"],
    }
    assert "keep_last(2)" in repr(policy)


def test_any_of_is_union_and_empty_keeps_newest() -> None:
    items = infos(12)
    a, b = RetentionPolicy.keep_every(5), RetentionPolicy.keep_last(2)
    assert kept_steps(RetentionPolicy.any_of(a, b), items) == kept_steps(a | b, items) == [0, 5, 10, 11]
    assert kept_steps(RetentionPolicy.any_of(), items) == [11]
    assert evaluate(RetentionPolicy.keep_last(1), [], NOW) == {}


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        RetentionPolicy.keep_every(0)
    with pytest.raises(ValueError):
        RetentionPolicy.keep_interval(timedelta(0))
    with pytest.raises(ValueError):
        RetentionPolicy.max_age(timedelta(seconds=-1))
    with pytest.raises(ValueError):
        in_shard("t", (3, 3))


@given(
    n=st.integers(1, 40),
    last=st.integers(0, 10),
    every=st.integers(1, 7),
    minutes=st.integers(1, 300),
)
def test_union_of_policies_is_union_of_kept_sets(n: int, last: int, every: int, minutes: int) -> None:
    items = infos(n, every=timedelta(minutes=7))
    parts = [
        RetentionPolicy.keep_last(last),
        RetentionPolicy.keep_every(every),
        RetentionPolicy.max_age(timedelta(minutes=minutes)),
        RetentionPolicy.keep_interval(timedelta(minutes=minutes)),
    ]
    union: set[str] = set()
    for p in parts:
        union |= set(evaluate(p, items, NOW))
    combined = evaluate(RetentionPolicy.any_of(*parts), items, NOW)
    assert set(combined) == union
    assert items[-1].checkpoint_id in combined
    assert all(reasons for reasons in combined.values())


def test_shards_are_disjoint_stable_and_cover() -> None:
    threads = [f"thread-{i}" for i in range(300)]
    shards = [[t for t in threads if in_shard(t, (i, 4))] for i in range(4)]
    assert sorted(t for s in shards for t in s) == sorted(threads)
    assert all(len(s) > 30 for s in shards)
    assert shards == [[t for t in threads if in_shard(t, (i, 4))] for i in range(4)]
    assert all(in_shard(t, None) for t in threads)
