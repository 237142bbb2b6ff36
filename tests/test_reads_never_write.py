"""Reading never writes; only the first commit creates an archive; gc keeps to the layout (issue 14 item 4)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest

import ckpt_archive as ca
from ckpt_archive.testing import S3Server

ZERO = timedelta(0)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``root`` with its size and mtime: what a read must leave as it was."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def read_everything(archive: ca.ArchiveCheckpointer) -> None:
    assert archive.load("t") is None
    assert archive.list("t") == []
    assert archive.load_by_id("01234567-89ab-7def-8123-456789abcdef") is None
    assert archive.threads() == []
    assert list(archive.history("t")) == []


@pytest.mark.parametrize("exists", [True, False])
def test_reads_of_an_empty_location_write_nothing(tmp_path: Path, exists: bool) -> None:
    root = tmp_path / "a"
    if exists:
        root.mkdir()
    before = snapshot(tmp_path)
    read_everything(ca.open_archive(str(root)))
    assert ca.open_archive(str(root)).gc().deleted == []
    assert snapshot(tmp_path) == before
    archive = ca.open_archive(str(root))  # the first save creates the archive
    archive.save(ca.Checkpoint.new("t", {"a": 1}))
    assert (root / "_archive.json").exists() and archive.load("t").state == {"a": 1}  # type: ignore[union-attr]


def test_reads_of_an_empty_bucket_write_nothing(s3_server: S3Server, s3_url: str) -> None:
    opts = s3_server.storage_options()
    archive = ca.open_archive(s3_url, storage_options=opts)
    s3_server.reset_counts()
    read_everything(archive)
    assert s3_server.requests.get("PUT", 0) == 0 and s3_server.requests.get("POST", 0) == 0, s3_server.log
    assert archive.store.fs.find(archive.store.root) == []


def test_a_folder_of_other_files_is_not_an_archive(tmp_path: Path) -> None:
    root = tmp_path / "photos"
    root.mkdir()
    (root / "cat.jpg").write_bytes(b"meow")
    before = snapshot(tmp_path)
    archive = ca.open_archive(str(root))
    for read in (lambda: archive.load("t"), lambda: archive.list("t"), archive.threads, archive.gc):
        with pytest.raises(ca.ArchiveNotFound, match=r"cat\.jpg.*create=True"):
            read()
    with pytest.raises(ca.ArchiveNotFound, match="create=True"):
        archive.save(ca.Checkpoint.new("t", {"a": 1}))
    assert snapshot(tmp_path) == before
    created = ca.open_archive(str(root), create=True)  # asked for: an archive beside the photos
    created.save(ca.Checkpoint.new("t", {"a": 1}))
    assert (root / "_archive.json").exists() and (root / "cat.jpg").read_bytes() == b"meow"
    assert ca.open_archive(str(root)).load("t").state == {"a": 1}  # type: ignore[union-attr]


def test_an_encrypted_archive_without_its_marker_is_never_given_a_new_one(tmp_path: Path) -> None:
    keys = ca.Encryption({"k1": os.urandom(32)}, "k1")
    root = tmp_path / "a"
    archive = ca.open_archive(str(root), encryption=keys)
    saved = ca.Checkpoint.new("t", {"secret": 42})
    archive.save(saved)
    marker = (root / "_archive.json").read_bytes()
    (root / "_archive.json").unlink()
    before = snapshot(tmp_path)
    again = ca.open_archive(str(root), encryption=keys)
    for call in (
        lambda: again.load("t"),
        lambda: again.list("t"),
        lambda: again.load_by_id(saved.checkpoint_id),
        again.threads,
        lambda: again.save(ca.Checkpoint.new("u", {"b": 1})),
        lambda: ca.open_archive(str(root), encryption=keys, create=True).save(ca.Checkpoint.new("u", {"b": 1})),
        lambda: again.gc(grace=ZERO, unsafe_no_writers=True),
    ):
        with pytest.raises(ca.ArchiveMarkerMissing, match="restore it"):
            call()
    assert snapshot(tmp_path) == before
    (root / "_archive.json").write_bytes(marker)  # restored: every checkpoint decrypts again
    assert ca.open_archive(str(root), encryption=keys).load("t").state == {"secret": 42}  # type: ignore[union-attr]


def test_gc_deletes_only_the_archives_own_files(tmp_path: Path) -> None:
    root = tmp_path / "a"
    archive = ca.open_archive(str(root))
    archive.save(ca.Checkpoint.new("t", {"a": 1}))
    ours = root / "thread_id=t" / "_log" / f".tmp-{'a' * 32}"  # an interrupted local write of the archive
    ours.write_bytes(b"partial")
    users = [
        root / ".tmp-build",
        root / f".tmp-{'b' * 32}.keep",
        root / "notes" / f".tmp-{'c' * 32}",
        root / "thread_id=t" / "mine" / f".tmp-{'d' * 32}",
        root / "thread_id=t" / "snapshots" / "deeper" / "x.json.zst",
        root / "_ids" / "sub" / "y.json",
    ]
    for path in users:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"the user's")
    report = archive.gc(grace=ZERO, unsafe_no_writers=True)
    assert not ours.exists() and report.temp_files == 1
    assert all(p.read_bytes() == b"the user's" for p in users), report.deleted
    assert archive.load("t").state == {"a": 1}  # type: ignore[union-attr]
