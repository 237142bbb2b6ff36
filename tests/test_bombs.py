"""Decompression bombs: a small stored object that expands to gigabytes must cost a reader nothing.

Each kind of object (head hint, commit entry, folded manifest, snapshot, page, delta segment) is
replaced by a bomb (a snapshot or segment also gets its digests forged into the log, as anyone who
can write the bucket can do). A fresh process then loads, lists and verifies the archive: each read
gives the right answer or a typed error, and the process's peak resident memory (``VmHWM``, which
counts the C allocations of zstd and pyarrow, unlike tracemalloc) stays under ``PEAK_MB``.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ckpt_archive as ca
from ckpt_archive import codec, limits
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import seal, unseal
from tests.capped import run_capped

BOMB = (2 << 30) - (1 << 20)  # just under 2 GiB expanded (the old cap per object was 2 GiB)
PEAK_MB = 256


def zstd_bomb(size: int, *, declare: bool = True) -> bytes:
    """One zstd frame of ``size`` spaces made of RLE blocks: 4 bytes per 128 KiB (~64 KB for 2 GiB)."""
    block = 1 << 17
    header = b"\x28\xb5\x2f\xfd" + (b"\xc0\x38" + struct.pack("<Q", size) if declare else b"\x00\x38")
    blocks = []
    left = size
    while left:
        n = min(block, left)
        left -= n
        blocks.append(struct.pack("<I", (n << 3) | (1 << 1) | (left == 0))[:3] + b" ")
    return header + b"".join(blocks)


def parquet_bomb(checkpoint_id: str, rows: int = 1024, value: int = 1 << 20) -> bytes:
    """A delta segment whose ``value`` column is one dictionary entry of ``value`` bytes repeated over
    ``rows`` rows: a few KB stored, ``rows * value`` bytes once decoded."""
    big = pa.array(['"' + "a" * (value - 2) + '"'])
    table = pa.table(
        {
            "checkpoint_id": pa.array([checkpoint_id] * rows),
            "step": pa.array([1] * rows, pa.int64()),
            "op": pa.array(["set"] * rows),
            "key": pa.array(["x"] * rows),
            "path": pa.array(['["x"]'] * rows),
            "value": pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), big),
            "target": pa.array([None] * rows, pa.string()),
        }
    )
    buf = io.BytesIO()
    with pq.ParquetWriter(
        buf, table.schema, compression="zstd", store_schema=False, dictionary_pagesize_limit=64 << 20
    ) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({"ckpt_archive.format_version": "1", "ckpt_archive.thread_id": "t"})
    return buf.getvalue()


def build(root: Path) -> list[ca.Checkpoint]:
    """A thread with a paged snapshot, an inline delta compacted into a segment, a fold and a hint."""
    cp = ca.open_archive(str(root), full_snapshot_interval=2)
    saved = []
    for step in range(3):
        ckpt = ca.Checkpoint.new("t", {"chat": list(range(40 + step)), "step": step}, step=step)
        if saved:
            ckpt = ckpt.with_parent(saved[-1].checkpoint_id)
        cp.save(ckpt)
        saved.append(ckpt)
    return saved


def objects_of(root: Path, kind: str) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and layout.kind_of(str(p.relative_to(root))) == kind)


def forge(root: Path, target: Path, data: bytes) -> None:
    """Store ``data`` at ``target`` and make the log name it (sha256, size), as a forger would: every
    commit entry is re-sealed, the hint and folds (which would still name the old bytes) removed."""
    key = str(target.relative_to(root))
    target.write_bytes(data)

    def fix(value: Any) -> Any:
        if isinstance(value, dict):
            out = {k: fix(v) for k, v in value.items()}
            if out.get("key") == key and "sha256" in out:
                out.update(sha256=codec.sha256(data), size=len(data))
            return out
        return [fix(v) for v in value] if isinstance(value, list) else value

    for entry in objects_of(root, "commit entry"):
        stored = entry.read_bytes()
        doc = fix(unseal(stored, "commit", kind="commit entry"))
        entry.write_bytes(codec.compress(seal(doc)))
    for gone in objects_of(root, "head hint") + objects_of(root, "folded manifest"):
        gone.unlink()


_READER = """
root, ids, want = args["root"], args["ids"], args["states"]
cp = ca.open_archive(root)
attempt("load", lambda: cp.load("t").state, want[-1])
attempt("list", lambda: [i.checkpoint_id for i in cp.list("t")], ids)
attempt("load_by_id", lambda: cp.load_by_id(ids[1]).state, want[1])
def verify():
    report = ca.open_archive(root).verify()
    return True if report.ok else "reported " + ",".join(sorted({p.kind for p in report.problems}))
attempt("verify", verify, check=lambda got: got)
"""


def read_in_child(root: Path, saved: list[ca.Checkpoint]) -> dict[str, Any]:
    args = {"root": str(root), "ids": [c.checkpoint_id for c in saved], "states": [c.state for c in saved]}
    return run_capped(_READER, args, timeout=600)


def plant(root: Path, kind: str, saved: list[ca.Checkpoint]) -> None:
    if kind in ("head hint", "page"):
        for target in objects_of(root, kind):
            target.write_bytes(zstd_bomb(BOMB))
    elif kind == "commit entry":
        objects_of(root, kind)[-1].write_bytes(zstd_bomb(BOMB, declare=False))
    elif kind == "folded manifest":
        objects_of(root, kind)[-1].write_bytes(zstd_bomb(BOMB))
    elif kind == "snapshot":
        forge(root, objects_of(root, kind)[-1], zstd_bomb(BOMB))
    else:
        forge(root, objects_of(root, kind)[-1], parquet_bomb(saved[1].checkpoint_id))


@pytest.mark.parametrize("kind", ["head hint", "commit entry", "folded manifest", "snapshot", "page", "delta segment"])
def test_a_bombed_object_costs_a_reader_nothing(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "archive"
    saved = build(root)
    assert objects_of(root, kind), kind
    plant(root, kind, saved)
    result = read_in_child(root, saved)
    peak = result.pop("peak_mb")
    assert peak < PEAK_MB, (kind, peak, result)
    assert all(not r.startswith(("UNTYPED", "WRONG")) for r in result.values()), result
    # a frame that does not declare its size is refused as damage (a commit entry: CorruptManifest)
    error = "CorruptManifest" if kind == "commit entry" else "ObjectTooLarge"
    assert error in result["verify"], result  # verify reports the bomb, as what it is
    if kind in ("head hint", "folded manifest"):  # optional: readers fold the log instead
        assert [result[k] for k in ("load", "list", "load_by_id")] == ["ok"] * 3, result
    else:
        assert error in result.values(), result


def test_an_oversized_object_is_refused_by_its_size_unread(tmp_path: Path) -> None:
    """A 200 MB head hint (sparse: nothing to compress) is refused by its size before it is read."""
    root = tmp_path / "archive"
    saved = build(root)
    for hint in objects_of(root, "head hint"):
        with open(hint, "wb") as f:
            f.truncate(200 << 20)
    result = read_in_child(root, saved)
    assert result.pop("peak_mb") < PEAK_MB, result
    assert result == {"load": "ok", "list": "ok", "load_by_id": "ok", "verify": "reported ObjectTooLarge"}


def test_a_frame_that_does_not_declare_its_size_is_refused() -> None:
    with pytest.raises(ca.TruncatedObject, match="content size"):
        codec.decompress(zstd_bomb(1 << 20, declare=False), kind="head hint")
    with pytest.raises(ca.ObjectTooLarge, match="head hint"):
        codec.decompress(zstd_bomb(BOMB), what="the hint", kind="head hint")
    assert codec.decompress(zstd_bomb(1000), kind="head hint") == b" " * 1000


def test_a_big_delta_is_stored_as_a_snapshot(tmp_path: Path) -> None:
    """Deltas stay inline (in commit entries, hints, folds) only while they are small and few, so
    those documents stay within their bounds; the rest are full snapshots and still load."""
    cp = ca.open_archive(str(tmp_path / "a"), full_snapshot_interval=1000)
    first = ca.Checkpoint.new("t", {"n": 0}, step=1)
    cp.save(first)
    big = ca.Checkpoint.new("t", {"n": 1, "blob": "x" * (limits.INLINE_OPS_BYTES + 1)}, step=2)
    cp.save(big.with_parent(first.checkpoint_id))
    kinds = [i.kind for i in cp.list("t")]
    assert kinds == ["full", "full"]
    parent = big.checkpoint_id
    for step in range(3, 3 + limits.MAX_INLINE_DELTAS + 1):
        ckpt = ca.Checkpoint.new("t", {"n": step}, step=step).with_parent(parent)
        cp.save(ckpt)
        parent = ckpt.checkpoint_id
    kinds = [i.kind for i in cp.list("t")][2:]
    assert kinds == ["delta"] * limits.MAX_INLINE_DELTAS + ["full"]
    assert ca.open_archive(str(tmp_path / "a")).load("t").state == {"n": 3 + limits.MAX_INLINE_DELTAS}
    assert ca.open_archive(str(tmp_path / "a")).load_by_id(big.checkpoint_id).state == big.state


def test_a_state_over_the_limit_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "STATE_BYTES", 1 << 20)
    cp = ca.open_archive(str(tmp_path / "a"))
    cp.save(ca.Checkpoint.new("t", {"n": 0}))
    before = sorted(p.name for p in (tmp_path / "a").rglob("*"))
    with pytest.raises(ca.StateTooLarge, match="more than a checkpoint may hold"):
        cp.save(ca.Checkpoint.new("t", {"blob": "x" * (2 << 20)}, step=1))
    assert sorted(p.name for p in (tmp_path / "a").rglob("*")) == before
