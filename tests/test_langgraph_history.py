"""``get_delta_channel_history``: planned on the manifest, its request count flat in the distance to the seed.

Request counts are taken at a moto S3 server (``S3Server.log``, this test's bucket only); results are
compared with LangGraph's own ``InMemorySaver`` (hypothesis over puts, forks, seeds, writes and new
processes).
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from ckpt_archive.integrations.langgraph import ArchiveSaver
from ckpt_archive.integrations.langgraph.testing import delta_chat
from ckpt_archive.testing import S3Server

try:
    from langgraph.channels.delta import DeltaChannel
except ImportError:  # pragma: no cover - older langgraph
    DeltaChannel = None


def _config(thread: str = "t", **kw: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": "", **kw}}


def _chat(saver: Any) -> Any:
    if DeltaChannel is None:
        pytest.skip("installed langgraph has no DeltaChannel")
    return delta_chat(saver)


def test_history_requests_are_flat_in_the_distance_to_the_seed(s3_server: S3Server) -> None:
    """At the start of every turn the graph's own saver reads the history of its ``DeltaChannel``: the
    manifest probe and one LIST of the target's parent's folder, the same at 1 write from the seed as at
    25 (before: one LIST of the thread and a GET per ancestor state and write object, 3 to 25 requests
    over these distances, 93 at 100). The graph's state equals InMemorySaver's, and so does the history
    a cold saver reads (in one round trip of state reads, plus that folder)."""
    bucket = "lg-history-flat"
    url = s3_server.make_bucket(bucket) + "/a"
    saver = ArchiveSaver.from_url(url, s3_server.storage_options())
    costs: list[tuple[int, int]] = []  # (writes returned, requests)
    plain = saver.get_delta_channel_history

    def counted(*, config: Any, channels: Any) -> Any:
        s3_server.reset_counts()
        out = plain(config=config, channels=channels)
        mine = sum(1 for _, path in s3_server.log if path.startswith(f"/{bucket}/"))
        costs.append((len(out["messages"]["writes"]), mine))
        return out

    saver.get_delta_channel_history = counted  # type: ignore[method-assign]
    graph, memory = _chat(saver), _chat(InMemorySaver())
    for _ in range(26):
        graph.invoke({}, _config(), durability="sync")
        memory.invoke({}, _config(), durability="sync")
    assert graph.get_state(_config()).values == memory.get_state(_config()).values
    by_distance = dict(costs)
    assert min(by_distance) <= 2 and max(by_distance) >= 24, sorted(by_distance)
    assert max(n for _, n in costs) <= 3, costs
    assert by_distance[max(by_distance)] == by_distance[min(by_distance)], costs
    cold = ArchiveSaver.from_url(url, s3_server.storage_options())
    s3_server.reset_counts()
    got = cold.get_delta_channel_history(config=_config(), channels=["messages"])["messages"]
    lists = sum(1 for kind, path in s3_server.log if kind == "LIST" and path.startswith(f"/{bucket}/"))
    want = memory.checkpointer.get_delta_channel_history(config=_config(), channels=["messages"])["messages"]
    assert [w[1:] for w in got["writes"]] == [w[1:] for w in want["writes"]] and len(got["writes"]) == 26
    assert lists <= 1, s3_server.log


def _put(saver: Any, parent: dict[str, Any], i: int, seed: bool) -> dict[str, Any]:
    values: dict[str, Any] = {"turn": i}
    if seed:
        values["d"] = [f"seed-{i}"]
    cp = generate_checkpoint(channel_values=values)
    cp["channel_versions"] = {"turn": i + 1, "d": i + 1}
    return dict(saver.put(parent, cp, generate_metadata(step=i), {"turn": i + 1, "d": i + 1}))


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 12), st.booleans()),  # child of the n-th newest; a seed?
        st.tuples(st.just("writes"), st.integers(0, 1), st.sampled_from(["task-1", "task-2"])),
        st.tuples(st.just("reopen")),
    ),
    max_size=30,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_delta_channel_history_equals_in_memory_saver(ops: list[tuple[Any, ...]]) -> None:
    """Whatever the puts (forks, seeds), the writes (to the newest checkpoint or its parent, as LangGraph
    makes them), and new processes, every checkpoint's history equals InMemorySaver's, read by the saver
    that wrote (its kept walks included) and by a fresh one."""
    url = f"memory://lg-history-hypo-{abs(hash(tuple(map(str, ops))))}"
    ours, theirs = ArchiveSaver.from_url(url), InMemorySaver()
    ids: list[str] = []
    counter = 0

    def histories(saver: Any) -> dict[str, Any]:
        out = {}
        for cid in ids:
            h = saver.get_delta_channel_history(config=_config(checkpoint_id=cid), channels=["d"])["d"]
            out[cid] = (h.get("seed"), [(w[1], w[2]) for w in h["writes"]])
        return out

    for op in [("put", 0, True), *ops]:
        if op[0] == "put":
            parent = _config(checkpoint_id=ids[-1 - op[1] % len(ids)]) if ids else _config()
            counter += 1
            cfg = _put(ours, parent, counter, op[2])
            cp = generate_checkpoint(channel_values={"turn": counter, **({"d": [f"seed-{counter}"]} if op[2] else {})})
            cp["id"] = cfg["configurable"]["checkpoint_id"]
            cp["channel_versions"] = {"turn": counter + 1, "d": counter + 1}
            theirs.put(parent, cp, generate_metadata(step=counter), {"turn": counter + 1, "d": counter + 1})
            ids.append(cfg["configurable"]["checkpoint_id"])
        elif op[0] == "writes":
            target = _config(checkpoint_id=ids[-1 - op[1] % len(ids)])
            counter += 1
            ours.put_writes(target, [("d", f"w-{counter}")], op[2], "p")
            theirs.put_writes(target, [("d", f"w-{counter}")], op[2], "p")
        else:
            ours = ArchiveSaver.from_url(url)
        if len(ids) % 4 == 0:  # walks kept by the saver, checked again after later puts and writes
            histories(ours)
    want = histories(theirs)
    assert histories(ours) == want
    assert histories(ArchiveSaver.from_url(url)) == want


def test_history_never_builds_a_state_for_the_seed_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed is found from the records' ``values`` (the manifest): a walk of 60 ancestors to the root
    builds only the states that carry writes, once; the walk of the next checkpoint builds its own
    child's only (before: every ancestor's state on every call, in batches of 16). Counted where the
    archive builds states for a caller (``ops.reads.contents``, under ``acontents`` and ``aparts``)."""
    from ckpt_archive.ops import reads as R

    url = "memory://lg-history-no-state"
    saver = ArchiveSaver.from_url(url, full_snapshot_interval=10)
    cfg = _config("t")
    for i in range(60):
        cfg = _put(saver, cfg, i, seed=i == 0)
        saver.put_writes(cfg, [("d", f"w{i}")], f"task-{i}", "p")
    reader = ArchiveSaver.from_url(url)
    built: list[str] = []
    plain = R.contents

    async def counted(engine: Any, at: str, ids: Any, m: Any = None) -> Any:
        ids = list(ids)
        out = await plain(engine, at, ids, m)
        built.extend(i for i in ids if i not in built)
        return out

    monkeypatch.setattr(R, "contents", counted)
    h = reader.get_delta_channel_history(config=cfg, channels=["d"])["d"]
    assert h["seed"] == ["seed-0"] and [w[2] for w in h["writes"]] == [f"w{i}" for i in range(59)]
    first = len(built)
    assert first <= 61, first
    cfg = _put(saver, cfg, 60, seed=False)
    built.clear()
    h = reader.get_delta_channel_history(config=cfg, channels=["d"])["d"]
    assert [w[2] for w in h["writes"]] == [f"w{i}" for i in range(60)]
    assert len(built) <= 3, built  # the new record and its parent's and grandparent's carriers


def test_savers_on_one_archive_share_its_cache_of_what_walks_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a walk reads of the states (carried writes, seeds) is cached by the archive, keyed by record
    version and bounded (``ArchiveCheckpointer.aparts``), not by each saver: a second saver on the same
    archive (``with_allowlist`` makes one) walks the same 60 ancestors building no state (before: each
    saver kept its own memo, and the second rebuilt the 60 carriers' states)."""
    from ckpt_archive.engine import contents as EC
    from ckpt_archive.ops import reads as R

    url = "memory://lg-history-shared"
    saver = ArchiveSaver.from_url(url, full_snapshot_interval=10)
    cfg = _config("t")
    for i in range(60):
        cfg = _put(saver, cfg, i, seed=i == 0)
        saver.put_writes(cfg, [("d", f"w{i}")], f"task-{i}", "p")
    archive = ArchiveSaver.from_url(url).archive
    first = ArchiveSaver(archive)
    want = first.get_delta_channel_history(config=cfg, channels=["d"])["d"]
    built: list[str] = []
    plain = R.contents

    async def counted(engine: Any, at: str, ids: Any, m: Any = None) -> Any:
        ids = list(ids)
        built.extend(ids)
        return await plain(engine, at, ids, m)

    monkeypatch.setattr(R, "contents", counted)
    second = ArchiveSaver(archive)
    assert second.get_delta_channel_history(config=cfg, channels=["d"])["d"] == want
    assert built == [], built
    held = archive.engine.contents
    assert len(held.parts) <= EC.PART_RECORDS and held.parts_bytes <= EC.PART_BYTES
    archive.delete("t")  # the archive's own delete forgets what it cached of the thread's records
    assert not held.parts


def test_an_object_no_state_carries_is_read_once_per_archive() -> None:
    """A write object that landed after its checkpoint's child was put (nothing carries it) is read apart
    by a walk, once for the archive (``ArchiveCheckpointer.held``, through ``writes.fetch``): a second
    saver on the same archive walks with no GET of it (before: each saver kept what it read apart, and
    every new saver read it again)."""
    import ckpt_archive as ca
    from ckpt_archive.storage.wrappers import RoundTrips

    trips = RoundTrips(ca.open_store("memory://lg-history-held"))
    archive = ca.ArchiveCheckpointer(trips)
    writer = ArchiveSaver(archive)
    parent = _put(writer, _config("t"), 0, seed=True)
    child = _put(writer, parent, 1, seed=False)
    writer.put_writes(parent, [("d", "late")], "task-late", "p")  # after the child's put: carried by none
    reads: list[int] = []
    for _ in range(2):
        saver = ArchiveSaver(archive)
        trips.reset()
        h = saver.get_delta_channel_history(config=child, channels=["d"])["d"]
        assert h["seed"] == ["seed-0"] and [w[2] for w in h["writes"]] == ["late"]
        reads.append(sum(1 for name, key, _ in trips.calls if name == "get" and "_langgraph/writes/" in key))
    assert reads == [1, 0], reads


def test_list_validates_each_message_once_and_shares_no_object(monkeypatch: pytest.MonkeyPatch) -> None:
    """``list()`` of an ``add_messages`` thread returns every checkpoint's whole message list (~n^2/2
    messages): each stored message is validated at most twice, then copied, so the tuples equal
    those read one by one and no two share a message or any list or dict inside one (before: every
    message of every checkpoint validated again: 1,365 for 30 steps)."""
    from langchain_core.messages import HumanMessage
    from langgraph.graph.message import add_messages

    from ckpt_archive.integrations.langgraph import values as V

    fields = {"messages": Annotated[list[Any], add_messages], "step": int}
    State = TypedDict("State", fields, total=False)  # type: ignore[misc]

    def chat(s: dict[str, Any]) -> dict[str, Any]:
        i = s.get("step", -1) + 1
        call = [{"name": "calc", "args": {"a": i}, "id": f"call-{i}"}]
        kind = HumanMessage(f"q{i}", id=f"h{i}") if i % 2 else AIMessage(f"a{i}", id=f"a{i}", tool_calls=call)
        return {"messages": [kind], "step": i}

    g: Any = StateGraph(State)
    g.add_node("chat", chat)
    g.add_edge(START, "chat")
    g.add_edge("chat", END)
    url = "memory://lg-list-messages-once"
    app = g.compile(checkpointer=ArchiveSaver.from_url(url))
    for _ in range(30):
        app.invoke({}, _config(), durability="sync")
    validated = 0
    plain = V.decode_message

    def counted(cell: Any, where: str, **kw: Any) -> Any:
        nonlocal validated
        validated += 1
        return plain(cell, where, **kw)

    monkeypatch.setattr(V, "decode_message", counted)
    listed = list(ArchiveSaver.from_url(url).list(_config()))
    assert len(listed) >= 60 and validated <= 2 * 30 + 5, validated  # 30 messages, each at most twice
    monkeypatch.setattr(V, "decode_message", plain)
    one_by_one = ArchiveSaver.from_url(url)
    seen: dict[int, str] = {}
    for tup in listed:
        alone = one_by_one.get_tuple(tup.config)
        assert alone is not None and alone.checkpoint == tup.checkpoint and alone.pending_writes == tup.pending_writes
        for m in tup.checkpoint["channel_values"].get("messages", []):
            for part in (m, m.additional_kwargs, m.response_metadata, getattr(m, "tool_calls", None)):
                if part is not None:
                    assert id(part) not in seen, (m.id, seen.get(id(part)))
                    seen[id(part)] = str(m.id)
            if getattr(m, "tool_calls", None):
                assert id(m.tool_calls[0]) not in seen and id(m.tool_calls[0]["args"]) not in seen
                seen[id(m.tool_calls[0])] = seen[id(m.tool_calls[0]["args"])] = str(m.id)


_LG = st.sampled_from([f"lg{i}" for i in range(6)])
_RECORD = st.tuples(st.sampled_from([f"c{i}" for i in range(10)]), _LG, st.one_of(st.none(), _LG), st.integers(1, 2))


def _manifest(records: list[tuple[str, str, str | None, int]]) -> Any:
    from ckpt_archive.format.langgraph import LANGGRAPH_KEY
    from ckpt_archive.format.manifest import Manifest

    m = Manifest("t")
    for cid, lg, parent, version in records:
        m.records.pop(cid, None)  # a re-added id moves to the end, as a commit does
        m.records[cid] = {"id": cid, "version": version, "metadata": {LANGGRAPH_KEY: {"id": lg, "parent": parent}}}
    return m


@settings(max_examples=200, deadline=None)
@given(
    first=st.lists(_RECORD, max_size=8),
    then=st.lists(_RECORD, max_size=8),
    change=st.sampled_from(["append", "compact", "drop", "replace", "reorder", "other thread"]),
)
def test_an_extended_lineage_equals_a_rebuilt_one(
    first: list[tuple[str, str, str | None, int]], then: list[tuple[str, str, str | None, int]], change: str
) -> None:
    """``Lineage(m, base)`` built on a lineage of an earlier manifest (records added since, copied by a
    compaction, dropped, replaced or reordered by maintenance, or another thread's) equals ``Lineage(m)``
    built from every record, holds ``m``'s records, and leaves ``base`` as it was."""
    from ckpt_archive.format import langgraph as L
    from ckpt_archive.format.langgraph import Lineage

    old = _manifest(first)
    m = old.copy()
    for cid, lg, parent, version in then:  # commits since: the same record objects, others after them
        m.records.pop(cid, None)
        m.records.update(_manifest([(cid, lg, parent, version)]).records)
    if change == "drop" and m.records:
        m.records.pop(next(iter(m.records)))
    elif change == "compact":  # records whose rows moved: copies, the same id, version and metadata
        for cid in list(m.records)[::2]:
            m.records[cid] = {**m.records[cid], "rows": {"type": "segment"}}
    elif change == "replace" and m.records:
        cid = next(iter(m.records))
        m.records[cid] = {**m.records[cid], "version": 3}
    elif change == "reorder":
        m.records = dict(reversed(m.records.items()))
    elif change == "other thread":
        m.thread_id = "u"
    base = Lineage(old)
    before = (dict(base.by_lg), {k: list(v) for k, v in base.kids.items()}, list(base.records), dict(base.ids))
    extended, rebuilt = Lineage(m, base), Lineage(m)
    assert extended.by_lg == rebuilt.by_lg
    assert extended.kids == rebuilt.kids
    assert extended.ids == rebuilt.ids  # each record's LangGraph ids, as ``record_lg_ids`` reads them
    assert all(extended.lg(r) == L.record_lg_ids(r) for r in m.records.values())
    assert extended.records == rebuilt.records and extended.thread_id == rebuilt.thread_id
    # the manifest's records (or records equal to them), never a copy a compaction replaced
    assert all(r == m.records[r["id"]] for r in extended.by_lg.values())
    assert (base.by_lg, base.kids, base.records, base.ids) == before


def test_a_savers_history_walks_extend_the_lineage_they_built_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each turn's ``get_delta_channel_history`` reads the LangGraph ids of the records committed since
    the saver's last walk (at most 3 a turn), not of every record of the thread (before: every record,
    every turn: 60 at the 20th), and answers as a newly opened saver does."""
    import itertools

    from ckpt_archive.format import langgraph as L

    saver = ArchiveSaver.from_url("memory://lg-history-lineage")
    app = delta_chat(saver)
    config: Any = {"configurable": {"thread_id": "chat"}}
    lineages: list[Any] = []
    build = L.Lineage.__init__

    def keeping(self: Any, m: Any, base: Any = None) -> None:
        build(self, m, base)
        lineages.append(self)

    monkeypatch.setattr(L.Lineage, "__init__", keeping)
    for _ in range(20):
        app.invoke({}, config, durability="sync")
    assert len(lineages) == 19 and len(lineages[-1].records) > 40  # the first turn has no history to read
    assert [x.read for x in lineages[1:]] == [len(b.records) - len(a.records) for a, b in itertools.pairwise(lineages)]
    assert max(x.read for x in lineages[1:]) <= 3
    want = ArchiveSaver.from_url("memory://lg-history-lineage").get_delta_channel_history(
        config=config, channels=["messages"]
    )
    assert saver.get_delta_channel_history(config=config, channels=["messages"]) == want


def test_a_new_savers_walk_lists_the_targets_parents_folder_not_the_thread() -> None:
    """A newly opened saver's walk reads the objects of the ancestors with a grandchild from the states
    that carry them, and lists only the folders of those without one (the target's parent, whose writes
    land while the target is put), as the graph's own saver does every turn: one LIST of one folder
    however many objects the thread holds (a recursive LIST of the thread was a request per 1,000), no
    recursive listing; the history equals InMemorySaver's."""
    import ckpt_archive as ca
    from ckpt_archive.format import layout
    from ckpt_archive.integrations.langgraph.encoding import archive_thread
    from ckpt_archive.model import uuid7
    from ckpt_archive.storage import RoundTrips

    url = "memory://lg-history-cold-" + uuid7()
    graph, memory = _chat(ArchiveSaver(ca.open_archive(url))), _chat(InMemorySaver())
    for _ in range(40):
        graph.invoke({}, _config(), durability="sync")
        memory.invoke({}, _config(), durability="sync")
    trips = RoundTrips(ca.open_store(url))
    cold = ArchiveSaver(ca.ArchiveCheckpointer(trips))
    got = cold.get_delta_channel_history(config=_config(), channels=["messages"])["messages"]
    want = memory.checkpointer.get_delta_channel_history(config=_config(), channels=["messages"])["messages"]
    assert [w[1:] for w in got["writes"]] == [w[1:] for w in want["writes"]] and len(got["writes"]) == 40
    head = cold.get_tuple(_config())
    assert head is not None and head.parent_config is not None
    parent = head.parent_config["configurable"]["checkpoint_id"]
    listed = [(name, key) for name, key, _ in trips.calls if name in ("list_dir", "find")]
    assert listed[0][0] == "list_dir" and listed[0][1].endswith(layout.writes_dir(archive_thread("t", ""), parent))
    assert trips.requests["find"] == 0 and len(listed) == 2, listed  # the walk's folder, then get_tuple's head's


def test_a_walk_reads_each_records_langgraph_ids_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk (plan, scan, what carries each ancestor's writes) asks each ancestor's LangGraph ids of the
    lineage, which read them once when it was built: a turn's walk back to the root through a 20-turn
    thread reads the ids of the records committed since the last walk (at most 3), not each ancestor's
    several times (before: 595 reads in this turn, growing with the distance to the seed)."""
    from ckpt_archive.format import langgraph as L

    saver = ArchiveSaver.from_url("memory://lg-history-ids")
    app = delta_chat(saver)  # no snapshot: every walk goes back to the root
    config: Any = {"configurable": {"thread_id": "chat"}}
    for _ in range(20):
        app.invoke({}, config, durability="sync")
    reads: list[str] = []
    real = L.record_lg_ids

    def counting(rec: Any) -> tuple[str, str | None]:
        reads.append(rec["id"])
        return real(rec)

    monkeypatch.setattr(L, "record_lg_ids", counting)
    app.invoke({}, config, durability="sync")  # one turn: its walk at the start, then its puts
    assert len(reads) <= 3, reads
    monkeypatch.undo()
    history = saver.get_delta_channel_history(config=config, channels=["messages"])["messages"]
    assert len(history["writes"]) == 21  # the turn's walk went back to the root, 20 ancestors


def test_a_short_listing_of_a_long_thread_lists_its_folders_not_the_thread() -> None:
    """``get_state_history(limit=10)`` lists ten checkpoints: a cold saver finds their pending writes by
    listing those folders (at once), not by one recursive LIST of the whole thread's writes (on S3 a
    request per 1,000 objects, in turn: a cost growing with the thread); a listing of the whole thread
    still takes that one LIST. Both give InMemorySaver's tuples."""
    import ckpt_archive as ca
    from ckpt_archive.model import uuid7
    from ckpt_archive.storage import RoundTrips

    url = "memory://lg-short-list-" + uuid7()
    graph, memory = _chat(ArchiveSaver(ca.open_archive(url))), _chat(InMemorySaver())
    for _ in range(45):
        graph.invoke({}, _config(), durability="sync")
        memory.invoke({}, _config(), durability="sync")

    def listed(saver: Any, limit: int | None) -> list[Any]:
        return [([w[1:] for w in t.pending_writes or []], t.metadata) for t in saver.list(_config(), limit=limit)]

    for limit in (10, None):
        trips = RoundTrips(ca.open_store(url))
        cold = ArchiveSaver(ca.ArchiveCheckpointer(trips))
        got = listed(cold, limit)
        assert got == listed(memory.checkpointer, limit)
        folders = sum(1 for name, _, _ in trips.calls if name == "list_dir")
        if limit is None:
            assert len(got) > 8 * 10 and trips.requests["find"] == 1  # the thread's writes, once
        else:
            assert len(got) == limit and trips.requests["find"] == 0 and folders <= limit, (folders, trips.requests)
