"""The Parquet segments alone hold the whole history, exactly as the API shows it (spec.md sections 4, 5, 10).

Every record's *history rows* (``diff(base(R), content(R))``, ``base(R)`` its parent's content when the
parent is a record of the thread, else the empty content) are in the thread's segments once, snapshot
steps included, and no other row is: after saves with snapshots, deltas and compactions, prune
(``keep_last``), gc, re-base, an edit (``update_state``), a fork and ``copy_thread``. Each reader (DuckDB
SQL with no code of ours, polars, Dask, Spark where ``pyspark`` imports) is compared with the API; a
property test applies every record's rows, read from the files alone, to its base.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from collections import defaultdict
from datetime import timedelta
from typing import Any

import dask.dataframe as dd
import duckdb
import fsspec
import hypothesis.strategies as st
import polars as pl
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings

import ckpt_archive as ca
from ckpt_archive.analysis import delta_glob
from ckpt_archive.delta import apply_checkpoint
from ckpt_archive.retention import RetentionPolicy

MAIN, ACCENT, ZEROS = "main", "héllo wörld", "007"
FORK, COPY = "fork/1", "copy of 007"
STEPS = 14
NONE = timedelta(0)

# the query of docs/guides/analysis-cli.md (and spec.md section 5), with no code of ours: every message
# of every thread, in order, as JSON text (state ``messages`` lists and the checkpoint message list)
MESSAGES_SQL = """
WITH rows AS (
    SELECT thread_id, checkpoint_id, step, op_index, target, CAST(value AS JSON) AS items
    FROM read_parquet('{glob}', hive_partitioning = false)
    WHERE path = '["messages"]' AND op IN ('set', 'append')
)
SELECT thread_id, coalesce(target, 'state') AS list, checkpoint_id,
       unnest(json_extract(items, '$[*]'))::VARCHAR AS message,
       generate_subscripts(json_extract(items, '$[*]'), 1) AS item, step, op_index
FROM rows
ORDER BY thread_id, list, step, checkpoint_id, op_index, item
"""

Expected = dict[tuple[str, str], list[Any]]


def _turn(archive: ca.ArchiveCheckpointer, thread: str, step: int, ckpt: ca.Checkpoint | None) -> ca.Checkpoint:
    state = dict(ckpt.state) if ckpt is not None else {"messages": []}
    messages = list(ckpt.messages) if ckpt is not None else []
    state["messages"] = [*state["messages"], {"role": "user", "content": f"mk {thread} state {step}"}]
    state["turn"] = step
    if step % 3 == 0:  # the checkpoint's own message list too (``target = 'messages'``)
        messages.append({"role": "assistant", "content": f"mk {thread} list {step}"})
    new = ca.Checkpoint.new(thread, state, step=step, messages=messages)
    archive.save(new)
    return new


def _grow(archive: ca.ArchiveCheckpointer, thread: str, steps: range) -> None:
    head = archive.load(thread)
    for step in steps:
        head = _turn(archive, thread, step, head)


def _scripted(url: str) -> ca.ArchiveCheckpointer:
    """Saves (snapshot interval 4: snapshots, deltas and compactions), a prune that re-bases, an edit,
    more saves, a fork, a copy, gc, and the closing compaction of every thread."""
    archive = ca.open_archive(url, full_snapshot_interval=4)
    for thread in (MAIN, ACCENT, ZEROS):
        _grow(archive, thread, range(STEPS))
    report = archive.prune(MAIN, RetentionPolicy.keep_last(9))  # keeps steps 5..13: step 5 is re-based
    assert report.rebased, "the script must re-base a delta"
    infos = archive.list(MAIN)
    edited = infos[3]  # a delta in the middle: its children re-based, their rows against the edit
    state = archive.load_by_id(edited.checkpoint_id).state  # type: ignore[union-attr]
    archive.update_state(edited.checkpoint_id, {**state, "turn": "edited", "note": "é"}, edited.version)
    _grow(archive, MAIN, range(STEPS, STEPS + 3))
    archive.prune(ACCENT, RetentionPolicy.keep_last(6))  # keeps steps 8..13: step 8 is a snapshot already
    archive.fork(archive.list(ACCENT)[2].checkpoint_id, FORK)
    _grow(archive, FORK, range(20, 23))
    archive.copy_thread(ZEROS, COPY)
    archive.remove(ZEROS, [archive.list(ZEROS)[5].checkpoint_id])
    for thread in archive.threads():
        archive.compact(thread)
    archive.gc(grace=NONE, unsafe_no_writers=True)
    return archive


def _added(base: list[Any], now: list[Any]) -> list[Any]:
    """The items a checkpoint's history rows add to a list: what it appended to its base's, or (set
    whole, at a chain root or a rewrite) all of it."""
    if now == base:
        return []
    return now[len(base) :] if now[: len(base)] == base else list(now)


def _api(archive: ca.ArchiveCheckpointer) -> tuple[set[tuple[str, str]], Expected]:
    """The API's view: the (thread, checkpoint) of every record whose content differs from its base's,
    and for each thread and list the messages its records add, in record order."""
    ids: set[tuple[str, str]] = set()
    expected: Expected = defaultdict(list)
    for thread in archive.threads():
        infos = archive.list(thread)
        contents = {i.checkpoint_id: archive.load_by_id(i.checkpoint_id) for i in infos}
        for info in infos:
            ckpt = contents[info.checkpoint_id]
            assert ckpt is not None
            base = contents.get(info.parent_id) if info.parent_id is not None else None
            base_state = base.state if base is not None else {}
            base_messages = base.messages if base is not None else []
            if (ckpt.state, ckpt.messages) != (base_state, base_messages):
                ids.add((thread, info.checkpoint_id))
            expected[(thread, "state")] += _added(base_state.get("messages", []), ckpt.state.get("messages", []))
            expected[(thread, "messages")] += _added(base_messages, ckpt.messages)
    return ids, {k: v for k, v in expected.items() if v}


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, set[tuple[str, str]], Expected]:
    url = str(tmp_path_factory.mktemp("history") / "archive")
    archive = _scripted(url)
    report = archive.verify()
    assert report.ok, str(report)
    ids, expected = _api(ca.open_archive(url))
    assert {t for t, _ in ids} == {MAIN, ACCENT, ZEROS, FORK, COPY}
    return url, ids, expected


def _messages_of(rows: list[dict[str, Any]]) -> Expected:
    """Per (thread, list), the messages of ``rows`` (segment rows as a reader gives them), in the
    documented order: step, checkpoint id, op index, then the items of each value."""
    rows = [r for r in rows if r["path"] == '["messages"]' and r["op"] in ("set", "append")]
    rows.sort(key=lambda r: (r["thread_id"], r["target"] or "state", r["step"], r["checkpoint_id"], r["op_index"]))
    out: Expected = defaultdict(list)
    for r in rows:
        out[(r["thread_id"], "messages" if r["target"] == "messages" else "state")] += json.loads(r["value"])
    return dict(out)


COLUMNS = ["thread_id", "checkpoint_id", "step", "op_index", "op", "path", "value", "target"]


def _compare(rows: list[dict[str, Any]], ids: set[tuple[str, str]], expected: Expected) -> None:
    assert {(r["thread_id"], r["checkpoint_id"]) for r in rows} == ids
    assert _messages_of(rows) == expected


def test_duckdb_alone_returns_every_message_of_every_thread_in_order(
    scripted: tuple[str, set[tuple[str, str]], Expected],
) -> None:
    url, ids, expected = scripted
    glob = delta_glob(url)
    got = duckdb.sql(MESSAGES_SQL.format(glob=glob)).fetchall()
    by_list: Expected = defaultdict(list)
    for thread, which, _cid, message, *_ in got:
        by_list[(thread, which)].append(json.loads(message))
    assert dict(by_list) == expected
    seen = duckdb.sql(
        f"SELECT DISTINCT thread_id, checkpoint_id FROM read_parquet('{glob}', hive_partitioning = false)"
    ).fetchall()
    assert set(seen) == ids
    # each checkpoint's rows once: (thread, checkpoint, op_index) is a key of the files' rows
    dupes = duckdb.sql(
        f"SELECT count(*) FROM (SELECT thread_id, checkpoint_id, op_index, count(*) AS n FROM read_parquet('{glob}', "
        "hive_partitioning = false) GROUP BY ALL HAVING n > 1)"
    ).fetchall()
    assert dupes == [(0,)]


def test_every_known_marker_is_recovered_by_duckdb_alone(scripted: tuple[str, set[tuple[str, str]], Expected]) -> None:
    url, _, _ = scripted
    archive = ca.open_archive(url)
    known = {
        m["content"]
        for t in archive.threads()
        for i in archive.list(t)
        for ckpt in [archive.load_by_id(i.checkpoint_id)]
        if ckpt is not None
        for m in [*ckpt.state["messages"], *ckpt.messages]
    }
    got = duckdb.sql(
        f"SELECT DISTINCT json_extract_string(m, '$.content') FROM (SELECT unnest(json_extract(CAST(value AS JSON), "
        f"'$[*]')) AS m FROM read_parquet('{delta_glob(url)}', hive_partitioning = false) "
        "WHERE path = '[\"messages\"]' AND op IN ('set', 'append'))"
    ).fetchall()
    assert len(known) > 50
    assert {r[0] for r in got} == known  # 100%, and nothing the API does not show


def test_polars_reads_the_same_history(scripted: tuple[str, set[tuple[str, str]], Expected]) -> None:
    url, ids, expected = scripted
    frame = pl.read_parquet(delta_glob(url), hive_partitioning=False, columns=COLUMNS)
    _compare(frame.to_dicts(), ids, expected)


def test_dask_reads_the_same_history(scripted: tuple[str, set[tuple[str, str]], Expected]) -> None:
    url, ids, expected = scripted
    frame = dd.read_parquet(delta_glob(url), columns=COLUMNS).compute()
    rows = [{k: (None if v != v else v) for k, v in r.items()} for r in frame.to_dict("records")]  # NaN: null
    _compare(rows, ids, expected)


def test_spark_reads_the_same_history(scripted: tuple[str, set[tuple[str, str]], Expected]) -> None:
    pytest.importorskip("pyspark", reason="pyspark is not installed in this environment (no Spark to compare)")
    from pyspark.sql import SparkSession

    url, ids, expected = scripted
    spark = SparkSession.builder.master("local[1]").getOrCreate()
    try:
        frame = spark.read.option("recursiveFileLookup", "true").parquet(url.rstrip("/") + "/thread_id=*/deltas/")
        _compare([r.asDict() for r in frame.select(*COLUMNS).collect()], ids, expected)
    finally:
        spark.stop()


# -- the invariant, from the files alone, over random histories ----------------------------------------
def _files_rows(url: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for path in fsspec.filesystem("file").glob(delta_glob(url)):
        for r in pq.read_table(path, columns=COLUMNS).to_pylist():
            out[(r["thread_id"], r["checkpoint_id"])].append(r)
    return out


def _op(row: dict[str, Any]) -> dict[str, Any]:
    op = {
        "op": row["op"],
        "path": json.loads(row["path"]),
        "value": None if row["value"] is None else json.loads(row["value"]),
    }
    return {**op, "target": row["target"]} if row["target"] is not None else op


def check_rows_give_contents(url: str, thread: str) -> None:
    """For every record R of the thread: its rows in the files, ordered by ``op_index``, applied to base(R)
    give R's content, and the files hold no row of anything else."""
    archive = ca.open_archive(url)
    infos = archive.list(thread)
    contents = {i.checkpoint_id: archive.load_by_id(i.checkpoint_id) for i in infos}
    rows = _files_rows(url)
    assert {cid for t, cid in rows if t == thread} <= set(contents)
    for info in infos:
        ckpt = contents[info.checkpoint_id]
        assert ckpt is not None
        base = contents.get(info.parent_id) if info.parent_id is not None else None
        mine = sorted(rows.get((thread, info.checkpoint_id), []), key=lambda r: r["op_index"])
        assert [r["op_index"] for r in mine] == list(range(len(mine)))  # once each
        state, messages = apply_checkpoint(
            base.state if base is not None else {}, base.messages if base is not None else [], [_op(r) for r in mine]
        )
        assert (state, messages) == (ckpt.state, ckpt.messages), info


ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("save"), st.integers(1, 4)),
        st.tuples(st.just("prune"), st.integers(1, 6)),
        st.tuples(st.just("remove"), st.integers(0, 20)),
        st.tuples(st.just("edit"), st.integers(0, 20)),
        st.tuples(st.just("compact"), st.just(0)),
    ),
    min_size=2,
    max_size=8,
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ACTIONS)
def test_rows_of_every_record_apply_to_its_base_after_random_maintenance(actions: list[tuple[str, int]]) -> None:
    url = tempfile.mkdtemp(prefix="hist-") + "/a"
    archive = ca.open_archive(url, full_snapshot_interval=3)
    _grow(archive, "t", range(3))
    step = itertools.count(3)
    for kind, n in actions:
        infos = archive.list("t")
        if kind == "save":
            for _ in range(n):
                _turn(archive, "t", next(step), archive.load("t"))
        elif kind == "prune":
            archive.prune("t", RetentionPolicy.keep_last(n))
        elif kind == "remove" and len(infos) > 1:
            archive.remove("t", [infos[n % len(infos)].checkpoint_id])
        elif kind == "edit" and infos:
            info = infos[n % len(infos)]
            state = archive.load_by_id(info.checkpoint_id).state  # type: ignore[union-attr]
            archive.update_state(info.checkpoint_id, {**state, "turn": f"edit {n}"}, info.version)
        elif kind == "compact":
            archive.compact("t")
    assert archive.verify().ok, str(archive.verify())
    archive.compact("t")
    archive.gc(grace=NONE, unsafe_no_writers=True)
    check_rows_give_contents(url, "t")
