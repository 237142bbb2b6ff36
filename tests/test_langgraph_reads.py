"""Per-call work of the read path a fresh ``ArchiveSaver`` serves LangGraph from (issue 21: ``list()``,
``get_state_history``, ``get_delta_channel_history``): what one call reads and builds, counted, not timed.

A whole-thread build replays forward: each full record is built from its parent's content (just built)
and its history rows, checked against its digests, so a batch decodes the snapshot its oldest chain
starts from and no other (``ChainReader._from_rows``); the states agree with a load of each by id,
which reads its snapshot."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

import ckpt_archive as ca
from ckpt_archive._sync import run_sync
from ckpt_archive.engine.chains import ChainReader
from ckpt_archive.integrations.langgraph import ArchiveSaver


class _Snapshots:
    """Counts the snapshots chain replays decode (``ChainReader._snapshot``) while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = ChainReader._snapshot

        async def counting(reader: ChainReader, rec: Any, inline: Any) -> Any:
            self.n += 1
            return await real(reader, rec, inline)

        monkeypatch.setattr(ChainReader, "_snapshot", counting)


def _chat(saver: ArchiveSaver, thread: str, n: int) -> None:
    """``n`` puts of a growing message list (``add_messages``-like: the whole list every step)."""
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    messages: list[Any] = []
    for i in range(n):
        kind = HumanMessage if i % 2 == 0 else AIMessage
        messages = [*messages, kind(f"turn {i} " + "x" * 200, id=f"m{i}")]
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": messages, "step": i}
        cp["channel_versions"] = {"messages": i + 1, "step": i + 1}
        cfg = saver.put(cfg, cp, {"source": "loop", "step": i, "parents": {}}, {"messages": i + 1, "step": i + 1})


def test_a_whole_thread_build_decodes_one_snapshot_and_agrees_with_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """``history`` and a batch of every checkpoint (``acontents``) decode the first snapshot only (before:
    one per full record, 6 of 60 checkpoints); each state equals a load by id, which reads its snapshot."""
    url = "memory://lg-reads-engine"
    writer = ca.open_archive(url, full_snapshot_interval=10)
    for i in range(60):
        writer.save(ca.Checkpoint.new("t", {"m": [f"msg {j}" for j in range(i + 1)], "n": i}, step=i))
    counted = _Snapshots(monkeypatch)
    walked = list(ca.open_archive(url).history("t"))
    assert counted.n == 1
    counted.n = 0
    fresh = ca.open_archive(url)
    ids = [c.checkpoint_id for c in walked]
    built = run_sync(fresh.acontents("t", ids))
    assert counted.n == 1
    for ckpt in walked:
        alone = ca.open_archive(url).load_by_id(ckpt.checkpoint_id)
        assert alone is not None and alone.state == ckpt.state == built[ckpt.checkpoint_id][0]


@pytest.mark.parametrize("n", [40, 120])
def test_list_all_from_a_fresh_saver_decodes_one_snapshot_per_window(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """``list()`` of a whole thread from a fresh saver decodes one snapshot per window of listed
    checkpoints (8, then 64 at a time), whatever the thread's length (before: one per full record,
    n/10), and lists every checkpoint with its messages."""
    url = f"memory://lg-reads-list-{n}"
    _chat(ArchiveSaver.from_url(url), "t", n)
    counted = _Snapshots(monkeypatch)
    got = list(ArchiveSaver.from_url(url).list({"configurable": {"thread_id": "t"}}))
    assert len(got) == n
    assert [len(t.checkpoint["channel_values"]["messages"]) for t in got] == list(range(n, 0, -1))
    windows = 1 + -(-(n - 8) // 64)
    assert counted.n <= windows


@pytest.mark.parametrize("n", [20, 90])
def test_list_reads_each_records_langgraph_ids_once(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """A listing asks each record's LangGraph ids many times (its children, grandchildren, objects, tuple:
    about 11 a record before); the call reads them once a record (``Reads.lg``) and lists as before."""
    from ckpt_archive.integrations.langgraph import reading

    url = f"memory://lg-reads-ids-{n}"
    _chat(ArchiveSaver.from_url(url), "t", n)
    want = [t.checkpoint["id"] for t in ArchiveSaver.from_url(url).list({"configurable": {"thread_id": "t"}})]
    reads: list[str] = []
    real = reading.lg_ids

    def counting(info: Any) -> tuple[str, str | None]:
        reads.append(info.checkpoint_id)
        return real(info)

    monkeypatch.setattr(reading, "lg_ids", counting)
    got = list(ArchiveSaver.from_url(url).list({"configurable": {"thread_id": "t"}}))
    assert [t.checkpoint["id"] for t in got] == want and len(want) == n
    assert len(reads) == len(set(reads)) == n


def test_a_cell_met_by_identity_costs_the_memo_no_object_to_track(monkeypatch: pytest.MonkeyPatch) -> None:
    """A listing meets thousands of message cells once each (each snapshot of a ``DeltaChannel`` is
    its own list of cells). The memo enters each by identity (found again without serialising it) in
    one map of the objects it keeps alive, not as an ``(object, value)`` pair an entry: cells equal to
    ones met before but other objects add no object for the gc to track (before: one pair a cell,
    7,500 of the 21,000 objects a fresh saver kept after ``list()`` of 1,002 checkpoints), and are found
    again by identity."""
    import gc

    import orjson
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from ckpt_archive.integrations.langgraph import encoding
    from ckpt_archive.integrations.langgraph.encoding import SerdeCodec

    memo: dict[Any, Any] = {}
    codec = SerdeCodec(JsonPlusSerializer(pickle_fallback=False), messages=memo)
    n = 200
    made = codec.encode_channel([HumanMessage(f"m {i} " + "x" * 50, id=f"m{i}") for i in range(n)], None)
    cells = orjson.loads(orjson.dumps(made))
    first = codec.decode_channel(cells)
    grown = []
    for _ in range(3):  # the fewest of three tries: another thread (the I/O loop) may allocate meanwhile
        again = orjson.loads(orjson.dumps(made))  # equal cells, other objects: a later snapshot's
        gc.collect()
        before = len(gc.get_objects())
        second = codec.decode_channel(again)
        del second
        gc.collect()
        grown.append(len(gc.get_objects()) - before)
    assert min(grown) <= 1, grown  # the memo's entries for 200 more cells (one pair a cell: >= 200)
    texts: list[Any] = []
    real = encoding.cell_text

    def counting(cell: dict[str, Any]) -> bytes:
        texts.append(cell)
        return real(cell)

    monkeypatch.setattr(encoding, "cell_text", counting)
    third = codec.decode_channel(again)
    assert not texts and third == first and all(a is not b for a, b in zip(third, first, strict=True))


def test_list_validates_each_message_once_and_hands_out_unshared_copies(request: pytest.FixtureRequest) -> None:
    """A fresh saver's ``list()`` of a thread whose every checkpoint holds the messages so far validates
    each distinct message once (before: twice, the second sight validated again to keep a copy), and
    every listed message is its own object: changing one changes no other checkpoint's."""
    url = "memory://lg-reads-validations"
    n = 30
    _chat(ArchiveSaver.from_url(url), "t", n)
    validated = request.getfixturevalue("validated_messages")  # from here on
    got = list(ArchiveSaver.from_url(url).list({"configurable": {"thread_id": "t"}}))
    assert sorted(validated) == sorted(f"m{i}" for i in range(n))
    firsts = [t.checkpoint["channel_values"]["messages"][0] for t in got]
    assert len({id(m) for m in firsts}) == n and all(m == firsts[0] for m in firsts)
    firsts[0].content = "changed"
    firsts[0].additional_kwargs["k"] = 1
    assert all(m.content.startswith("turn 0") and not m.additional_kwargs for m in firsts[1:])


@pytest.mark.parametrize("turns", [20, 45])
def test_a_fresh_savers_delta_channel_walk_decodes_one_snapshot(monkeypatch: pytest.MonkeyPatch, turns: int) -> None:
    """``get_delta_channel_history`` from a newly opened saver builds the states carrying the range's
    writes in one forward replay: one snapshot decoded however long the range (before: one per full
    record in it, 6 at 20 turns and 14 at 45), and the history equals the writing saver's."""
    from ckpt_archive.integrations.langgraph.testing import delta_chat

    url = f"memory://lg-reads-walk-{turns}"
    writer = ArchiveSaver.from_url(url)
    app = delta_chat(writer)
    config: Any = {"configurable": {"thread_id": "chat"}}
    for _ in range(turns):
        app.invoke({}, config, durability="sync")
    want = writer.get_delta_channel_history(config=config, channels=["messages"])
    counted = _Snapshots(monkeypatch)
    got = ArchiveSaver.from_url(url).get_delta_channel_history(config=config, channels=["messages"])
    assert counted.n == 1
    assert len(got["messages"]["writes"]) == turns
    assert got == want


def test_list_all_parses_each_segment_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh saver's ``list()`` of a whole thread parses each delta segment once (windows end at full
    records, so no two windows need one segment; before: 16 parses of 14 segments at 150 checkpoints)."""
    from ckpt_archive.format import objects

    url = "memory://lg-reads-segments"
    _chat(ArchiveSaver.from_url(url, full_snapshot_interval=10), "t", 150)  # 14 compactions
    parsed: list[str] = []
    real = objects.SegmentReader.__init__

    def counting(reader: Any, data: bytes, *, thread_id: str, key: str) -> None:
        parsed.append(key)
        real(reader, data, thread_id=thread_id, key=key)

    monkeypatch.setattr(objects.SegmentReader, "__init__", counting)
    got = list(ArchiveSaver.from_url(url).list({"configurable": {"thread_id": "t"}}))
    assert len(got) == 150
    assert len(parsed) == len(set(parsed)) >= 4  # 14 tier-0 segments, merged by tier at the saves


def test_list_finds_each_message_cell_by_identity_not_by_serialising_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The states of a listing share their unchanged message cells, so a fresh saver's ``list()`` of a
    thread holding the messages so far in every checkpoint serialises a cell to find its message only
    the first time it meets that cell object: at most one per message per window (before: every
    message of every checkpoint, n(n+1)/2 = 820 at 40 steps); the tuples still equal the same
    checkpoints read alone."""
    from ckpt_archive.integrations.langgraph import encoding

    url = "memory://lg-reads-cells"
    n = 40
    _chat(ArchiveSaver.from_url(url), "t", n)
    texts = 0
    real = encoding.cell_text

    def counting(cell: dict[str, Any]) -> bytes:
        nonlocal texts
        texts += 1
        return real(cell)

    monkeypatch.setattr(encoding, "cell_text", counting)
    got = list(ArchiveSaver.from_url(url).list({"configurable": {"thread_id": "t"}}))
    assert len(got) == n and texts <= 3 * n, texts
    monkeypatch.setattr(encoding, "cell_text", real)
    alone = ArchiveSaver.from_url(url)
    for tup in got[::7]:
        one = alone.get_tuple(tup.config)
        assert one is not None and one.checkpoint["channel_values"] == tup.checkpoint["channel_values"]


def test_segments_within_their_bounds_are_sized_without_expanding_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A listing's segments, small row groups well within their bounds, are sized from their
    dictionaries' bytes: no dictionary's entry lengths taken to count its decoded bytes, no value text
    counted for commas and brackets (before: every dictionary column of each row group, 30 at 60
    steps, and a count over every text); each checkpoint's rows are found from one index of the row group. Bombs past
    the bounds are still refused (``tests/test_bombs.py``, ``tests/test_stored_bounds.py``)."""
    from ckpt_archive.format import objects

    url = "memory://lg-reads-sizing"
    _chat(ArchiveSaver.from_url(url), "t", 60)
    sized = 0
    real = objects.pc.binary_length  # what sizing a dictionary's expansion starts with

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal sized
        sized += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(objects.pc, "binary_length", counting)
    got = list(ArchiveSaver.from_url(url).list({"configurable": {"thread_id": "t"}}))
    assert len(got) == 60 and sized == 0, sized


def test_list_copies_what_it_read_without_checking_it_as_json_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh saver's ``list()`` hands out private copies of the stored JSON (the checkpoint skeletons,
    ``json`` cells) made by one orjson round trip (``codec.stored_copy``): what was read from storage is
    JSON, so none is checked to round-trip as JSON again (before: 24 checks for 12 checkpoints, two each),
    and each listed checkpoint is its own copy."""
    from ckpt_archive import codec

    url = "memory://lg-reads-json-checks"
    n = 12
    writer, cfg = ArchiveSaver.from_url(url), {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for i in range(n):
        cp = empty_checkpoint()
        cp["channel_values"] = {"notes": {"i": i, "tags": ["a", "b"]}, "step": i}
        cp["channel_versions"] = {"notes": i + 1, "step": i + 1}
        cfg = writer.put(cfg, cp, {"source": "loop", "step": i, "parents": {}}, {"notes": i + 1, "step": i + 1})
    fresh = ArchiveSaver.from_url(url)
    checks: list[str] = []
    real = codec.json_copy_raw

    def counting(value: Any, where: str = "state", series: str | None = None) -> Any:
        checks.append(where)
        return real(value, where, series)

    monkeypatch.setattr(codec, "json_copy_raw", counting)
    got = list(fresh.list({"configurable": {"thread_id": "t"}}))
    assert len(got) == n
    assert checks == []
    assert [t.checkpoint["channel_values"]["step"] for t in got] == list(range(n - 1, -1, -1))
    assert [t.checkpoint["channel_values"]["notes"]["i"] for t in got] == list(range(n - 1, -1, -1))
    skeletons = [t.checkpoint["channel_versions"] for t in got]
    assert len({id(s) for s in skeletons}) == n
    skeletons[0]["notes"] = -1
    got[0].checkpoint["channel_values"]["notes"]["tags"].append("c")
    again = list(fresh.list({"configurable": {"thread_id": "t"}}))
    assert again[0].checkpoint["channel_versions"]["notes"] == n
    assert again[0].checkpoint["channel_values"]["notes"]["tags"] == ["a", "b"]


def test_get_state_history_decodes_a_shared_seed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``get_state_history(limit=10)`` of a ``DeltaChannel`` graph from a fresh saver: the seed every
    listed state's history starts from (one ``_DeltaSnapshot`` list, the same stored cells from the
    archive's part cache) is decoded at most twice, then handed out as fresh copies (before: once per
    history walk: 10 times here); the states equal the writer's, and share no list, dict or message."""
    from langgraph.channels.delta import DeltaChannel
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import _messages_delta_reducer
    from typing_extensions import TypedDict

    from ckpt_archive.integrations.langgraph.encoding import SerdeCodec

    reducer: Any = _messages_delta_reducer
    channel = Annotated[list[Any], DeltaChannel(reducer, snapshot_frequency=8)]
    State = TypedDict("State", {"messages": channel})  # noqa: UP013 - the annotation names a local

    def chat(s: dict[str, Any]) -> dict[str, Any]:
        i = len(s.get("messages") or [])
        return {"messages": [AIMessage(f"turn {i}", id=f"m{i}")]}

    def app(saver: ArchiveSaver) -> Any:
        g: Any = StateGraph(State)
        g.add_node("chat", chat)
        g.add_edge(START, "chat")
        g.add_edge("chat", END)
        return g.compile(checkpointer=saver)

    url = "memory://lg-reads-shared-seed"
    config: Any = {"configurable": {"thread_id": "t"}}
    writer = app(ArchiveSaver.from_url(url))
    for _ in range(12):
        writer.invoke({}, config, durability="sync")
    want = [s.values for s in writer.get_state_history(config, limit=10)]
    decoded: list[str] = []
    real = SerdeCodec._message

    def counting(codec: SerdeCodec, cell: dict[str, Any]) -> Any:
        decoded.append(str(cell.get("id")))
        return real(codec, cell)

    monkeypatch.setattr(SerdeCodec, "_message", counting)
    got = [s.values for s in app(ArchiveSaver.from_url(url)).get_state_history(config, limit=10)]
    assert got == want and len(got) == 10
    assert 1 <= decoded.count("m0") <= 2, decoded.count("m0")
    lists = [s["messages"] for s in got]
    assert len({id(x) for x in lists}) == len(lists)
    firsts = [x[0] for x in lists if x]
    assert len({id(m) for m in firsts}) == len(firsts)
    firsts[0].content = "changed"
    firsts[0].additional_kwargs["k"] = 1
    assert all(m.content == "turn 0" and not m.additional_kwargs for m in firsts[1:])


def test_a_message_validated_from_its_cell_shares_nothing_with_what_is_handed_out() -> None:
    """The memo validates a message once, from the stored cell itself (no private copy of the cell
    first): what it keeps may share nested parts with the cell, what it hands out shares nothing with
    either, so a caller editing a handed-out message deep inside changes no cell and no later read."""
    import orjson
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from ckpt_archive.integrations.langgraph.encoding import SerdeCodec

    codec = SerdeCodec(JsonPlusSerializer(pickle_fallback=False), messages={})
    original = AIMessage(
        "hi",
        id="a1",
        additional_kwargs={"deep": {"list": [1, {"x": 2}]}},
        tool_calls=[{"name": "f", "args": {"q": {"nested": [1]}}, "id": "c1"}],
    )
    cells = orjson.loads(orjson.dumps(codec.encode_channel([original], None)))
    stored = orjson.dumps(cells)
    first = codec.decode_channel(cells)
    first[0].additional_kwargs["deep"]["list"][1]["x"] = 99
    first[0].tool_calls[0]["args"]["q"]["nested"].append(2)
    assert orjson.dumps(cells) == stored  # the cell is as stored
    again = codec.decode_channel(cells)
    assert again[0].additional_kwargs == {"deep": {"list": [1, {"x": 2}]}}
    assert again[0].tool_calls[0]["args"] == {"q": {"nested": [1]}} and again[0] == original
