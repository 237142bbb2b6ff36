"""Two-phase deletion: readers holding an old manifest keep working until gc, which then frees the bytes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import ckpt_archive as ca
from ckpt_archive import RetentionPolicy as RP
from ckpt_archive._sync import run_sync
from ckpt_archive.format import layout
from ckpt_archive.storage import LocalStore, RoundTrips
from ckpt_archive.testing import S3Server
from tests.conftest import BACKENDS, open_backend
from tests.test_retention import assert_loads, chat, fresh

Make = Callable[..., tuple[str, dict[str, Any]]]
ZERO = timedelta(0)


def stored_bytes(archive: ca.ArchiveCheckpointer) -> int:
    if isinstance(archive.store, LocalStore):  # what the filesystem itself says, not our bookkeeping
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(archive.store.root) for f in fs)
    return sum(info["size"] for info in run_sync(archive.store.find("")).values())


@pytest.mark.parametrize("backend", BACKENDS)
def test_reader_with_old_manifest_loads_until_gc_frees_bytes(archive_url: Make, backend: str) -> None:
    archive = open_backend(archive_url, backend, full_snapshot_interval=4)
    saved = chat(archive, "t", 30)
    archive.compact("t")
    reader = fresh(archive)
    old = run_sync(reader.engine.log.manifest("t")).copy()  # a reader in the middle of a load holds this manifest
    report = archive.prune("t", RP.keep_last(3))
    assert len(report.removed) == 27 and report.bytes_freed > 0
    after_prune = stored_bytes(archive)

    def old_read(ckpt: ca.Checkpoint) -> dict[str, Any]:
        reader.engine.contents.states.clear()
        return run_sync(reader.engine.contents.content_of(old, ckpt.checkpoint_id))[0]

    for ckpt in saved[::5]:  # removed from the manifest, still on storage
        assert old_read(ckpt) == ckpt.state
    waiting = archive.gc()  # default grace (1 h): nothing tombstoned goes yet
    assert waiting.pending > 0 and waiting.tombstones_purged == 0 and waiting.orphans == 0
    assert old_read(saved[1]) == saved[1].state
    gone = archive.gc(grace=ZERO, unsafe_no_writers=True)
    # what the prune freed, and the segments compact's merge (tiers) tombstoned before it
    assert gone.tombstones_purged == report.objects_freed + len(old.tombstones)
    assert gone.bytes_freed >= report.bytes_freed
    assert stored_bytes(archive) < after_prune - report.bytes_freed // 2
    with pytest.raises(ca.MissingObject):
        old_read(saved[1])
    assert assert_loads(archive, saved, "t") == {c.checkpoint_id for c in saved[-3:]}
    # nothing left to collect; purge committed
    assert fresh(archive).gc(grace=ZERO, unsafe_no_writers=True).objects_deleted == 0
    assert run_sync(fresh(archive).engine.log.manifest("t")).tombstones == {}


def test_gc_orphans_and_temp_files_after_grace_never_a_foreign_ids_folder(tmp_path: Path) -> None:
    """There is no id index: a ``_ids/`` folder at the root is a foreign one, and gc leaves it alone."""
    archive = ca.open_archive(str(tmp_path / "a"), full_snapshot_interval=3)
    saved = chat(archive, "o", 5)
    root = Path(archive.store.root)
    orphan = root / "thread_id=o" / "snapshots" / "000000000009-crashed.json.zst"
    orphan.write_bytes(b"x" * 1000)
    temp = root / "thread_id=o" / "_log" / f".tmp-{'d' * 32}"  # as store._write_local names them
    temp.write_bytes(b"y" * 10)
    stale_id = root / "_ids" / "never-committed.json"
    stale_id.parent.mkdir()
    stale_id.write_bytes(b"{}")
    unknown = root / "thread_id=o" / "notes.txt"
    unknown.write_bytes(b"left alone")
    report = archive.gc()
    assert report.orphans == report.temp_files == 0
    assert orphan.exists() and temp.exists() and stale_id.exists()
    report = archive.gc(grace=ZERO, unsafe_no_writers=True)
    assert (report.orphans, report.temp_files) == (1, 1)
    assert not orphan.exists() and not temp.exists() and stale_id.exists() and unknown.exists()
    assert assert_loads(archive, saved, "o") == {c.checkpoint_id for c in saved}
    assert ca.open_archive(str(root)).load_by_id(saved[0].checkpoint_id) is not None  # by the id alone


def test_gc_keeps_manifest_cost_bounded(tmp_path: Path) -> None:
    archive = ca.open_archive(str(tmp_path / "a"), full_snapshot_interval=5)
    saved = chat(archive, "long", 60)
    log_dir = tmp_path / "a" / "thread_id=long" / "_log"
    parts_dir = tmp_path / "a" / "thread_id=long" / "_parts"
    before = set(os.listdir(log_dir)) | {f"p/{n}" for n in os.listdir(parts_dir)}
    report = archive.gc(grace=ZERO, unsafe_no_writers=True)
    after = set(os.listdir(log_dir)) | {f"p/{n}" for n in os.listdir(parts_dir)}
    assert len(before) > 60 and len(os.listdir(log_dir)) <= 5 + 4  # commit 1, the fold and its own entry, ...
    # what gc deleted of the log and parts (it may commit a purge of its own, with its fold)
    assert report.manifests == len(before - after)
    reader = fresh(archive)
    assert reader.load("long").state == saved[-1].state  # type: ignore[union-attr]
    os.remove(tmp_path / "a" / "thread_id=long" / "_head.json.zst")  # recovery path: LIST of the log
    assert assert_loads(archive, saved, "long") == {c.checkpoint_id for c in saved}
    more = chat(archive, "long", 7, start=60)
    assert assert_loads(archive, saved + more, "long") == {c.checkpoint_id for c in saved + more}


def test_writer_with_stale_cache_rereads_after_gc(tmp_path: Path) -> None:
    url = str(tmp_path / "a")
    stale = ca.open_archive(url, full_snapshot_interval=4, gc_grace=timedelta(seconds=1.2))
    first = chat(stale, "w", 2)
    other = ca.open_archive(url, full_snapshot_interval=4)
    more = chat(other, "w", 20, start=2)
    other.gc(grace=ZERO, unsafe_no_writers=True)  # cuts the log below the newest folded manifest
    time.sleep(1.3)  # the stale writer's cached manifest is now older than half its grace
    last = ca.Checkpoint.new("w", {"messages": [], "turn": 22}, step=22)
    with pytest.raises(ca.CheckpointConflict):  # re-read, not committed at a seq gc already cut
        stale.save(last)
    stale.save(last)  # now it knows the head
    listed = [i.checkpoint_id for i in fresh(other).list("w")]
    assert listed == [c.checkpoint_id for c in first + more] + [last.checkpoint_id]
    assert fresh(other).load("w").parent_id == more[-1].checkpoint_id  # type: ignore[union-attr]


def test_gc_aborts_stale_multipart_uploads(archive_url: Make, s3_server: S3Server) -> None:
    archive = open_backend(archive_url, "s3", full_snapshot_interval=4)
    chat(archive, "m", 3)
    fs = archive.store.fs
    bucket, _, prefix = archive.store.root.partition("/")
    key = f"{prefix}/{layout.thread_dir('m')}/deltas/000000000001-crashed.parquet"
    run_sync(fs._call_s3("create_multipart_upload", Bucket=bucket, Key=key))
    run_sync(fs._call_s3("create_multipart_upload", Bucket=bucket, Key="elsewhere/big.bin"))
    # (moto reports every upload as initiated in 2010, so the grace check itself is not exercised here)
    assert archive.gc(grace=ZERO, unsafe_no_writers=True).multipart_aborted == 1
    uploads = run_sync(fs._call_s3("list_multipart_uploads", Bucket=bucket))
    assert [u["Key"] for u in uploads.get("Uploads", [])] == ["elsewhere/big.bin"]


@pytest.mark.parametrize("backend", ["memory"])
def test_edit_tombstones_replaced_snapshot(archive_url: Make, backend: str) -> None:
    archive = open_backend(archive_url, backend, full_snapshot_interval=3)
    saved = chat(archive, "e", 7)
    target = saved[3]  # a full snapshot at step 3 with delta children
    archive.update_state(target.checkpoint_id, {"edited": True}, 1)
    m = run_sync(fresh(archive).engine.log.manifest("e"))
    assert any(f"000000000003-{target.checkpoint_id}.json.zst" in key for key in m.tombstones)
    report = archive.gc(grace=ZERO, unsafe_no_writers=True)
    assert report.tombstones_purged >= 1 and report.bytes_freed > 0
    reader = fresh(archive)
    assert reader.load_by_id(target.checkpoint_id).state == {"edited": True}  # type: ignore[union-attr]
    for c in saved:
        if c is not target:
            assert reader.load_by_id(c.checkpoint_id).state == c.state  # type: ignore[union-attr]


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_replayed_lists_survive_prune_gc_copy_and_fork(archive_url: Make, backend: str) -> None:
    """Snapshots replay their long lists from history rows: after a prune (the oldest kept record a
    root, its rows its whole content), gc, copy_thread, fork and the source's deletion, every kept
    checkpoint of every thread still loads, with its lists."""
    archive = open_backend(archive_url, backend, full_snapshot_interval=4)
    saved = chat(archive, "long", 75)  # snapshots replaying up to 75 messages
    manifest = run_sync(fresh(archive).engine.log.manifest("long"))
    assert max(r["ref"].get("replay", 0) for r in manifest.records.values()) > 40
    report = archive.prune("long", RP.keep_last(2))
    archive.gc(grace=ZERO, unsafe_no_writers=True)
    assert assert_loads(archive, saved, "long") == {c.checkpoint_id for c in saved[-2:]}
    assert report.rebased
    mapping = archive.copy_thread("long", "copy")
    forked = archive.fork(saved[-1].checkpoint_id, "fork")
    archive.delete("long")
    archive.gc(grace=ZERO, unsafe_no_writers=True)
    reader = fresh(archive)
    assert [c.state for c in reader.history("copy")] == [c.state for c in saved[-2:]]
    assert [c.messages for c in reader.history("copy")] == [c.messages for c in saved[-2:]]
    assert reader.load_by_id(forked).state == saved[-1].state  # type: ignore[union-attr]
    assert reader.verify().ok
    assert len(mapping) == 2


def test_verify_reads_the_log_gc_left(tmp_path: Path) -> None:
    """gc deletes the commit entries below a folded manifest (commit 1 stays): verify reads the entries
    the listing shows, not a GET for every seq the thread ever had, and still proves the thread; a
    commit missing above the fold is still reported."""
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=4)
    chat(archive, "t", 60)
    archive.gc(grace=ZERO, unsafe_no_writers=True)
    chat(archive, "t", 3, start=60)  # commits after the newest fold (gc's purge may have folded)
    log = sorted(run_sync(archive.store.find(layout.thread_dir("t") + "/_log")))
    assert len(log) <= 12  # commit 1, the newest fold, the commits after it
    trips = RoundTrips(ca.open_store(url))
    report = ca.ArchiveCheckpointer(trips).verify("t")
    assert report.ok and report.checkpoints == 63, report
    log_gets = [k for name, k, _ in trips.calls if name == "get" and "/_log/" in k]
    assert sorted(log_gets) == log  # was 61 GETs for 5 objects
    unrebuilt = ("CorruptManifest", None)  # the thread's manifest cannot be rebuilt from its log
    folds = [k for k in log if k.endswith(layout.FOLDED_SUFFIX)]  # gc's purge commit may have its own
    for i, key in enumerate(folds):  # the folds: the log now has a gap from commit 2
        os.rename(tmp_path / "a" / key, tmp_path / f"fold{i}")
    damaged = fresh(archive).verify("t")
    assert [(p.kind, p.key) for p in damaged.problems] == [("MissingObject", layout.log_key("t", 2)), unrebuilt]
    for i, key in enumerate(folds):
        os.rename(tmp_path / f"fold{i}", tmp_path / "a" / key)
    newest = max(i for i, k in enumerate(log) if k.endswith(layout.FOLDED_SUFFIX))
    after = [k for k in log[newest + 1 :] if not k.endswith(layout.FOLDED_SUFFIX)]
    assert len(after) >= 2
    last = after[0]  # a commit after the newest fold, and before another
    os.remove(tmp_path / "a" / last)
    damaged = fresh(archive).verify("t")
    assert [(p.kind, p.key) for p in damaged.problems] == [("MissingObject", last), unrebuilt]
