"""Decompression bombs: a small stored object that expands to gigabytes must cost a reader nothing.

Each kind of object (head hint, commit entry, folded manifest, snapshot, delta segment) is
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
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive import codec, limits
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import seal, unseal
from ckpt_archive.format.objects import SEGMENT_SCHEMA, SegmentReader, encode_segment
from ckpt_archive.format.thrift import ThriftError, read_struct
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
            "thread_id": pa.array(["t"] * rows),
            "checkpoint_id": pa.array([checkpoint_id] * rows),
            "base_id": pa.array([None] * rows, pa.string()),
            "step": pa.array([1] * rows, pa.int64()),
            "op_index": pa.array(range(rows), pa.int64()),
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
        writer.add_key_value_metadata({"ckpt_archive.format_version": "1"})
    return buf.getvalue()


def lying_segment(checkpoint_id: str, rows: int = 200, value: int = 8 << 20) -> bytes:
    """A delta segment of ``rows`` distinct ``value``-byte values (one page each, ~80 KB stored, 1.6 GB
    decoded: distinct, so no dictionary shares them) whose footer declares 1000 bytes per column
    chunk, as a forger can write it: each size's varint is rewritten in place, padded to its length
    (compact Thrift accepts a varint of any length), so nothing else in the file moves."""
    text = pa.py_buffer(bytes(range(33, 33 + rows)) + b"a" * value)  # value i: text[i : i + value]
    values = [
        pa.StringArray.from_buffers(1, pa.array([i, i + value], pa.int32()).buffers()[1], text) for i in range(rows)
    ]

    def same(array: pa.Array) -> pa.ChunkedArray:
        return pa.chunked_array([array] * rows)

    columns = [
        same(pa.array(["t"])),
        same(pa.array([checkpoint_id])),
        same(pa.array([None], pa.string())),  # base_id
        same(pa.array([1], pa.int64())),
        pa.chunked_array([pa.array([i], pa.int64()) for i in range(rows)]),  # op_index
        same(pa.array(["set"])),
        same(pa.array(["x"])),
        same(pa.array(['["x"]'])),
        pa.chunked_array(values),
        same(pa.array([None], pa.string())),
    ]
    schema = SEGMENT_SCHEMA
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, schema, compression="zstd", store_schema=False) as writer:
        writer.write_table(pa.Table.from_arrays(columns, schema=schema), row_group_size=rows)
        writer.add_key_value_metadata({"ckpt_archive.format_version": "1"})
    data = buf.getvalue()
    n = struct.unpack("<I", data[-8:-4])[0]
    footer = data[-8 - n : -8]
    group = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
    for true in {group.column(c).total_uncompressed_size for c in range(group.num_columns)} | {group.total_byte_size}:
        if true > 1000:
            old = _varint(true << 1)  # zigzag of a positive i64
            footer = footer.replace(old, _varint(1000 << 1, len(old)))
    lie = data[: -8 - n] + footer + data[-8:]
    group = pq.ParquetFile(io.BytesIO(lie)).metadata.row_group(0)
    assert max(group.column(c).total_uncompressed_size for c in range(group.num_columns)) <= 1000
    return lie


def _varint(n: int, width: int = 1) -> bytes:
    out = bytearray()
    while n >> 7 or len(out) + 1 < width:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


def footer_list_bomb(length: int = 1000 * 1000) -> bytes:
    """A Parquet file of a 1 KB footer whose schema list declares ``length`` elements (none follow):
    a reader that reserves the list first takes ~200 MB for it."""
    head = b"\x15\x02" + b"\x19\xfc" + _varint(length)  # FileMetaData{1: version 1, 2: list<struct> of length}
    footer = head + b"\x00" * 1000
    return b"PAR1" + footer + struct.pack("<I", len(footer)) + b"PAR1"


def build(root: Path) -> list[ca.Checkpoint]:
    """A thread with a snapshot replaying a long list, an inline delta compacted into a segment, a fold
    and a hint."""
    cp = ca.open_archive(str(root), full_snapshot_interval=2)
    saved = []
    for step in range(3):
        ckpt = ca.Checkpoint.new("t", {"chat": list(range(40 + step)), "step": step}, step=step)
        if saved:
            ckpt = ckpt.with_parent(saved[-1].checkpoint_id)
        cp.save(ckpt)
        saved.append(ckpt)
    cp.flush_hints()  # the fold (and hint) the last save's compaction left to the writer's next save
    return saved


def grow(root: Path, saved: list[ca.Checkpoint]) -> list[ca.Checkpoint]:
    """One more checkpoint, a delta after the fold ``build`` ends with: its commit entry is the newest,
    above the fold, so every reader of the thread must read it (the entries below the fold only verify
    reads)."""
    ckpt = ca.Checkpoint.new("t", {"chat": list(range(43)), "step": 3}, step=3).with_parent(saved[-1].checkpoint_id)
    ca.open_archive(str(root), full_snapshot_interval=2).save(ckpt)
    return [*saved, ckpt]


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
    if kind == "head hint":
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


@pytest.mark.parametrize("kind", ["head hint", "commit entry", "folded manifest", "snapshot", "delta segment"])
def test_a_bombed_object_costs_a_reader_nothing(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "archive"
    saved = build(root)
    if kind == "commit entry":  # the newest entry, which readers read (one below the fold only verify does)
        saved = grow(root, saved)
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


@pytest.mark.parametrize("bomb", ["lying sizes", "lying list"])
def test_a_segment_whose_footer_lies_costs_a_reader_nothing(tmp_path: Path, bomb: str) -> None:
    """The footer is all a reader checks before pyarrow decodes, and pyarrow allocates by what the
    pages and lists say, not the footer's sizes: a segment whose footer understates its column chunks
    (80 KB stored, 1.6 GB of pages) took a capped reader to 620 MB (2.2 GB uncapped) before a
    ``TruncatedObject``; one whose footer declares a million-element list took ~300 MB for a 1 KB file."""
    root = tmp_path / "archive"
    saved = build(root)
    target = objects_of(root, "delta segment")[-1]
    forge(root, target, lying_segment(saved[1].checkpoint_id) if bomb == "lying sizes" else footer_list_bomb())
    result = read_in_child(root, saved)
    peak = result.pop("peak_mb")
    assert peak < PEAK_MB, (bomb, peak, result)
    assert all(not r.startswith(("UNTYPED", "WRONG")) for r in result.values()), result
    error = "ObjectTooLarge" if bomb == "lying sizes" else "TruncatedObject"
    assert error in result["verify"] and error in (result["load"], result["load_by_id"]), result


def test_a_segment_in_an_encoding_that_expands_past_its_pages_is_refused() -> None:
    """DELTA_BYTE_ARRAY values share their predecessor's prefix, so they decode to more than their
    page's size; no segment is written in it, so a reader refuses it before pyarrow decodes it."""
    rows = {"thread_id": ["t"] * 4, "checkpoint_id": ["c"] * 4, "base_id": [None] * 4, "step": [1] * 4}
    rows["op_index"] = [0, 1, 2, 3]
    rows.update({"op": ["set"] * 4, "key": ["x"] * 4})
    rows.update({"path": ['["x"]'] * 4, "value": ["1"] * 4, "target": [None] * 4})
    buf = io.BytesIO()
    options: dict[str, Any] = {"use_dictionary": False, "column_encoding": {"value": "DELTA_BYTE_ARRAY"}}
    with pq.ParquetWriter(buf, SEGMENT_SCHEMA, store_schema=False, **options) as writer:
        writer.write_table(pa.table(rows, schema=SEGMENT_SCHEMA))
        writer.add_key_value_metadata({"ckpt_archive.format_version": "1"})
    with pytest.raises(ca.TruncatedObject, match=r"column .value.*encoded 7: not written by this format"):
        SegmentReader(buf.getvalue(), thread_id="t", key="k").ops("c", 0)


def test_a_segment_that_says_parquet_mr_wrote_it_is_refused() -> None:
    """pyarrow reads past a column chunk's declared end for parquet-mr's files (PARQUET-816), where
    the page walk does not look; segments are written by pyarrow."""
    data, _ = encode_segment("t", [("c", 1, None, [{"op": "set", "path": ["a"], "value": 1}])])
    at = data.rfind(b"parquet-cpp-arrow")
    forged = data[:at] + b"parquet-mr".ljust(17) + data[at + 17 :]
    with pytest.raises(ca.TruncatedObject, match="parquet-mr"):
        SegmentReader(forged, thread_id="t", key="k")


@given(st.binary(max_size=64))
@settings(max_examples=300, deadline=None)
def test_a_page_header_of_any_bytes_is_read_or_refused_typed(data: bytes) -> None:
    try:
        fields, end = read_struct(data)
    except ThriftError:
        return
    assert isinstance(fields, dict) and 0 < end <= len(data)


def test_page_headers_of_a_written_segment_add_up_to_what_its_footer_declares() -> None:
    """The page walk and the footer agree on every segment this format writes (so none is refused)."""
    entries = [(f"c{i}", i, None, [{"op": "set", "path": ["k", str(i)], "value": "v" * 50 * i}]) for i in range(1, 200)]
    data, _ = encode_segment("t", entries)
    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            pos = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            end, total = pos + chunk.total_compressed_size, 0
            while pos < end:
                header, after = read_struct(data, pos, end)
                total += after - pos + header[2]
                pos = after + header[3]
            assert (pos, total) == (end, chunk.total_uncompressed_size)
    reader = SegmentReader(data, thread_id="t", key="k")
    assert reader.ops("c199", meta.num_row_groups - 1)[0]["value"] == "v" * 50 * 199


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
    # strings under the blob threshold (a larger one would be a blob, its reference a small delta)
    strings = ["x" * (limits.BLOB_MIN_BYTES - 1)] * (limits.INLINE_OPS_BYTES // limits.BLOB_MIN_BYTES + 1)
    big = ca.Checkpoint.new("t", {"n": 1, "blob": strings}, step=2)
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


# -- JSON bombs: inside the byte bounds, a document whose values cost far more than its bytes ------------

AMPLIFIERS = {"lists": b"[]", "dicts": b"{}", "floats": b"0.5", "strings": b'"ab"', "members": b'{"a":[]}'}
"""Values that cost a parse 8-28 times their bytes (``[],`` is 3 bytes, 64 of objects)."""


def json_bomb(unit: bytes, size: int) -> bytes:
    """``[unit,unit,...]`` of about ``size`` bytes: ~11 KB as zstd for 127 MiB."""
    return b"[" + (unit + b",") * max(0, size // (len(unit) + 1) - 1) + unit + b"]"


def with_junk(raw: bytes, junk: bytes) -> bytes:
    """A document's canonical JSON with ``junk`` as the value of one more key, re-sealed when it is
    sealed: readers ignore unknown keys, so it is well formed, and only its cost is hostile."""
    doc = codec.loads(raw)
    doc["junk"] = None
    put = lambda value: codec.dumps(value).replace(b'"junk":null', b'"junk":' + junk)  # noqa: E731
    if "digest" not in doc:
        return put(doc)
    body = {k: v for k, v in doc.items() if k != "digest"}
    return put({**body, "digest": codec.sha256(put(body))})


def plant_json(root: Path, kind: str, junk: bytes) -> None:
    """The newest object of ``kind`` carries ``junk``; a snapshot's digests are forged into the log."""
    target = objects_of(root, kind)[-1]
    raw = codec.decompress(target.read_bytes(), kind=kind)
    data = codec.compress(with_junk(raw, junk), kind)
    if kind == "snapshot":
        forge(root, target, data)
    else:
        target.write_bytes(data)


@pytest.fixture(scope="module")
def baseline_mb(tmp_path_factory: pytest.TempPathFactory) -> float:
    """The peak of the same reads of a clean archive, measured in this run (~110 MB: the interpreter,
    pyarrow and zstd)."""
    root = tmp_path_factory.mktemp("clean") / "archive"
    result = read_in_child(root, build(root))
    assert all(v == "ok" for k, v in result.items() if k != "peak_mb"), result
    return float(result["peak_mb"])


def allowed_mb(baseline: float) -> float:
    """What a stored document may cost a reader: the baseline plus the most a document within its
    kind's bounds builds (a commit entry or fold: 1M values of at most ~96 bytes, and its bytes)."""
    return max(3 * baseline, baseline + 200)


@pytest.mark.parametrize("pattern", sorted(AMPLIFIERS))
@pytest.mark.parametrize("kind", ["head hint", "commit entry", "folded manifest", "snapshot"])
def test_a_json_bomb_inside_the_byte_bound_costs_a_reader_the_baseline(
    tmp_path: Path, kind: str, pattern: str, baseline_mb: float
) -> None:
    """127 MiB of JSON (~11 KB stored; its bound in bytes when that is smaller) of values that cost a
    parse 8-28x their bytes: refused by the values it holds before it is parsed (a hint is ignored, the
    log folded), for the cost of a clean read (it was 4.1 GB and 34 s for the hint)."""
    root = tmp_path / "archive"
    saved = build(root)
    if kind == "commit entry":  # the newest entry, which readers read
        saved = grow(root, saved)
    plant_json(root, kind, json_bomb(AMPLIFIERS[pattern], min(limits.LIMITS[kind], 127 << 20) - (64 << 10)))
    result = read_in_child(root, saved)
    peak = result.pop("peak_mb")
    assert peak < allowed_mb(baseline_mb), (kind, pattern, peak, baseline_mb, result)
    assert not [v for v in result.values() if v.startswith(("UNTYPED", "WRONG"))], result
    assert "ObjectTooLarge" in result["verify"], result  # verify reports the bomb, as what it is
    if kind in ("head hint", "folded manifest"):  # optional: readers fold the log instead
        assert [result[k] for k in ("load", "list", "load_by_id")] == ["ok"] * 3, result
    else:
        assert "ObjectTooLarge" in result.values(), result


def test_the_largest_json_bomb_a_snapshot_may_be_costs_a_reader_the_baseline(
    tmp_path: Path, baseline_mb: float
) -> None:
    """A snapshot at its bound in bytes (513 MiB of ``[],``: ~44 KB stored; it ran 706 s at 6.9 GB into
    a SystemError): its values are counted as it streams, so it costs a window of it."""
    root = tmp_path / "archive"
    saved = build(root)
    plant_json(root, "snapshot", json_bomb(b"[]", limits.LIMITS["snapshot"] - (1 << 20)))
    assert objects_of(root, "snapshot")[-1].stat().st_size < 64 << 10
    result = read_in_child(root, saved)
    peak = result.pop("peak_mb")
    assert peak < baseline_mb + 64, (peak, baseline_mb, result)
    assert result["load"] == "ObjectTooLarge" and "ObjectTooLarge" in result["verify"], result


@pytest.mark.parametrize("kind", ["head hint", "commit entry", "folded manifest"])
def test_a_document_within_its_budget_is_read_at_a_bounded_cost(tmp_path: Path, kind: str, baseline_mb: float) -> None:
    """The worst a document may cost: as many values as its kind holds (each a list: 64 bytes of
    objects per 3 bytes). It is read (the reads are right), and costs at most the allowance."""
    root = tmp_path / "archive"
    saved = build(root)
    plant_json(root, kind, json_bomb(b"[]", 3 * (limits.VALUES[kind] // 2 - 1024)))
    result = read_in_child(root, saved)
    peak = result.pop("peak_mb")
    assert peak < allowed_mb(baseline_mb), (kind, peak, baseline_mb, result)
    assert result == {"load": "ok", "list": "ok", "load_by_id": "ok", "verify": "ok"}, result


@pytest.mark.parametrize("depth", [300, 2000])
@pytest.mark.parametrize("kind", ["head hint", "commit entry", "folded manifest", "snapshot"])
def test_deep_nesting_is_a_typed_error(tmp_path: Path, kind: str, depth: int) -> None:
    """orjson reads 1,024 levels but writes 254: a document nested between the two used to end in a
    raw ``JSONEncodeError`` when its digest was checked; past 1,024 it is invalid JSON."""
    root = tmp_path / "archive"
    saved = build(root)
    plant_json(root, kind, b"[" * depth + b"]" * depth)
    result = read_in_child(root, saved)
    result.pop("peak_mb")
    assert not [v for v in result.values() if v.startswith(("UNTYPED", "WRONG"))], result
    if kind in ("head hint", "folded manifest"):
        assert [result[k] for k in ("load", "list", "load_by_id")] == ["ok"] * 3, result


_DECODE = """
from ckpt_archive import codec
from ckpt_archive.format import parts
data = open(args["path"], "rb").read()
ref = {"key": "thread_id=t/_parts/p.json.zst", "sha256": codec.sha256(data), "size": len(data)}
attempt("decode", lambda: parts.decode_part(data, ref, "t"))
"""


def test_a_json_bomb_of_a_part_is_refused_unparsed(tmp_path: Path, baseline_mb: float) -> None:
    """A part whose digests check (a forger rewrites what names them) holding 127 MiB of ``[],``:
    refused by its values (``ObjectTooLarge``) before it is parsed."""
    junk = json_bomb(b"[]", min(limits.LIMITS["manifest part"], 127 << 20) - (64 << 10))
    raw = seal({"type": "manifest-part", "thread_id": "t", "records": [], "junk": None})
    raw = with_junk(raw, junk)
    path = tmp_path / "object"
    path.write_bytes(codec.compress(raw))
    result = run_capped(_DECODE, {"path": str(path)})
    assert result["peak_mb"] < allowed_mb(baseline_mb), result
    assert result["decode"] == "ObjectTooLarge", result


def test_a_state_of_too_many_values_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers refuse what readers would: a state holding more values than ``STATE_VALUES``."""
    monkeypatch.setattr(limits, "STATE_VALUES", 1000)
    cp = ca.open_archive(str(tmp_path / "a"))
    cp.save(ca.Checkpoint.new("t", {"n": 0}))
    before = sorted(p.name for p in (tmp_path / "a").rglob("*"))
    with pytest.raises(ca.StateTooLarge, match="JSON values"):
        cp.save(ca.Checkpoint.new("t", {"numbers": list(range(2000))}, step=1))
    assert sorted(p.name for p in (tmp_path / "a").rglob("*")) == before


def test_inline_deltas_stay_within_the_hint_and_fold_bounds(tmp_path: Path) -> None:
    """A thread's inline deltas together stay under ``INLINE_TOTAL_BYTES`` (the next delta is a
    snapshot), so every head hint and fold written stays within its (small) bound and is read."""
    cp = ca.open_archive(str(tmp_path / "a"), full_snapshot_interval=1000)
    parent = None

    def text(step: int) -> list[str]:  # ~600 KB of strings each under the blob threshold (they stay inline)
        return [f"{step}" * (limits.BLOB_MIN_BYTES // 2 - 16)] * ((600 << 10) // (limits.BLOB_MIN_BYTES // 2))

    for step in range(12):  # deltas of ~600 KB: three would pass INLINE_TOTAL_BYTES
        ckpt = ca.Checkpoint.new("t", {"step": step, "blob": text(step)}, step=step)
        ckpt = ckpt.with_parent(parent) if parent else ckpt
        cp.save(ckpt)
        parent = ckpt.checkpoint_id
    kinds = [i.kind for i in cp.list("t")]
    assert "full" in kinds[1:] and kinds.count("delta") >= 6, kinds
    root = tmp_path / "a"
    for hint in objects_of(root, "head hint") + objects_of(root, "folded manifest"):
        kind = layout.kind_of(str(hint.relative_to(root)))
        assert kind is not None and limits.fits(kind, codec.decompress(hint.read_bytes(), kind=kind))
    assert objects_of(root, "head hint")
    fresh = ca.open_archive(str(root))
    assert fresh.load("t").state == {"step": 11, "blob": text(11)}
    assert fresh.verify().ok


def value_segment(checkpoint_id: str, value: bytes) -> bytes:
    """A well-formed delta segment holding one ``set`` op of ``value`` (JSON text) for the checkpoint,
    written the way the format writes segments."""
    table = pa.table(
        {
            "thread_id": ["t"],
            "checkpoint_id": [checkpoint_id],
            "base_id": pa.array([None], pa.string()),
            "step": pa.array([1], pa.int64()),
            "op_index": pa.array([0], pa.int64()),
            "op": ["set"],
            "key": ["chat"],
            "path": ['["chat"]'],
            "value": [value.decode()],
            "target": pa.array([None], pa.string()),
        }
    )
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, table.schema, compression="zstd", store_schema=False) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({"ckpt_archive.format_version": "1"})
    return buf.getvalue()


def test_a_json_bomb_in_a_segment_value_is_refused_unparsed(tmp_path: Path, baseline_mb: float) -> None:
    """An op value of a delta segment within the segment's byte bound whose values cost a parse 20x its
    bytes (``[],[],…``, ~7 MiB): refused by the values its row group holds before any op is parsed."""
    root = tmp_path / "archive"
    saved = build(root)
    bomb = json_bomb(b"[]", limits.LIMITS["row group"] - (1 << 20))
    forge(root, objects_of(root, "delta segment")[-1], value_segment(saved[1].checkpoint_id, bomb))
    result = read_in_child(root, saved)
    peak = result.pop("peak_mb")
    assert peak < allowed_mb(baseline_mb), (peak, baseline_mb, result)
    assert not [v for v in result.values() if v.startswith(("UNTYPED", "WRONG"))], result
    assert result["load_by_id"] == "ObjectTooLarge" and "ObjectTooLarge" in result["verify"], result
