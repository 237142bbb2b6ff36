"""pyarrow datasets over an archive: the Parquet delta segments, and the manifest's checkpoint rows.

The deltas are plain hive-partitioned Parquet (``thread_id=<percent-encoded>/deltas/*.parquet``,
one row per delta operation, one row group per checkpoint), so any engine reads
them as they are; this module only finds the files (never the snapshots or the
log next to them) and gives each file its partition expression
``thread_id == <id>``, so that a filter on ``thread_id`` prunes whole folders
and one on ``step`` skips row groups. The id comes from the folder name
(percent-decoded, as hive readers do) except for ids too long for a key
segment, whose folder is ``thread_id=@<sha256>``: their id is read from the
segment's ``ckpt_archive.thread_id`` file metadata.

Open segments: a thread's newest deltas stay inline in its commit log until the
next full snapshot or ``archive.compact(thread_id)``; they are not in these files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import fsspec
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from ..archive import layout
from ..archive.objects import SEGMENT_SCHEMA
from ..errors import TruncatedObject
from .frames import Source, archive_of, checkpoints_table

THREAD_META = b"ckpt_archive.thread_id"
DELTA_SCHEMA = (
    SEGMENT_SCHEMA
    if "thread_id" in SEGMENT_SCHEMA.names
    else pa.schema([pa.field("thread_id", pa.string()), *SEGMENT_SCHEMA])
)
"""Columns of ``open_dataset``: the segment's columns, with ``thread_id`` from the partition folder."""

DELTA_GLOB = "thread_id=*/deltas/*.parquet"
"""Where the delta segments are, relative to the archive root (for DuckDB, Dask, Spark...)."""


def delta_glob(url: str) -> str:
    """The glob of every delta segment of the archive at ``url`` (``<url>/thread_id=*/deltas/*.parquet``)."""
    return f"{url.rstrip('/')}/{DELTA_GLOB}"


def open_dataset(
    source: Source,
    *,
    storage_options: dict[str, Any] | None = None,
    threads: Sequence[str] | None = None,
    kind: Literal["deltas", "checkpoints"] = "deltas",
) -> ds.Dataset:
    """A pyarrow dataset over the archive's delta segments (default) or its checkpoint records.

    ``kind="deltas"``: columns thread_id (from the folder), checkpoint_id, step, op, key,
    path (JSON list), value (JSON text, null for ``del``), one row per operation in
    the order they apply within a checkpoint; ``threads`` limits the
    files listed. ``kind="checkpoints"``: the rows of ``checkpoints_table``
    (read from the manifest, always complete) as an in-memory dataset.
    """
    if kind == "checkpoints":
        return ds.dataset(checkpoints_table(source, threads, storage_options=storage_options))
    if kind != "deltas":
        raise ValueError(f"kind must be 'deltas' or 'checkpoints', not {kind!r}")
    if isinstance(source, str):
        fs, root = fsspec.core.url_to_fs(source, **(storage_options or {}))
    else:
        store = archive_of(source).store
        fs, root = store.fs, store.root
    root = root.rstrip("/")
    if threads is None:
        patterns = [f"{root}/{DELTA_GLOB}"]
    else:
        patterns = [f"{root}/{layout.thread_dir(t)}/deltas/*.parquet" for t in threads]
    fs.invalidate_cache()
    paths = sorted({p for pattern in patterns for p in fs.glob(pattern)})
    if not paths:
        return ds.dataset(pa.table({n: [] for n in DELTA_SCHEMA.names}, schema=DELTA_SCHEMA))
    threads_of = _thread_of_folder(fs, paths)
    return ds.FileSystemDataset.from_paths(
        paths,
        schema=DELTA_SCHEMA,
        format=ds.ParquetFileFormat(),
        filesystem=_arrow_fs(fs),
        partitions=[ds.field("thread_id") == threads_of[_folder(p)] for p in paths],
    )


def _arrow_fs(fs: fsspec.AbstractFileSystem) -> pafs.FileSystem:
    if isinstance(fs, LocalFileSystem):
        return pafs.LocalFileSystem()
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs))


def _folder(path: str) -> str:
    return path.rsplit("/", 3)[-3]


def _thread_of_folder(fs: fsspec.AbstractFileSystem, paths: list[str]) -> dict[str, str]:
    """Thread id of each ``thread_id=<enc>`` folder: decoded, or (hashed long id) read from a file's column."""
    out: dict[str, str] = {}
    for path in paths:
        folder = _folder(path)
        if folder in out:
            continue
        thread = layout.decode_id(folder[len(layout.THREAD_PREFIX) :])
        if thread is None:
            with fs.open(path, "rb") as f:
                meta = pq.ParquetFile(f).schema_arrow.metadata or {}
            thread = meta.get(THREAD_META, b"").decode("utf-8", "replace")
            if not thread:
                raise TruncatedObject("delta segment does not name its thread", key=path)
        out[folder] = thread
    return out
