"""The delta segments read by DuckDB, polars and Dask as plain Parquet files, compared with the API.

Thread ids are a column inside every segment (spec.md section 5), so no reader depends on hive
partition inference, which garbles exactly the ids below: ``007`` becomes 7, a non-ASCII id is
mangled or NaN, ``__HIVE_DEFAULT_PARTITION__`` reads as null, ``a/b c`` is a percent-encoded folder.
A copied thread's rows name the copy (its id and its checkpoints' ids), never the source.
"""

from __future__ import annotations

from typing import Any

import dask.dataframe as dd
import duckdb
import polars as pl
import pytest

import ckpt_archive as ca
from ckpt_archive.analysis import delta_glob, open_dataset

THREADS = ["007", "héllo wörld", "__HIVE_DEFAULT_PARTITION__", "a/b c", "plain"]
COPY = ("007", "0070")
STEPS = 7
Row = tuple[str, str, str, str]


def _history(url: str) -> ca.ArchiveCheckpointer:
    """Saves with deltas (every 3rd a snapshot, which compacts the inline deltas into a segment), a
    closing compact of each thread, and a copy of one thread into a new one."""
    archive = ca.open_archive(url, full_snapshot_interval=3)
    for thread in THREADS:
        messages: list[dict[str, Any]] = []
        for step in range(STEPS):
            messages.append({"role": "user", "content": f"{thread} turn {step}"})
            archive.save(ca.Checkpoint.new(thread, {"messages": list(messages), "turn": step}, step=step))
        archive.compact(thread)
    archive.copy_thread(*COPY)
    return archive


def _rows(records: list[dict[str, Any]]) -> set[Row]:
    return {(r["thread_id"], r["checkpoint_id"], r["op"], r["path"]) for r in records}


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, set[Row]]:
    """The archive's URL and its segment rows as the API gives them (``open_dataset``)."""
    url = str(tmp_path_factory.mktemp("readers") / "archive")
    _history(url)
    table = open_dataset(url).to_table(columns=["thread_id", "checkpoint_id", "op", "path"])
    return url, _rows(table.to_pylist())


def test_duckdb_reads_thread_ids_from_the_files(history: tuple[str, set[Row]]) -> None:
    url, expected = history
    got = duckdb.sql(
        f"SELECT thread_id, checkpoint_id, op, path FROM read_parquet('{delta_glob(url)}', hive_partitioning = false)"
    ).fetchall()
    assert {tuple(r) for r in got} == expected


def test_polars_reads_thread_ids_from_the_files(history: tuple[str, set[Row]]) -> None:
    url, expected = history
    columns = ["thread_id", "checkpoint_id", "op", "path"]
    frame = pl.read_parquet(delta_glob(url), hive_partitioning=False, columns=columns)
    assert frame.schema["thread_id"] == pl.String
    assert _rows(frame.to_dicts()) == expected


def test_dask_reads_thread_ids_from_the_files(history: tuple[str, set[Row]]) -> None:
    url, expected = history
    frame = dd.read_parquet(delta_glob(url), columns=["thread_id", "checkpoint_id", "op", "path"]).compute()
    assert _rows(frame.to_dict("records")) == expected


def test_segment_rows_are_the_listed_checkpoints_of_their_own_thread(history: tuple[str, set[Row]]) -> None:
    url, rows = history
    archive = ca.open_archive(url)
    every = {(i.thread_id, i.checkpoint_id) for t in archive.threads() for i in archive.list(t)}
    # every checkpoint's history rows (a delta's ops, a snapshot's against its parent) are in a
    # segment, under its own thread
    assert {(t, c) for t, c, _, _ in rows} == every
    assert {t for t, _, _, _ in rows} == {*THREADS, COPY[1]}
    source = {c for t, c, _, _ in rows if t == COPY[0]}
    copied = {c for t, c, _, _ in rows if t == COPY[1]}
    assert len(copied) == len(source) and not copied & source
