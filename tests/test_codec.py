"""Codec pieces with an invariant of their own."""

from __future__ import annotations

import copy
import enum
import hashlib
from datetime import datetime
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive import codec

# each step turns the previous input into the next: grow it, change a byte, cut it, or start afresh
_edits = st.one_of(
    st.tuples(st.just("grow"), st.binary(max_size=40)),
    st.tuples(st.just("poke"), st.tuples(st.integers(min_value=0), st.binary(min_size=1, max_size=3))),
    st.tuples(st.just("cut"), st.integers(min_value=0)),
    st.tuples(st.just("new"), st.binary(max_size=100)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_edits, max_size=60))
def test_prefix_hasher_is_sha256_of_every_input(edits: list[tuple[str, Any]]) -> None:
    hasher = codec.PrefixHasher(step=8)  # tiny steps: every path (resume, re-save, shrink) is taken
    current = b""
    for kind, arg in edits:
        if kind == "grow":
            current += arg
        elif kind == "poke" and current:
            at = arg[0] % len(current)
            current = current[:at] + arg[1] + current[at + 1 :]
        elif kind == "cut":
            current = current[: arg % (len(current) + 1)]
        elif kind == "new":
            current = arg
        assert hasher.hexdigest(current) == hashlib.sha256(current).hexdigest()


@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 3 * 65536])
def test_prefix_hasher_on_step_boundaries(size: int) -> None:
    data = bytes(range(256)) * (size // 256 + 1)
    hasher = codec.PrefixHasher()
    for n in (size, size + 1, size, max(size - 1, 0), size + 65536):
        assert hasher.hexdigest(data[:n]) == hashlib.sha256(data[:n]).hexdigest()


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63) + 1, 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_json)
def test_json_copy_raw_gives_the_canonical_bytes(value: Any) -> None:
    copy, raw = codec.json_copy_raw(value)
    assert raw == codec.dumps(value) and codec.loads(raw) == copy


class _Level(enum.IntEnum):
    ONE = 1


class _Dict(dict[str, Any]):
    pass


# values JSON text cannot tell from a plain one; the round trip check must refuse or keep each as today
_odd = st.sampled_from(
    [(1, 2), [1, 2], float("nan"), None, _Level.ONE, 1, 1.0, True, "x", _Dict(a=1), {"a": 1}, datetime(2026, 1, 1)]
).map(copy.deepcopy)  # a fresh object per draw: the test mutates what it drew (a shared one made hypothesis flaky)


_STEPS = ["append", "append", "grow-copy", "set", "odd", "odd-set", "poke", "drop", "key"]
_keys = st.text(max_size=3) | st.sampled_from(["\ud800", "\u00e9", "\U0001f600", "Z", "", "\x00", 1, ("t",)])


def _containers(value: Any) -> list[Any]:
    out, todo = [], [value]
    while todo:
        v = todo.pop()
        if isinstance(v, dict | list):
            out.append(v)
            todo.extend(v.values() if isinstance(v, dict) else v)
    return out


def _exact(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(_exact(a[k], b[k]) for k in a)  # key order too
    if type(a) is list:
        return len(a) == len(b) and all(map(_exact, a, b))
    return bool(a == b)


def _round_trip(value: Any) -> tuple[Any, bytes] | None:
    """The definition ``json_copy_raw`` implements: (copy, bytes) when the value survives JSON exactly."""
    try:
        raw = codec.dumps(value)
    except TypeError:
        return None
    copy = orjson.loads(raw)
    return (copy, raw) if copy == value else None


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_json_copy_with_a_slot_is_the_plain_round_trip_check(data: st.DataObject) -> None:
    """A series of mostly-growing states, mutated in place or not, some with values JSON cannot hold:
    with a slot, every outcome (refusal, copy, bytes) is the one without, and the copy is private."""
    codec._copies.put(("state", "prop"), b"", None, {})  # nothing from earlier examples
    state: dict[Any, Any] = {"log": [], "meta": {"n": 0, "tags": []}}
    for _ in range(data.draw(st.integers(1, 12))):
        kind = data.draw(st.sampled_from(_STEPS))
        where = data.draw(st.sampled_from([("log",), ("meta", "tags"), ("meta", "deep")]))
        parent = state if len(where) == 1 else state["meta"]
        target = parent.get(where[-1])
        if kind == "append" and isinstance(target, list):
            target.append(data.draw(_json))  # in place: the slot's copy must not follow
        elif kind == "grow-copy" and isinstance(target, list):
            parent[where[-1]] = [*target, data.draw(_json)]
        elif kind == "set":
            parent[where[-1]] = data.draw(_json)
        elif kind == "odd-set":
            parent[where[-1]] = data.draw(_odd)
        elif kind == "odd":
            parent[where[-1]] = [*(target if isinstance(target, list) else []), data.draw(_odd)]
        elif kind == "poke" and isinstance(target, list) and target:
            target[data.draw(st.integers(0, len(target) - 1))] = data.draw(_odd)
        elif kind == "drop":
            parent.pop(where[-1], None)
        elif kind == "key":  # top-level keys in any order, some that sort oddly or are not valid
            state[data.draw(_keys)] = data.draw(_json)
        expected = _round_trip(state)
        if expected is None:
            with pytest.raises(ca.InvalidState):
                codec.json_copy_raw(state, series="prop")
            continue
        copy, raw = codec.json_copy_raw(state, series="prop")
        assert raw == expected[1] and _exact(copy, expected[0])
        mine = {id(c) for c in _containers(state)}
        assert not any(id(c) in mine for c in _containers(copy))


@pytest.mark.parametrize("bad", [{1: "a"}, {("t",): 1}, {"a": 1, 2: "b"}, {"\ud800": 1}])
def test_a_slot_never_lets_a_key_json_cannot_hold_through(bad: dict[Any, Any]) -> None:
    codec.json_copy_raw({"a": 1}, series="keys")  # the slot has a copy to build on
    with pytest.raises(ca.InvalidState, match="key"):
        codec.json_copy_raw(bad, series="keys")


def test_the_copies_kept_for_slots_are_bounded() -> None:
    copies = codec._Copies(slots=3, max_bytes=100)
    for i in range(5):
        copies.put(i, b"x" * 10, [i], {})
    assert [copies.get(i) is not None for i in range(5)] == [False, False, True, True, True]  # oldest go first
    copies.put(2, b"x" * 40, [2], {})  # replacing an entry counts its new size only
    copies.put(5, b"x" * 45, [5], {})
    assert copies.get(3) is None and copies.get(2) is not None  # 4: 10 + 2: 40 + 5: 45 <= 100
    copies.put(6, b"x" * 51, [6], {})  # more than half the budget: not kept, and nothing evicted for it
    assert copies.get(6) is None and copies.get(5) is not None
    copies.put(5, b"x" * 51, [5], {})  # an entry that grew past it is dropped, not left stale
    assert copies.get(5) is None
