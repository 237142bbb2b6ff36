"""Prune, remove, pin, edits, history, fork and copy on the archive, on local disk, memory:// and S3 (moto)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

import ckpt_archive as ca
from ckpt_archive import RetentionPolicy as RP
from ckpt_archive._sync import run_sync
from ckpt_archive.retention import PINNED_KEY
from ckpt_archive.storage import RoundTrips
from ckpt_archive.testing import S3Server
from tests.conftest import BACKENDS, open_backend

Make = Callable[..., tuple[str, dict[str, Any]]]


def chat(archive: ca.ArchiveCheckpointer, thread: str, n: int, start: int = 0) -> list[ca.Checkpoint]:
    saved = []
    latest = archive.load(thread)
    messages = list(latest.state["messages"]) if latest else []
    for step in range(start, start + n):
        messages.append({"role": "user", "content": f"turn {step} " * 3})
        ckpt = ca.Checkpoint.new(thread, {"messages": list(messages), "turn": step}, step=step)
        archive.save(ckpt)
        saved.append(ckpt)
    return saved


def all_objects(archive: ca.ArchiveCheckpointer) -> dict[str, bytes | None]:
    keys = sorted(run_sync(archive.store.find("")))
    return dict(zip(keys, run_sync(archive.store.get_many(keys)), strict=True))


def age(root: str | os.PathLike[str], seconds: float) -> None:
    """Make every object under ``root`` ``seconds`` older (gc goes by the objects' modification times)."""
    then = time.time() - seconds
    for folder, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(folder, name), (then, then))


def fresh(archive: ca.ArchiveCheckpointer, **kw: Any) -> ca.ArchiveCheckpointer:
    return ca.ArchiveCheckpointer(archive.store, full_snapshot_interval=archive.full_snapshot_interval, **kw)


def assert_loads(archive: ca.ArchiveCheckpointer, saved: list[ca.Checkpoint], thread: str) -> set[str]:
    """Every listed checkpoint loads (from a fresh instance) to the state it was saved with."""
    by_id = {c.checkpoint_id: c for c in saved}
    reader = fresh(archive)
    listed = [i.checkpoint_id for i in reader.list(thread)]
    for cid in listed:
        loaded = reader.load_by_id(cid)
        assert loaded is not None and loaded.state == by_id[cid].state
    return set(listed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_prune_keeps_exact_states_and_rebases(archive_url: Make, backend: str) -> None:
    archive = open_backend(archive_url, backend, full_snapshot_interval=4)
    saved = chat(archive, "t", 23)
    archive.compact("t")
    policy = RP.keep_last(5) | RP.keep_every(7)
    report = archive.prune("t", policy)
    expected = {c.checkpoint_id for c in saved if c.step % 7 == 0 or c.step >= 18}
    assert set(report.kept) == expected
    assert set(report.removed) == {c.checkpoint_id for c in saved} - expected
    assert report.kept[saved[-1].checkpoint_id][0] == "newest"
    assert report.rebased and set(report.rebased) <= expected
    assert report.objects_freed > 0 and report.bytes_freed > 0 and not report.dry_run
    assert assert_loads(archive, saved, "t") == expected
    kinds = {i.checkpoint_id: i.kind for i in archive.list("t")}
    assert all(kinds[cid] == "full" for cid in report.rebased)
    for cid in report.removed:
        assert archive.load_by_id(cid) is None
    assert archive.load("t").checkpoint_id == saved[-1].checkpoint_id  # type: ignore[union-attr]
    # pruning again with the same policy is a no-op; saving goes on from the same head
    again = archive.prune("t", policy)
    assert again.removed == [] and again.objects_freed == 0
    more = chat(archive, "t", 3, start=23)
    assert assert_loads(archive, saved + more, "t") == expected | {c.checkpoint_id for c in more}


@pytest.mark.parametrize("backend", BACKENDS)
def test_dry_run_changes_nothing(archive_url: Make, backend: str) -> None:
    archive = open_backend(archive_url, backend, full_snapshot_interval=3)
    saved = chat(archive, "d", 14)
    before = all_objects(archive)
    report = archive.prune("d", RP.keep_last(2), dry_run=True)
    removal = archive.remove("d", [saved[4].checkpoint_id], dry_run=True)
    assert all_objects(archive) == before
    assert report.dry_run and len(report.removed) == 12 and report.bytes_freed > 0
    assert removal.removed == [saved[4].checkpoint_id] and removal.rebased == [saved[5].checkpoint_id]
    assert assert_loads(archive, saved, "d") == {c.checkpoint_id for c in saved}
    real = archive.prune("d", RP.keep_last(2))
    assert (real.removed, real.kept, real.rebased) == (report.removed, report.kept, report.rebased)
    assert (real.objects_freed, real.bytes_freed) == (report.objects_freed, report.bytes_freed)


@pytest.mark.parametrize("backend", ["memory", "s3"])
def test_remove_explicit_ids_including_head(archive_url: Make, backend: str) -> None:
    archive = open_backend(archive_url, backend, full_snapshot_interval=4)
    saved = chat(archive, "r", 10)
    doomed = [saved[0].checkpoint_id, saved[5].checkpoint_id, saved[9].checkpoint_id, "not-there"]
    report = archive.remove("r", doomed)
    assert report.removed == doomed[:3]
    assert report.rebased == [saved[1].checkpoint_id, saved[6].checkpoint_id]
    kept = {c.checkpoint_id for c in saved} - set(doomed)
    assert assert_loads(archive, saved, "r") == kept
    assert archive.load("r").checkpoint_id == saved[8].checkpoint_id  # type: ignore[union-attr]
    nxt = ca.Checkpoint.new("r", {"messages": [], "turn": 10}, step=10)
    archive.save(nxt)
    assert archive.load("r").parent_id == saved[8].checkpoint_id  # type: ignore[union-attr]


@pytest.mark.parametrize("backend", BACKENDS)
def test_pin_unpin_and_keep_pinned(archive_url: Make, backend: str) -> None:
    archive = open_backend(archive_url, backend, full_snapshot_interval=4)
    saved = chat(archive, "p", 8)
    target = saved[2].checkpoint_id
    assert archive.pin(target) is True
    assert archive.pin(target) is False
    info = {i.checkpoint_id: i for i in archive.list("p")}[target]
    assert info.metadata[PINNED_KEY] is True and info.version == 1
    report = archive.prune("p", RP.keep_pinned())
    assert set(report.kept) == {target, saved[-1].checkpoint_id} and report.kept[target] == ["pinned"]
    assert archive.load_by_id(target).state == saved[2].state  # type: ignore[union-attr]
    assert archive.unpin(target) is True
    archive.prune("p", RP.keep_pinned())
    assert [i.checkpoint_id for i in archive.list("p")] == [saved[-1].checkpoint_id]
    with pytest.raises(ca.CheckpointNotFound):
        archive.pin(saved[0].checkpoint_id)


@pytest.mark.parametrize("backend", BACKENDS)
def test_update_state_versions_and_dependents(archive_url: Make, backend: str) -> None:
    archive = open_backend(archive_url, backend, full_snapshot_interval=5)
    saved = chat(archive, "e", 9)
    target = saved[3]  # a delta with delta children
    assert {i.checkpoint_id: i.version for i in archive.list("e")}[target.checkpoint_id] == 1
    assert archive.update_state(target.checkpoint_id, {"edited": [1, 2]}, 1) == 2
    with pytest.raises(ca.CheckpointVersionConflict):
        archive.update_state(target.checkpoint_id, {"edited": "again"}, 1)
    reader = fresh(archive)
    assert reader.load_by_id(target.checkpoint_id).state == {"edited": [1, 2]}  # type: ignore[union-attr]
    for c in saved:
        if c is not target:
            assert reader.load_by_id(c.checkpoint_id).state == c.state  # type: ignore[union-attr]
    versions = {i.checkpoint_id: i.version for i in reader.list("e")}
    assert versions[target.checkpoint_id] == 2 and sum(versions.values()) == len(saved) + 1
    assert reader.update_state(target.checkpoint_id, {"edited": 3}, 2) == 3
    assert archive.load_by_id(target.checkpoint_id).state == {"edited": 3}  # type: ignore[union-attr]
    with pytest.raises(ca.CheckpointNotFound):
        archive.update_state("no-such-checkpoint", {}, 1)
    with pytest.raises(ca.InvalidState):
        archive.update_state(target.checkpoint_id, {"x": float("nan")}, 3)
    latest = archive.load("e")
    assert latest is not None and latest.checkpoint_id == saved[-1].checkpoint_id
    archive.save(ca.Checkpoint.new("e", {"messages": [], "turn": 9}, step=9))


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_history_is_lazy_and_reuses_reconstruction(archive_url: Make, backend: str, s3_server: S3Server) -> None:
    archive = open_backend(archive_url, backend, full_snapshot_interval=5)
    saved = chat(archive, "h", 17)
    archive.compact("h")
    fork = ca.Checkpoint.new("h", {"forked": True}, step=3, parent_id=saved[2].checkpoint_id)
    archive.save(fork)
    expected = [*saved, fork]
    reader = fresh(archive)
    it = reader.history("h")
    first = next(it)
    assert first.checkpoint_id == saved[0].checkpoint_id and first.state == saved[0].state
    s3_server.reset_counts()
    rest = list(it)
    assert [c.checkpoint_id for c in [first, *rest]] == [c.checkpoint_id for c in expected]
    assert [c.state for c in [first, *rest]] == [c.state for c in expected]
    if backend == "s3":  # one GET per payload object: snapshots + segments, never a replay per checkpoint
        objects = {i for i in run_sync(archive.store.find("thread_id=h")) if "/snapshots/" in i or "/deltas/" in i}
        assert s3_server.requests["GET"] <= len(objects)

    async def collect() -> list[ca.Checkpoint]:
        return [c async for c in reader.ahistory("h")]

    assert [c.state for c in asyncio.run(collect())] == [c.state for c in expected]


@pytest.mark.parametrize("backend", BACKENDS)
def test_fork_and_copy_thread(archive_url: Make, backend: str) -> None:
    archive = open_backend(archive_url, backend, full_snapshot_interval=4)
    saved = chat(archive, "src", 11)
    archive.compact("src")
    archive.prune("src", RP.keep_last(6))
    kept = [c for c in saved if c.step >= 5]
    new_id = archive.fork(saved[7].checkpoint_id, "forked")
    forked = archive.load("forked")
    assert forked is not None and forked.checkpoint_id == new_id and forked.parent_id is None
    assert forked.state == saved[7].state and forked.step == 7
    full = archive.fork(saved[8].checkpoint_id, "forked-from-snapshot")  # step 8 is a full snapshot
    assert archive.load_by_id(full).state == saved[8].state  # type: ignore[union-attr]
    with pytest.raises(ca.CheckpointConflict):
        archive.fork(saved[9].checkpoint_id, "forked")
    mapping = archive.copy_thread("src", "dst")
    assert list(mapping) == [c.checkpoint_id for c in kept]
    copied = list(archive.history("dst"))
    assert [c.state for c in copied] == [c.state for c in kept]
    assert [c.parent_id for c in copied[1:]] == [mapping[c.checkpoint_id] for c in kept[:-1]]
    # only what the copy needs: the objects its records reference, nothing tombstoned
    dst_payload = {k for k in run_sync(archive.store.find("thread_id=dst")) if "/_log/" not in k}
    refs = fresh(archive)
    m = run_sync(refs.engine.log.manifest("dst"))
    assert dst_payload - {"thread_id=dst/_head.json.zst"} == set(m.referenced_keys())
    archive.delete("src")
    reader = fresh(archive)
    assert [c.state for c in reader.history("dst")] == [c.state for c in kept]
    assert reader.load("forked").state == saved[7].state  # type: ignore[union-attr]
    archive.save(ca.Checkpoint.new("dst", {"after": "copy"}, step=11))
    assert reader.load("dst").parent_id == mapping[kept[-1].checkpoint_id]  # type: ignore[union-attr]


def test_copy_uses_server_side_copy_on_s3(archive_url: Make, s3_server: S3Server) -> None:
    """Snapshots are copied server-side, unread; a segment's rows name their thread and checkpoints,
    so each source segment is read once and re-encoded under the copy's ids (spec.md section 7)."""
    archive = open_backend(archive_url, "s3", full_snapshot_interval=4)
    chat(archive, "big", 9)
    archive.compact("big")
    segments = {k for k in archive.store.fs.find(archive.store.path("thread_id=big/deltas"))}
    assert segments
    s3_server.reset_counts()
    archive.copy_thread("big", "big-copy")
    copies = [path for method, path in s3_server.log if method == "PUT" and "big-copy" in path]
    assert copies  # CopyObject is a PUT carrying x-amz-copy-source; no snapshot GET was needed
    assert [p for m, p in s3_server.log if m == "GET" and "/snapshots/" in p] == []
    delta_gets = [p for m, p in s3_server.log if m == "GET" and "/deltas/" in p]
    assert sorted(delta_gets) == sorted(f"/{k}" for k in segments)  # each source segment once
    assert archive.load("big-copy").state == archive.load("big").state


@pytest.mark.parametrize("backend", ["memory"])
def test_prune_all_shards_and_progress(archive_url: Make, backend: str) -> None:
    archive = open_backend(archive_url, backend, full_snapshot_interval=3)
    threads = [f"user-{i}" for i in range(9)]
    for t in threads:
        chat(archive, t, 4)
    seen: list[tuple[int, int, str]] = []
    reports: list[ca.PruneReport] = []
    for i in range(3):
        part = archive.prune_all(
            RP.keep_last(1), shard=(i, 3), concurrency=3, progress=lambda d, n, r: seen.append((d, n, r.thread_id))
        )
        reports += part
    assert sorted(r.thread_id for r in reports) == threads
    assert len(seen) == 9 and all(len(r.removed) == 3 for r in reports)
    assert all(len(archive.list(t)) == 1 for t in threads)
    assert archive.prune_all(RP.keep_last(1), dry_run=True)[0].removed == []


@pytest.mark.parametrize("backend", ["memory", "s3"])
def test_two_pruners_racing(archive_url: Make, backend: str) -> None:
    first = open_backend(archive_url, backend, full_snapshot_interval=4)
    saved = chat(first, "race", 20)
    second = fresh(first)
    a, b = RP.keep_last(4) | RP.keep_every(5), RP.keep_last(8) | RP.keep_every(3)

    async def both() -> list[ca.PruneReport]:
        return list(await asyncio.gather(first.aprune("race", a), second.aprune("race", b)))

    reports = asyncio.run(both())
    kept = assert_loads(first, saved, "race")
    both_keep = {c.checkpoint_id for c in saved if c.step >= 16 or (c.step % 5 == 0 and c.step % 3 == 0)}
    assert both_keep <= kept
    assert set().union(*(set(r.removed) for r in reports)) == {c.checkpoint_id for c in saved} - kept
    assert saved[-1].checkpoint_id in kept


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_prune_racing_a_writer(archive_url: Make, backend: str) -> None:
    writer = open_backend(archive_url, backend, full_snapshot_interval=4)
    saved = chat(writer, "live", 3)
    pruner = fresh(writer)

    writing = True

    async def write() -> None:
        nonlocal writing
        messages = list(saved[-1].state["messages"])
        try:
            for step in range(3, 33):
                messages.append(f"m{step}")
                ckpt = ca.Checkpoint.new("live", {"messages": list(messages), "turn": step}, step=step)
                await writer.asave(ckpt)  # a prune commit in between must not make this a conflict
                saved.append(ckpt)
        finally:
            writing = False

    async def prune() -> int:
        # every prune starts while the writer saves, for as long as it does (a fixed number of rounds
        # could all pass before its saves gave them anything to remove, on a loaded machine)
        removed = rounds = 0
        while writing and rounds < 2000:
            removed += len((await pruner.aprune("live", RP.keep_last(3) | RP.keep_every(10))).removed)
            rounds += 1
            await asyncio.sleep(0.005)
        return removed

    async def run() -> int:
        return (await asyncio.gather(write(), prune()))[1]

    assert asyncio.run(run()) > 0
    kept = assert_loads(writer, saved, "live")
    assert saved[-1].checkpoint_id in kept
    assert fresh(writer).load("live").checkpoint_id == saved[-1].checkpoint_id  # type: ignore[union-attr]


@pytest.mark.parametrize("encrypted", [False, True])
def test_a_rebased_snapshot_is_the_snapshot_a_save_writes(tmp_path: Any, encrypted: bool) -> None:
    """Saves, re-bases (prune, update_state) and forks encode a snapshot in one place
    (``Contents.snapshot``): the snapshot prune writes for a delta whose parent it removed is,
    byte for byte (encrypted: size for size, its nonce is fresh), the one a save writes of it."""
    kw: dict[str, Any] = {"encryption": ca.Encryption({"k1": b"k" * 32}, "k1")} if encrypted else {}
    deltas = ca.open_archive(str(tmp_path / "deltas"), full_snapshot_interval=100, **kw)
    fulls = ca.open_archive(str(tmp_path / "fulls"), full_snapshot_interval=1, **kw)
    messages: list[Any] = []
    for step in range(6):
        messages.append({"role": "user", "content": f"turn {step} " * 20})
        state = {"messages": list(messages), "rows": list(range(step * 40))}  # long lists: replayed
        ckpt = ca.Checkpoint.new("t", state, step=step).model_copy(update={"checkpoint_id": f"c{step}"})
        deltas.save(ckpt)
        fulls.save(ckpt)
    report = deltas.remove("t", ["c0", "c1", "c2"])
    assert report.rebased == ["c3"]

    def snapshot(archive: ca.ArchiveCheckpointer) -> tuple[dict[str, Any], bytes | None]:
        rec = run_sync(archive.engine.log.manifest("t", cache=False)).records["c3"]
        return rec, run_sync(archive.store.get(rec["ref"]["key"]))

    (rebased, rebased_object), (saved, saved_object) = snapshot(deltas), snapshot(fulls)
    assert rebased["kind"] == saved["kind"] == "full"
    assert rebased["ref"]["size"] == saved["ref"]["size"]
    # both replay their long lists from their rows: the re-based root from its own, the save's through its lineage
    assert rebased["ref"]["replay"] == 0 and saved["ref"]["replay"] == 3
    if not encrypted:
        assert rebased_object == saved_object
        assert rebased["ref"]["sha256"] == saved["ref"]["sha256"]
    assert fresh(deltas, **kw).load_by_id("c3").state == fresh(fulls, **kw).load_by_id("c3").state  # type: ignore[union-attr]


def test_a_prune_fetches_and_writes_each_object_once(tmp_path: Any) -> None:
    """The re-based records of one prune share one replay: an object their chains share (the snapshot
    at their root, the Parquet segment of their deltas) is fetched once, not once per record."""
    archive = ca.open_archive(str(tmp_path), full_snapshot_interval=10)
    saved = []
    messages: list[Any] = []
    for step in range(30):
        messages.append(f"turn {step} " * 30)
        ckpt = ca.Checkpoint.new("t", {"messages": list(messages), "rows": list(range(step * 30))}, step=step)
        archive.save(ckpt)
        saved.append(ckpt)
    archive.compact("t")
    trips = RoundTrips(ca.open_store(str(tmp_path)))
    pruner = ca.ArchiveCheckpointer(trips, full_snapshot_interval=10)  # nothing cached
    report = pruner.remove("t", [c.checkpoint_id for c in saved if c.step % 2])
    assert len(report.rebased) == 12  # every kept delta, 4 to 6 to a chain
    gets = [k for name, k, _ in trips.calls if name == "get" and "/_log/" not in k and "_head" not in k]
    puts = [k for name, k, _ in trips.calls if name == "put"]
    assert len(gets) == len(set(gets)), sorted(gets)  # was 22 GETs of 12 objects
    assert len(puts) == len(set(puts)), sorted(puts)  # was 52 PUTs of 34 objects
    assert assert_loads(archive, saved, "t") == {c.checkpoint_id for c in saved if c.step % 2 == 0}
