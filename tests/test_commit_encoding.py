"""Commit entries are stored zstd-compressed in archives whose marker says ``"commits": "zstd"`` (every
archive this revision creates), and as plain sealed JSON in archives created before: readers take both,
even mixed in one log, and the bytes decide which they are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec
import pytest

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive.archive import layout
from ckpt_archive.archive.manifest import now_iso, seal, unseal


def _grow(archive: ca.ArchiveCheckpointer, steps: int) -> list[ca.Checkpoint]:
    saved, messages = [], []
    for step in range(steps):
        messages.append({"role": "user", "content": f"message {step}: " + " ".join(["lorem ipsum dolor"] * 20)})
        ckpt = ca.Checkpoint.new("t", {"messages": list(messages), "turn": step}, step=step)
        archive.save(ckpt)
        saved.append(ckpt)
    return saved


def _entries(root: Path) -> dict[str, bytes]:
    fs = fsspec.filesystem("file")
    return {p: fs.cat_file(p) for p in sorted(fs.glob(f"{root}/thread_id=t/_log/*.json"))}


def _reads(url: str) -> tuple[Any, ...]:
    reader = ca.open_archive(url)
    infos = reader.list("t")
    latest = reader.load("t")
    assert latest is not None
    states = [reader.load_by_id(i.checkpoint_id) for i in infos]
    return [i.model_dump() for i in infos], latest.state, [s.state for s in states if s is not None]


def test_new_archives_compress_commit_entries_and_older_ones_keep_them_plain(tmp_path: Path) -> None:
    new, old = tmp_path / "new", tmp_path / "old"
    old.mkdir()
    (old / layout.ARCHIVE_MARKER).write_bytes(seal({"type": "archive", "created_at": now_iso()}))  # an earlier writer's
    saved_new = _grow(ca.open_archive(str(new), full_snapshot_interval=4), 12)
    saved_old = _grow(ca.open_archive(str(old), full_snapshot_interval=4), 12)

    marker = unseal((new / layout.ARCHIVE_MARKER).read_bytes(), "marker", accept=(2,))
    assert marker["commits"] == "zstd" and marker["format_version"] == 2
    zipped, plain = _entries(new), _entries(old)
    assert len(zipped) == len(plain) == 12
    assert all(data[:4] == codec.ZSTD_MAGIC for data in zipped.values())
    assert all(data[:1] == b"{" for data in plain.values())  # readers of earlier revisions read these
    assert sum(map(len, zipped.values())) < 0.6 * sum(map(len, plain.values()))
    for data in zipped.values():  # the same sealed document, only compressed
        assert codec.decompress(data) == codec.dumps(unseal(data, "commit"))

    for url, saved in ((str(new), saved_new), (str(old), saved_old)):
        infos, latest, states = _reads(url)
        assert [i["checkpoint_id"] for i in infos] == [c.checkpoint_id for c in saved]
        assert latest == saved[-1].state and states == [c.state for c in saved]
        assert ca.open_archive(url).verify().ok


def test_a_log_mixing_plain_and_compressed_entries_reads_the_same(tmp_path: Path) -> None:
    url = str(tmp_path / "a")
    _grow(ca.open_archive(url, full_snapshot_interval=4), 10)
    before = _reads(url)
    fs = fsspec.filesystem("file")
    for i, (path, data) in enumerate(_entries(tmp_path / "a").items()):
        if i % 2:  # every other entry back to plain sealed JSON, as an earlier writer stored it
            fs.pipe_file(path, codec.decompress(data))
    (tmp_path / "a" / layout.head_key("t")).unlink()  # no hint: the reader replays the log
    assert _reads(url) == before
    assert ca.open_archive(url).verify().ok


@pytest.mark.parametrize("damage", ["truncate", "append", "flip"])
def test_a_damaged_compressed_entry_is_a_typed_error(tmp_path: Path, damage: str) -> None:
    url = str(tmp_path / "a")
    _grow(ca.open_archive(url, full_snapshot_interval=100), 5)
    path, data = list(_entries(tmp_path / "a").items())[2]
    bad = {"truncate": data[:-3], "append": data + b"\x00", "flip": data[:-6] + bytes([data[-6] ^ 1]) + data[-5:]}
    fsspec.filesystem("file").pipe_file(path, bad[damage])
    (tmp_path / "a" / layout.head_key("t")).unlink()
    with pytest.raises(ca.CorruptManifest):
        ca.open_archive(url).list("t")
    assert not ca.open_archive(url).verify().ok
