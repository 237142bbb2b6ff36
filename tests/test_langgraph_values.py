"""Readable LangGraph values (issue 21): messages and plain data stored as JSON, rebuilt exactly.

Through a real tool-using graph (``FakeMessagesListChatModel`` + ``ToolNode``), every message kind a
graph carries is stored as its JSON cell (``integrations/langgraph/values.py``, spec.md section 11),
read back by a fresh saver as the same objects, and read by DuckDB from the Parquet alone. Values JSON
cannot hold exactly keep the serde's bytes; stored JSON someone else wrote constructs only the
allowlisted message classes; an encrypting serde stores no plaintext.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import io
import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

import duckdb
import orjson
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive.analysis import delta_glob
from ckpt_archive.format import layout
from ckpt_archive.integrations.langgraph import ArchiveSaver, UnreadableValue, strict_serde
from ckpt_archive.integrations.langgraph.encoding import SerdeCodec

IMAGE = "iVBORw0KGgo" + "A" * 200
TOOL_CALL = {"name": "lookup", "args": {"query": "q"}, "id": "call-0", "type": "tool_call"}


def every_kind() -> list[BaseMessage]:
    """One message of every kind a LangGraph graph carries, with the fields each kind has."""
    return [
        SystemMessage("be brief", id="s1"),
        HumanMessage(
            [{"type": "text", "text": "what is this?"}, {"type": "image", "base64": IMAGE, "mime_type": "image/png"}],
            id="h1",
            name="ada",
        ),
        AIMessage(
            "",
            id="a1",
            tool_calls=[TOOL_CALL],
            invalid_tool_calls=[
                {"name": "bad", "args": "{oops", "id": "call-x", "error": "bad json", "type": "invalid_tool_call"}
            ],
            usage_metadata={"input_tokens": 10, "output_tokens": 3, "total_tokens": 13},
            response_metadata={"model_name": "fake", "finish_reason": "tool_calls"},
            additional_kwargs={"refusal": None, "extra": {"n": 1.5, "ok": True}},
        ),
        ToolMessage("42", tool_call_id="call-0", id="t1", name="lookup", status="success", artifact={"rows": [1, 2]}),
        ToolMessage("boom", tool_call_id="call-1", id="t2", status="error"),
        FunctionMessage("{}", name="fn", id="f1"),
        ChatMessage("hello", role="critic", id="c1"),
        AIMessage([{"type": "text", "text": "done"}], id="a2"),
        HumanMessageChunk("hu", id="hc"),
        AIMessageChunk("par", id="ac", tool_call_chunks=[{"name": "lookup", "args": '{"q', "id": "c9", "index": 0}]),
        ToolMessageChunk("tc", tool_call_id="call-0", id="tc"),
        SystemMessageChunk("sc", id="sc"),
        FunctionMessageChunk("fc", name="fn", id="fc"),
        ChatMessageChunk("cc", role="r", id="cc"),
        RemoveMessage(id="gone"),
    ]


class KindsState(TypedDict, total=False):
    kinds: Annotated[list[Any], operator.add]


def _kinds_graph(saver: Any) -> Any:
    def emit(state: KindsState) -> dict[str, Any]:
        return {"kinds": every_kind()}

    g = StateGraph(KindsState)
    g.add_node("emit", emit)
    g.add_edge(START, "emit")
    return g.compile(checkpointer=saver)


def _same(a: Any, b: Any) -> bool:
    """Equal, of the same classes throughout (messages by class, ==, and their dumps' types)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, BaseMessage):
        return bool(a == b) and _same(a.model_dump(), b.model_dump())
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _cells(url: str, thread: str, channel: str) -> Any:
    state = ca.open_archive(url).load(thread).state  # type: ignore[union-attr]
    return state["channels"][channel]


def test_every_message_kind_is_stored_as_json_and_read_back_the_same(tmp_path: Path) -> None:
    url = str(tmp_path / "a")
    config: Any = {"configurable": {"thread_id": "k"}}
    _kinds_graph(ArchiveSaver.from_url(url)).invoke({"kinds": []}, config)
    got = _kinds_graph(ArchiveSaver.from_url(url)).get_state(config).values["kinds"]
    assert _same(got, every_kind())
    items = _cells(url, "k", "kinds")["items"]
    assert [c["type"] for c in items] == [m.type for m in every_kind()]  # each one a JSON message, none serde
    ai = items[2]
    assert ai["tool_calls"] == [TOOL_CALL] and ai["usage_metadata"]["total_tokens"] == 13
    assert items[1]["content"][1]["base64"] == IMAGE and items[3]["tool_call_id"] == "call-0"
    # the pending write that carried them is readable too (its value a list, item by item)
    history = list(ArchiveSaver.from_url(url).list(config))
    writes = [w for t in history for w in t.pending_writes if w[1] == "kinds"]
    assert writes and _same(writes[0][2], every_kind())  # newest first: the node's write


class Mood(enum.StrEnum):
    HAPPY = "happy"


class MyHuman(HumanMessage):
    """A user's subclass: only the serde keeps its class."""


NOT_JSON: list[Any] = [
    ToolMessage("r", tool_call_id="c", artifact=b"raw bytes"),
    ToolMessage("r", tool_call_id="c", artifact={1: "int key"}),
    AIMessage("x", response_metadata={"at": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)}),
    AIMessage("x", additional_kwargs={"mood": Mood.HAPPY}),
    AIMessage("x", additional_kwargs={"nan": float("nan")}),
    MyHuman("custom"),
    datetime.date(2026, 1, 2),
    {1, 2},
    (1, "tuple"),
    b"bytes",
    Mood.HAPPY,
]


@pytest.mark.parametrize("value", NOT_JSON, ids=[type(v).__name__ + str(i) for i, v in enumerate(NOT_JSON)])
def test_what_json_cannot_hold_exactly_keeps_the_serde_value(value: Any) -> None:
    codec = SerdeCodec(strict_serde())
    entry = codec.encode_channel([value], None)
    (cell,) = entry["items"]
    assert type(cell) is list and len(cell) == 2  # [type, base64]
    serde_gives = codec.loads(codec.dumps(value))  # (a user type outside the allowlist: its plain data)
    assert codec.dumps(codec.decode_channel(entry)[0]) == codec.dumps(serde_gives)


def test_a_container_holding_what_json_cannot_is_split_down_to_it() -> None:
    codec = SerdeCodec(strict_serde())
    value = {"when": datetime.date(2026, 1, 2), "note": "plain", "log": [HumanMessage("hi"), (1, 2)]}
    cell = codec.encode_channel(value, None)
    inner = cell["dict"]
    assert type(inner["when"]) is list and inner["note"] == "plain"
    assert inner["log"]["items"][0] == {"type": "human", "content": "hi"} and type(inner["log"]["items"][1]) is list
    assert codec.decode_channel(cell) == {**value, "log": [HumanMessage("hi"), [1, 2]]}  # the serde's own tuple


LOOKALIKES: list[Any] = [
    ["msgpack", "kqFhoWI="],
    {"type": "human", "content": "not a message"},
    {"json": 1},
    {"items": [1]},
    {"dict": {}},
    {"snapshot": 1},
    {"$blob": {"key": "x"}},
    None,
    [None, [], {}],
    "",
    0,
    -0.0,
    True,
]


def test_json_that_looks_like_a_tag_a_message_or_a_serde_value_is_read_back_as_data(tmp_path: Path) -> None:
    codec = SerdeCodec(strict_serde())
    entry = codec.encode_channel(LOOKALIKES, None)
    assert all(type(c) is not list for c in entry["items"])  # none of them kept as serde
    assert _same(codec.decode_channel(entry), LOOKALIKES)
    for value in LOOKALIKES:  # a single value, and a pending write, through a real saver
        saver = ArchiveSaver.from_url(f"memory://lookalike-{id(value)}")
        cfg = _put(saver, {"x": value})
        saver.put_writes(cfg, [("x", value)], "task")
        tup = ArchiveSaver(ca.open_archive(f"memory://lookalike-{id(value)}")).get_tuple(cfg)
        assert tup is not None
        assert _same(tup.checkpoint["channel_values"]["x"], value) and _same(tup.pending_writes[0][2], value)


def _put(saver: ArchiveSaver, values: dict[str, Any]) -> Any:
    from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

    cp = generate_checkpoint(channel_values=values)
    versions = dict.fromkeys(values, 1)
    cp["channel_versions"] = versions
    return saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, generate_metadata(step=0), versions)


HOSTILE: dict[str, Any] = {
    "unknown type": {"type": "langchain_core.messages.HumanMessage", "content": "x"},
    "import path": {"type": "os.system", "content": "touch pwned"},
    "base class": {"type": "BaseMessage", "content": "x"},
    "wrong content": {"type": "human", "content": 12},
    "lc constructor": {"type": "human", "content": {"lc": 1, "type": "constructor", "id": ["os", "system"]}},
    "no type": {"content": "x", "id": "1"},
    "tag and more": {"json": 1, "type": "human", "content": "x"},
    "items not a list": {"items": 5},
    "dict not a dict": {"dict": [1]},
    "blob lookalike id": {"type": "human", "content": "x", "id": {"$blob": 1}},
    "too deep": {"items": [{"items": [{"items": [0]}]}]},
    "not a cell": {"type": "tool", "content": "x"},  # ToolMessage needs tool_call_id
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_stored_json_is_a_typed_error_and_constructs_nothing(
    name: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """Whoever wrote the archive chose the cells: a message of a type outside the allowlist, or fields
    its class refuses, is ``UnreadableValue``; a malformed cell a ``CheckpointError``; never an import."""
    from ckpt_archive.integrations.langgraph import values

    monkeypatch.setattr(values, "MAX_NESTING", 2)
    url = str(tmp_path / "a")
    cfg = _put(ArchiveSaver.from_url(url), {"msgs": ["benign"], "x": "benign"})
    archive = ca.open_archive(url)
    info = archive.list("t")[-1]
    state = archive.load_by_id(info.checkpoint_id).state  # type: ignore[union-attr]
    state["channels"]["msgs"]["items"][0] = HOSTILE[name]
    archive.update_state(info.checkpoint_id, state, info.version)
    with pytest.raises(ca.CheckpointError) as raised:
        ArchiveSaver.from_url(url).get_tuple(cfg)
    if name not in ("no type", "tag and more", "items not a list", "dict not a dict", "too deep"):
        assert isinstance(raised.value, UnreadableValue)
        assert "\n" not in str(raised.value)
    assert not (Path.cwd() / "pwned").exists()


@tool
def lookup(query: str) -> str:
    """Look a query up."""
    return f"result for {query}"


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _responses(turns: int) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for t in range(turns):
        call = {"name": "lookup", "args": {"query": f"q-{t}"}, "id": f"call-{t}", "type": "tool_call"}
        out.append(AIMessage("", tool_calls=[call], id=f"ai-call-{t}"))
        out.append(AIMessage(f"answer-{t} " + "x" * 1000, id=f"ai-final-{t}"))
    return out


def _tool_graph(saver: Any, turns: int) -> Any:
    model = FakeMessagesListChatModel(responses=_responses(turns))

    def agent(state: ChatState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    g = StateGraph(ChatState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([lookup]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=saver)


DUCKDB_MESSAGES = """
WITH ops AS (
  SELECT step, CASE WHEN op = 'set' THEN json_extract(value, '$.items') ELSE value::JSON END AS items
  FROM read_parquet('{glob}', hive_partitioning = false)
  WHERE thread_id = 'chat' AND path IN ('["channels","messages"]', '["channels","messages","items"]')
)
SELECT m->>'type' AS type, m->>'content' AS content, m->'tool_calls' AS tool_calls,
       m->>'tool_call_id' AS tool_call_id,
       CASE WHEN m->>'type' = 'tool' THEN coalesce(m->>'status', 'success') END AS status
FROM ops, unnest(json_extract(items, '$[*]')) WITH ORDINALITY AS t(m, i)
ORDER BY step, i
"""


def test_duckdb_alone_recovers_every_message_of_a_tool_using_graph_in_order(tmp_path: Path) -> None:
    turns = 15
    url = str(tmp_path / "a")
    saver = ArchiveSaver.from_url(url, full_snapshot_interval=10_000)  # the Parquet holds every delta
    graph = _tool_graph(saver, turns)
    config: Any = {"configurable": {"thread_id": "chat"}}
    for t in range(turns):
        graph.invoke({"messages": [HumanMessage(f"question-{t}", id=f"human-{t}")]}, config, durability="sync")
    saver.archive.compact("chat")
    api = graph.get_state(config).values["messages"]
    assert len(api) == 4 * turns
    rows = duckdb.sql(DUCKDB_MESSAGES.format(glob=delta_glob(url))).fetchall()
    expected = [
        (
            m.type,
            m.content,
            getattr(m, "tool_calls", None) or None,
            getattr(m, "tool_call_id", None),
            getattr(m, "status", None),
        )
        for m in api
    ]
    got = [
        (ty, content, orjson.loads(calls) if calls else None, tcid, status) for ty, content, calls, tcid, status in rows
    ]
    assert got == expected  # every message, in order, with its type, text, tool calls and tool results
    markers = [f"question-{t}" for t in range(turns)] + [f"answer-{t}" for t in range(turns)]
    markers += [f"result for q-{t}" for t in range(turns)]
    text = " ".join(str(r) for r in rows)
    assert sum(m in text for m in markers) == len(markers) == 45


class _Reverse:
    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "rev", plaintext[::-1]

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        return ciphertext[::-1]


def _plaintext(saver: ArchiveSaver) -> bytes:
    """Every stored object as its readers see it: zstd frames decompressed, Parquet decoded."""
    out = []
    for key in sorted(asyncio.run(saver.store.find(""))):
        data = asyncio.run(saver.store.get(key))
        assert data is not None
        if data[:4] == b"\x28\xb5\x2f\xfd":
            data = codec.decompress(data, kind=layout.kind_of(key) or "object")  # log documents: the dictionary
        elif data[:4] == b"PAR1":
            data = str(pq.read_table(io.BytesIO(data)).to_pylist()).encode()
        out.append(data)
    return b"\n".join(out)


@pytest.mark.parametrize("serde", ["encrypted", "own"])
def test_a_serde_other_than_the_plain_one_sees_every_value_and_no_plaintext_is_stored(serde: str) -> None:
    chosen = EncryptedSerializer(_Reverse(), strict_serde()) if serde == "encrypted" else _Own()
    url = f"memory://lg-values-{serde}"
    saver = ArchiveSaver.from_url(url, serde=chosen)
    graph = _tool_graph(saver, 3)
    config: Any = {"configurable": {"thread_id": "chat"}}
    for t in range(3):
        graph.invoke({"messages": [HumanMessage(f"question-{t}", id=f"human-{t}")]}, config, durability="sync")
    saver.archive.compact("chat")
    raw = _plaintext(saver)
    assert b"question-" not in raw and b"answer-" not in raw and b"result for" not in raw and b"lookup" not in raw
    items = _cells(url, "chat", "messages")["items"]
    assert all(type(c) is list and len(c) == 2 for c in items)  # [type, base64] each
    again = _tool_graph(ArchiveSaver.from_url(url, serde=chosen), 3).get_state(config).values["messages"]
    assert _same(again, graph.get_state(config).values["messages"]) and len(again) == 12


class _Own(JsonPlusSerializer):
    """A serde of the user's own (here: the plain one, reversed): the saver stores only what it gives."""

    def __init__(self) -> None:
        super().__init__(pickle_fallback=False, allowed_msgpack_modules=None)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        typ, data = super().dumps_typed(obj)
        return typ, data[::-1]

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return super().loads_typed((data[0], data[1][::-1]))


def _unrandom(values: dict[str, Any]) -> dict[str, Any]:
    """The tool messages' ids are add_messages' random uuids: compared without them."""
    msgs = [m.model_copy(update={"id": None}) if isinstance(m, ToolMessage) else m for m in values.get("messages", [])]
    return {**values, "messages": msgs}


def test_a_real_graph_equals_in_memory_saver_and_stores_its_messages_as_json(tmp_path: Path) -> None:
    url = str(tmp_path / "a")
    config: Any = {"configurable": {"thread_id": "chat"}}
    ours, theirs = _tool_graph(ArchiveSaver.from_url(url), 4), _tool_graph(InMemorySaver(), 4)
    for t in range(4):
        for g in (ours, theirs):
            g.invoke({"messages": [HumanMessage(f"question-{t}", id=f"human-{t}")]}, config, durability="sync")
    fresh = _tool_graph(ArchiveSaver.from_url(url), 4)
    assert _same(fresh.get_state(config).values, ours.get_state(config).values)  # read back, the same objects
    history = [_unrandom(s.values) for s in fresh.get_state_history(config)]
    reference = [_unrandom(s.values) for s in theirs.get_state_history(config)]
    assert len(history) == len(reference) and all(_same(a, b) for a, b in zip(history, reference, strict=True))
    items = _cells(url, "chat", "messages")["items"]
    assert [c["type"] for c in items] == ["human", "ai", "tool", "ai"] * 4


message_texts = st.text(max_size=30)
ids = st.one_of(st.none(), st.text(min_size=1, max_size=8))
json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**62), 2**62), st.floats(allow_nan=False), st.text(max_size=8)
)
json_values = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
contents = st.one_of(
    message_texts,
    st.lists(
        st.one_of(message_texts, st.fixed_dictionaries({"type": st.just("text"), "text": message_texts})), max_size=3
    ),
)
tool_calls = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.text(min_size=1, max_size=6),
            "args": st.dictionaries(st.text(max_size=4), json_values, max_size=2),
            "id": st.text(min_size=1, max_size=6),
        }
    ),
    max_size=2,
)
messages = st.one_of(
    st.builds(
        HumanMessage,
        content=contents,
        id=ids,
        additional_kwargs=st.dictionaries(st.text(max_size=4), json_values, max_size=2),
    ),
    st.builds(
        AIMessage,
        content=contents,
        id=ids,
        tool_calls=tool_calls,
        response_metadata=st.dictionaries(st.text(max_size=4), json_values, max_size=2),
    ),
    st.builds(
        ToolMessage,
        content=contents,
        tool_call_id=st.text(min_size=1, max_size=6),
        id=ids,
        artifact=json_values,
        status=st.sampled_from(["success", "error"]),
    ),
    st.builds(SystemMessage, content=contents, id=ids),
    st.builds(ChatMessage, content=contents, role=st.text(max_size=5), id=ids),
    st.builds(AIMessageChunk, content=message_texts, id=ids),
)
elements = st.one_of(messages, json_values)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(elements, max_size=8), st.lists(elements, min_size=1, max_size=4))
def test_generated_message_lists_round_trip_exactly_and_grow_by_appending(old: list[Any], extra: list[Any]) -> None:
    codec = SerdeCodec(strict_serde(), {})
    first = codec.encode_channel(old, None)
    stored = orjson.loads(orjson.dumps(first))  # as the archive stores and reads it
    assert _same(codec.decode_channel(stored), old)
    second = codec.encode_channel(old + extra, stored)
    assert orjson.dumps(second["items"][: len(old)]) == orjson.dumps(stored["items"])  # kept: an append
    assert _same(codec.decode_channel(orjson.loads(orjson.dumps(second))), old + extra)
    ops = ca.diff({"c": stored}, {"c": second})
    assert [op["op"] for op in ops] == ["append"]  # from an empty list too (delta.py: growth is an append)


def test_a_delta_channel_snapshot_is_stored_item_by_item_and_its_history_is_unchanged(tmp_path: Path) -> None:
    """LangGraph's ``DeltaChannel`` puts ``_DeltaSnapshot(value)`` in ``channel_values`` every
    ``snapshot_frequency`` updates: stored as ``{"snapshot": {"items": [...]}}``, readable, and rebuilt."""
    pytest.importorskip("langgraph.channels.delta")
    from ckpt_archive.integrations.langgraph.testing import build_graph, run_turns

    url = str(tmp_path / "a")
    ours, theirs = build_graph(ArchiveSaver.from_url(url), delta=True), build_graph(InMemorySaver(), delta=True)
    for g in (ours, theirs):
        run_turns(g, "t", 0, 5, "sync")
    archive = ca.open_archive(url)
    snapshots = [
        s["channels"]["notes"]
        for i in archive.list("t")
        if "notes" in (s := archive.load_by_id(i.checkpoint_id).state)["channels"]  # type: ignore[union-attr]
    ]
    assert snapshots and all(set(s) == {"snapshot"} for s in snapshots)
    assert all(type(n) is str and n.startswith("agent step") for n in snapshots[-1]["snapshot"]["items"])
    config: Any = {"configurable": {"thread_id": "t"}}
    fresh = build_graph(ArchiveSaver.from_url(url), delta=True)
    assert [s.values for s in fresh.get_state_history(config)] == [s.values for s in theirs.get_state_history(config)]
    ckpt = fresh.get_state(config).config
    got = ArchiveSaver.from_url(url).get_delta_channel_history(config=ckpt, channels=["notes"])
    assert got["notes"]["writes"] or "seed" in got["notes"]


@pytest.mark.parametrize("wrap", ["channel", "snapshot", "write"])
def test_a_value_nested_past_the_readers_bound_is_written_so_that_it_reads_back(wrap: str) -> None:
    """Containers that hold messages nest as tagged cells down to the bound the reader checks, then as
    one serde value: whatever the nesting, what is written reads back."""
    from ckpt_archive.integrations.langgraph import values

    codec = SerdeCodec(strict_serde())
    value: Any = HumanMessage("deep")
    for i in range(values.MAX_NESTING + 5):
        value = [value] if i % 2 else {"k": value}
    if wrap == "snapshot":
        cell = codec.encode_channel(values.delta_snapshot([value]), None)
        assert codec.decode_channel(cell).value == [value]
    else:
        cell = codec.encode_channel([value], None) if wrap == "channel" else codec.encode_value(value)
        assert codec.decode_channel(cell) == ([value] if wrap == "channel" else value)
