"""Snapshot lists replayed from history rows (``format.replay``, spec.md section 5).

The invariant: over any lineage of records (each one's rows ``diff(parent, content)``, or against the
empty content at a root), a snapshot that stores its long lists as ``[]`` and rebuilds them from its
lineage's rows -- from each list's nearest defining record, or from a content held for an ancestor --
gives back exactly its content, whatever edits the lists went through: appends, splices (an item
replaced or removed, the list cut, a prefix summarised), a set of the list or of the key enclosing it,
its removal and return. And the bound a writer records (``ops.history.reach``) reaches far enough.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive._sync import run_sync
from ckpt_archive.delta import diff_checkpoint
from ckpt_archive.errors import BrokenChain, TruncatedObject
from ckpt_archive.format import layout, replay
from ckpt_archive.format.content import Content
from ckpt_archive.format.manifest import seal, unseal
from ckpt_archive.ops.history import reach
from ckpt_archive.storage import RoundTrips

EMPTY: Content = ({}, [])
WHERE = dict(thread_id="t", checkpoint_id="c")


def _edit(items: list[Any], data: st.DataObject, n: int) -> list[Any] | None:
    """One edit of a list (None: the list goes)."""
    kind = data.draw(st.sampled_from(["append", "append", "append", "splice", "cut", "summary", "set", "gone"]))
    if kind == "append":
        return items + [f"m{n}.{i}" for i in range(data.draw(st.integers(1, 6)))]
    if kind == "splice" and items:
        at = data.draw(st.integers(0, len(items) - 1))
        remove = data.draw(st.integers(0, len(items) - at))
        return items[:at] + [f"r{n}"] * data.draw(st.integers(0, 2)) + items[at + remove :]
    if kind == "cut":
        return items[: data.draw(st.integers(0, len(items)))]
    if kind == "summary" and len(items) > 2:
        return [f"summary {n}", *items[data.draw(st.integers(1, len(items))) :]]
    if kind == "set":
        return [f"s{n}.{i}" for i in range(data.draw(st.integers(0, 40)))]
    if kind == "gone":
        return None
    return items


def _content(lists: dict[str, list[Any] | None], n: int) -> Content:
    state: dict[str, Any] = {"n": n}
    if lists["top"] is not None:
        state["top"] = lists["top"]
    if lists["nested"] is not None:
        state["chat"] = {"history": lists["nested"], "meta": n % 3}
    return state, list(lists["messages"] or [])


@st.composite
def lineages(draw: st.DrawFn) -> tuple[list[Content], list[bool]]:
    """Contents c0..cn and, for each, whether it is a root (its rows against the empty content)."""
    data = draw(st.data())
    lists: dict[str, list[Any] | None] = {"top": [], "nested": [], "messages": []}
    contents, roots = [], []
    for n in range(draw(st.integers(1, 14))):
        for name in lists:
            if data.draw(st.booleans()):
                lists[name] = _edit(lists[name] or [], data, n)
                if name == "messages" and lists[name] is None:
                    lists[name] = []
        contents.append(_content(lists, n))
        roots.append(n == 0 or data.draw(st.integers(0, 9)) == 0)
    return contents, roots


def _rows(contents: list[Content], roots: list[bool]) -> list[list[dict[str, Any]]]:
    return [diff_checkpoint(*(EMPTY if roots[i] else contents[i - 1]), *contents[i]) for i in range(len(contents))]


@settings(max_examples=300, deadline=None)
@given(lineages(), st.integers(1, 40), st.data())
def test_a_replayed_snapshot_is_its_content_from_any_base(
    lineage: tuple[list[Content], list[bool]], items: int, data: st.DataObject
) -> None:
    contents, roots = lineage
    rows = _rows(contents, roots)
    old, replay.LIST_ITEMS = replay.LIST_ITEMS, items
    try:
        n = len(contents) - 1
        state, messages = codec.loads(codec.dumps(contents[n]))  # what was saved, as JSON
        content = (state, messages)
        where = replay.places(content)
        stored = replay.stub(content, where)
        raw = codec.loads(codec.dumps(replay.encode(where)))
        assert replay.decode(raw, stored, **WHERE) == where
        # a reader holding the content of some ancestors (its cache) starts there if it comes first
        known = {i for i in range(n) if data.draw(st.booleans(), label=f"known {i}")}
        lists = {}
        for place in where:
            i = n
            while True:
                if i < n and i in known:
                    lists[place] = replay.replay(place, replay.get(contents[i], place), rows[i + 1 :], **WHERE)
                    break
                if roots[i] or replay.touches(rows[i], place):
                    lists[place] = replay.replay(place, None, rows[i:], **WHERE)
                    break
                i -= 1
        assert replay.fill(stored, lists) == content
    finally:
        replay.LIST_ITEMS = old


@settings(max_examples=200, deadline=None)
@given(lineages())
def test_the_reach_a_writer_records_covers_every_list(lineage: tuple[list[Content], list[bool]]) -> None:
    """``ops.history.reach`` over records whose rows are held inline: no list's start is past it."""
    contents, roots = lineage
    rows = _rows(contents, roots)
    old, replay.LIST_ITEMS = replay.LIST_ITEMS, 2
    try:
        n = len(contents) - 1
        records = {
            f"c{i}": {
                "id": f"c{i}",
                "kind": "delta",
                "ref": {"type": "inline"},
                "parent": None if roots[i] else f"c{i - 1}",
            }
            for i in range(n)
        }
        inline = {f"c{i}": rows[i] for i in range(n)}
        where = replay.places(contents[n])
        parent = None if roots[n] else f"c{n - 1}"
        r = reach(records, inline, parent, rows[n], where)
        for place in where:
            i = n
            while not (roots[i] or replay.touches(rows[i], place)):
                i -= 1
            assert n - i <= r
    finally:
        replay.LIST_ITEMS = old


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("x", "not a list"),
        ([["messages"]], "not \\[target"),
        ([[None, 1]], "not \\[target"),
        ([["other", "messages"]], "unknown target"),
        ([[None, "a"], [None, "a"]], "twice"),
        ([[None, "b"]], "is not \\[\\]"),
        ([[None, "a", "deeper"]], "is not \\[\\]"),
    ],
)
def test_a_snapshot_whose_places_do_not_fit_it_is_refused(raw: Any, why: str) -> None:
    with pytest.raises(TruncatedObject, match=why):
        replay.decode(raw, ({"a": [], "b": [1]}, []), **WHERE)


def test_rows_that_do_not_define_the_list_are_a_broken_chain() -> None:
    with pytest.raises(BrokenChain):
        replay.replay((None, ("a",)), None, [[{"op": "append", "path": ["a"], "value": [1]}]], **WHERE)
    with pytest.raises(BrokenChain, match="rebuild the list"):
        replay.replay((None, ("a",)), None, [[{"op": "set", "path": ["a"], "value": {"x": 1}}]], **WHERE)


def _chat(archive: ca.Archive, n: int, thread: str = "t") -> list[ca.Checkpoint]:
    saved, messages = [], []
    parent = None
    for step in range(n):
        messages.append({"role": "user", "content": f"message {step}"})
        ckpt = ca.Checkpoint.new(
            thread, {"log": list(range(step)), "n": step}, step=step, parent_id=parent, messages=list(messages)
        )
        archive.save(ckpt)
        saved.append(ckpt)
        parent = ckpt.checkpoint_id
    return saved


def test_a_fresh_reader_loads_every_checkpoint_and_verify_is_clean(tmp_path: Any) -> None:
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=7)
    saved = _chat(archive, 120)
    archive.close()
    fresh = ca.open_archive(url)
    for ckpt in saved:
        got = fresh.load_by_id(ckpt.checkpoint_id)
        assert got is not None and got.state == ckpt.state and got.messages == ckpt.messages
    report = fresh.verify()
    assert report.ok, report


def test_prune_keeps_every_kept_snapshot_replayable(tmp_path: Any) -> None:
    """A prune makes the oldest kept record a root (its rows its whole content): the kept snapshots'
    lists replay from there, with no rewrite of theirs."""
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=5)
    saved = _chat(archive, 80)
    archive.prune("t", ca.RetentionPolicy.keep_last(23))
    archive.gc(grace=timedelta(0), unsafe_no_writers=True)
    fresh = ca.open_archive(url)
    for ckpt in saved[-23:]:
        got = fresh.load_by_id(ckpt.checkpoint_id)
        assert got is not None and got.state == ckpt.state and got.messages == ckpt.messages
    assert fresh.verify().ok


def _cold(url: str) -> tuple[RoundTrips, ca.Checkpoint | None]:
    trips = RoundTrips(ca.open_store(url))
    return trips, ca.ArchiveCheckpointer(trips).load("t")


def test_a_fresh_reader_replays_the_head_from_the_hint_and_its_segments_in_two_round_trips(tmp_path: Any) -> None:
    """The head hint names the thread's segments and each segment row its base (``base_id``): a fresh
    reader fetches them with the snapshot and walks the lineage inside them, reading no manifest."""
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=10)
    saved = _chat(archive, 95)
    archive.close()
    trips, got = _cold(url)
    assert got is not None and got.messages == saved[-1].messages and got.state == saved[-1].state
    assert trips.depth == 2 and not [k for _, k, _ in trips.calls if "/_parts/" in k], trips.calls


@pytest.mark.parametrize("damage", ["drop", "bogus", "corrupt"])
def test_a_hint_whose_segments_do_not_hold_the_lineage_hands_over_to_the_manifest(tmp_path: Any, damage: str) -> None:
    """What the hint names is not trusted: a segment list missing one, naming one that is not there,
    or a segment whose bytes changed (no digest in the hint) gives the same head through the manifest,
    whose read checks every object (the changed one: a typed error, as any load)."""
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=10)
    saved = _chat(archive, 95)
    archive.close()
    store = ca.open_store(url)
    doc = unseal(run_sync(store.get(layout.head_key("t"))), "hint", kind="head hint")
    assert len(doc["segments"]) >= 2
    if damage == "corrupt":
        key = f"{layout.segments_dir(layout.thread_dir('t'))}/{doc['segments'][0]}"
        data = bytearray(run_sync(store.get(key)))
        data[len(data) // 2] ^= 0xFF
        run_sync(store.put(key, bytes(data)))
        with pytest.raises(ca.IntegrityError):
            _cold(url)
        return
    doc["segments"] = doc["segments"][1:] if damage == "drop" else [*doc["segments"], "000000000000-nothere.parquet"]
    run_sync(store.put(layout.head_key("t"), codec.compress(seal(doc), "head hint", hot=True)))
    trips, got = _cold(url)
    assert got is not None and got.messages == saved[-1].messages
    assert trips.depth > 2  # the manifest was read


def test_an_encrypted_cold_load_replays_from_the_hint_too(tmp_path: Any) -> None:
    """Sealed rows name their key and are bound to their checkpoint and op: a fresh reader with the
    keys opens them from the segments the hint names (2 round trips); without the key, a typed error."""
    url = str(tmp_path / "a")
    keys = ca.Encryption({"k1": b"k" * 32}, "k1", required=True)
    archive = ca.open_archive(url, full_snapshot_interval=10, encryption=keys)
    saved = _chat(archive, 95)
    archive.close()
    trips = RoundTrips(ca.open_store(url))
    got = ca.ArchiveCheckpointer(trips, encryption=keys).load("t")
    assert got is not None and got.messages == saved[-1].messages and got.state == saved[-1].state
    assert trips.depth == 2, trips.calls
    with pytest.raises(ca.EncryptionError):
        ca.open_archive(url).load("t")


def test_a_writer_bound_that_falls_short_costs_a_round_trip_never_a_wrong_load(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ref.replay`` is a prefetch hint the writer computed: a reader goes on past it (``lists.EXTEND``
    more ancestors a round trip) and loads the same contents, verify clean."""
    from ckpt_archive.engine import lists
    from ckpt_archive.ops import save

    monkeypatch.setattr(save, "reach", lambda *_: 1)  # every snapshot says: one ancestor's rows suffice
    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=10)
    saved = _chat(archive, 95)
    archive.close()
    extended: list[int] = []
    lineage = lists.Replays.lineage

    def counting(self: lists.Replays, rec: Any, n: int) -> Any:
        if n == lists.EXTEND:
            extended.append(n)
        return lineage(self, rec, n)

    monkeypatch.setattr(lists.Replays, "lineage", counting)
    fresh = ca.open_archive(url)
    for ckpt in saved[::7]:
        got = fresh.load_by_id(ckpt.checkpoint_id)
        assert got is not None and got.state == ckpt.state and got.messages == ckpt.messages
    assert extended, "no load went past the writer's bound"
    _, got = _cold(url)  # from the hint's segments: the extension finds the rows there
    assert got is not None and got.messages == saved[-1].messages and got.state == saved[-1].state
    assert ca.open_archive(url).verify().ok


def test_a_segment_parses_each_distinct_path_once_and_hands_each_op_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay reads one op of each of a thousand records, all on the same path: a row group's path
    texts are parsed once each, not once a row; each op still gets a list of its own."""
    from ckpt_archive.format import objects

    entries = [
        (f"c{i}", i, None, [{"op": "append", "path": ["log"], "value": [i]}, {"op": "set", "path": ["n"], "value": i}])
        for i in range(200)
    ]
    data, placed = objects.encode_segment("t", entries)
    reader = objects.SegmentReader(data, thread_id="t", key="k")
    parsed: list[str] = []
    loads = codec.loads

    def counting(text: Any) -> Any:
        parsed.append(text)
        return loads(text)

    monkeypatch.setattr(objects.codec, "loads", counting)
    ops = [reader.ops(cid, placed[cid][0]) for cid, _, _, _ in entries]
    assert ops == [e[3] for e in entries]
    assert sum(1 for t in parsed if t in ('["log"]', '["n"]')) <= 2 * reader.row_groups
    assert len({id(op["path"]) for delta in ops for op in delta}) == 2 * len(entries)


def test_a_replay_scope_is_decided_once_per_row_group_and_distinct_path() -> None:
    """A replay asks a segment for each record of a lineage with the same scope: which rows it takes
    is decided once per row group and (target, path), not once per row and call, and the ops taken
    are exactly those the scope names, values parsed for those alone."""
    from ckpt_archive.format import objects

    entries = [
        (
            f"c{i}",
            i,
            None,
            [
                {"op": "append", "path": ["log"], "value": [i]},
                {"op": "set", "path": ["n"], "value": i},
                {"op": "append", "path": ["messages"], "value": {"i": i}, "target": "messages"},
            ],
        )
        for i in range(300)
    ]
    data, placed = objects.encode_segment("t", entries)
    reader = objects.SegmentReader(data, thread_id="t", key="k")
    asked: list[tuple[Any, Any]] = []

    def within(target: Any, path: Any) -> bool:
        asked.append((target, tuple(path)))
        return target is None and path == ["log"]

    got = [reader.ops(cid, placed[cid][0], within) for cid, _, _, _ in entries]
    assert got == [[e[3][0]] for e in entries]
    assert len(asked) == 3 * reader.row_groups  # three distinct (target, path), once per row group
    assert reader.row_groups > 1  # the scope is kept per row group, not per segment
    # another scope is decided anew; the plain read still gives every op
    assert reader.ops("c7", placed["c7"][0], lambda target, path: target == "messages") == [entries[7][3][2]]
    assert reader.ops("c7", placed["c7"][0]) == entries[7][3]


def test_a_misnumbered_checkpoint_is_refused_and_its_row_group_neighbours_still_read() -> None:
    """``op_index`` is checked for a whole row group at once; a checkpoint numbered wrong is refused
    when asked for, and the other checkpoints of its row group still read (nothing else is lost)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ckpt_archive.format.objects import SEGMENT_SCHEMA, SegmentReader

    rows: dict[str, list[Any]] = {"thread_id": ["t"] * 4, "checkpoint_id": ["a", "a", "b", "b"]}
    rows.update({"base_id": [None] * 4, "step": [1, 1, 2, 2], "op_index": [0, 1, 0, 2]})
    rows.update({"op": ["set"] * 4, "key": ["x", "y", "x", "y"], "path": ['["x"]', '["y"]', '["x"]', '["y"]']})
    rows.update({"value": ["1", "2", "3", "4"], "target": [None] * 4})
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, SEGMENT_SCHEMA, store_schema=False) as writer:
        writer.write_table(pa.table(rows, schema=SEGMENT_SCHEMA))
        writer.add_key_value_metadata({"ckpt_archive.format_version": "1"})
    reader = SegmentReader(buf.getvalue(), thread_id="t", key="k")
    with pytest.raises(ca.TruncatedObject, match="op_index 2 where 1 belongs"):
        reader.ops("b", 0)
    assert reader.ops("a", 0) == [{"op": "set", "path": ["x"], "value": 1}, {"op": "set", "path": ["y"], "value": 2}]
    with pytest.raises(ca.TruncatedObject, match="op_index 2 where 1 belongs"):
        reader.ops("b", 0, lambda target, path: True)


@pytest.mark.parametrize("dictionary", [False, True])
def test_a_segment_reads_the_same_whether_its_values_carry_a_dictionary_or_not(dictionary: bool) -> None:
    """The writer stores ``path`` and ``value`` plain, and they are read plain (no dictionary built
    from a row group's message text); a file that dictionary-encodes them (another writer) is read
    through the dictionary path, bounded before expanding, to the same ops."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ckpt_archive.format import objects

    entries = [
        (f"c{i}", i, None, [{"op": "append", "path": ["log"], "value": {"text": "x" * (i % 7)}}]) for i in range(40)
    ]
    data, placed = objects.encode_segment("t", entries)
    if dictionary:
        table = pq.read_table(pa.BufferReader(data))
        buf = io.BytesIO()
        with pq.ParquetWriter(buf, objects.SEGMENT_SCHEMA, store_schema=False, use_dictionary=True) as writer:
            writer.write_table(table)
            writer.add_key_value_metadata({"ckpt_archive.format_version": "1"})
        data = buf.getvalue()
    reader = objects.SegmentReader(data, thread_id="t", key="k")
    assert [reader.ops(cid, placed[cid][0]) for cid, _, _, _ in entries] == [e[3] for e in entries]
    assert (reader._plain is None) is dictionary  # the plain view only where no dictionary page is found


def test_a_cold_load_walks_the_heads_lineage_once_and_asks_each_ancestor_little(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What to fetch and the replay both need the head snapshot's lineage: it is walked once per read
    (before: three times, each asking every ancestor whether its content is known), and each ancestor
    is asked about twice in all, not four times."""
    from ckpt_archive.engine import chains, lists

    url = str(tmp_path / "a")
    archive = ca.open_archive(url, full_snapshot_interval=10)
    saved = _chat(archive, 150)
    archive.close()
    walks: list[Any] = []
    asked: list[Any] = []
    walk, known = lists.Replays._walk, chains.ChainReader.known

    def counted_walk(self: Any, rec: Any, n: int) -> Any:
        walks.append(rec["id"])
        return walk(self, rec, n)

    def counted_known(self: Any, rec: Any) -> Any:
        asked.append(rec["id"])
        return known(self, rec)

    monkeypatch.setattr(lists.Replays, "_walk", counted_walk)
    monkeypatch.setattr(chains.ChainReader, "known", counted_known)
    got = ca.open_archive(url).load("t")
    assert got is not None and got.messages == saved[-1].messages and got.state == saved[-1].state
    # walked once per set of records the read holds: the hint's, then the fuller one it proves (before:
    # three times), and never extended (a walk kept from fewer records would fall short: a fetch more)
    assert len(walks) <= 2 and len(set(walks)) == 1, walks
    assert len(asked) <= 2.2 * len(saved), len(asked)
