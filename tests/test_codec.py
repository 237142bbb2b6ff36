"""Codec pieces with an invariant of their own."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
