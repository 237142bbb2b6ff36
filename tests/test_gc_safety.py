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
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import ckpt_archive as ca
from ckpt_archive.engine import gc_floor
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
    with pytest.raises(ca.UnsafeGcGrace, match="below 3600 s"):
        ca.open_archive(str(tmp_path / "a")).gc(grace=timedelta(minutes=10))
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


def writer_process(url: str, opts: dict[str, Any], seconds: float, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    args = [sys.executable, WRITER, url, json.dumps(opts), str(seconds), "0"]
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
    ca.open_archive(url, storage_options=opts).save(ca.Checkpoint.new("seed", {"items": []}))
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
