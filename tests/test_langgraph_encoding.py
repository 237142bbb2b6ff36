"""Properties of the LangGraph <-> archive state mapping (pure functions, no storage)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langgraph")

from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import ckpt_archive as ca
from ckpt_archive.integrations.langgraph.encoding import (
    SerdeCodec,
    archive_thread,
    build_state,
    restore_checkpoint,
    split_thread,
)
from ckpt_archive.integrations.langgraph.saver import ArchiveSaver

CODEC = SerdeCodec(JsonPlusSerializer(pickle_fallback=False))
names = st.text(min_size=1, max_size=12)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=20))
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@given(st.text(min_size=1, max_size=30), st.text(max_size=30))
def test_thread_mapping_is_reversible(thread_id: str, ns: str) -> None:
    assert split_thread(archive_thread(thread_id, ns)) == (thread_id, ns)
    if "#" not in thread_id and "%" not in thread_id:
        assert archive_thread(thread_id, "") == thread_id


def _checkpoint(channels: dict[str, Any], versions: dict[str, int], cid: str) -> dict[str, Any]:
    return {
        "v": 4,
        "id": cid,
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": channels,
        "channel_versions": versions,
        "versions_seen": {"node": dict(versions)},
        "updated_channels": None,
    }


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(names, values, max_size=6), st.dictionaries(names, values, max_size=6))
def test_state_round_trips_and_unchanged_channels_cost_nothing(first: dict[str, Any], changed: dict[str, Any]) -> None:
    v1 = {k: 1 for k in first}
    s1 = build_state(CODEC, _checkpoint(first, v1, "a"), v1, None, {})
    assert restore_checkpoint(CODEC, s1)["channel_values"] == first
    second = {**first, **changed}
    v2 = {k: (2 if k in changed else 1) for k in second}
    cp2 = _checkpoint(second, v2, "b")
    s2 = build_state(CODEC, cp2, {k: 2 for k in changed}, s1, {})
    assert restore_checkpoint(CODEC, s2)["channel_values"] == second
    ops = ca.diff(s1, s2)
    touched = {op["path"][1] for op in ops if op["path"][0] == "channels"}
    assert touched <= set(changed), (touched, changed)


@settings(max_examples=40, deadline=None)
@given(st.lists(values, max_size=8), st.lists(values, min_size=1, max_size=5))
def test_a_list_that_grew_by_appending_is_an_append(old: list[Any], extra: list[Any]) -> None:
    s1 = build_state(CODEC, _checkpoint({"messages": old}, {"messages": 1}, "a"), {"messages": 1}, None, {})
    cp2 = _checkpoint({"messages": old + extra}, {"messages": 2}, "b")
    s2 = build_state(CODEC, cp2, {"messages": 2}, s1, {})
    ops = [op for op in ca.diff(s1, s2) if op["path"][:2] == ["channels", "messages"]]
    if old:
        assert [op["op"] for op in ops] == ["append"] and len(ops[0]["value"]) == len(extra)
    assert restore_checkpoint(CODEC, s2)["channel_values"]["messages"] == old + extra


def test_missing_thread_id_is_a_typed_error() -> None:
    saver = ArchiveSaver.from_url("memory://lg-typed-errors")
    with pytest.raises(ca.InvalidIdentifier):
        saver.get_tuple({"configurable": {}})
    with pytest.raises(ca.InvalidIdentifier):
        saver.put_writes({"configurable": {"thread_id": "t"}}, [("a", 1)], "task")


@pytest.mark.parametrize("text", ["not base64!", "YWJj\n", "YWJ", "Y=Jj", "\u00e9\u00e9\u00e9\u00e9"])
def test_a_stored_value_that_is_not_base64_is_a_typed_error(text: str) -> None:
    """A blob that is not strict base64 (bad characters, bad padding) is refused, with or without the cache."""
    for codec in (CODEC, SerdeCodec(JsonPlusSerializer(pickle_fallback=False), {})):
        with pytest.raises(ca.CheckpointError, match="not base64"):
            codec.loads_many([["msgpack", text]])


@given(st.binary(max_size=300))
def test_blob_text_is_standard_base64(data: bytes) -> None:
    import base64

    typ, text = CODEC.dumps(data)
    assert base64.b64decode(text, validate=True) == CODEC.serde.dumps_typed(data)[1]
    assert CODEC.loads([typ, text]) == data
