"""Archive-specific behaviour: request economy, commits, crashes, format versions, Parquet layout."""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta
from typing import Any

import duckdb
import fsspec
import pyarrow.parquet as pq
import pytest

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive._sync import run_sync
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import seal, unseal
from ckpt_archive.storage import RoundTrips
from ckpt_archive.testing import S3Server


class SimulatedCrash(Exception):
    pass


def grow(archive: ca.ArchiveCheckpointer, thread: str, steps: range, messages: list[Any]) -> list[ca.Checkpoint]:
    saved = []
    for step in steps:
        messages.append({"role": "user", "content": f"message {step} " + "x" * 200})
        ckpt = ca.Checkpoint.new(thread, {"messages": list(messages), "counter": step}, step=step)
        archive.save(ckpt)
        saved.append(ckpt)
    return saved


def test_s3_request_economy(s3_server: S3Server, s3_url: str) -> None:
    opts = s3_server.storage_options()
    writer = ca.open_archive(s3_url, storage_options=opts, full_snapshot_interval=10)
    messages: list[Any] = []
    grow(writer, "t", range(24), messages)  # warm: the writer knows its head

    s3_server.reset_counts()
    grow(writer, "t", range(24, 25), messages)  # a delta save: its commit entry, nothing else
    assert s3_server.requests["LIST"] == 0
    assert s3_server.total() == s3_server.requests["PUT"] == 1, s3_server.log

    s3_server.reset_counts()
    grow(writer, "t", range(25, 31), messages)  # includes the snapshot at step 30
    assert s3_server.requests["LIST"] == 0
    # 5 commits, then the snapshot's: snapshot, segment and commit (its fold goes with the next save,
    # the hint naming that fold with the one after: seq 33). No hint: the last (seq 23, the save after
    # step 20's fold) is 8 commits behind, fewer than ``hint_every`` (10)
    assert s3_server.total() == 5 + 3, s3_server.log

    trips = RoundTrips(ca.open_store(s3_url, opts), latency=0.05)
    reader = ca.ArchiveCheckpointer(trips)
    s3_server.reset_counts()
    latest = reader.load("t")
    assert latest is not None and latest.step == 30 and len(latest.state["messages"]) == 31
    assert s3_server.requests["LIST"] == 0
    assert trips.depth == 3, (trips.depth, trips.calls)
    # marker, hint; the commit the hint names (is it the one committed?), the probe window past it (as
    # far as the reader's own writes would let a hint trail: ``min(hint_every, interval)``, 10) and the
    # hint's snapshot, in one round trip; then the snapshot of step 30, which the run past the hint ends
    # with (its fold goes with the next save, the hint naming it with the one after). The window of 10
    # (5 before HINT_EVERY went 5 -> 10) is 5 GETs more in the same round trip
    assert reader.engine.root.probe_window == 10
    assert s3_server.total() == 2 + 1 + 10 + 1 + 1, s3_server.log

    lister = ca.open_archive(s3_url, storage_options=opts)
    s3_server.reset_counts()
    infos = lister.list("t")
    assert len(infos) == 31
    assert s3_server.requests["LIST"] == 0
    # list reads manifest objects only, never a snapshot or a delta segment
    assert all("/snapshots/" not in p and "/deltas/" not in p for _, p in s3_server.log), s3_server.log


def test_s3_save_round_trips(s3_server: S3Server, s3_url: str) -> None:
    """A warm writer's delta save is one sequential round trip, the head hint included (it is put with
    the commit; there is no id index to write first), and so is the one after a snapshot, which puts the
    snapshot's fold beside its commit, and the one after that, which puts the hint naming that fold (it
    has landed by then) beside its own; a snapshot save two (payloads, commit). The hint names the
    commit it went out with."""
    opts = s3_server.storage_options()
    trips = RoundTrips(ca.open_store(s3_url, opts))
    writer = ca.ArchiveCheckpointer(trips, full_snapshot_interval=10)
    messages: list[Any] = []
    grow(writer, "t", range(11), messages)
    trips.latency = 0.02
    depths, hinted = {}, []
    for step in range(11, 21):
        trips.reset()
        s3_server.reset_counts()
        grow(writer, "t", range(step, step + 1), messages)
        depths[step] = trips.depth
        hinted.append(any(p.endswith("/_head.json.zst") and k == "PUT" for k, p in s3_server.log))
    assert all(depths[s] == 1 for s in range(11, 20)), depths
    assert depths[20] == 2, depths  # the snapshot
    # the save after the fold's (seq 13) and no other: the next falls due at seq 23 (``hint_every`` 10)
    assert hinted == [s == 12 for s in range(11, 21)]
    assert sum(p.endswith(".manifest.json.zst") for _, p, _ in trips.calls) == 0  # since the last reset
    hint = unseal(run_sync(writer.store.get(layout.head_key("t"))), "hint", kind="head hint")
    entry = run_sync(writer.store.get(layout.log_key("t", hint["seq"])))
    assert hint["entry_sha256"] == codec.sha256(entry) and hint["chain"][-1]["step"] == 12
    assert hint["manifest_seq"] == 11  # the fold of step 10's compaction, put with step 11's save


@pytest.mark.parametrize("version", [2, 3])
def test_a_marker_of_an_unknown_version_is_refused(tmp_path: Any, version: int) -> None:
    """A marker of a version this reader does not know is refused, not guessed at."""
    (tmp_path / "a").mkdir()
    body = {"type": "archive", "created_at": "2030-01-01", "format_version": version}
    marker = codec.dumps({**body, "digest": codec.sha256(codec.dumps(body))})  # sealed, as its writer would
    (tmp_path / "a" / layout.ARCHIVE_MARKER).write_bytes(marker)
    with pytest.raises(ca.UnsupportedFormatVersion, match=f"format_version {version}"):
        ca.open_archive(str(tmp_path / "a")).load("t")


def test_chain_never_exceeds_interval_with_forks_and_irregular_steps(tmp_path: Any) -> None:
    archive = ca.open_archive(str(tmp_path / "a"), full_snapshot_interval=4)
    ids: list[str] = []
    steps = [0, 1, 2, 7, 9, 10, 11, 13, 14, 15, 17, 21, 22, 23, 25, 26, 27]
    for i, step in enumerate(steps):
        parent = ids[i // 2] if i % 5 == 4 else None  # fork now and then
        ckpt = ca.Checkpoint.new("t", {"i": i, "hist": list(range(i))}, step=step, parent_id=parent)
        ids.append(archive.save(ckpt))
    m = archive.engine.log.manifests["t"]
    for cid in ids:
        assert len(m.chain(cid)) <= 4
        assert archive.load_by_id(cid) is not None


async def race_round(writers: list[ca.ArchiveCheckpointer], i: int, results: dict[str, int]) -> None:
    latest = await asyncio.gather(*(w.aload("race") for w in writers))

    async def attempt(n: int) -> None:
        head = latest[n]
        state = {"log": [*(head.state["log"] if head else []), f"w{n}-{i}"]}
        try:
            await writers[n].asave(ca.Checkpoint.new("race", state, step=(head.step + 1) if head else 0))
            results["ok"] += 1
        except ca.CheckpointConflict:
            results["conflict"] += 1

    await asyncio.gather(*(attempt(n) for n in range(len(writers))))


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_racing_writers_threads(archive_url: Any, backend: str) -> None:
    """Four writers load the same head, then all save: exactly one commit per round wins."""
    url, opts = archive_url(backend)
    results = {"ok": 0, "conflict": 0}
    writers = [ca.open_archive(url, storage_options=opts, full_snapshot_interval=5) for _ in range(4)]

    async def main() -> None:
        for i in range(8):
            await race_round(writers, i, results)

    asyncio.run(main())
    assert results == {"ok": 8, "conflict": 24}
    check_linear(ca.open_archive(url, storage_options=opts), "race", results["ok"])


def check_linear(archive: ca.ArchiveCheckpointer, thread: str, committed: int) -> None:
    infos = archive.list(thread)
    assert len(infos) == committed
    assert infos[0].parent_id is None
    for prev, info in itertools.pairwise(infos):
        assert info.parent_id == prev.checkpoint_id
    previous: list[str] = []
    for info in infos:
        ckpt = archive.load_by_id(info.checkpoint_id)
        assert ckpt is not None
        # every state extends its parent's log by exactly one entry: nothing was lost or merged
        assert ckpt.state["log"][:-1] == previous
        previous = ckpt.state["log"]


def test_interrupted_save_leaves_archive_unchanged(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=3)
    messages: list[Any] = []
    grow(archive, "t", range(5), messages)
    before_list = archive.list("t")
    before_state = archive.load("t")

    real = archive.store.put_if_absent

    async def crash_on_commit(key: str, data: bytes) -> bool:
        if "/_log/" in key:
            raise SimulatedCrash("process died between payload and commit")
        return await real(key, data)

    monkeypatch.setattr(archive.store, "put_if_absent", crash_on_commit)
    for step in (5, 6):  # a snapshot+compaction save (step 6) and a delta save
        with pytest.raises(SimulatedCrash):
            grow(archive, "t", range(step, step + 1), list(messages))
    fresh = ca.open_archive(url)
    assert fresh.list("t") == before_list
    assert fresh.load("t") == before_state
    assert archive.list("t") == before_list
    # the writer itself carries on from the committed head
    monkeypatch.undo()
    grow(archive, "t", range(5, 6), messages)
    assert [i.step for i in ca.open_archive(url).list("t")] == list(range(6))


def test_unknown_format_version_is_a_clear_error(tmp_path: Any) -> None:
    url = str(tmp_path / "a")
    archive = ca.open_archive(url)
    archive.save(ca.Checkpoint.new("t", {"a": 1}))
    fs = fsspec.filesystem("file")
    entry = unseal(fs.cat_file(f"{url}/{layout.log_key('t', 1)}"), "commit", kind="commit entry")
    entry["seq"] = 2
    body = {k: v for k, v in entry.items() if k != "digest"}
    body["format_version"] = 99
    future = codec.dumps({**body, "digest": codec.sha256(codec.dumps(body))})
    fs.pipe_file(f"{url}/{layout.log_key('t', 2)}", codec.compress(future))
    with pytest.raises(ca.UnsupportedFormatVersion, match="99"):
        ca.open_archive(url).load("t")

    marker = codec.loads(fs.cat_file(f"{url}/_archive.json"))
    marker["format_version"] = 7
    fs.pipe_file(f"{url}/_archive.json", codec.dumps(marker))
    with pytest.raises(ca.UnsupportedFormatVersion, match="7"):
        ca.open_archive(url).list("t")


@pytest.mark.parametrize("per_group", [64, 3])
def test_segments_are_parquet_row_groups_of_consecutive_checkpoints_readable_without_us(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, per_group: int
) -> None:
    from ckpt_archive.format import objects

    monkeypatch.setattr(objects, "GROUP_CHECKPOINTS", per_group)
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=5)
    messages: list[Any] = []
    grow(archive, "chat/1", range(12), messages)
    assert archive.compact("chat/1") is True
    assert archive.compact("chat/1") is False
    files = sorted(fsspec.filesystem("file").glob(f"{url}/thread_id=*/deltas/*.parquet"))
    assert len(files) == 3  # steps 0-5, 6-10, 11: each snapshot's history rows join its compaction's segment
    assert [pq.ParquetFile(f).num_row_groups for f in files] == ([1, 1, 1] if per_group == 64 else [2, 2, 1])
    infos = ca.open_archive(url).list("chat/1")
    deltas = [i for i in infos if i.kind == "delta"]
    assert all(i.stored_bytes > 0 for i in deltas)  # each checkpoint's share of its row group
    for info in infos:  # every checkpoint of a shared row group reads back its own ops only
        ckpt = ca.open_archive(url).load_by_id(info.checkpoint_id)
        assert ckpt is not None and ckpt.state["messages"] == messages[: info.step + 1]
    rows = duckdb.sql(
        f"select thread_id, step, op, key from read_parquet('{url}/thread_id=*/deltas/*.parquet', "
        "hive_partitioning=false) order by step"
    ).fetchall()
    assert [r[1] for r in rows if r[3] == "messages"] == list(range(12))  # snapshot steps included
    assert {r[0] for r in rows} == {"chat/1"}
    # the first checkpoint's rows are against the empty content: its list is set whole, then appended to
    assert [r[2] for r in rows if r[3] == "messages"] == ["set"] + ["append"] * 11
    fresh = ca.open_archive(url)
    assert fresh.load("chat/1").state["messages"] == messages  # type: ignore[union-attr]
    assert [i.kind for i in fresh.list("chat/1")][:6] == ["full", "delta", "delta", "delta", "delta", "full"]


def test_backend_without_put_if_absent_is_refused(tmp_path: Any) -> None:
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem

    fs = DirFileSystem(path=str(tmp_path), fs=LocalFileSystem(auto_mkdir=True))
    with pytest.raises(ca.UnsafeBackend, match="single_writer"):
        ca.open_store(fs, root="a")
    archive = ca.ArchiveCheckpointer(ca.open_store(fs, root="a", single_writer=True))
    archive.save(ca.Checkpoint.new("t", {"a": 1}))
    assert archive.load("t").state == {"a": 1}  # type: ignore[union-attr]
    assert ca.open_archive(str(tmp_path / "a")).load("t").state == {"a": 1}  # type: ignore[union-attr]


def test_lost_hint_is_recovered_from_the_log(tmp_path: Any) -> None:
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=4)
    saved = grow(archive, "t", range(9), [])
    fsspec.filesystem("file").rm_file(f"{url}/{layout.head_key('t')}")
    fresh = ca.open_archive(url)
    assert fresh.load("t").checkpoint_id == saved[-1].checkpoint_id  # type: ignore[union-attr]
    assert len(fresh.list("t")) == 9


def test_gc_keeps_commit_one_so_a_lost_hint_after_gc_is_still_recovered(tmp_path: Any) -> None:
    """No hint and no commit 1 means a new thread (no LIST); so gc must never collect commit 1."""
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=4)
    messages: list[Any] = []
    saved = grow(archive, "t", range(13), messages)
    archive.gc(grace=timedelta(0), unsafe_no_writers=True)
    fs = fsspec.filesystem("file")
    logs = sorted(p.rsplit("/", 1)[1] for p in fs.glob(f"{url}/thread_id=t/_log/*.json.zst"))
    assert logs[0] == "00000000000000000001.json.zst" and "00000000000000000002.json.zst" not in logs, logs
    fs.rm_file(f"{url}/{layout.head_key('t')}")
    fresh = ca.open_archive(url)
    assert fresh.load("t").checkpoint_id == saved[-1].checkpoint_id  # type: ignore[union-attr]
    grow(fresh, "t", range(13, 14), messages)  # appends after the real head: no fork at commit 1
    assert [i.step for i in ca.open_archive(url).list("t")] == list(range(14))


def test_listing_an_empty_folder_is_one_request_on_s3(s3_server: S3Server, s3_url: str) -> None:
    """s3fs's own ``ls`` lists the parent again when a folder is empty; the store must not."""
    archive = ca.open_archive(s3_url, storage_options=s3_server.storage_options())
    archive.save(ca.Checkpoint.new("t", {"a": 1}))  # the parent folder is not empty
    s3_server.reset_counts()
    assert run_sync(archive.store.list_dir("thread_id=t/nothing-here")) == []
    assert s3_server.requests["LIST"] == 1 and s3_server.total() == 1, s3_server.log
    assert "_log" in run_sync(archive.store.list_dir("thread_id=t"))


def test_first_save_of_a_thread_lists_nothing(s3_server: S3Server, s3_url: str) -> None:
    opts = s3_server.storage_options()
    trips = RoundTrips(ca.open_store(s3_url, opts))
    archive = ca.ArchiveCheckpointer(trips)
    s3_server.reset_counts()
    archive.save(ca.Checkpoint.new("first", {"a": 1}))  # also creates the archive marker
    # one LIST, of the root, to refuse creating an archive among other files (never in a known archive)
    assert s3_server.requests["LIST"] == 1 and s3_server.total() <= 9, s3_server.log
    s3_server.reset_counts()
    trips.latency = 0.1
    trips.reset()
    archive.save(ca.Checkpoint.new("second", {"a": 1}))  # a new thread of a known archive
    assert s3_server.requests["LIST"] == 0 and s3_server.total() <= 6, s3_server.log
    assert trips.depth <= 4, trips.calls
    assert ca.open_archive(s3_url, storage_options=opts).load("second").state == {"a": 1}  # type: ignore[union-attr]


def test_stale_hint_is_detected(tmp_path: Any) -> None:
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=4)
    grow(archive, "t", range(3), [])
    fs = fsspec.filesystem("file")
    old_hint = fs.cat_file(f"{url}/{layout.head_key('t')}")
    saved = grow(archive, "t", range(3, 6), [])
    fs.pipe_file(f"{url}/{layout.head_key('t')}", old_hint)  # a slow writer's late hint
    assert ca.open_archive(url).load("t").checkpoint_id == saved[-1].checkpoint_id  # type: ignore[union-attr]


def test_archive_marker_is_sealed(tmp_path: Any) -> None:
    url = str(tmp_path / "a")
    ca.open_archive(url).save(ca.Checkpoint.new("t", {}))
    doc = codec.loads(fsspec.filesystem("file").cat_file(f"{url}/_archive.json"))
    assert doc["format_version"] == 1 and doc["type"] == "archive" and "commits" not in doc
    assert seal(doc) == codec.dumps(doc)


def test_long_lists_are_replayed_from_history_rows_and_never_stored_in_snapshots(tmp_path: Any) -> None:
    """A list of 32 items or more is stored once, in the history rows: a snapshot keeps ``[]`` and its
    place, so snapshots stay the size of the small keys however long the chat grows (spec.md section 5)."""
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=10)
    messages: list[Any] = []
    saved = []
    for step in range(100):
        messages.append({"role": "user", "content": f"message {step} " + "x" * 200})
        state = {"chat": {"messages": list(messages), "meta": {"n": step}}, "short": [1, 2]}
        ckpt = ca.Checkpoint.new("t", state, step=step)
        archive.save(ckpt)
        saved.append(ckpt)
    fs = fsspec.filesystem("file")
    assert not fs.glob(f"{url}/thread_id=t/pages")
    fresh = ca.open_archive(url)
    for ckpt in saved:
        assert fresh.load_by_id(ckpt.checkpoint_id).state == ckpt.state  # type: ignore[union-attr]
    snapshots = sorted(fs.glob(f"{url}/thread_id=t/snapshots/*"))
    doc = codec.loads(codec.decompress(fs.cat_file(snapshots[-1])))
    assert doc["state"] == {"chat": {"messages": [], "meta": {"n": 90}}, "short": [1, 2]}
    assert doc["lists"] == [[None, "chat", "messages"]]
    sizes = [fs.size(k) for k in snapshots]
    assert max(sizes[4:]) < 2 * min(sizes[4:]), sizes  # 40 messages or 90: the same size


def test_a_tampered_history_row_a_snapshot_replays_is_detected(tmp_path: Any) -> None:
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=10)
    for step in range(41):
        archive.save(ca.Checkpoint.new("t", {"m": list(range(step + 1))}, step=step))
    archive.close()
    fs = fsspec.filesystem("file")
    segment = sorted(fs.glob(f"{url}/thread_id=t/deltas/*.parquet"))[0]
    data = bytearray(fs.cat_file(segment))
    data[len(data) // 3] ^= 0xFF
    fs.pipe_file(segment, bytes(data))
    with pytest.raises(ca.IntegrityError):
        ca.open_archive(url).load("t")


def test_plain_delta_saves_write_only_their_commit_and_a_fresh_reader_still_finds_the_head(
    s3_server: S3Server, s3_url: str
) -> None:
    """A plain delta save is one request, its commit entry (the snapshot's fold goes with the save after
    it, and the hint naming that fold with the save after that, once in the default ``hint_every`` of 10
    commits, one snapshot interval); a
    fresh reader still loads the newest checkpoint from the hint plus the commits it trails by, in two
    round trips, without reading the manifest."""
    opts = s3_server.storage_options()
    writer = ca.open_archive(s3_url, storage_options=opts, full_snapshot_interval=10)
    messages: list[Any] = []
    saved = grow(writer, "t", range(22), messages)
    costs = []
    for step in range(22, 30):  # deltas only (snapshots at steps 0, 10, 20 and 30)
        s3_server.reset_counts()
        saved += grow(writer, "t", range(step, step + 1), messages)
        costs.append(s3_server.total())
        assert s3_server.requests["LIST"] == 0
    # the commit; at seq 23 with the hint naming seq 21's fold (put with seq 22), 10 after the last (seq 13)
    assert costs == [2, 1, 1, 1, 1, 1, 1, 1], costs
    hint = unseal(
        fsspec.filesystem("s3", **opts).cat_file(f"{s3_url}/{layout.head_key('t')}"), "hint", kind="head hint"
    )
    assert hint["seq"] == 23 and writer.engine.log.manifests["t"].seq == 30  # 7 plain deltas behind
    assert hint["manifest_seq"] == 21
    trips = RoundTrips(ca.open_store(s3_url, opts), latency=0.05)
    reader = ca.ArchiveCheckpointer(trips)
    s3_server.reset_counts()
    latest = reader.load("t")
    assert latest is not None and latest.checkpoint_id == saved[-1].checkpoint_id
    assert latest.state == saved[-1].state and trips.depth <= 2, trips.calls
    assert not any("manifest" in p or "_parts" in p for _, p in s3_server.log), s3_server.log
    grow(reader, "t", range(30, 31), messages)  # and it can append after the head it read
    assert [i.step for i in ca.open_archive(s3_url, storage_options=opts).list("t")] == list(range(31))


def test_a_trailing_hint_followed_by_a_fork_or_an_edit_reads_the_manifest(tmp_path: Any) -> None:
    """Only a delta appended to the hint's head is taken from the commit after the hint; a fork (a
    delta whose parent is another checkpoint) or a maintenance commit there sends the reader to the
    manifest, which has the real head and metadata."""
    url = str(tmp_path / "a")
    fs = fsspec.filesystem("file")
    archive = ca.open_archive(url, full_snapshot_interval=10, hint_every=2)
    messages: list[Any] = []
    saved = grow(archive, "t", range(3), messages)  # seq 3: hint written (2 commits after seq 1's)
    assert unseal(fs.cat_file(f"{url}/{layout.head_key('t')}"), "hint", kind="head hint")["seq"] == 3
    fork = ca.Checkpoint.new("t", {"forked": True}, step=9, parent_id=saved[0].checkpoint_id)
    archive.save(fork)  # seq 4, a delta: the hint is not rewritten
    assert unseal(fs.cat_file(f"{url}/{layout.head_key('t')}"), "hint", kind="head hint")["seq"] == 3
    loaded = ca.open_archive(url).load("t")
    assert loaded is not None and loaded.checkpoint_id == fork.checkpoint_id and loaded.state == {"forked": True}

    head = grow(archive, "t", range(10, 11), messages)[-1]  # seq 5: a delta appended to the head (the fork)
    old_hint = fs.cat_file(f"{url}/{layout.head_key('t')}")
    archive.pin(head.checkpoint_id)  # seq 6: a maintenance commit, then the hint is put back one commit late
    fs.pipe_file(f"{url}/{layout.head_key('t')}", old_hint)
    loaded = ca.open_archive(url).load("t")
    assert loaded is not None and loaded.checkpoint_id == head.checkpoint_id
    assert loaded.metadata.get(ca.retention.PINNED_KEY) is True


def test_hint_is_compressed_and_a_plain_one_is_no_hint(s3_server: S3Server, s3_url: str) -> None:
    """The hint is written as zstd and read without the LIST of the recovery path; plain sealed JSON
    where the hint belongs is not a hint: the reader rebuilds from the log and loses nothing."""
    opts = s3_server.storage_options()
    writer = ca.open_archive(s3_url, storage_options=opts, full_snapshot_interval=4)
    saved = grow(writer, "t", range(7), [])
    fs = fsspec.filesystem("s3", **opts)
    stored = fs.cat_file(f"{s3_url}/{layout.head_key('t')}")
    assert stored[:4] == codec.ZSTD_MAGIC
    s3_server.reset_counts()
    loaded = ca.open_archive(s3_url, storage_options=opts).load("t")
    assert loaded is not None and loaded.checkpoint_id == saved[-1].checkpoint_id
    assert s3_server.requests["LIST"] == 0, s3_server.log
    fs.pipe_file(f"{s3_url}/{layout.head_key('t')}", codec.decompress(stored, kind="head hint"))
    loaded = ca.open_archive(s3_url, storage_options=opts).load("t")
    assert loaded is not None and loaded.checkpoint_id == saved[-1].checkpoint_id
