"""ckpt_archive.analysis over a generated archive, on local disk and on S3 (moto over HTTP)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pyarrow.dataset as ds
import pytest

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive.analysis import (
    changes_frame,
    checkpoints_frame,
    delta_glob,
    open_dataset,
    states,
)
from ckpt_archive.testing import S3Server
from tests import sample_archive

Make = Callable[..., tuple[str, dict[str, Any]]]
BACKENDS = ["local", "s3"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server) -> dict[str, tuple[str, dict[str, Any]]]:
    """The session's compacted sample archive per backend (read-only here)."""
    root = tmp_path_factory.getbasetemp()
    return {b: sample_archive.shared(b, root, s3_server) for b in BACKENDS}


def ops_by_checkpoint(table: Any) -> dict[str, list[dict[str, Any]]]:
    """Each checkpoint's operations, in file order (the order they apply)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in table.to_pylist():
        value = None if r["value"] is None else codec.loads(r["value"])
        out.setdefault(r["checkpoint_id"], []).append({"op": r["op"], "path": codec.loads(r["path"]), "value": value})
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_dataset_rows_are_the_stored_deltas(built: Any, backend: str) -> None:
    url, opts = built[backend]
    dataset = open_dataset(url, storage_options=opts)
    by_ckpt = ops_by_checkpoint(dataset.to_table())
    seen = 0
    threads = list(sample_archive.THREADS) if backend == "local" else ["support/alice"]  # S3: one is enough
    archive = ca.open_archive(url, storage_options=opts)
    for thread in threads:
        kinds = {i.checkpoint_id: i.kind for i in archive.list(thread)}
        known: dict[str, dict[str, Any]] = {}
        for ckpt in states(archive, thread):
            known[ckpt.checkpoint_id] = ckpt.state
            # every checkpoint's history rows, a full snapshot's too: against its parent's state, or
            # the empty one where the parent is not in the thread (a chain root)
            parent = known.get(ckpt.parent_id or "", {})
            assert kinds[ckpt.checkpoint_id] == "delta" or ckpt.parent_id is None or ckpt.parent_id in known
            assert by_ckpt.get(ckpt.checkpoint_id, []) == ca.diff(parent, ckpt.state)
            assert ca.apply(parent, by_ckpt.get(ckpt.checkpoint_id, [])) == ckpt.state
            seen += 1
    assert seen > 15
    # the partition value is URL-decoded and agrees with the column inside the files
    assert set(dataset.to_table(columns=["thread_id"]).column("thread_id").to_pylist()) == set(sample_archive.THREADS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dataset_pushdown(built: Any, backend: str) -> None:
    url, opts = built[backend]
    dataset = open_dataset(url, storage_options=opts)
    bob = ds.field("thread_id") == "support/bob"
    fragments = list(dataset.get_fragments(filter=bob))
    assert fragments and all("thread_id=support%2Fbob/" in f.path for f in fragments)
    assert len(fragments) < len(list(dataset.get_fragments()))
    late = dataset.to_table(filter=bob & (ds.field("step") >= 10))
    assert late.num_rows > 0 and min(late.column("step").to_pylist()) >= 10
    assert set(late.column("thread_id").to_pylist()) == {"support/bob"}
    only = open_dataset(url, storage_options=opts, threads=["support/bob"])
    assert only.to_table().num_rows == dataset.to_table(filter=bob).num_rows
    assert open_dataset(url, storage_options=opts, threads=["nobody"]).to_table().num_rows == 0


def test_dataset_pushdown_fetches_only_the_thread(built: Any, s3_server: S3Server) -> None:
    url, opts = built["s3"]
    s3_server.reset_counts()
    dataset = open_dataset(url, storage_options=opts)
    # the archive marker, then one LIST of the root and one of each deltas/ folder
    assert dict(s3_server.requests) == {"GET": 1, "LIST": 1 + len(sample_archive.THREADS)}
    files = {f.path for f in dataset.get_fragments()}
    bob_files = {f.path for f in dataset.get_fragments(filter=ds.field("thread_id") == "support/bob")}
    s3_server.reset_counts()
    dataset.to_table(filter=ds.field("thread_id") == "support/bob")
    touched = {p for kind, p in s3_server.log if kind == "GET"}
    assert touched and all("thread_id=support%2Fbob/" in p for p in touched)
    assert len(touched) == len(bob_files) < len(files)
    assert s3_server.requests["GET"] == len(bob_files) and s3_server.requests["HEAD"] <= len(bob_files)
    s3_server.reset_counts()
    assert open_dataset(url, storage_options=opts, threads=["support/bob"]).count_rows() > 0
    assert s3_server.requests["LIST"] == 1


def test_open_segment_appears_after_compaction(archive_url: Make) -> None:
    url, opts = archive_url("local")
    archive = sample_archive.build(url, opts, compact=False)
    open_ids = {i.checkpoint_id for i in archive.list("research 42") if i.step >= 15 and i.kind == "delta"}
    assert open_ids
    before = set(open_dataset(url, storage_options=opts).to_table().column("checkpoint_id").to_pylist())
    assert not open_ids & before
    assert archive.compact("research 42")
    after = set(open_dataset(url, storage_options=opts).to_table().column("checkpoint_id").to_pylist())
    assert open_ids <= after
    # the manifest-based view is complete either way
    assert len(open_dataset(url, storage_options=opts, kind="checkpoints").to_table()) == 55


def test_dataset_long_thread_ids_keep_their_id(archive_url: Make) -> None:
    url, opts = archive_url("local")
    archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=3)
    long_id, short_id = "agent/" + "é" * 200, "short one"
    for thread in (long_id, short_id):
        for step in range(4):
            archive.save(ca.Checkpoint.new(thread, {"n": step, "log": ["x"] * step}, step=step))
        archive.compact(thread)
    dataset = open_dataset(url, storage_options=opts)
    assert set(dataset.to_table().column("thread_id").to_pylist()) == {long_id, short_id}
    assert dataset.to_table(filter=ds.field("thread_id") == long_id).num_rows > 0
    assert len(list(dataset.get_fragments(filter=ds.field("thread_id") == long_id))) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoints_frame(built: Any, backend: str) -> None:
    url, opts = built[backend]
    archive = ca.open_archive(url, storage_options=opts)
    df = checkpoints_frame(url, storage_options=opts, progress=True)
    assert len(df) == sum(sample_archive.THREADS.values()) + 1  # + the fork
    assert {"thread_id", "checkpoint_id", "parent_id", "step", "kind", "created_at", "bytes"} <= set(df.columns)
    assert {"metadata.node", "metadata.source", "metadata.cost"} <= set(df.columns)
    assert str(df["metadata.cost"].dtype) == "float64"
    alice = df[df.thread_id == "support/alice"]
    infos = archive.list("support/alice")
    assert list(alice.checkpoint_id) == [i.checkpoint_id for i in infos]
    assert list(alice["bytes"]) == [i.stored_bytes for i in infos]
    assert (alice["metadata.source"] == "fork").sum() == 1
    pl_df = checkpoints_frame(url, ["support/bob"], storage_options=opts, backend="polars")
    assert pl_df.height == 13 and set(pl_df["thread_id"].to_list()) == {"support/bob"}
    assert pl_df.filter(pl_df["kind"] == "full").height == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_changes_frame_replays_to_every_state(built: Any, backend: str) -> None:
    url, opts = built[backend]
    archive = ca.open_archive(url, storage_options=opts)
    thread = "support/alice" if backend == "local" else "support/bob"  # alice has the fork
    changes = changes_frame(url, thread, storage_options=opts)
    assert set(changes.op) <= {"set", "del", "append"}
    # one append (or initial set) of messages per checkpoint
    assert (changes.key == "messages").sum() == len(archive.list(thread))
    rebuilt: dict[str, dict[str, Any]] = {}
    for ckpt in states(url, thread, storage_options=opts):
        rows = changes[changes.checkpoint_id == ckpt.checkpoint_id]
        ops = [
            {
                "op": r.op,
                "path": json.loads(r.path),
                "value": json.loads(r.value) if isinstance(r.value, str) else None,
            }
            for r in rows.itertuples()
        ]
        base = rebuilt[ckpt.parent_id] if ckpt.parent_id else {}
        rebuilt[ckpt.checkpoint_id] = ca.apply(base, ops)
        assert rebuilt[ckpt.checkpoint_id] == ckpt.state
    assert len(rebuilt) == len(archive.list(thread))
    if backend == "local":
        polars = changes_frame(url, "support/alice", storage_options=opts, backend="polars")
        assert polars.height == len(changes)


def test_states_in_order_and_complete(tmp_path: Any) -> None:
    url = str(tmp_path / "a")
    sample_archive.build(url, compact=False)  # research 42 keeps an open segment: states still complete
    got = list(states(url, "research 42"))
    assert [c.step for c in got] == list(range(17))
    assert all(c.state == sample_archive.state_at("research 42", c.step) for c in got)


def test_unknown_thread_is_a_typed_error(tmp_path: Any) -> None:
    url = str(tmp_path / "a")
    sample_archive.build(url)
    with pytest.raises(ca.CheckpointNotFound, match="nobody"):
        changes_frame(url, "nobody")
    with pytest.raises(ca.CheckpointNotFound, match="nobody"):
        list(states(url, "nobody"))
    for reader in (checkpoints_frame, open_dataset, lambda u: list(states(u, "t"))):
        with pytest.raises(ca.ArchiveNotFound, match="no archive at"):
            reader(str(tmp_path / "typo"))
    assert not (tmp_path / "typo").exists()
    with pytest.raises(ValueError, match="backend"):
        checkpoints_frame(url, backend="excel")  # type: ignore[arg-type]


DUCKDB_RECIPE = r"""
import json, sys
import duckdb
url, opts = sys.argv[1], json.loads(sys.argv[2])
if url.startswith("s3://"):
    import s3fs
    duckdb.register_filesystem(s3fs.S3FileSystem(**opts))
rows = duckdb.sql(f'''
    SELECT thread_id, count(DISTINCT checkpoint_id) AS checkpoints, count(*) AS ops, max(step) AS last_step
    FROM read_parquet('{url}/thread_id=*/deltas/*.parquet', hive_partitioning = false)
    GROUP BY thread_id ORDER BY thread_id
''').fetchall()
print(json.dumps({"rows": rows, "ours": sorted(m for m in sys.modules if m.startswith("ckpt_archive"))}))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_duckdb_recipe_needs_no_import_of_ours(built: Any, backend: str) -> None:
    url, opts = built[backend]
    proc = subprocess.run(
        [sys.executable, "-c", DUCKDB_RECIPE, url, json.dumps(opts)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ours"] == []
    table = open_dataset(url, storage_options=opts).to_table()
    expected = []
    for thread in sorted(sample_archive.THREADS):
        rows = [r for r in table.to_pylist() if r["thread_id"] == thread]
        expected.append([thread, len({r["checkpoint_id"] for r in rows}), len(rows), max(r["step"] for r in rows)])
    assert result["rows"] == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_dask_one_liner(built: Any, backend: str) -> None:
    import dask.dataframe as dd

    url, opts = built[backend]
    df = dd.read_parquet(delta_glob(url), storage_options=opts or None)
    table = open_dataset(url, storage_options=opts).to_table()
    assert len(df) == table.num_rows
    counts = df.groupby("thread_id").size().compute().to_dict()
    assert counts == {t: table.filter(ds.field("thread_id") == t).num_rows for t in sample_archive.THREADS}


def test_importing_the_package_leaves_pandas_unimported() -> None:
    """pyarrow.dataset imports pandas: ~25,000 more objects that every full collection of a user's process
    walks (the first one ran inside a fresh process's first read, ~75 ms); only ``open_dataset`` needs it."""
    code = "import sys, ckpt_archive.analysis; print(sorted({'pandas', 'pyarrow.dataset'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
