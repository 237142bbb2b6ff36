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
import re
import tempfile
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
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
from ckpt_archive.ops import history
from ckpt_archive.retention import RetentionPolicy

MAIN, ACCENT, ZEROS = "main", "héllo wörld", "007"
FORK, COPY = "fork/1", "copy of 007"
STEPS = 14
NONE = timedelta(0)

SPEC = Path(__file__).resolve().parent.parent / "docs" / "format" / "spec.md"


def messages_sql(glob: str) -> str:
    """Spec section 5's query, exactly as written (no code of ours): every message of every thread, in
    order, as JSON text (state ``messages`` lists and the checkpoint's message list)."""
    blocks = [b for b in re.findall(r"```sql\n(.*?)```", SPEC.read_text(), flags=re.S) if "coalesce(target" in b]
    assert len(blocks) == 1, "spec section 5 documents the messages query"
    return blocks[0].replace("<root>/thread_id=*/deltas/*.parquet", glob)


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
    got = duckdb.sql(messages_sql(glob)).fetchall()
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
    _random_maintenance(actions)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ACTIONS)
def test_rows_stay_once_when_compact_merges_segments_by_tier(actions: list[tuple[str, int]]) -> None:
    """The same with merges of 2 segments (``history.SEGMENT_FANOUT``): every ``compact`` merges tiers
    (spec.md section 6), between prunes, removes and edits; the files still hold every record's rows
    once and nothing else."""
    fanout, history.SEGMENT_FANOUT = history.SEGMENT_FANOUT, 2
    try:
        _random_maintenance(actions)
    finally:
        history.SEGMENT_FANOUT = fanout


def _random_maintenance(actions: list[tuple[str, int]]) -> None:
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


# -- verify, forged rows, big rows, encryption --------------------------------------------------------
def _six(url: str) -> tuple[ca.ArchiveCheckpointer, list[ca.Checkpoint]]:
    """Interval 4: snapshot 0 (rows inline), deltas 1-3, snapshot 4 (its compaction's segment holds the
    rows of 0..4), delta 5 (inline)."""
    archive = ca.open_archive(url, full_snapshot_interval=4)
    saved: list[ca.Checkpoint] = []
    for step in range(6):
        saved.append(_turn(archive, "t", step, saved[-1] if saved else None))
    return archive, saved


def _reseal(archive: ca.ArchiveCheckpointer, seq: int, edit: Any) -> None:
    """Rewrite commit ``seq`` of thread t with ``edit`` applied, digest recomputed (a consistent forgery);
    the folds and the hint that name the old bytes go too."""
    from ckpt_archive import codec
    from ckpt_archive._sync import run_sync
    from ckpt_archive.format import layout
    from ckpt_archive.format.manifest import seal, unseal

    key = layout.log_key("t", seq)
    doc = unseal(run_sync(archive.store.get(key)), "commit", kind="commit entry")
    edit(doc)
    run_sync(archive.store.put(key, codec.compress(seal(doc))))
    folds = [k for k in run_sync(archive.store.find(layout.thread_dir("t") + "/_log")) if ".manifest." in k]
    run_sync(archive.store.delete([*folds, layout.head_key("t")]))


def test_verify_reports_stale_rows_and_a_record_without_rows(tmp_path: Any) -> None:
    url = str(tmp_path / "a")
    archive, saved = _six(url)
    assert archive.verify().ok
    first = saved[0].checkpoint_id

    def no_rows(doc: dict[str, Any]) -> None:  # commit 1 adds snapshot 0 with its rows inline
        add = doc["actions"][0]
        del add["record"]["rows"], add["ops"]

    def unplaced(doc: dict[str, Any]) -> None:  # commit 5's compaction no longer places snapshot 0's rows
        del next(a for a in doc["actions"] if a["action"] == "compact")["row_groups"][first]

    _reseal(archive, 1, no_rows)
    _reseal(archive, 5, unplaced)
    report = ca.open_archive(url).verify()
    kinds = {(p.kind, p.checkpoint_id) for p in report.problems}
    assert kinds == {("MissingRows", first), ("StaleRows", first)}, str(report)
    assert all(ca.open_archive(url).load_by_id(c.checkpoint_id) is not None for c in saved)  # loads unaffected


def test_verify_reports_forged_history_rows_of_a_snapshot(tmp_path: Any) -> None:
    """A snapshot's rows are never read by a load; verify proves them (rows applied to the base give the
    content), so a forged row with the manifest re-sealed around it is reported."""
    import io

    import pyarrow as pa

    from ckpt_archive import codec

    url = str(tmp_path / "a")
    archive, saved = _six(url)
    path = next(p for p in fsspec.filesystem("file").glob(delta_glob(url)))
    original = pq.ParquetFile(io.BytesIO(Path(path).read_bytes()))
    table = original.read_row_group(0)
    ids, values = table.column("checkpoint_id").to_pylist(), table.column("value").to_pylist()
    at = max(i for i, c in enumerate(ids) if c == saved[4].checkpoint_id and table.column("key")[i].as_py() == "turn")
    values[at] = "999"
    table = table.set_column(table.schema.get_field_index("value"), "value", pa.array(values, pa.string()))
    with pq.ParquetWriter(path, original.schema_arrow, store_schema=False) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({"ckpt_archive.format_version": "1"})
    forged = Path(path).read_bytes()

    def fix(doc: dict[str, Any]) -> None:
        for action in doc["actions"]:
            target = action if action["action"] == "compact" else action["record"]["rows"]
            target.update(sha256=codec.sha256(forged), size=len(forged))

    _reseal(archive, 5, fix)
    fresh = ca.open_archive(url)
    assert all(fresh.load_by_id(c.checkpoint_id) is not None for c in saved)  # deltas 1-3 still read their rows
    report = fresh.verify()
    assert [(p.kind, p.checkpoint_id) for p in report.problems] == [("MissingRows", saved[4].checkpoint_id)]


def test_big_history_rows_get_a_history_segment_of_their_own(tmp_path: Any) -> None:
    """The first checkpoint of a big thread: all its content is its history, too big for a delta
    segment's bounds: one segment of its own (``*.rows.parquet``, read under a snapshot's bounds), in
    the same commit; DuckDB reads it like any other."""
    import random

    from ckpt_archive import limits
    from ckpt_archive.format import layout
    from ckpt_archive.format.schema import check_record

    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=4)
    rng = random.Random(7)
    chat = [{"role": "user", "content": f"mk {i} " + rng.randbytes(3000).hex()} for i in range(1500)]
    first = ca.Checkpoint.new("big", {"n": 0}, messages=chat)
    archive.save(first)
    archive.save(ca.Checkpoint.new("big", {"n": 1}, step=1, messages=[*chat, {"role": "ai", "content": "mk end"}]))
    archive.compact("big")
    files = fsspec.filesystem("file").glob(delta_glob(url))
    big = [f for f in files if f.endswith(layout.HISTORY_SUFFIX)]
    assert len(big) == 1 and len(files) == 2
    rows = duckdb.sql(
        f"SELECT count(*) FROM (SELECT unnest(json_extract(CAST(value AS JSON), '$[*]')) FROM read_parquet("
        f"'{delta_glob(url)}', hive_partitioning = false) WHERE target = 'messages')"
    ).fetchall()
    assert rows == [(1501,)]
    assert archive.verify().ok
    group = pq.ParquetFile(big[0]).metadata.row_group(0)
    decoded = sum(group.column(c).total_uncompressed_size for c in range(group.num_columns))
    assert decoded > limits.LIMITS["row group"]  # a delta segment's reader would refuse it
    rec = {**archive.engine.log.manifests["big"].records[first.checkpoint_id]}
    key = rec["rows"]["key"]
    forged = {**rec, "kind": "delta", "parent": "x", "depth": 1, "ref": {**rec["rows"], "key": key}}
    forged.pop("rows")
    with pytest.raises(ca.CorruptManifest, match="history segment"):  # a load reads deltas under their bounds
        check_record(forged, "big")


def test_encrypted_history_rows_are_sealed_and_verify_after_maintenance(tmp_path: Any) -> None:
    url = str(tmp_path / "a")
    keys = ca.Encryption({"k1": b"k" * 32}, "k1", required=True)
    archive = ca.open_archive(url, full_snapshot_interval=3, encryption=keys)
    _grow(archive, "t", range(10))
    archive.prune("t", RetentionPolicy.keep_last(5))
    info = archive.list("t")[2]
    state = archive.load_by_id(info.checkpoint_id).state  # type: ignore[union-attr]
    archive.update_state(info.checkpoint_id, {**state, "turn": "edited"}, info.version)
    archive.compact("t")
    archive.gc(grace=NONE, unsafe_no_writers=True)
    assert archive.verify().ok, str(archive.verify())
    rows = [r for f in fsspec.filesystem("file").glob(delta_glob(url)) for r in pq.read_table(f).to_pylist()]
    assert {r["checkpoint_id"] for r in rows} == {i.checkpoint_id for i in archive.list("t")}
    assert all(r["value"].startswith('"enc1:') for r in rows if r["op"] != "del")
    assert not any("mk t" in (r["value"] or "") for r in rows)  # nothing readable leaks


def test_loads_never_read_a_snapshots_history_rows(tmp_path: Any) -> None:
    """Two snapshots in a row: the second's compaction writes one segment holding only the two snapshots'
    history rows. With it gone, every checkpoint still loads (from its snapshot); verify reports it."""
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=1)
    saved = [_turn(archive, "t", 0, None)]
    saved.append(_turn(archive, "t", 1, saved[0]))
    (segment,) = fsspec.filesystem("file").glob(delta_glob(url))
    Path(segment).unlink()
    fresh = ca.open_archive(url)
    assert [fresh.load_by_id(c.checkpoint_id).state for c in saved] == [c.state for c in saved]  # type: ignore[union-attr]
    assert "MissingObject" in {p.kind for p in fresh.verify().problems}
