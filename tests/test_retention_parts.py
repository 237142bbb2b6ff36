"""Sealed manifest parts keep every fold small; prunes, pins and gc keep working across parts."""

from __future__ import annotations

import os
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive import RetentionPolicy as RP
from ckpt_archive._sync import run_sync
from ckpt_archive.format import parts
from tests.test_retention import age, assert_loads, chat, fresh


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parts, "PART_SIZE", 8)


def folds(root: Path, thread: str) -> list[int]:
    log = root / f"thread_id={thread}" / "_log"
    return [os.path.getsize(log / n) for n in sorted(os.listdir(log)) if n.endswith(".manifest.json.zst")]


def test_folds_stay_bounded_and_everything_reloads(tmp_path: Path) -> None:
    archive = ca.open_archive(str(tmp_path / "a"), full_snapshot_interval=4)
    saved = chat(archive, "long", 120)
    sizes = folds(tmp_path / "a", "long")
    assert len(sizes) > 25
    assert max(sizes[-10:]) < 2 * max(sizes[2:6])  # not growing with the thread
    m = run_sync(fresh(archive).engine.log.manifest("long"))
    assert len(m.sealed) >= 80 and sum(p["count"] for p in m.parts) == len(m.sealed)
    levels = [p["level"] for p in m.parts]
    assert max(levels) >= 1 and levels == sorted(levels, reverse=True)  # merged: few parts, big first
    assert all(levels.count(lv) < parts.FANOUT for lv in set(levels))
    assert assert_loads(archive, saved, "long") == {c.checkpoint_id for c in saved}
    assert [c.state for c in fresh(archive).history("long")] == [c.state for c in saved]


def test_overrides_removals_and_reseal_across_parts(tmp_path: Path) -> None:
    archive = ca.open_archive(str(tmp_path / "a"), full_snapshot_interval=4)
    saved = chat(archive, "t", 60)
    archive.pin(saved[3].checkpoint_id)  # a change to a sealed record: an override in the fold
    archive.compact("t")
    archive.update_state(saved[10].checkpoint_id, {"edited": 1}, 1)
    archive.remove("t", [saved[20].checkpoint_id])
    archive.compact("t")
    reader = fresh(archive)
    infos = {i.checkpoint_id: i for i in reader.list("t")}
    assert infos[saved[3].checkpoint_id].metadata[ca.retention.PINNED_KEY] is True
    assert infos[saved[10].checkpoint_id].version == 2 and saved[20].checkpoint_id not in infos
    assert [i.checkpoint_id for i in reader.list("t")] == [
        c.checkpoint_id for c in saved if c.checkpoint_id != saved[20].checkpoint_id
    ]
    old_parts = {p["key"] for p in run_sync(reader.engine.log.manifest("t")).parts}
    archive.prune("t", RP.keep_last(5) | RP.keep_pinned())  # most sealed records go: re-seal
    assert archive.engine.log.manifests["t"].parts == []
    saved += chat(archive, "t", 20, start=60)  # the head hint now names the re-sealed fold
    expected = [saved[3].checkpoint_id] + [c.checkpoint_id for c in saved[-25:]]
    reader = fresh(archive)
    m = run_sync(reader.engine.log.manifest("t"))
    assert m.parts and not {p["key"] for p in m.parts} & old_parts
    assert [i.checkpoint_id for i in reader.list("t")] == expected
    report = archive.gc(grace=timedelta(0), unsafe_no_writers=True)
    assert report.manifests > 0
    in_use = run_sync(fresh(archive).engine.log.manifest("t")).parts + archive.engine.log.manifests["t"].parts
    left = {f"thread_id=t/_parts/{n}" for n in os.listdir(tmp_path / "a" / "thread_id=t" / "_parts")}
    assert left == {p["key"] for p in in_use} and not left & old_parts
    assert assert_loads(archive, saved, "t") == set(expected)


def test_merged_parts_drop_removed_records_and_take_overrides(tmp_path: Path) -> None:
    """Removals and edits of sealed records, then enough saves to merge their parts: the merged part
    holds the current records only, and a fresh reader sees exactly what the writer sees."""
    archive = ca.open_archive(str(tmp_path / "a"), full_snapshot_interval=4)
    saved = chat(archive, "t", 30)
    gone = [saved[2].checkpoint_id, saved[9].checkpoint_id]
    archive.remove("t", gone)
    archive.pin(saved[5].checkpoint_id)
    saved += chat(archive, "t", 80, start=30)
    m = run_sync(fresh(archive).engine.log.manifest("t"))
    assert any(p["level"] >= 1 for p in m.parts)
    assert not set(gone) & (m.sealed | set(m.records)) and not m.dirty & {saved[5].checkpoint_id}
    assert m.records[saved[5].checkpoint_id]["metadata"][ca.retention.PINNED_KEY] is True
    assert list(m.records) == list(archive.engine.log.manifests["t"].records)
    kept = [c for c in saved if c.checkpoint_id not in gone]
    assert [c.state for c in fresh(archive).history("t")] == [c.state for c in kept]


def test_gc_keeps_the_parts_of_a_young_fold_it_keeps(tmp_path: Path) -> None:
    """A fold newer than the grace stays even when a newer fold supersedes it, so the parts it names
    stay too, however old they are (gc once kept only the parts of folds from the newest one on, and
    verify then found the young fold's parts missing)."""
    archive = ca.open_archive(str(tmp_path / "a"), full_snapshot_interval=4)
    saved = chat(archive, "t", 60)
    age(tmp_path / "a", 2 * 3600)  # the parts are older than the default grace (1 h)
    archive.compact("t")  # a young fold naming those parts
    archive.prune("t", RP.keep_last(5))  # re-sealed: the newest fold names none of them
    report = archive.gc()
    assert report.manifests > 0 and report.pending > 0  # old folds and commits went; tombstones wait
    verified = fresh(archive).verify()
    assert verified.ok, verified
    assert assert_loads(archive, saved, "t") == {c.checkpoint_id for c in saved[-5:]}


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("save"), st.integers(1, 25)),
        st.tuples(st.just("prune"), st.integers(1, 12)),
        st.tuples(st.just("remove"), st.integers(0, 10**6)),
        st.tuples(st.sampled_from(["compact", "age", "gc", "gc0"]), st.just(0)),
    ),
    min_size=1,
    max_size=10,
)


@given(steps=_STEPS)
@example(steps=[("save", 25), ("save", 25), ("age", 0), ("compact", 0), ("prune", 5), ("gc", 0)])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_after_any_gc_verify_is_clean_and_every_checkpoint_loads(tmp_path: Path, steps: list[tuple[str, int]]) -> None:
    """Saves, prunes, removals, compactions, time passing (``age``) and gc (default grace, or none) in
    any order: after every gc, verify finds nothing wrong and every listed checkpoint loads."""
    root = tmp_path / uuid.uuid4().hex
    archive = ca.open_archive(str(root), full_snapshot_interval=4)
    saved: list[ca.Checkpoint] = []
    for op, n in steps:
        if op == "save":
            saved += chat(archive, "t", n, start=len(saved))
        elif op == "prune":
            archive.prune("t", RP.keep_last(n))
        elif op == "remove" and (listed := archive.list("t")):
            archive.remove("t", [listed[n % len(listed)].checkpoint_id])
        elif op == "compact":
            archive.compact("t")
        elif op == "age":
            age(root, 2 * 3600)
        elif op in ("gc", "gc0"):
            archive.gc(**({"grace": timedelta(0), "unsafe_no_writers": True} if op == "gc0" else {}))
            report = fresh(archive).verify()
            assert report.ok, report
            assert_loads(archive, saved, "t")
