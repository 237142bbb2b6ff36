"""pyarrow datasets over an archive: the Parquet delta segments, and the manifest's checkpoint rows.

The deltas are plain Parquet (``thread_id=<encoded>/deltas/*.parquet``, one row
per delta operation, row groups of consecutive steps), so any engine reads them
as they are; this module only finds the files (never the snapshots or the log
next to them). The thread id is a column of every file, exactly as given: no
reader (this one included) takes its values from the folder name, whose encoding
hive readers garble (``007`` -> 7, ``__HIVE_DEFAULT_PARTITION__`` -> null, a
hashed long id). Each file is given the partition expression ``thread_id == <id>``
only as a pruning hint, so that a filter on ``thread_id`` skips whole files unread
(one on ``step`` skips row groups): the id is this format's own exact decoding of
the folder (``layout.decode_id``, not hive's), or for ids too long for a key
segment (folder ``thread_id=@<sha256>``) the column of one of its files.

Open segments: a thread's newest deltas stay inline in its commit log until the
next full snapshot or ``archive.compact(thread_id)``; they are not in these files.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import fsspec
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from .._sync import run_sync
from ..errors import TruncatedObject
from ..format import layout
from ..format.objects import SEGMENT_SCHEMA
from ..storage import ObjectStore
from ..storage.local import check_regular
from .frames import Source, archive_of, checkpoints_table

if TYPE_CHECKING:
    import pyarrow.dataset as ds

DELTA_SCHEMA = SEGMENT_SCHEMA
"""Columns of ``open_dataset``: the segment's columns, ``thread_id`` among them (read from the files)."""

DELTA_GLOB = layout.DELTA_GLOB
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

    ``kind="deltas"``: columns thread_id (from the files), checkpoint_id, step, op, key,
    path (JSON list), value (JSON text, null for ``del``), one row per operation in
    the order they apply within a checkpoint; ``threads`` limits the
    files listed. ``kind="checkpoints"``: the rows of ``checkpoints_table``
    (read from the manifest, always complete) as an in-memory dataset.
    """
    # imported here: pyarrow.dataset imports pandas, ~50,000 objects every full collection of the
    # process walks (and ~0.1 s of import), and ``import ckpt_archive`` reaches this module
    import pyarrow.dataset as ds

    if kind == "checkpoints":
        return ds.dataset(checkpoints_table(source, threads, storage_options=storage_options))
    if kind != "deltas":
        raise ValueError(f"kind must be 'deltas' or 'checkpoints', not {kind!r}")
    store = archive_of(source, storage_options).store
    segments = run_sync(_segments(store, threads))
    if not segments:
        return ds.dataset(pa.table({n: [] for n in DELTA_SCHEMA.names}, schema=DELTA_SCHEMA))
    paths = [store.path(key) for key in segments]
    if isinstance(store.fs, LocalFileSystem):  # pyarrow opens them itself: a FIFO would block it, a device flood it
        for key, path in zip(segments, paths, strict=True):
            check_regular(os.stat(path).st_mode, key)
    threads_of = _thread_of_folder(store.fs, paths)
    fmt = ds.ParquetFileFormat()
    arrow_fs = _arrow_fs(store.fs, dict(zip(paths, segments.values(), strict=True)))
    fragments = [
        fmt.make_fragment(
            path, arrow_fs, partition_expression=ds.field("thread_id") == threads_of[_folder(path)], file_size=size
        )
        for path, size in zip(paths, segments.values(), strict=True)
    ]
    return ds.FileSystemDataset(fragments, DELTA_SCHEMA, fmt, arrow_fs)


async def _segments(store: ObjectStore, threads: Sequence[str] | None) -> dict[str, int]:
    """``{key: size}`` of every delta segment: one LIST of the root, then one per thread's deltas/ folder."""
    if threads is None:
        folders = [n for n in await store.list_dir("") if n.startswith(layout.THREAD_PREFIX)]
    else:
        folders = [layout.thread_dir(t) for t in threads]
    found = await asyncio.gather(*(store.find(layout.segments_dir(folder)) for folder in folders))
    out: dict[str, int] = {}
    for listing in found:
        for key, info in sorted(listing.items()):
            name = key.rsplit("/", 1)[-1]
            if name.endswith(layout.SEGMENT_SUFFIX) and not name.startswith("."):
                out[key] = int(info["size"])
    return out


def _arrow_fs(fs: fsspec.AbstractFileSystem, sizes: dict[str, int]) -> pafs.FileSystem:
    if isinstance(fs, LocalFileSystem):
        return pafs.LocalFileSystem()
    return pafs.PyFileSystem(_KnownSizes(fs, sizes))


class _KnownSizes(pafs.FSSpecHandler):  # type: ignore[misc]
    """Opens files whose size the listing already gave without asking again (no HEAD before the GET)."""

    def __init__(self, fs: fsspec.AbstractFileSystem, sizes: dict[str, int]) -> None:
        super().__init__(fs)
        self.sizes = sizes

    def open_input_file(self, path: str) -> pa.PythonFile:
        size = self.sizes.get(path)
        if size is not None:
            try:
                return pa.PythonFile(self.fs.open(path, mode="rb", size=size), mode="r")
            except TypeError:  # a filesystem whose files take no size hint
                pass
        return super().open_input_file(path)


def _folder(path: str) -> str:
    return path.rsplit("/", 3)[-3]


def _thread_of_folder(fs: fsspec.AbstractFileSystem, paths: list[str]) -> dict[str, str]:
    """Thread id of each ``thread_id=<enc>`` folder, for pruning: decoded, or (a hashed long id) read
    from the ``thread_id`` column of one of its files (its footer and one small dictionary)."""
    out: dict[str, str] = {}
    for path in paths:
        folder = _folder(path)
        if folder in out:
            continue
        thread = layout.decode_id(folder[len(layout.THREAD_PREFIX) :])
        if thread is None:
            with fs.open(path, "rb") as f:
                file = pq.ParquetFile(f)
                column = file.read_row_group(0, columns=["thread_id"]).column(0) if file.num_row_groups else None
                names = [] if column is None else column.unique().to_pylist()
            if len(names) != 1 or not isinstance(names[0], str) or not names[0]:
                raise TruncatedObject("delta segment does not name its one thread", key=path)
            thread = names[0]
        out[folder] = thread
    return out
