"""Encoding and decoding of the two payload objects: zstd snapshots and Parquet delta segments.

Decoders verify size and sha256 first, then parse, and turn every parser error
into a typed ``IntegrityError`` naming the object, never a raw pyarrow/zstd one.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .. import codec
from ..delta import Delta
from ..errors import DigestMismatch, IntegrityError, TruncatedObject, UnsupportedFormatVersion

SEGMENT_SCHEMA = pa.schema(
    [
        ("checkpoint_id", pa.string()),
        ("step", pa.int64()),
        ("op", pa.string()),
        ("key", pa.string()),
        ("path", pa.string()),
        ("value", pa.string()),
        ("target", pa.string()),
    ]
)
"""``target`` is null for a state op and ``"messages"`` for an op on the message list; segments
written before the column existed have no ``target`` column (every row is a state op)."""
# Statistics on JSON values would store each large value twice more (min/max); keep them where they
# help predicate pushdown. The thread id comes from the hive partition folder.
_PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 9,
    "write_statistics": ["step"],
    "use_dictionary": ["op", "key", "target"],
    "write_page_index": False,
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


def check_content(content: tuple[dict[str, Any], list[Any]], record: dict[str, Any], thread_id: str) -> None:
    """A rebuilt (state, messages) must hash to the ``state_sha256`` and ``messages_sha256`` recorded
    at save (each checked where the record has it: records written before messages have neither)."""
    for name, value in (("state", content[0]), ("messages", content[1])):
        want = record.get(f"{name}_sha256")
        if want is not None and codec.sha256(codec.dumps(value)) != want:
            raise DigestMismatch(
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
    pages: dict[str, list[str]] | None = None,
    messages: list[Any] | None = None,
    message_pages: dict[str, list[str]] | None = None,
) -> bytes:
    """``messages``/``message_pages``: the message list's tail and page table (absent when empty)."""
    doc: dict[str, Any] = {
        "format_version": codec.FORMAT_VERSION,
        "type": "snapshot",
        "thread_id": thread_id,
        "checkpoint_id": checkpoint_id,
        "state": state,
        "pages": pages or {},
    }
    if messages or message_pages:
        doc["messages"] = messages or []  # absent means no messages (and in snapshots written before them)
    if message_pages:
        doc["message_pages"] = message_pages
    return codec.compress(codec.dumps(doc))


def decode_snapshot_content(
    data: bytes, *, thread_id: str, checkpoint_id: str, key: str
) -> tuple[dict[str, Any], dict[str, list[str]], list[Any], dict[str, list[str]]]:
    """(state tails, state page table, messages tail, messages page table) of a snapshot object."""
    try:
        doc = codec.decode_document(data, f"snapshot {key!r}", compressed=True)
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
    pages = doc.get("pages") or {}
    message_pages = doc.get("message_pages") or {}
    if not isinstance(pages, dict) or not isinstance(message_pages, dict):
        raise TruncatedObject("snapshot has a malformed page table", thread_id=thread_id, key=key)
    return state, pages, messages, message_pages


def encode_segment(thread_id: str, entries: Sequence[tuple[str, int, Delta]]) -> tuple[bytes, dict[str, int]]:
    """One row group per checkpoint with at least one op; returns (bytes, {checkpoint_id: row_group})."""
    buf = io.BytesIO()
    meta = {_META_VERSION: str(codec.FORMAT_VERSION).encode(), b"ckpt_archive.thread_id": thread_id.encode()}
    schema = SEGMENT_SCHEMA.with_metadata(meta)
    groups: dict[str, int] = {}
    with pq.ParquetWriter(buf, schema, **_PARQUET_OPTIONS) as writer:
        for checkpoint_id, step, ops in entries:
            if not ops:
                continue
            cols: dict[str, list[Any]] = {name: [] for name in SEGMENT_SCHEMA.names}
            for op in ops:
                path = op["path"]
                cols["checkpoint_id"].append(checkpoint_id)
                cols["step"].append(step)
                cols["op"].append(op["op"])
                cols["key"].append(path[0])
                cols["path"].append(codec.dumps(path).decode())
                cols["value"].append(None if op["op"] == "del" else codec.dumps(op.get("value")).decode())
                cols["target"].append(op.get("target"))
            writer.write_table(pa.table(cols, schema=schema), row_group_size=len(ops) + 1)
            groups[checkpoint_id] = len(groups)
    return buf.getvalue(), groups


class SegmentReader:
    """A parsed segment file; ``ops(checkpoint_id, row_group)`` decodes one checkpoint's delta."""

    def __init__(self, data: bytes, *, thread_id: str, key: str) -> None:
        self.thread_id, self.key = thread_id, key
        try:
            self._file = pq.ParquetFile(io.BytesIO(data))
            meta = self._file.schema_arrow.metadata or {}
        except Exception as exc:  # pyarrow raises many types for garbage input
            raise TruncatedObject(
                f"delta segment is not a readable Parquet file ({type(exc).__name__})",
                thread_id=thread_id,
                key=key,
            ) from None
        version = meta.get(_META_VERSION, b"").decode(errors="replace")
        if version != str(codec.FORMAT_VERSION):
            raise UnsupportedFormatVersion(
                f"delta segment {key!r} has format_version {version!r}; this ckpt_archive reads {codec.FORMAT_VERSION}"
            )

    def ops(self, checkpoint_id: str, row_group: int) -> Delta:
        try:
            columns = ["checkpoint_id", "op", "path", "value"]
            has_target = "target" in self._file.schema_arrow.names
            if has_target:
                columns.append("target")
            table = self._file.read_row_group(row_group, columns=columns)
            rows = table.to_pydict()
            targets = rows["target"] if has_target else [None] * table.num_rows
            out: Delta = []
            for cid, op, path, value, target in zip(
                rows["checkpoint_id"], rows["op"], rows["path"], rows["value"], targets, strict=True
            ):
                if cid != checkpoint_id:
                    raise ValueError("row group holds another checkpoint")
                decoded = None if value is None else codec.loads(value)
                entry = {"op": op, "path": codec.loads(path), "value": decoded}
                if target is not None:
                    entry["target"] = target
                out.append(entry)
            return out
        except Exception as exc:
            raise TruncatedObject(
                f"row group {row_group} of the delta segment cannot be read ({exc})",
                thread_id=self.thread_id,
                checkpoint_id=checkpoint_id,
                key=self.key,
            ) from None
