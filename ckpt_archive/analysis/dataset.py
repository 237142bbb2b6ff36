"""pyarrow datasets over an archive: the Parquet delta segments, and the manifest's checkpoint rows.

The deltas are plain hive-partitioned Parquet (``thread_id=<percent-encoded>/deltas/*.parquet``,
one row per delta operation, one row group per checkpoint), so any engine reads
them as they are; this module only finds the files (never the snapshots or the
log next to them) and declares the partitioning, so that a filter on
``thread_id`` prunes whole folders and one on ``step`` skips row groups.

Open segments: a thread's newest deltas stay inline in its commit log until the
next full snapshot or ``archive.compact(thread_id)``; they are not in these files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import fsspec
import pyarrow as pa
import pyarrow.dataset as ds

from ..archive import layout
from ..archive.objects import SEGMENT_SCHEMA
from .frames import Source, archive_of, checkpoints_table

DELTA_GLOB = "thread_id=*/deltas/*.parquet"
"""Where the delta segments are, relative to the archive root (for DuckDB, Dask, Spark...)."""

PARTITIONING = ds.partitioning(pa.schema([("thread_id", pa.string())]), flavor="hive")


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

    ``kind="deltas"``: columns thread_id, checkpoint_id, step, op_index, op, key,
    path (JSON list), value (JSON text, null for ``del``); ``threads`` limits the
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
        return ds.dataset(pa.table({n: [] for n in SEGMENT_SCHEMA.names}, schema=SEGMENT_SCHEMA))
    return ds.dataset(
        paths,
        schema=SEGMENT_SCHEMA,
        format="parquet",
        filesystem=fs,
        partitioning=PARTITIONING,
        partition_base_dir=root,
    )
