"""Lists edited in place: the ``splice`` op keeps a delta to the items that changed, exactly.

A chat agent cuts, summarises, edits or removes messages; without a splice the delta re-stored the
whole list (a ``set``) and a reader of the history saw every message again as if new. Here:
``apply(a, diff(a, b))`` is ``b`` (as canonical JSON text, and through a JSON round trip of the delta
as stored) over random list edits, growth stays an ``append``, and a replaced or removed item costs
O(changed items) bytes, not O(list). Hostile splice values are a one-line ``BrokenChain``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive.delta import apply_checkpoint, diff_checkpoint

# a small pool of scalars, so equal items (and JSON twins: 1, 1.0, True, -0.0) are common
twins = st.sampled_from([0, 1, 2, True, False, 0.0, 1.0, -0.0, 2.5, "1", "", None])
items = st.recursive(
    twins | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "k"]), inner, max_size=3),
    max_leaves=8,
)
EDITS = ["insert", "remove", "replace", "cut_prefix", "cut_suffix", "summarise", "swap", "reverse", "retype"]


@st.composite
def edited_lists(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    """A list and the list after 1-4 random in-place edits (on fresh copies: equal, not identical)."""
    before = draw(st.lists(items, max_size=12))
    after = copy.deepcopy(before) if draw(st.booleans()) else list(before)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(EDITS))
        n = len(after)
        i = draw(st.integers(0, n))
        j = draw(st.integers(0, n))
        lo, hi = min(i, j), max(i, j)
        if kind == "insert":
            after.insert(i, draw(items))
        elif kind == "remove" and n:
            del after[min(i, n - 1)]
        elif kind == "replace" and n:
            after[min(i, n - 1)] = draw(items)
        elif kind == "cut_prefix":
            del after[:i]
        elif kind == "cut_suffix":
            del after[i:]
        elif kind == "summarise":
            after[:i] = [draw(items)]
        elif kind == "swap" and n:
            a, b = min(i, n - 1), min(j, n - 1)
            after[a], after[b] = after[b], after[a]
        elif kind == "reverse":
            after[lo:hi] = after[lo:hi][::-1]
        elif kind == "retype" and n:  # the same number as another JSON type: 1 -> 1.0 -> True
            k = min(i, n - 1)
            x = after[k]
            after[k] = {True: 1, False: 0.0}.get(x, True) if type(x) in (bool, int, float) else [x]
    return before, after


def text(value: Any) -> bytes:
    return codec.dumps(value)


def check(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """``diff``/``apply`` round trips exactly, in memory and as stored (JSON text of each side)."""
    before = text(old)
    ops = ca.diff(old, new)
    assert text(ca.apply(old, ops)) == text(new)
    stored = codec.loads(text(ops))  # as a commit entry or a Parquet value column holds it
    assert text(ca.apply(codec.loads(before), stored)) == text(new)
    assert text(old) == before, "diff and apply must not mutate their input"
    return ops


@given(edited_lists())
@settings(max_examples=400, deadline=None)
def test_random_list_edits_round_trip(pair: tuple[list[Any], list[Any]]) -> None:
    before, after = pair
    ops = check({"l": before}, {"l": after})
    for op in ops:
        if op["op"] == "splice":  # never bigger than the set it replaces
            assert len(text(op["value"])) < len(text(after))


@given(edited_lists(), edited_lists())
@settings(max_examples=200, deadline=None)
def test_nested_lists_and_lists_of_dicts_round_trip(
    one: tuple[list[Any], list[Any]], two: tuple[list[Any], list[Any]]
) -> None:
    """Lists inside dicts, dicts inside lists, two lists edited in one delta."""
    old = {"doc": {"inner": one[0], "n": 1}, "rows": [{"k": x} for x in two[0]], "top": two[0]}
    new = {"doc": {"inner": one[1], "n": 1}, "rows": [{"k": x} for x in two[1]], "top": two[1]}
    check(old, new)


@given(edited_lists(), st.dictionaries(st.sampled_from(["a", "b"]), items, max_size=2))
@settings(max_examples=200, deadline=None)
def test_message_list_edits_round_trip(pair: tuple[list[Any], list[Any]], state: dict[str, Any]) -> None:
    """Message ops (``target: messages``) splice the checkpoint's message list the same way."""
    before, after = pair
    ops = diff_checkpoint(state, before, state, after)
    assert all(op["target"] == "messages" for op in ops)
    got_state, got = apply_checkpoint(state, codec.loads(text(before)), codec.loads(text(ops)))
    assert text(got) == text(after) and got_state == state


@given(st.lists(items, min_size=1, max_size=10), st.lists(items, min_size=1, max_size=5), st.booleans())
@settings(max_examples=200, deadline=None)
def test_growth_is_still_an_append(before: list[Any], extra: list[Any], fresh: bool) -> None:
    """Appending (the common case) stays an ``append`` of the new items, also on equal fresh copies."""
    after = (copy.deepcopy(before) if fresh else list(before)) + extra
    assert ca.diff({"l": before}, {"l": after}) == [{"op": "append", "path": ["l"], "value": extra}]


def message(i: int, size: int = 200) -> dict[str, Any]:
    return {"role": "user" if i % 2 else "ai", "content": f"message {i} " + "x" * size, "id": f"m{i}"}


@given(
    n=st.integers(2, 300),
    at=st.integers(0, 10**6),
    kind=st.sampled_from(["replace", "remove", "insert", "summarise"]),
    fresh=st.booleans(),
)
@settings(max_examples=100, deadline=None)
def test_a_delta_is_the_size_of_the_changed_items_not_the_list(n: int, at: int, kind: str, fresh: bool) -> None:
    before = [message(i) for i in range(n)]
    after = copy.deepcopy(before) if fresh else list(before)
    k = at % n
    changed: list[Any] = []
    if kind == "replace":
        after[k] = changed = [message(10_000 + k)]
    elif kind == "remove":
        del after[k]
    elif kind == "insert":
        after.insert(k, message(10_000))
        changed = [after[k]]
    else:  # a summary replaces the first k + 1 messages
        after[: k + 1] = changed = [{"role": "system", "content": "summary"}]
    ops = check({"messages": before}, {"messages": after})
    size = len(text(ops))
    assert size <= len(text(changed)) + 100, (kind, n, k, ops)
    if len(after) - len(changed) >= 2:  # two kept messages outweigh the splice's fields
        assert size < len(text(after)) // 2


def test_the_edits_an_agent_makes_are_splices() -> None:
    """Summarise (drop 40, insert a summary), edit message 7, remove the last tool call, of 500."""
    chat = [message(i) for i in range(500)]
    summary = {"role": "system", "content": "summary of 40 messages"}
    edited = {**chat[7], "content": "edited"}
    cases = [
        ([summary, *chat[40:]], {"at": 0, "remove": 40, "insert": [summary]}),
        ([*chat[:7], edited, *chat[8:]], {"at": 7, "remove": 1, "insert": [edited]}),
        (chat[:-1], {"at": 499, "remove": 1, "insert": []}),
    ]
    for after, value in cases:
        assert ca.diff({"m": chat}, {"m": copy.deepcopy(after)}) == [{"op": "splice", "path": ["m"], "value": value}]
    # nearly everything changed: a set of the new list is smaller than a splice of it
    rewritten = [message(1000 + i) for i in range(500)]
    assert [op["op"] for op in ca.diff({"m": [0, *chat]}, {"m": [0, *rewritten]})] == ["set"]
    assert [op["op"] for op in ca.diff({"m": chat}, {"m": [chat[0], *rewritten]})] == ["splice"]  # one kept item pays
    assert [op["op"] for op in ca.diff({"m": [1, 2]}, {"m": [1]})] == ["set"]  # 3 bytes beat a 31-byte splice


def test_json_twins_are_changes() -> None:
    """A list item (or a value) turned into its JSON twin is a change: 1, 1.0, True; 0.0 and -0.0."""
    for a, b in [(1, True), (1, 1.0), (0.0, -0.0), (-0.0, 0.0), (0, False)]:
        chat = [message(i) for i in range(10)]
        old, new = {"m": [*chat, a, *chat], "v": a}, {"m": [*chat, b, *chat], "v": b}
        ops = check(old, new)
        assert [op["op"] for op in ops] == ["splice", "set"], (a, b)
        assert ops[0]["value"] == {"at": 10, "remove": 1, "insert": [b]}


def splice(value: Any) -> list[dict[str, Any]]:
    return [{"op": "splice", "path": ["m"], "value": value}]


@pytest.mark.parametrize(
    "value",
    [
        None,
        [0, 1, []],
        {"at": 0, "remove": 0},  # a key missing
        {"at": 0, "remove": 0, "insert": [], "more": 1},  # a key too many
        {"at": -1, "remove": 0, "insert": []},
        {"at": 0, "remove": -1, "insert": []},
        {"at": 4, "remove": 0, "insert": []},  # past the end of the 3 items
        {"at": 2, "remove": 2, "insert": []},
        {"at": 10**30, "remove": 0, "insert": []},
        {"at": True, "remove": 0, "insert": []},  # a bool is not an index
        {"at": 0, "remove": 1.0, "insert": []},
        {"at": "0", "remove": 0, "insert": []},
        {"at": 0, "remove": 0, "insert": "abc"},
        {"at": 0, "remove": 0, "insert": {"0": 1}},
    ],
)
def test_a_hostile_splice_is_a_one_line_broken_chain(value: Any) -> None:
    base = {"m": [1, 2, 3], "s": "x"}
    for delta, run in [
        (splice(value), lambda d: ca.apply(base, d)),
        (
            [{**splice(value)[0], "target": "messages", "path": ["messages"]}],
            lambda d: apply_checkpoint({}, [1, 2, 3], d),
        ),
    ]:
        with pytest.raises(ca.BrokenChain) as err:
            run(delta)
        assert "\n" not in str(err.value) and "splice" in str(err.value)
    with pytest.raises(ca.BrokenChain, match="not a list"):
        ca.apply(base, [{"op": "splice", "path": ["s"], "value": {"at": 0, "remove": 0, "insert": []}}])
    assert base == {"m": [1, 2, 3], "s": "x"}


def test_a_splice_at_either_end_applies() -> None:
    base = {"m": [1, 2, 3]}
    assert ca.apply(base, splice({"at": 3, "remove": 0, "insert": [4]})) == {"m": [1, 2, 3, 4]}
    assert ca.apply(base, splice({"at": 0, "remove": 3, "insert": []})) == {"m": []}
    assert ca.apply(base, splice({"at": 1, "remove": 1, "insert": [[9], {"a": 1}]})) == {"m": [1, [9], {"a": 1}, 3]}
