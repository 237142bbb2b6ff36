"""gc never destroys a committed checkpoint (issue 14 item 3).

A grace below ``gc_floor`` is refused while writers may run; a save that outlives the grace checks its
own checkpoint afterwards; with a writer saving in a loop in another process, every save it reports as
successful loads after gc has run again and again, at the floor and (once the writer stopped) at 0.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive.engine import gc_floor
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import seal, unseal
from ckpt_archive.format.schema import MAX_GC_GRACE_MS
from ckpt_archive.storage import ObjectStore, WrapperStore
from ckpt_archive.testing import S3Server

ROOT = Path(__file__).resolve().parent.parent
WRITER = str(Path(__file__).with_name("gc_writer.py"))
ZERO = timedelta(0)


def test_gc_below_the_floor_is_refused_unless_no_writers(tmp_path: Path) -> None:
    archive = ca.open_archive(str(tmp_path / "a"), gc_grace=ZERO)
    archive.save(ca.Checkpoint.new("t", {"a": 1}))
    floor = gc_floor(ZERO)
    assert floor == timedelta(seconds=2) and gc_floor(timedelta(hours=1)) == timedelta(hours=1)
    with pytest.raises(ca.UnsafeGcGrace, match="unsafe_no_writers=True"):
        archive.gc(grace=ZERO)
    hourly = ca.open_archive(str(tmp_path / "b"))  # created with the default grace, 1 h
    hourly.save(ca.Checkpoint.new("t", {"a": 1}))
    with pytest.raises(ca.UnsafeGcGrace, match="below 3600 s"):
        ca.open_archive(str(tmp_path / "b")).gc(grace=timedelta(minutes=10))
    # the floor is the archive's: opened without a grace, a process has archive a's (0, floor 2 s)
    assert ca.open_archive(str(tmp_path / "a")).gc(grace=floor).errors == []
    assert archive.gc().errors == []  # the default grace is never below the floor
    assert archive.gc(grace=floor).errors == []
    assert archive.gc(grace=ZERO, unsafe_no_writers=True).errors == []
    assert archive.load("t").state == {"a": 1}  # type: ignore[union-attr]


class StalledCommits(WrapperStore):
    """The real store, with a hook run before each commit entry is created (a save stalled there)."""

    def __init__(self, inner: ObjectStore, stall: Any) -> None:
        super().__init__(inner)
        self.stall = stall

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        if "/_log/" in key and self.stall is not None:
            stall, self.stall = self.stall, None
            await stall()
        return await super().put_if_absent(key, data)


def test_a_save_slower_than_the_grace_still_loads(tmp_path: Path) -> None:
    """gc collects the payloads of a save stalled before its commit (they are orphans then, and older
    than the grace); the save notices it took that long and puts them again before reporting success."""
    url = str(tmp_path / "a")
    base = ca.open_archive(url, gc_grace=ZERO, full_snapshot_interval=2)
    first = ca.Checkpoint.new("t", {"items": list(range(40))})
    base.save(first)
    collected: list[str] = []

    async def stall() -> None:
        await asyncio.sleep(gc_floor(ZERO).total_seconds() + 0.3)
        report = await ca.open_archive(url, gc_grace=ZERO).agc(grace=gc_floor(ZERO))
        collected.extend(report.deleted)

    writer = ca.ArchiveCheckpointer(StalledCommits(base.store, stall), gc_grace=ZERO, full_snapshot_interval=2)
    writer.load("t")
    slow = ca.Checkpoint.new("t", {"items": list(range(80))}, step=2, parent_id=first.checkpoint_id)
    writer.save(slow)  # step 2: a full snapshot, its pages and a segment, all written before the commit
    assert any("/snapshots/" in k for k in collected), collected  # gc did delete the save's payloads
    reader = ca.open_archive(url)
    assert reader.load("t").state == slow.state  # type: ignore[union-attr]
    assert reader.load_by_id(slow.checkpoint_id).state == slow.state  # type: ignore[union-attr]
    assert reader.verify().ok


MIN_SAVES = 24
"""Saves the writer makes however slow the machine: 12 a thread, past the hint interval (10), so a
hint naming a fold goes out and gc has a superseded log to collect while the writer runs (a loaded
machine made 7 saves in 6 s, and a gc with nothing to collect proves nothing)."""


def writer_process(url: str, opts: dict[str, Any], seconds: float, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    args = [sys.executable, WRITER, url, json.dumps(opts), str(seconds), "0", str(MIN_SAVES)]
    return subprocess.Popen(args, stdout=out.open("w"), text=True, env=env)


def check_saves(url: str, opts: dict[str, Any], out: Path) -> int:
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines and lines[-1] == {"done": True}, lines[-3:]
    errors = [line for line in lines if "error" in line]
    assert errors == [], errors  # never a raw FileNotFoundError (nor anything else)
    saved = [line for line in lines if "saved" in line]
    reader = ca.open_archive(url, storage_options=opts)
    unloadable = []
    for line in saved:
        try:
            ckpt = reader.load_by_id(line["saved"])
            ok = ckpt is not None and len(ckpt.state["items"]) == line["n"]  # type: ignore[arg-type]
        except ca.CheckpointError as exc:
            ok, ckpt = False, exc  # type: ignore[assignment]
        if not ok:
            unloadable.append((line, ckpt))
    assert unloadable == [], f"{len(unloadable)} of {len(saved)} saved checkpoints do not load: {unloadable[:3]}"
    return len(saved)


def gc_while_saving(url: str, opts: dict[str, Any], tmp_path: Path, seconds: float) -> None:
    # the archive's grace is 0 (its marker's): the writer and the collector are opened with it too
    ca.open_archive(url, storage_options=opts, gc_grace=ZERO).save(ca.Checkpoint.new("seed", {"items": []}))
    out = tmp_path / "writer.jsonl"
    proc = writer_process(url, opts, seconds, out)
    collector = ca.open_archive(url, storage_options=opts, gc_grace=ZERO)
    runs = deleted = 0
    try:
        while proc.poll() is None:
            deleted += collector.gc(grace=gc_floor(ZERO)).objects_deleted
            runs += 1
    finally:
        proc.wait(timeout=120)
    assert proc.returncode == 0
    for _ in range(3):  # the writer has stopped: nothing is in flight
        deleted += collector.gc(grace=ZERO, unsafe_no_writers=True).objects_deleted
    assert runs >= 2 and deleted > 0
    assert check_saves(url, opts, out) > 10
    assert ca.open_archive(url, storage_options=opts).verify().ok


def test_gc_while_a_process_saves_loses_nothing_local(tmp_path: Path) -> None:
    gc_while_saving(str(tmp_path / "a"), {}, tmp_path, seconds=5)


def test_gc_while_a_process_saves_loses_nothing_s3(s3_server: S3Server, s3_url: str, tmp_path: Path) -> None:
    gc_while_saving(s3_url, s3_server.storage_options(), tmp_path, seconds=6)


def test_settings_file_grace_and_key_reach_the_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = os.urandom(32)
    monkeypatch.setenv("TEAM_KEY", base64.b64encode(key).decode())
    toml = tmp_path / "ckpt.toml"
    url = tmp_path / "a"
    toml.write_text(f'url = "{url}"\ngc_grace = "5m"\nencryption_key = "env:TEAM_KEY"\n')
    archive = ca.ArchiveSettings.load(toml).open()
    assert archive.gc_grace == timedelta(minutes=5)
    assert archive.encryption is not None and archive.encryption.active_key_id == "TEAM_KEY"
    archive.save(ca.Checkpoint.new("t", {"secret": "the launch codes"}))
    assert not any(b"launch codes" in p.read_bytes() for p in url.rglob("*") if p.is_file())
    with pytest.raises(ca.KeyUnavailable):
        ca.open_archive(str(url), encryption=ca.Encryption({"other": os.urandom(32)}, "other")).load("t")
    assert ca.ArchiveSettings.load(toml).open().load("t").state == {"secret": "the launch codes"}  # type: ignore[union-attr]
    keyfile = tmp_path / "k.b64"
    keyfile.write_text(base64.b64encode(key).decode() + "\n")
    from_file = ca.ArchiveSettings.load(toml, encryption_key=f"file:{keyfile}").open()
    assert from_file.encryption is not None and from_file.encryption.active_key_id == "k.b64"
    with pytest.raises(ca.ConfigError, match="encryption_key"):
        ca.ArchiveSettings.load(toml, encryption_key="kms:arn:aws:kms:eu-west-1:1:key/x").open()
    monkeypatch.setenv("TEAM_KEY", "too short")
    with pytest.raises(ca.ConfigError, match="32 bytes"):
        ca.ArchiveSettings.load(toml).open()


def log_entries(url: str, thread: str) -> list[int]:
    """The seqs of the commit entries in a thread's log (on disk, as listed)."""
    names = os.listdir(Path(url) / layout.thread_dir(thread) / "_log")
    return sorted(s for n in names if (e := layout.log_name(n)) and e[0] == "commit" for s in [e[1]])


def test_a_maintenance_process_with_another_grace_cannot_lose_a_save(tmp_path: Path) -> None:
    """Issue 19 item 1: a writer opened with the default grace (its cached manifest trusted for 30 min)
    and a maintenance process opened with gc_grace=0 (floor 2 s) running a plain gc(). The grace is the
    archive's (its marker's): the maintenance process gets ``GraceMismatch``, and a plain gc of a process
    opened without one keeps the log the writer's cache relies on, so the writer's save conflicts
    instead of landing below the fold (where no reader would ever see it)."""
    url = str(tmp_path / "a")
    writer = ca.open_archive(url, full_snapshot_interval=4)  # default grace: it creates the archive with it
    first = ca.Checkpoint.new("t", {"n": 0}, step=0)
    writer.save(first)  # commit 1; the writer's cached manifest is at seq 1
    other = ca.open_archive(url, full_snapshot_interval=4)
    other.load("t")
    for step in range(1, 5):  # commits 2..5; step 4 is a snapshot: compacted, folded as of 5
        other.save(ca.Checkpoint.new("t", {"n": step}, step=step))
    assert log_entries(url, "t") == [1, 2, 3, 4, 5]
    time.sleep(gc_floor(ZERO).total_seconds() + 0.2)  # entries 2..5 are older than the 2 s floor of a grace of 0
    with pytest.raises(ca.GraceMismatch, match="open it without gc_grace"):
        ca.open_archive(url, gc_grace=ZERO).gc()
    report = ca.open_archive(url).gc()  # plain gc, the archive's grace (1 h)
    assert not [k for k in report.deleted if "/_log/" in k] and log_entries(url, "t") == [1, 2, 3, 4, 5]
    lost = ca.Checkpoint.new("t", {"n": "writer"}, step=1)
    saved = True
    try:
        writer.save(lost)  # against its cached seq 1 (fresh for 30 min): put-if-absent of commit 2
    except ca.CheckpointConflict:
        saved = False
    reader = ca.open_archive(url)
    assert not saved or reader.load_by_id(lost.checkpoint_id) is not None, "a save returned success, lost"
    assert not saved and reader.load("t").state == {"n": 4}  # type: ignore[union-attr]
    assert reader.verify().ok


def marker(root: Path) -> dict[str, Any]:
    return unseal((root / layout.ARCHIVE_MARKER).read_bytes(), "marker", kind="archive marker")


def test_the_grace_is_the_archives(tmp_path: Path) -> None:
    """The creating process's gc_grace is recorded in the marker; every process uses it (manifest ttl,
    gc's default grace and floor), and one opened with another explicit grace gets ``GraceMismatch``."""
    url = str(tmp_path / "a")
    ca.open_archive(url, gc_grace=timedelta(seconds=1.5)).save(ca.Checkpoint.new("t", {"a": 1}))
    assert marker(Path(url))["gc_grace_ms"] == 1500
    plain = ca.open_archive(url)
    assert plain.load("t") is not None and plain.gc_grace == timedelta(seconds=1.5)
    assert plain.engine.root.manifest_ttl == 1.0  # max(grace / 2, 1 s)
    assert plain.gc(grace=timedelta(seconds=2)).errors == []  # the archive's floor (2 s), not 1 h's
    with pytest.raises(ca.UnsafeGcGrace, match=r"below 2 s, .*\(gc_grace 1.5 s\)"):
        plain.gc(grace=timedelta(seconds=1))
    with pytest.raises(ValueError, match="ten years"):
        ca.open_archive(url, gc_grace=timedelta(days=3651))
    same = ca.open_archive(url, gc_grace=timedelta(milliseconds=1500))
    assert same.load("t") is not None
    for op in ("load", "save", "gc", "verify"):  # every way in: a read, a write, maintenance
        other = ca.open_archive(url, gc_grace=timedelta(hours=1))
        with pytest.raises(ca.GraceMismatch, match=r"has gc_grace 1.5 s .* not the 3600 s"):
            if op == "load":
                other.load("t")
            elif op == "save":
                other.save(ca.Checkpoint.new("t", {"a": 2}, step=1))
            elif op == "gc":
                other.gc()
            else:
                report = other.verify()
                raise ca.GraceMismatch(report.problems[0].message) if report.problems else AssertionError(op)
    settings_file = tmp_path / "ckpt.toml"
    settings_file.write_text(f'url = "{url}"\n')  # no gc_grace in the settings: the archive's
    assert ca.ArchiveSettings.load(settings_file).open().gc().errors == []
    assert ca.open_archive(url).load("t").state == {"a": 1}  # type: ignore[union-attr]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    grace=st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=False),
        st.text(max_size=8),
        st.integers(min_value=-(2**63), max_value=-1),
        st.integers(min_value=MAX_GC_GRACE_MS + 1, max_value=2**63 - 1),
        st.lists(st.integers(min_value=0, max_value=9), max_size=2),
        st.just("missing"),
    )
)
def test_a_marker_without_a_valid_grace_is_corrupt(tmp_path_factory: pytest.TempPathFactory, grace: Any) -> None:
    """A sealed marker whose gc_grace_ms is missing or not a whole number of ms in range is
    ``CorruptManifest`` to every reader and to gc (never a KeyError, never a grace nobody set)."""
    root = tmp_path_factory.mktemp("m")
    body = {"type": "archive", "created_at": "2030-01-01"} | ({} if grace == "missing" else {"gc_grace_ms": grace})
    (root / layout.ARCHIVE_MARKER).write_bytes(seal(body))
    with pytest.raises(ca.CorruptManifest, match="gc_grace_ms"):
        ca.open_archive(str(root)).load("t")
    with pytest.raises(ca.CorruptManifest, match="gc_grace_ms"):
        ca.open_archive(str(root), gc_grace=ZERO).gc(grace=ZERO, unsafe_no_writers=True)
    report = ca.open_archive(str(root)).verify()
    assert [p.kind for p in report.problems] == ["CorruptManifest"]


class StalledSnapshot(WrapperStore):
    """The real store, with a hook run before the first snapshot is put: a save paused (a VM suspended,
    a stop-the-world pause) after it checked its cached manifest and before its commit and hint."""

    def __init__(self, inner: ObjectStore, stall: Any) -> None:
        super().__init__(inner)
        self.stall = stall

    async def put(self, key: str, data: bytes) -> None:
        if "/snapshots/" in key and self.stall is not None:
            stall, self.stall = self.stall, None
            await stall()
        await super().put(key, data)


def lost_commit(url: str, other_steps: range) -> tuple[ca.ArchiveCheckpointer, ca.Checkpoint, list[str]]:
    """A writer (grace 0: its cache trusted for 1 s) paused for longer than the grace between checking its
    cached manifest (commit 1) and committing a snapshot; meanwhile another writer commits ``other_steps``
    (a fold at the last) and gc at the floor cuts the log below that fold. The paused save's commit 2 and
    its hint (due with a snapshot) then land below the fold. Returns the writer, its checkpoint and what
    gc deleted."""
    base = ca.open_archive(url, gc_grace=ZERO, full_snapshot_interval=4)
    base.save(ca.Checkpoint.new("t", {"n": 0}, step=0))
    deleted: list[str] = []

    async def stall() -> None:
        other = ca.open_archive(url, full_snapshot_interval=4)
        for step in other_steps:
            await other.asave(ca.Checkpoint.new("t", {"n": step}, step=step))
        await other.aflush_hints()  # the fold its last save's compaction left for the next save
        await asyncio.sleep(gc_floor(ZERO).total_seconds() + 0.3)
        deleted.extend((await ca.open_archive(url).agc(grace=gc_floor(ZERO))).deleted)

    writer = ca.ArchiveCheckpointer(StalledSnapshot(base.store, stall), full_snapshot_interval=4)
    writer.load("t")
    return writer, ca.Checkpoint.new("t", {"n": "paused"}, step=4), deleted


def test_a_save_whose_commit_landed_below_a_fold_fails(tmp_path: Path) -> None:
    """The slow save's check reads the log's listing, not the hint it put itself: before, it found its own
    hint naming its commit 2, reported success, and readers went by that hint to a thread without
    commits 2..5 until another write replaced it. Now the save fails and takes its hint back."""
    url = str(tmp_path / "a")
    writer, paused, deleted = lost_commit(url, range(1, 5))
    with pytest.raises(ca.CheckpointConflict, match="longer than gc's grace"):
        writer.save(paused)
    # gc deleted commits 2 to 4 (5 is fold 5's own entry, which a hint written with it names: it stays)
    assert sorted(k.rsplit("/", 1)[1][:20] for k in deleted if "/_log/" in k) == [f"{s:020d}" for s in range(2, 5)]
    assert log_entries(url, "t") == [1, 2, 5]  # the paused save's commit 2 did land, below fold 5
    reader = ca.open_archive(url)
    head = reader.load("t")
    assert head is not None and head.state == {"n": 4}
    assert [i.step for i in reader.list("t")] == [0, 1, 2, 3, 4]
    assert reader.load_by_id(paused.checkpoint_id) is None
    assert writer.load("t").state == {"n": 4}  # type: ignore[union-attr]
    writer.save(ca.Checkpoint.new("t", {"n": 5}, step=5))  # and goes on from the head
    assert ca.open_archive(url).load("t").parent_id == head.checkpoint_id  # type: ignore[union-attr]


def test_verify_reports_a_commit_below_a_fold_and_gc_keeps_it(tmp_path: Path) -> None:
    """The entry the paused save left below fold 5 is younger than the fold: verify reports it as
    ``LostCommit`` naming its checkpoint, and gc, even with no writers at grace 0, keeps it (it is the
    only copy of that save) and says so."""
    url = str(tmp_path / "a")
    writer, paused, _ = lost_commit(url, range(1, 5))
    with pytest.raises(ca.CheckpointConflict):
        writer.save(paused)
    report = ca.open_archive(url).verify()
    assert [(p.kind, p.checkpoint_id, p.key) for p in report.problems] == [
        ("LostCommit", paused.checkpoint_id, layout.log_key("t", 2))
    ], str(report)
    gc = ca.open_archive(url).gc(grace=ZERO, unsafe_no_writers=True)
    assert log_entries(url, "t") == [1, 2, 5]
    assert len(gc.errors) == 1 and paused.checkpoint_id in gc.errors[0] and "kept" in gc.errors[0]
    assert not ca.open_archive(url).verify().ok  # still reported after gc: nothing was lost silently
