"""Tiered segments (spec.md section 6): a compaction merges every 8 consecutive segments of one tier into
one of the next -- a save's when its writer holds the segments it absorbs (it wrote or read them: it
reads nothing), maintenance's (``compact``) otherwise -- so a long thread keeps a few segments per tier,
and every checkpoint still loads, verifies, copies, prunes and survives gc; a save never reads a
segment, so its requests stay bounded."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import duckdb
import fsspec
import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

import ckpt_archive as ca
from ckpt_archive.analysis import delta_glob
from ckpt_archive.ops.history import tiers
from ckpt_archive.retention import RetentionPolicy

NONE = timedelta(0)


def _grow(archive: ca.ArchiveCheckpointer, thread: str, steps: int) -> list[ca.Checkpoint]:
    """W1: a message appended per step (the snapshot interval is the archive's)."""
    saved: list[ca.Checkpoint] = []
    state: dict[str, Any] = {"messages": []}
    parent = None
    for step in range(steps):
        state = {"messages": [*state["messages"], {"role": "user", "content": f"mk {thread} {step} " + "w" * 40}]}
        ckpt = ca.Checkpoint.new(thread, state, step=step, parent_id=parent)
        archive.save(ckpt)
        saved.append(ckpt)
        parent = ckpt.checkpoint_id
    return saved


def _no_held_segments(monkeypatch: Any) -> None:
    """Writers keep no parsed segment, so no save merges (a writer that restarted): ``compact`` does."""
    from ckpt_archive.engine import contents

    monkeypatch.setattr(contents, "SEGMENT_BYTES", 0)


def _live(archive: ca.ArchiveCheckpointer, thread: str) -> list[tuple[str, int, int, int]]:
    return tiers(archive.engine.log.manifests[thread])


def _messages(url: str) -> list[str]:
    return [
        r[0]
        for r in duckdb.sql(
            "SELECT unnest(json_extract(CAST(value AS JSON), '$[*]'))::VARCHAR FROM read_parquet("
            f"'{delta_glob(url)}', hive_partitioning = false) WHERE op = 'append' ORDER BY step, op_index"
        ).fetchall()
    ]


def test_a_long_thread_keeps_a_few_segments_per_level(tmp_path: Any) -> None:
    """1,000 steps at interval 10 by one writer: its saves merge the segments it wrote (8 of a tier into
    one of the next, reading nothing: ``save_compaction``), so at most 7 are live per level (not 99). A
    second writer holds none of them: its saves write tier-0 segments, and its ``compact`` merges them.
    Every checkpoint loads from a fresh reader and verify passes; after gc the merged-away segments are
    gone from storage too, and the Parquet files hold each message once."""
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=10)
    saved = _grow(archive, "t", 1000)
    levels = Counter(level for _, level, _, _ in _live(archive, "t"))
    assert max(levels.values()) <= 7 and sum(levels.values()) <= 16 and max(levels) >= 2, levels
    archive.close()
    other = ca.open_archive(url, full_snapshot_interval=10)
    other.load("t")
    saved += _grow_from(other, saved[-1], 100)
    assert Counter(level for _, level, _, _ in _live(other, "t"))[0] > 7  # it held none to merge
    assert other.compact("t")
    live = _live(other, "t")
    levels = Counter(level for _, level, _, _ in live)
    assert max(levels.values()) <= 7 and len(live) <= 16, levels
    fresh = ca.open_archive(url)
    for ckpt in saved[::37] + saved[-3:]:
        assert fresh.load_by_id(ckpt.checkpoint_id).state == ckpt.state  # type: ignore[union-attr]
    assert fresh.verify().ok, str(fresh.verify())
    fresh.gc(grace=NONE, unsafe_no_writers=True)
    files = fsspec.filesystem("file").glob(delta_glob(url))
    assert len(files) == len(live)
    assert {f.rsplit("/", 1)[1] for f in files} == {key.rsplit("/", 1)[1] for key, _, _, _ in live}
    appended = _messages(url)
    assert len(appended) == len(set(appended)) == 1099  # the first message is the root's `set`
    assert fresh.verify().ok


def test_a_save_merges_the_segments_its_writer_holds(tmp_path: Any, monkeypatch: Any) -> None:
    """Merges of 2: a writer's snapshot save at step 8 merges step 4's segment (which it wrote) with the
    inline rows into one tier-1 segment, tombstoning the absorbed one in the same commit; a fresh
    writer (holding nothing) writes a tier-0 segment instead; both load and verify."""
    from ckpt_archive.ops import history

    monkeypatch.setattr(history, "SEGMENT_FANOUT", 2)
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=4)
    saved = _grow(archive, "t", 9)
    assert sorted(level for _, level, _, _ in _live(archive, "t")) == [1]
    assert archive.engine.log.manifests["t"].tombstones
    other = ca.open_archive(str(tmp_path / "b"), full_snapshot_interval=4)
    first = _grow(other, "u", 8)
    other.close()
    cold = ca.open_archive(str(tmp_path / "b"), full_snapshot_interval=4)
    cold.load("u")
    _grow_from(cold, first[-1], 1)
    assert sorted(level for _, level, _, _ in _live(cold, "u")) == [0, 0]
    reader = ca.open_archive(url)
    for c in saved:
        assert reader.load_by_id(c.checkpoint_id).state == c.state  # type: ignore[union-attr]
    assert reader.verify().ok
    assert ca.open_archive(str(tmp_path / "b")).verify().ok


def test_tiers_survive_prune_copy_and_gc(tmp_path: Any) -> None:
    """A rewrite of a merged segment (prune drops rows of removed records) keeps its level; a copy
    re-encodes each segment at its level; both load every kept checkpoint after gc."""
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=4)
    saved = _grow(archive, "t", 300)
    archive.compact("t")
    before = {level for _, level, _, _ in _live(archive, "t")}
    assert max(before) >= 1
    archive.prune("t", RetentionPolicy.keep_last(150))
    archive.copy_thread("t", "copy")
    archive.gc(grace=NONE, unsafe_no_writers=True)
    fresh = ca.open_archive(url)
    kept = saved[-150:]
    for ckpt in kept[::7] + kept[-2:]:
        assert fresh.load_by_id(ckpt.checkpoint_id).state == ckpt.state  # type: ignore[union-attr]
    copied = fresh.list("copy")
    assert [fresh.load_by_id(c.checkpoint_id).state for c in copied[:: max(1, len(copied) // 9)]]  # type: ignore[union-attr]
    fresh.list("t")
    levels = {thread: sorted(level for _, level, _, _ in _live(fresh, thread)) for thread in ("t", "copy")}
    assert levels["copy"] == levels["t"] and max(levels["t"]) >= 1, levels
    assert fresh.verify().ok, str(fresh.verify())
    _grow(fresh, "t2", 40)
    assert fresh.verify().ok


def test_a_segment_that_cannot_be_read_never_makes_compact_fail(tmp_path: Any, monkeypatch: Any) -> None:
    """Merging is economy: with one of the segments a merge would absorb gone, ``compact`` still commits
    (the inline rows' compaction, and the merges that do not need it); the gone segment stays named
    by its records, and verify reports the missing object. Its rows are the only copy of their items:
    a snapshot whose lists replay through them is refused (``MissingObject``, typed), one before it loads."""
    from pathlib import Path

    _no_held_segments(monkeypatch)
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=2)
    saved = _grow(archive, "t", 40)  # 19 tier-0 segments, and inline deltas
    live = _live(archive, "t")
    key = live[3][0]  # in the first run of 8 a merge would absorb
    Path(url, key).unlink()
    saved += _grow_from(archive, saved[-1], 1)
    assert archive.compact("t")
    after = _live(archive, "t")
    assert key in {k for k, _, _, _ in after}  # not merged, not lost from the records
    assert max(level for _, level, _, _ in after) == 1  # the second run of 8 merged
    assert not archive.engine.log.manifests["t"].inline  # the inline rows compacted
    fresh = ca.open_archive(url)
    with pytest.raises(ca.MissingObject):
        fresh.load_by_id(saved[-1].checkpoint_id)
    assert fresh.load_by_id(saved[2].checkpoint_id).state == saved[2].state  # type: ignore[union-attr]
    assert "MissingObject" in {p.kind for p in fresh.verify().problems}


def _grow_from(archive: ca.ArchiveCheckpointer, last: ca.Checkpoint, steps: int) -> list[ca.Checkpoint]:
    out: list[ca.Checkpoint] = []
    for step in range(last.step + 1, last.step + 1 + steps):
        state = {"messages": [*last.state["messages"], {"role": "user", "content": f"mk {step}"}]}
        last = ca.Checkpoint.new(last.thread_id, state, step=step, parent_id=last.checkpoint_id)
        archive.save(last)
        out.append(last)
    return out


def test_encrypted_rows_merge_sealed_and_still_open(tmp_path: Any) -> None:
    """Encrypted rows are sealed per op (bound to their checkpoint and op index): a merge moves them as
    stored, so every checkpoint of an encrypted thread still loads after ``compact`` merged its
    segments, verify passes, and the merged segment holds no plaintext."""
    import pyarrow.parquet as pq

    url = str(tmp_path / "a")
    keys = ca.Encryption({"k1": b"k" * 32}, "k1", required=True)
    archive = ca.open_archive(url, full_snapshot_interval=2, encryption=keys)
    saved = _grow(archive, "t", 40)  # 19 tier-0 segments
    assert archive.compact("t")
    assert max(level for _, level, _, _ in _live(archive, "t")) == 1  # 19 segments and the inline rows: 2 merges
    fresh = ca.open_archive(url, encryption=keys)
    for ckpt in saved[::3] + saved[-2:]:
        assert fresh.load_by_id(ckpt.checkpoint_id).state == ckpt.state  # type: ignore[union-attr]
    assert fresh.verify().ok, str(fresh.verify())
    rows = [r for f in fsspec.filesystem("file").glob(delta_glob(url)) for r in pq.read_table(f).to_pylist()]
    assert rows and all(r["value"].startswith('"enc1:') for r in rows if r["op"] != "del")
    assert not any("mk t" in (r["value"] or "") for r in rows)


def test_a_compact_repoints_a_bounded_number_of_records(tmp_path: Any, monkeypatch: Any) -> None:
    """One ``compact`` re-points at most ``history.MERGE_RECORDS`` records (its update actions stay within
    a commit entry's bounds): the merges past it wait for the next ``compact``, which makes them; every
    checkpoint loads in between."""
    from ckpt_archive.ops import history

    monkeypatch.setattr(history, "MERGE_RECORDS", 20)
    _no_held_segments(monkeypatch)
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=2)
    saved = _grow(archive, "t", 40)  # 19 segments of 2 or 3 records each, and the inline rows
    assert archive.compact("t")
    first = _live(archive, "t")
    assert sorted(level for _, level, _, _ in first).count(1) == 1  # 8 segments (<= 20 records): one merge
    fresh = ca.open_archive(url)
    for ckpt in saved[::5]:
        assert fresh.load_by_id(ckpt.checkpoint_id).state == ckpt.state  # type: ignore[union-attr]
    assert archive.compact("t")
    assert sorted(level for _, level, _, _ in _live(archive, "t")).count(1) == 2
    assert ca.open_archive(url).verify().ok


_small = st.tuples(st.integers(0, 3), st.integers(1, 400_000), st.integers(1, 70))


@settings(max_examples=200, deadline=None)
@given(st.lists(_small, max_size=120))
def test_the_carry_merges_consecutive_runs_of_one_tier(segments: list[tuple[int, int, int]]) -> None:
    """``history.carry`` (the merge plan, pure) over any sequence of segments (tier, stored size,
    records): each segment goes into at most one merge; a merge takes consecutive segments, in order,
    within half a delta segment's bound, and is one tier above the segments it took; and the plan is
    complete: once applied, the carry finds nothing left to merge."""
    from ckpt_archive import limits
    from ckpt_archive.ops import history

    order = [(f"k{i}", level, size, n) for i, (level, size, n) in enumerate(segments)]
    plan = history.carry(order)
    keys = [k for group, _ in plan for k in group]
    assert len(keys) == len(set(keys))
    position = {key: i for i, (key, _, _, _) in enumerate(order)}
    by_key = {key: (level, size, n) for key, level, size, n in order}
    for group, level in plan:
        at = [position[k] for k in group]
        assert at == list(range(at[0], at[0] + len(at)))  # consecutive, in order
        assert sum(by_key[k][1] for k in group) <= limits.LIMITS["delta segment"] // 2
        assert level > max(by_key[k][0] for k in group)
    merged = {group[0]: (group, level) for group, level in plan}
    after: list[tuple[str, int, int, int]] = []
    for key, level, size, n in order:
        if key in merged:
            group, new = merged[key]
            after.append((key, new, sum(by_key[k][1] for k in group), sum(by_key[k][2] for k in group)))
        elif key not in keys:
            after.append((key, level, size, n))
    assert history.carry(after) == []
