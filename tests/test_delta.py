"""The delta engine: apply(a, diff(a, b)) == b for arbitrary JSON, and the ops it chooses."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive.delta import json_equal

scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner, max_size=5),
    max_leaves=25,
)
states = st.dictionaries(st.text(max_size=5), json_values, max_size=6)


@given(states, states)
@settings(max_examples=200, deadline=None)
def test_apply_diff_round_trip(a: dict[str, Any], b: dict[str, Any]) -> None:
    before = copy.deepcopy(a)
    result = ca.apply(a, ca.diff(a, b))
    assert json_equal(result, b)
    assert json_equal(a, before), "apply must not mutate its input"


@given(states, st.lists(json_values, max_size=4))
def test_list_growth_stores_only_the_suffix(a: dict[str, Any], extra: list[Any]) -> None:
    old = {**a, "messages": [1, {"x": "y"}]}
    new = {**a, "messages": [1, {"x": "y"}, *extra]}
    ops = ca.diff(old, new)
    if extra:
        assert ops == [{"op": "append", "path": ["messages"], "value": extra}]
    else:
        assert ops == []


def test_ops_are_minimal_and_nested() -> None:
    old = {"a": 1, "gone": True, "doc": {"x": {"deep": 1, "keep": [1, 2]}, "y": 2}}
    new = {"a": 1, "doc": {"x": {"deep": 2, "keep": [1, 2]}, "y": 2}, "new": "v"}
    assert ca.diff(old, new) == [
        {"op": "del", "path": ["gone"], "value": None},
        {"op": "set", "path": ["doc", "x", "deep"], "value": 2},
        {"op": "set", "path": ["new"], "value": "v"},
    ]


def test_json_types_kept_apart() -> None:
    assert ca.diff({"a": 1}, {"a": True}) == [{"op": "set", "path": ["a"], "value": True}]
    assert ca.diff({"a": 1}, {"a": 1.0}) == [{"op": "set", "path": ["a"], "value": 1.0}]
    assert ca.diff({"a": [1]}, {"a": [True, 2]}) == [{"op": "set", "path": ["a"], "value": [True, 2]}]


@pytest.mark.parametrize(
    "delta",
    [
        [{"op": "explode", "path": ["a"]}],
        [{"op": "set", "path": []}],
        [{"op": "del", "path": ["missing"]}],
        [{"op": "append", "path": ["a"], "value": [1]}],
        [{"op": "set", "path": ["a", "b"], "value": 1}],
        [{"op": [], "path": ["a"]}],  # unhashable op names
        [{"op": {"set": 1}, "path": ["a"]}],
        [["set", ["a"], 1]],  # an op that is not an object
        [None],
    ],
)
def test_bad_delta_is_a_typed_error(delta: list[dict[str, Any]]) -> None:
    with pytest.raises(ca.BrokenChain):
        ca.apply({"a": 1}, delta)


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        ([1], [1, 2], "append"),
        ([1], [12, 3], "set"),  # a number that starts like the old one is not the old one
        ([True], [1, 2], "set"),  # JSON types stay apart
        ([1.0], [1, 2], "set"),
        (["a,b"], ["a", "b", "c"], "set"),
        ([{"k": [1]}], [{"k": [1]}, {"k": [2]}], "append"),
        ([{"k": [1]}], [{"k": [1, 2]}, {}], "set"),
        ([[1], 2], [[1], 2, 3, 4], "append"),
        ([], [1], "append"),  # an empty list grows by an append too
        ([1, 2], [1, 2], None),
        ([1, 2], [1], "set"),
    ],
)
def test_list_diff_appends_only_when_the_old_items_lead(before: list[Any], after: list[Any], kind: str | None) -> None:
    ops = ca.diff({"l": before}, {"l": after})
    assert [op["op"] for op in ops] == ([kind] if kind else [])
    assert json_equal(ca.apply({"l": before}, ops), {"l": after})
    if kind == "append":
        assert ops[0]["value"] == after[len(before) :]


def test_a_list_that_shares_its_items_with_the_old_one_is_an_append() -> None:
    """Items that are the very objects of the old list are the old items (no text needed to tell)."""
    first, second = {"role": "user", "content": "hi"}, {"role": "ai", "content": "hello"}
    old = {"messages": [first]}
    new = {"messages": [first, second]}
    assert ca.diff(old, new) == [{"op": "append", "path": ["messages"], "value": [second]}]
    assert ca.diff(new, {"messages": [first, second]}) == []
    assert ca.diff(new, {"messages": [second, first]})[0]["op"] == "set"
    assert ca.apply(old, ca.diff(old, new)) == new
