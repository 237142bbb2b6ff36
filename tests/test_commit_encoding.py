"""Commit entries are stored zstd-compressed (the sealed JSON as one frame); anything else where an entry
belongs is damage, a typed error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec
import pytest

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive._sync import run_sync
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import unseal


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
    paths = sorted(fs.glob(f"{root}/thread_id=t/_log/*{layout.COMMIT_SUFFIX}"))
    return {p: fs.cat_file(p) for p in paths if not p.endswith(layout.FOLDED_SUFFIX)}


def _reads(url: str) -> tuple[Any, ...]:
    reader = ca.open_archive(url)
    infos = reader.list("t")
    latest = reader.load("t")
    assert latest is not None
    states = [reader.load_by_id(i.checkpoint_id) for i in infos]
    return [i.model_dump() for i in infos], latest.state, [s.state for s in states if s is not None]


def test_commit_entries_are_compressed_sealed_documents(tmp_path: Path) -> None:
    root = tmp_path / "a"
    saved = _grow(ca.open_archive(str(root), full_snapshot_interval=4), 12)

    marker = unseal((root / layout.ARCHIVE_MARKER).read_bytes(), "marker", kind="archive marker")
    assert marker["format_version"] == 1 and "commits" not in marker
    zipped = _entries(root)
    assert len(zipped) == 12
    assert all(data[:4] == codec.ZSTD_MAGIC for data in zipped.values())
    plain = sum(len(codec.decompress(data, kind="commit entry")) for data in zipped.values())
    assert sum(map(len, zipped.values())) < 0.6 * plain
    for data in zipped.values():  # the same sealed document, only compressed
        assert codec.decompress(data, kind="commit entry") == codec.dumps(unseal(data, "commit", kind="commit entry"))

    infos, latest, states = _reads(str(root))
    assert [i["checkpoint_id"] for i in infos] == [c.checkpoint_id for c in saved]
    assert latest == saved[-1].state and states == [c.state for c in saved]
    assert ca.open_archive(str(root)).verify().ok


@pytest.mark.parametrize("damage", ["truncate", "append", "flip", "plain"])
def test_a_damaged_compressed_entry_is_a_typed_error(tmp_path: Path, damage: str) -> None:
    url = str(tmp_path / "a")
    _grow(ca.open_archive(url, full_snapshot_interval=100), 5)
    path, data = list(_entries(tmp_path / "a").items())[2]
    flip = data[:-6] + bytes([data[-6] ^ 1]) + data[-5:]
    bad = {
        "truncate": data[:-3],
        "append": data + b"\x00",
        "flip": flip,
        "plain": codec.decompress(data, kind="commit entry"),
    }
    fsspec.filesystem("file").pipe_file(path, bad[damage])
    (tmp_path / "a" / layout.head_key("t")).unlink()
    with pytest.raises(ca.CorruptManifest):
        ca.open_archive(url).list("t")
    assert not ca.open_archive(url).verify().ok


@pytest.mark.parametrize("encrypted", [False, True])
def test_a_save_applies_its_own_entry_without_unsealing_it(monkeypatch: pytest.MonkeyPatch, encrypted: bool) -> None:
    """A save applies its commit entry to its manifest from the JSON it sealed (``Manifest.sealed_commit``),
    not by decompressing and unsealing the bytes it just compressed: 0 zstd decompressions per plain
    save (before: 1, its own entry). What it applied is what a reader unseals from the stored entry,
    document for document, encrypted values (sealed before the entry is) included."""
    from ckpt_archive.format.manifest import Manifest

    opts: dict[str, Any] = {}
    if encrypted:
        opts["encryption"] = ca.Encryption({"k1": b"k" * 32}, "k1", required=True)
    url = f"memory://commit-own-entry-{encrypted}"
    archive = ca.open_archive(url, full_snapshot_interval=100, **opts)
    _grow(archive, 3)  # the archive, the thread and its snapshot exist: what follows are plain saves
    applied: list[dict[str, Any]] = []
    real_apply = Manifest.apply_entry

    def recording(m: Manifest, doc: dict[str, Any]) -> None:
        applied.append(doc)
        real_apply(m, doc)

    decompressed = 0
    real_decompress = codec.decompress

    def counting(*args: Any, **kwargs: Any) -> bytes:
        nonlocal decompressed
        decompressed += 1
        return real_decompress(*args, **kwargs)

    monkeypatch.setattr(Manifest, "apply_entry", recording)
    monkeypatch.setattr(codec, "decompress", counting)
    per_save = []
    for step in range(3, 9):
        decompressed = 0
        archive.save(ca.Checkpoint.new("t", {"messages": [f"m{i}" for i in range(step + 1)], "turn": step}, step=step))
        per_save.append(decompressed)
    monkeypatch.undo()
    assert per_save == [0] * 6, per_save
    stored = run_sync(ca.open_store(url).get_many([layout.log_key("t", s) for s in range(4, 10)]))
    assert [d["seq"] for d in applied] == list(range(4, 10))
    assert applied == [unseal(data, "commit", kind="commit entry") for data in stored if data is not None]
    assert len(applied) == len([d for d in stored if d is not None]) == 6
    reader = ca.open_archive(url, **opts)
    assert [i.step for i in reader.list("t")] == list(range(9))
    assert reader.verify().ok
