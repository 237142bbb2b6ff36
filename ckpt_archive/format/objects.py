"""Encoding and decoding of the two payload objects: zstd snapshots and Parquet delta segments.

Decoders verify size and sha256 first, then parse, and turn every parser error
into a typed ``IntegrityError`` naming the object, never a raw pyarrow/zstd one.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import codec, limits, versions
from ..delta import Delta
from ..errors import (
    DigestMismatch,
    ForeignRows,
    IntegrityError,
    ObjectTooLarge,
    TruncatedObject,
    UnsupportedFormatVersion,
)
from . import layout
from .thrift import ThriftError, read_struct

SEGMENT_SCHEMA = pa.schema(
    [
        ("thread_id", pa.string()),
        ("checkpoint_id", pa.string()),
        ("base_id", pa.string()),
        ("step", pa.int64()),
        ("op_index", pa.int64()),
        ("op", pa.string()),
        ("key", pa.string()),
        ("path", pa.string()),
        ("value", pa.string()),
        ("target", pa.string()),
    ]
)
"""``thread_id`` is the thread's id exactly as given (never the folder's encoding), so a reader of the
files alone needs no hive partition inference (which turns ``007`` into 7, mangles non-ASCII ids and
reads ``__HIVE_DEFAULT_PARTITION__`` as null); ``op_index`` is the op's position among its checkpoint's
ops (0, 1, ...), so a reader of the files alone orders a thread's history by ``step``, ``checkpoint_id``,
``op_index`` whatever order the files and row groups come in; ``target`` is null for a state op and
``"messages"`` for an op on the message list; ``base_id`` is the checkpoint the rows are against (the
record's parent in the thread; null: the empty content), so a reader holding only the segments walks a
lineage (a snapshot's replayed lists, spec.md section 5) without the manifest."""
# Statistics on JSON values would store each large value twice more (min/max); keep them where they
# help predicate pushdown. Not on thread_id: one thread per file, and its min/max would cost ~110 bytes
# per segment (measured: +128 bytes per segment for the column without them, +238 with them).
_PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 9,
    "write_statistics": ["step"],
    "use_dictionary": ["thread_id", "checkpoint_id", "base_id", "op", "key", "target"],
    "write_page_index": False,
    # no ARROW:schema entry (~700 bytes of base64 per segment): the Parquet types read back the same
    "store_schema": False,
}
_META_VERSION = b"ckpt_archive.format_version"


def verify(data: bytes, ref: dict[str, Any], *, thread_id: str, checkpoint_id: str | None) -> None:
    key = ref.get("key")
    if "size" in ref and len(data) != ref["size"]:
        raise TruncatedObject(
            f"object is {len(data)} bytes, manifest recorded {ref['size']}",
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            key=key,
        )
    if "sha256" in ref and codec.sha256(data) != ref["sha256"]:
        raise DigestMismatch(
            "object's sha256 differs from the manifest's",
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            key=key,
        )


def check_content(
    content: tuple[dict[str, Any], list[Any]],
    record: dict[str, Any],
    thread_id: str,
    digest: Callable[[str, bytes], str],
    mismatch: type[IntegrityError] = DigestMismatch,
) -> None:
    """A rebuilt (state, messages) must hash to the ``state_sha256`` and ``messages_sha256`` recorded
    at save (a digest is null only in a record encrypted since, whose MACs prove it instead).
    ``digest(name, raw)`` is the engine's ``codec.content_digest`` of the canonical bytes (resumed by
    its prefix hashers); ``mismatch``: the error a difference is (a protected record's is
    ``ProtectionMismatch``)."""
    for name, value in (("state", content[0]), ("messages", content[1])):
        want = record.get(f"{name}_sha256")
        if want is not None and digest(name, codec.stored_dumps(value, f"rebuilt {name}")) != want:
            raise mismatch(
                f"rebuilt {name} differ from the {name}_sha256 recorded when it was saved"
                if name == "messages"
                else "rebuilt state differs from the state_sha256 recorded when it was saved",
                thread_id=thread_id,
                checkpoint_id=record.get("id"),
                key=record.get("ref", {}).get("key"),
            )


def encode_snapshot(
    thread_id: str,
    checkpoint_id: str,
    state: dict[str, Any],
    messages: list[Any] | None = None,
    lists: list[list[str | None]] | None = None,
) -> bytes:
    """``lists``: the places of the lists stored as ``[]`` and replayed from the lineage's history rows
    (``format.replay``; absent when none)."""
    doc: dict[str, Any] = {
        "format_version": versions.FORMAT_VERSION,
        "type": "snapshot",
        "thread_id": thread_id,
        "checkpoint_id": checkpoint_id,
        "state": state,
    }
    if messages:
        doc["messages"] = messages  # absent means no messages
    if lists:
        doc["lists"] = lists
    raw = codec.dumps(doc)
    limits.check_written("snapshot", raw, f"snapshot of checkpoint {checkpoint_id!r}")
    return codec.compress(raw)


def decode_snapshot_content(
    data: bytes, *, thread_id: str, checkpoint_id: str, key: str
) -> tuple[dict[str, Any], list[Any], Any]:
    """(state, messages, places of its replayed lists as stored: ``format.replay.decode`` checks them)
    of a snapshot object."""
    try:
        doc = codec.decode_document(data, f"snapshot {key!r}", compressed=True, kind="snapshot")
    except ObjectTooLarge as exc:
        raise ObjectTooLarge(str(exc), thread_id=thread_id, checkpoint_id=checkpoint_id, key=key) from None
    except UnsupportedFormatVersion:
        raise
    except IntegrityError as exc:
        raise TruncatedObject(str(exc), thread_id=thread_id, checkpoint_id=checkpoint_id, key=key) from None
    if doc.get("checkpoint_id") != checkpoint_id or not isinstance(doc.get("state"), dict):
        raise IntegrityError(
            "snapshot belongs to another checkpoint",
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            key=key,
        )
    messages = doc.get("messages", [])
    if not isinstance(messages, list):
        raise IntegrityError(
            "snapshot's messages are not a list", thread_id=thread_id, checkpoint_id=checkpoint_id, key=key
        )
    state: dict[str, Any] = doc["state"]
    return state, messages, doc.get("lists", [])


GROUP_CHECKPOINTS = 256
GROUP_BYTES = limits.INLINE_TOTAL_BYTES
"""A row group holds consecutive checkpoints, up to this many or about this many bytes of ops (paths and
values as text): values compressed together cost a fraction of values compressed alone (a ~1 KB chat
message shares most of its words with its neighbours), and a reader fetches the whole segment object
anyway. Each row group costs pyarrow ~0.35 ms of fixed work whatever its rows (W1's 2,137-row tier
segment: 5.2 ms as 11 row groups, 1.6 ms as one), and a cold load reads every row group of a
lineage: at 256, W1's head reads 10, not 22. The price is a one-record read, which decodes its whole
row group (a LangGraph ``add_messages`` one of 240 checkpoints, 570 KB of values: ~3 ms). No more
than a compaction's inline deltas together, so a merged segment's row groups (tiers,
spec.md section 6) stay within the row group bounds a reader checks (``limits.VALUES``)."""


def encode_segment(
    thread_id: str, entries: Sequence[tuple[str, int, str | None, Delta]]
) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """Checkpoints with at least one op, in order, as rows of consecutive row groups; each entry is
    (checkpoint id, step, base id: the checkpoint its rows are against or None, ops).

    Returns (bytes, {checkpoint_id: (row_group, bytes)}), ``bytes`` being the checkpoint's share of
    its row group's compressed size (by the size of its ops), for listings and stats.
    """
    buf = io.BytesIO()
    meta = {_META_VERSION: str(versions.FORMAT_VERSION).encode()}
    schema = SEGMENT_SCHEMA
    groups: list[list[tuple[str, dict[str, list[Any]], int]]] = [[]]
    weight = 0
    for checkpoint_id, step, base_id, ops in entries:
        if not ops:
            continue
        cols: dict[str, list[Any]] = {name: [] for name in SEGMENT_SCHEMA.names}
        for index, op in enumerate(ops):
            path = op["path"]
            cols["thread_id"].append(thread_id)
            cols["checkpoint_id"].append(checkpoint_id)
            cols["base_id"].append(base_id)
            cols["step"].append(step)
            cols["op_index"].append(index)
            cols["op"].append(op["op"])
            cols["key"].append(path[0])
            cols["path"].append(codec.dumps(path).decode())
            cols["value"].append(None if op["op"] == "del" else codec.dumps(op.get("value")).decode())
            cols["target"].append(op.get("target"))
        size = sum(len(v or "") + len(p) for v, p in zip(cols["value"], cols["path"], strict=True))
        if groups[-1] and (len(groups[-1]) >= GROUP_CHECKPOINTS or weight + size > GROUP_BYTES):
            groups.append([])
            weight = 0
        groups[-1].append((checkpoint_id, cols, size))
        weight += size
    groups = [group for group in groups if group]
    with pq.ParquetWriter(buf, schema, **_PARQUET_OPTIONS) as writer:
        for group in groups:
            merged = {name: [x for _, cols, _ in group for x in cols[name]] for name in SEGMENT_SCHEMA.names}
            writer.write_table(pa.table(merged, schema=schema), row_group_size=len(merged["op"]) + 1)
        writer.add_key_value_metadata(meta)
    data = buf.getvalue()
    file_meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    placed: dict[str, tuple[int, int]] = {}
    for g, group in enumerate(groups):
        rg = file_meta.row_group(g)
        stored = sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
        total = max(sum(size for _, _, size in group), 1)
        for checkpoint_id, _, size in group:
            placed[checkpoint_id] = (g, max(1, stored * size // total))
    return data, placed


_STRINGS = ["thread_id", "checkpoint_id", "base_id", "op", "key", "path", "value", "target"]
_WRITTEN_PLAIN = frozenset(_STRINGS) - set(_PARQUET_OPTIONS["use_dictionary"])
"""The string columns the writer stores without a dictionary (``path``, ``value``): read as Arrow
dictionaries, pyarrow hashes every value into one, then ``_plain`` expands it again (a DeltaChannel
row group of ~1 MB of values: 3.8 ms a read, 3.2 read plain); where the page walk finds no
dictionary page in them, their decoded size is their pages' (bounded before the read), so they are
read plain."""
_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
_PLAIN, _PLAIN_DICTIONARY, _RLE_DICTIONARY = 0, 2, 8
_ENCODINGS = {
    _DICTIONARY_PAGE: (_PLAIN, _PLAIN_DICTIONARY),
    _DATA_PAGE: (_PLAIN, _PLAIN_DICTIONARY, _RLE_DICTIONARY),
    _DATA_PAGE_V2: (_PLAIN, _PLAIN_DICTIONARY, _RLE_DICTIONARY),
}
"""Page types and value encodings a segment's string columns are written in (Parquet's numbers). Each
decodes to at most its page's uncompressed size, plus one dictionary index per value; the DELTA_*
encodings (prefix lengths) can expand past it, and no writer of this format uses them."""


_OPTIONAL = 1  # a SchemaElement's repetition_type (Parquet's numbers): every segment column is nullable


def _footer_shape(data: bytes) -> str | None:
    """What is wrong with a segment's footer that pyarrow would not survive, None when nothing: read with
    ``thrift`` before pyarrow sees it. pyarrow 26 aborts the process (a C++ exception it cannot raise)
    on level histograms whose length disagrees with the schema's levels (found by
    ``tests/test_hostile.py::test_decoders_on_damaged_real_objects``), so the schema must be this
    format's flat one of nullable columns and each column chunk's ``size_statistics`` histograms
    lengths its levels give (definition: 2, repetition: 0 or 1). A footer this fails to parse is left
    to pyarrow, which raises on it."""
    if len(data) < 12 or data[-4:] != b"PAR1":
        return None
    size = int.from_bytes(data[-8:-4], "little")
    if size > len(data) - 12:
        return None
    try:
        meta, _ = read_struct(data, len(data) - 8 - size, len(data) - 8)
    except ThriftError:
        return "footer is not well-formed Thrift"
    schema = meta.get(2)
    width = len(SEGMENT_SCHEMA)
    if not isinstance(schema, list) or not all(isinstance(e, dict) for e in schema):
        return "footer has no schema"
    names = [e.get(4).decode(errors="replace") for e in schema[1:] if isinstance(e.get(4), bytes)]
    missing = [name for name in SEGMENT_SCHEMA.names if name not in names]
    if missing:
        return f"has no {missing[0]!r} column: not a segment this format writes"
    if len(schema) != width + 1:
        return f"has columns {names[:12]}, not {SEGMENT_SCHEMA.names}: not a segment this format writes"
    if schema[0].get(5) != width or any(e.get(5) is not None or e.get(3) != _OPTIONAL for e in schema[1:]):
        return "footer's schema is not this format's flat one of nullable columns"
    groups = meta.get(4)
    if not isinstance(groups, list):
        return "footer lists no row groups"
    for group in groups:
        columns = group.get(1) if isinstance(group, dict) else None
        if not isinstance(columns, list) or len(columns) != width:
            return "footer has a row group without the schema's columns"
        for chunk in columns:
            column = chunk.get(3) if isinstance(chunk, dict) else None
            sizes = column.get(16) if isinstance(column, dict) else None
            if sizes is None:
                continue
            if not isinstance(sizes, dict) or _length(sizes.get(3, [])) not in (0, 2) or _length(sizes.get(2, [])) > 1:
                return "footer has level histograms that disagree with its schema"
    return None


def _length(value: Any) -> int:
    return len(value) if isinstance(value, list) else 99


class SegmentReader:
    """A parsed segment file; ``ops(checkpoint_id, row_group)`` decodes one checkpoint's delta."""

    def __init__(self, data: bytes, *, thread_id: str, key: str) -> None:
        self.thread_id, self.key = thread_id, key
        # a history segment (one full record's big history rows, ``layout.HISTORY_SUFFIX``) is read under
        # a snapshot's bounds, every other one under a delta segment's
        self.group = "history row group" if key.endswith(layout.HISTORY_SUFFIX) else "row group"
        self._data = data
        self._plain: pq.ParquetFile | None = None
        self._rows: dict[int, dict[str, list[Any]]] = {}
        self._at: dict[int, Index] = {}  # row group -> its checkpoints' rows (``_index``)
        self._paths: dict[str, Any] = {}  # path text -> parsed (read under the row groups' bounds)
        self._scoped: dict[int, tuple[Any, dict[Any, list[int]]]] = {}  # row group -> (within, rows it takes)
        if (wrong := _footer_shape(data)) is not None:
            raise TruncatedObject(f"delta segment {wrong}", thread_id=thread_id, key=key)
        try:
            # string columns come back dictionary-encoded, as stored: a small dictionary page
            # repeated over many rows is only expanded once its decoded size is known (``_read``)
            self._file = pq.ParquetFile(
                pa.BufferReader(data),  # Arrow reads it in place (BytesIO: a Python call per read, 2x slower)
                read_dictionary=_STRINGS,
                # pyarrow sizes a footer list by its declared length before reading it (1M elements by
                # default: ~200 MB for a 1 KB footer); a segment's longest holds its row groups
                thrift_container_size_limit=limits.FOOTER_ITEMS,
                thrift_string_size_limit=limits.FOOTER_STRING_BYTES,
            )
            meta = self._file.schema_arrow.metadata or {}
            # decoded here: a damaged footer's strings fail to decode (UnicodeDecodeError from pyarrow)
            created_by, names = self._file.metadata.created_by or "", self._file.schema_arrow.names
        except KeyError as exc:  # a string column of SEGMENT_SCHEMA is missing (pyarrow names it in bytes)
            name = exc.args[0].decode(errors="replace") if isinstance(exc.args[0], bytes) else exc.args[0]
            raise TruncatedObject(
                f"delta segment has no {name!r} column: not a segment this format writes",
                thread_id=thread_id,
                key=key,
            ) from None
        except Exception as exc:  # pyarrow raises many types for garbage input
            raise TruncatedObject(
                f"delta segment is not a readable Parquet file ({type(exc).__name__})",
                thread_id=thread_id,
                key=key,
            ) from None
        if created_by.partition(" version")[0].strip() == "parquet-mr":
            # pyarrow reads up to 100 bytes past a column chunk of a file parquet-mr says it wrote
            # (PARQUET-816): pages the page walk (``_pages``) would not see
            raise TruncatedObject(
                "delta segment says parquet-mr wrote it: not a segment this format writes", thread_id=thread_id, key=key
            )
        if names != SEGMENT_SCHEMA.names:  # e.g. no ``op_index``: another layout
            raise TruncatedObject(
                f"delta segment has columns {names[:12]}, not {SEGMENT_SCHEMA.names}: not a segment this format writes",
                thread_id=thread_id,
                key=key,
            )
        version = meta.get(_META_VERSION, b"").decode(errors="replace")
        if not versions.readable(version):
            raise UnsupportedFormatVersion(
                f"delta segment {key!r} has format_version {version!r}; this ckpt_archive reads {versions.READABLE}"
            )

    def ops(
        self, checkpoint_id: str, row_group: int, within: Callable[[str | None, list[Any]], bool] | None = None
    ) -> Delta:
        """The checkpoint's ops, in order, from its row group (decoded once per row group); ``within``
        (target, path): only the ops it takes, the values of the others never parsed (a replay of one
        list through a thousand records wants one op of each). A replay asks for each record of a
        lineage in turn with the same ``within``: which rows it takes is decided once per row group
        and distinct (target, path), not once per row and call."""
        try:
            rows = self._rows.get(row_group)
            if rows is None:
                rows = self._rows[row_group] = self._read(row_group, checkpoint_id)
            indexed = self._at.get(row_group)
            if indexed is None:
                indexed = self._at[row_group] = _index(rows)
            at, misnumbered = indexed
            if checkpoint_id in misnumbered:
                index, seen = misnumbered[checkpoint_id]
                raise TruncatedObject(
                    f"row group {row_group} of the delta segment has op_index {index!r} where {seen} "
                    "belongs (each checkpoint's ops are numbered 0, 1, ... in order)",
                    thread_id=self.thread_id,
                    checkpoint_id=checkpoint_id,
                    key=self.key,
                )
            mine = at.get(checkpoint_id)
            if mine is None:  # a segment ref is only written for a checkpoint with ops
                raise TruncatedObject(
                    f"row group {row_group} of the delta segment holds no op of the checkpoint",
                    thread_id=self.thread_id,
                    checkpoint_id=checkpoint_id,
                    key=self.key,
                )
            if within is not None:
                mine = self._taken(rows, at, row_group, within).get(checkpoint_id, [])
            ops, paths, values, targets = rows["op"], rows["path"], rows["value"], rows["target"]
            out: Delta = []
            for i in mine:
                value, target = values[i], targets[i]
                entry = {
                    "op": ops[i],
                    "path": list(self._path(paths[i])),
                    "value": None if value is None else codec.loads(value),
                }
                if target is not None:
                    entry["target"] = target
                out.append(entry)
        except IntegrityError:  # refused by a bound or a check, the object named already
            raise
        except Exception as exc:
            raise TruncatedObject(
                f"row group {row_group} of the delta segment cannot be read ({exc})",
                thread_id=self.thread_id,
                checkpoint_id=checkpoint_id,
                key=self.key,
            ) from None
        return out

    def _path(self, text: str) -> Any:
        """A path text parsed once per segment (a row group's paths repeat: a chat appends to one list
        a row); each op gets its own copy (``list``), as a parse would give."""
        parsed = self._paths.get(text)
        if parsed is None:
            parsed = self._paths[text] = codec.loads(text)
        return parsed

    def _taken(
        self,
        rows: dict[str, list[Any]],
        at: dict[Any, list[int]],
        row_group: int,
        within: Callable[[str | None, list[Any]], bool],
    ) -> dict[Any, list[int]]:
        """Each checkpoint's rows ``within`` takes (kept for the last ``within`` asked of the row group)."""
        held = self._scoped.get(row_group)
        if held is not None and held[0] is within:
            return held[1]
        paths, targets = rows["path"], rows["target"]
        decided: dict[tuple[Any, Any], bool] = {}
        taken: dict[Any, list[int]] = {}
        for cid, mine in at.items():
            kept = []
            for i in mine:
                where = (targets[i], paths[i])
                takes = decided.get(where)
                if takes is None:
                    takes = decided[where] = bool(within(where[0], list(self._path(where[1]))))
                if takes:
                    kept.append(i)
            taken[cid] = kept
        self._scoped[row_group] = (within, taken)
        return taken

    @property
    def row_groups(self) -> int:
        return int(self._file.metadata.num_row_groups)

    def checkpoint_ids(self, row_group: int) -> list[str]:
        """The checkpoints a row group holds rows of, in order, each once (read under the bounds of
        ``ops``): what verify compares with the records that name the segment."""
        try:
            rows = self._rows.get(row_group)
            if rows is None:
                rows = self._rows[row_group] = self._read(row_group, None)
        except IntegrityError:
            raise
        except Exception as exc:
            raise TruncatedObject(
                f"row group {row_group} of the delta segment cannot be read ({exc})",
                thread_id=self.thread_id,
                key=self.key,
            ) from None
        return list(dict.fromkeys(rows["checkpoint_id"]))

    def bases(self, row_group: int) -> dict[str, str | None]:
        """Each checkpoint of a row group and the checkpoint its rows are against (None: the empty
        content); a checkpoint whose rows name two bases is ``TruncatedObject``."""
        self.checkpoint_ids(row_group)
        rows = self._rows[row_group]
        out: dict[str, str | None] = {}
        for cid, base in zip(rows["checkpoint_id"], rows["base_id"], strict=True):
            if out.setdefault(cid, base) != base:
                raise TruncatedObject(
                    f"row group {row_group} of the delta segment names two bases of {cid!r}",
                    thread_id=self.thread_id,
                    key=self.key,
                )
        return out

    def _read(self, row_group: int, checkpoint_id: str | None) -> dict[str, list[Any]]:
        """The columns of one row group as lists, refused (``ObjectTooLarge``) when the footer declares
        more rows or bytes than a writer puts in a row group, or its values would decode to more."""
        where = {"thread_id": self.thread_id, "checkpoint_id": checkpoint_id, "key": self.key}
        meta = self._file.metadata.row_group(row_group)
        what = f"row group {row_group} of the delta segment"
        if meta.num_rows > limits.ROW_GROUP_ROWS:
            raise ObjectTooLarge(
                f"{what} has {meta.num_rows} rows, more than any holds ({limits.ROW_GROUP_ROWS})", **where
            )
        declared = sum(meta.column(c).total_uncompressed_size for c in range(meta.num_columns))
        limits.check_read(self.group, declared, what, **where)
        columns = ["thread_id", "checkpoint_id", "base_id", "op_index", "op", "path", "value", "target"]
        chunks = {meta.column(c).path_in_schema: meta.column(c) for c in range(meta.num_columns)}
        paged, dictionaries = 0, set()
        for name in columns:
            size, dictionary = self._pages(chunks[name], meta.num_rows, f"column {name!r} of {what}", where)
            paged += size
            if dictionary:
                dictionaries.add(name)
        limits.check_read(self.group, paged, f"{what} (its pages)", **where)
        file = self._file if dictionaries & _WRITTEN_PLAIN else self._plain_file()
        table = file.read_row_group(row_group, columns=columns, use_threads=False)  # small: no pool
        limits.check_read(self.group, _decoded_size(table, columns, self.group), f"{what} (decoded)", **where)
        self._check_thread(table.column("thread_id"), what, where)
        # the size is known now: Arrow expands the dictionaries (to Python, element by element through
        # dictionary scalars, that was half the cost of listing a thread)
        rows = {name: _plain(table.column(name)).to_pylist() for name in columns if name != "thread_id"}
        # each path and value is parsed on its own (``ops``): what those parses may build is bounded
        # here, on the text, before any of them runs (a bytes bound alone lets ``[],[],…`` cost 20x)
        texts = [t for t in (*rows["path"], *rows["value"]) if t is not None]
        # k texts of V values in all take at least 2V - k characters: only texts long enough to hold
        # more values than the bound are counted (``limits.may_exceed``)
        if limits.may_exceed(self.group, sum(map(len, texts)) + len(texts)):
            count = sum(t.count(",") + t.count("[") + t.count("{") for t in texts)
            limits.check_values(self.group, count if count > limits.VALUES[self.group] else None, what, **where)
        return rows

    def _check_thread(self, column: pa.ChunkedArray, what: str, where: dict[str, Any]) -> None:
        """Every row names the thread the segment is read for: a segment copied or moved under
        another thread by hand (or a copy that kept its source's rows) is refused, not replayed
        as this thread's history. Checked on the dictionaries (one entry per row group), not per row."""
        names: set[Any] = set()
        for chunk in column.chunks:
            if chunk.null_count:
                names.add(None)
            names.update((chunk.dictionary if pa.types.is_dictionary(chunk.type) else chunk).to_pylist())
        if names - {self.thread_id}:
            other = sorted(repr(n)[:80] for n in names - {self.thread_id})[0]
            raise ForeignRows(f"{what} holds rows of thread {other}, not of the thread it is read for", **where)

    def _plain_file(self) -> pq.ParquetFile:
        """The file read with ``_WRITTEN_PLAIN`` as plain strings (its footer parsed once, shared)."""
        if self._plain is None:
            self._plain = pq.ParquetFile(
                pa.BufferReader(self._data),
                metadata=self._file.metadata,
                read_dictionary=[c for c in _STRINGS if c not in _WRITTEN_PLAIN],
            )
        return self._plain

    def _pages(self, chunk: Any, rows: int, what: str, where: dict[str, Any]) -> tuple[int, bool]:
        """The bytes the pages of a column chunk decompress to, by their own headers, and whether one is
        a dictionary page (then its values expand past them: ``_decoded_size``): what pyarrow
        allocates, whatever the footer declares (it checks neither ``total_uncompressed_size`` nor
        the page count against them). Every page pyarrow can read lies in the byte range it reads,
        from the first page to ``total_compressed_size`` past it, so each header there is read: an
        optional dictionary page, then data pages of at least one value each, no more values than the
        row group has rows, in the encodings this format writes (none expands past its page size).
        """
        start = chunk.data_page_offset
        if chunk.has_dictionary_page and 0 < chunk.dictionary_page_offset < start:
            start = chunk.dictionary_page_offset  # pyarrow's rule for where a chunk starts
        end = start + chunk.total_compressed_size
        if start < 4 or end > len(self._data) - 8 or chunk.total_compressed_size < 0:
            raise TruncatedObject(f"{what} lies outside the file", **where)
        pos, size, values, first, dictionary = start, 0, 0, True, False
        while pos < end:
            try:
                header, pos = read_struct(self._data, pos, end)
                kind, uncompressed, compressed = header[1], header[2], header[3]
                body = header.get(7 if kind == _DICTIONARY_PAGE else 5 if kind == _DATA_PAGE else 8, {})
                count, encoding = body.get(1, 0), body.get(4 if kind == _DATA_PAGE_V2 else 2)
                if not all(type(n) is int for n in (kind, uncompressed, compressed, count)):
                    raise ThriftError("a size that is not an integer")
            except (ThriftError, KeyError, AttributeError) as exc:
                raise TruncatedObject(f"{what} has a malformed page header ({exc})", **where) from None
            if (kind == _DICTIONARY_PAGE and not first) or encoding not in _ENCODINGS.get(kind, ()):
                raise TruncatedObject(
                    f"{what} has a page of type {kind} encoded {encoding}: not written by this format", **where
                )
            if not (0 <= compressed <= end - pos and uncompressed >= 0 and 0 <= count <= rows):
                raise TruncatedObject(f"{what} has a page header with impossible sizes", **where)
            if kind != _DICTIONARY_PAGE:
                if count < 1:
                    raise TruncatedObject(f"{what} has a data page of no values", **where)
                values += count
                if values > rows:
                    raise ObjectTooLarge(f"{what} has more values than the row group has rows ({rows})", **where)
            size += uncompressed
            limits.check_read(self.group, size, f"{what} (its pages)", **where)
            pos += compressed
            dictionary = dictionary or kind == _DICTIONARY_PAGE
            first = False
        return size, dictionary


Index = tuple[dict[Any, list[int]], dict[Any, tuple[Any, int]]]
"""A row group's checkpoints: each one's rows, and those whose ``op_index`` is not 0, 1, ... in order
(checkpoint -> (the index found, the one due))."""


def _index(rows: dict[str, list[Any]]) -> Index:
    """Each checkpoint's rows, found in one pass; a checkpoint numbered wrong (what a reader of the
    files alone orders the ops by) is set aside, refused when asked for, the row group's other
    checkpoints still read."""
    at: dict[Any, list[int]] = {}
    bad: dict[Any, tuple[Any, int]] = {}
    for i, (cid, index) in enumerate(zip(rows["checkpoint_id"], rows["op_index"], strict=True)):
        mine = at.setdefault(cid, [])
        if index != len(mine) and cid not in bad:
            bad[cid] = (index, len(mine))
        mine.append(i)
    return at, bad


def _decoded_size(table: pa.Table, columns: Sequence[str], group: str) -> int:
    """The bytes the dictionary-encoded columns of ``table`` expand to, or an upper bound of them that
    is within the ``group``'s read bound: each chunk's dictionary bytes times its rows, known without
    a pass over the data (a row group of small ops is well within it); only past the bound is the
    exact sum of the entries the indices take computed."""
    chunks = [c for name in columns for c in table.column(name).chunks if pa.types.is_dictionary(c.type)]
    bound = 0
    for chunk in chunks:
        data = chunk.dictionary.buffers()[-1]
        bound += (0 if data is None else data.size) * len(chunk.indices)
    if bound <= limits.LIMITS[group]:
        return bound
    return sum(pc.sum(pc.take(pc.binary_length(c.dictionary), c.indices)).as_py() or 0 for c in chunks)


def _plain(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """``column`` with its dictionary-encoded chunks expanded by Arrow."""
    if not pa.types.is_dictionary(column.type):
        return column
    return pa.chunked_array([chunk.dictionary_decode() for chunk in column.chunks], type=column.type.value_type)
