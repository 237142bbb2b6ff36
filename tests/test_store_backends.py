"""ObjectStore primitives on every backend, against the real servers (moto, fake-gcs-server, Azurite)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import fsspec
import pytest
from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

import ckpt_archive as ca
from ckpt_archive._sync import run_sync
from ckpt_archive.storage import ObjectStore, open_store
from tests.conftest import BACKENDS


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, archive_url: Any) -> ObjectStore:
    url, opts = archive_url(request.param)
    fs, root = fsspec.core.url_to_fs(url, **opts)
    return open_store(fs, root=root)


def test_capabilities_say_what_the_backend_does(store: ObjectStore, tmp_path: Any) -> None:
    """Every backend of BACKENDS has an atomic put-if-absent (the race test below proves it), so each
    says so; only memory:// forgets on exit. A generic sync filesystem's create is check-then-set."""
    assert store.conditional_create
    assert store.durable == (not isinstance(store.fs, MemoryFileSystem))
    generic = open_store(DirFileSystem(path=str(tmp_path), fs=LocalFileSystem()), root="a", single_writer=True)
    assert not generic.conditional_create and generic.durable


def test_put_if_absent_keeps_the_first_writer(store: ObjectStore) -> None:
    assert run_sync(store.put_if_absent("a/key.json", b"first"))
    assert not run_sync(store.put_if_absent("a/key.json", b"second"))
    assert run_sync(store.get("a/key.json")) == b"first"


def test_put_if_absent_race_has_one_winner(store: ObjectStore) -> None:
    async def race() -> list[bool]:
        return list(await asyncio.gather(*(store.put_if_absent("race/x", str(i).encode()) for i in range(12))))

    wins = run_sync(race())
    assert wins.count(True) == 1
    assert run_sync(store.get("race/x")) == str(wins.index(True)).encode()


def test_reads_lists_and_deletes(store: ObjectStore) -> None:
    with pytest.raises(FileNotFoundError):
        run_sync(store.get("missing"))
    assert run_sync(store.get_or_none("missing")) is None
    assert run_sync(store.list_dir("nothing-here")) == []
    run_sync(store.put("d/one", b"1"))
    run_sync(store.put("d/two", b"22"))
    run_sync(store.put("d/sub/three", b"333"))
    run_sync(store.put("d/one", b"1 again"))
    assert run_sync(store.get_many(["d/one", "d/nope", "d/two"])) == [b"1 again", None, b"22"]
    assert run_sync(store.list_dir("d")) == ["one", "sub", "two"]
    assert "d" in run_sync(store.list_dir(""))
    found = run_sync(store.find("d"))
    assert {k: v["size"] for k, v in found.items()} == {"d/one": 7, "d/two": 2, "d/sub/three": 3}
    run_sync(store.delete(["d/one", "d/never"]))
    assert run_sync(store.get_or_none("d/one")) is None
    run_sync(store.delete_prefix("d"))
    assert run_sync(store.find("d")) == {}
    assert run_sync(store.list_dir("d")) == []


@pytest.mark.parametrize("backend", ["s3", "gcs", "azure"])
def test_archive_at_bucket_root(backend: str, archive_url: Any) -> None:
    """An archive can live at a bucket's root (no key prefix): listing threads must still work."""
    url, opts = archive_url(backend)
    bucket_url = url.rsplit("/", 1)[0]
    cp = ca.open_archive(bucket_url, storage_options=opts)
    cp.save(ca.Checkpoint.new("t", {"a": 1}))
    assert cp.threads() == ["t"]
    assert ca.open_archive(bucket_url, storage_options=opts).load("t").state == {"a": 1}  # type: ignore[union-attr]


def test_a_plain_save_on_local_disk_is_one_file_one_fsync_and_no_mkdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20: a plain delta save creates its commit entry only (temp file, fsync, link), and no
    ``mkdir`` once the thread's folders exist (the OS calls are counted, and still made)."""
    import os

    root = tmp_path / "a"
    archive = ca.open_archive(str(root), full_snapshot_interval=1000, hint_every=1000)
    for step in range(3):
        archive.save(ca.Checkpoint.new("t", {"n": step, "pad": "x" * 100}, step=step))
    calls: dict[str, int] = {}
    for name in ("fsync", "link", "mkdir", "replace"):
        real = getattr(os, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            calls[_name] = calls.get(_name, 0) + 1
            return _real(*args, **kw)

        monkeypatch.setattr(os, name, counted)
    before = {p for p in root.rglob("*") if p.is_file()}
    for step in range(3, 13):
        archive.save(ca.Checkpoint.new("t", {"n": step, "pad": "x" * 100}, step=step))
    monkeypatch.undo()
    created = {p for p in root.rglob("*") if p.is_file()} - before
    assert sorted(p.name for p in created) == [f"{seq:020d}.json.zst" for seq in range(4, 14)]
    assert calls == {"fsync": 10, "link": 10}, calls
