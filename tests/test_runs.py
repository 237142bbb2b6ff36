"""Provenance of list items and run tables (``format.runs``, design note 008 steps 3-5; not wired yet).

The invariant: the provenance the delta engine computes beside a content (``runs.provenance`` over a
record's history rows, ``diff_checkpoint(base, content)``) names, for every list item that has one,
the op of a record of the lineage that inserted exactly that item; so a run table built from it
(``runs.split``) joins back (``runs.join``) into exactly the content, also after a JSON round trip,
whatever the list edits (append, splice, set of the list, set/del of an enclosing key) and wherever
the chain was re-rooted. What a forged or damaged table does is refused with a typed error.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from ckpt_archive import codec, limits
from ckpt_archive.delta import Delta, diff_checkpoint, json_equal
from ckpt_archive.errors import BrokenChain, ObjectTooLarge, TruncatedObject
from ckpt_archive.format import runs

Content = tuple[dict[str, Any], list[Any]]
WHERE = {"thread_id": "t", "checkpoint_id": "c"}

item = st.one_of(st.integers(-3, 3), st.text("ab", max_size=3), st.fixed_dictionaries({"m": st.integers(0, 9)}))
items = st.lists(item, max_size=6)
# one edit of a content: (what, where, value...)
edit = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(["top", "nested", "messages"]), items),
    st.tuples(
        st.just("splice"), st.sampled_from(["top", "nested", "messages"]), st.integers(0, 40), st.integers(0, 5), items
    ),
    st.tuples(st.just("set-list"), st.sampled_from(["top", "nested", "messages"]), items),
    st.tuples(st.just("set-enclosing"), st.just("nested"), items),
    st.tuples(st.just("del-enclosing"), st.just("nested"), st.just([])),
    st.tuples(st.just("scalar"), st.just("n"), st.integers(0, 9)),
)
# a record: its edits, and whether its chain is re-rooted there (its base the empty content)
record = st.tuples(st.lists(edit, max_size=3), st.booleans())


def _lists(content: Content) -> dict[str, list[Any]]:
    state, messages = content
    return {"top": state.get("top", []), "nested": state.get("box", {}).get("in", []), "messages": messages}


def _edited(content: Content, edits: list[tuple[Any, ...]]) -> Content:
    state, messages = codec.loads(codec.dumps(content[0])), list(content[1])
    for kind, where, *args in edits:
        current = _lists((state, messages))[where] if where in ("top", "nested", "messages") else []
        if kind == "append":
            new = current + args[0]
        elif kind == "splice":
            at = min(args[0], len(current))
            new = current[:at] + args[2] + current[at + min(args[1], len(current) - at) :]
        elif kind == "set-list":
            new = args[0]
        elif kind == "set-enclosing":
            state["box"] = {"in": list(args[0]) * 9, "k": 1}
            continue
        elif kind == "del-enclosing":
            state.pop("box", None)
            continue
        else:
            state["n"] = args[0]
            continue
        if where == "top":
            state["top"] = new
        elif where == "nested":
            state.setdefault("box", {})["in"] = new
        else:
            messages = new
    return state, messages


def _resolver(lineage: list[str], rows: dict[str, Delta]) -> Any:
    def rows_of(d: int) -> tuple[Delta, tuple[runs.Target, ...]]:
        if d >= len(lineage):
            raise BrokenChain("a run reaches past the lineage", **WHERE)
        ops = rows[lineage[d]]
        return ops, runs.targets(ops)

    return rows_of


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record, min_size=1, max_size=12), st.integers(0, 4))
def test_runs_resolve_to_exactly_the_content(records: list[tuple[list[Any], bool]], least: int) -> None:
    content: Content = ({}, [])
    prov: runs.Prov = runs.EMPTY
    lineage: list[str] = []
    rows: dict[str, Delta] = {}
    for n, (edits, reroot) in enumerate(records):
        rid = f"r{n}"
        new = _edited(content, edits)
        base, base_prov = (({}, []), runs.EMPTY) if reroot or not lineage else (content, prov)
        ops = diff_checkpoint(*base, *new)
        rows[rid] = codec.loads(codec.dumps(ops))  # as stored
        prov = runs.provenance(base_prov, rid, rows[rid])
        lineage = [rid] if reroot or not lineage else [rid, *lineage]
        content = new
        # provenance mirrors the content, and each token names the op of the lineage that inserted the item
        for where, values in _lists(content).items():
            marks = _lists(prov)[where]
            assert len(marks) == len(values)
            for value, mark in zip(values, marks, strict=True):
                if mark is not None:
                    got = runs.inserted(rows[mark[0]][mark[1]])
                    assert mark[0] in lineage and got is not None and json_equal(got[mark[2]], value)
        stub, table, message_table = runs.split(content, prov, lineage, least=least)
        stored = codec.loads(codec.dumps({"s": stub[0], "m": stub[1], "t": table, "mt": message_table}))
        joined = runs.join((stored["s"], stored["m"]), (stored["t"], stored["mt"]), _resolver(lineage, rows), WHERE)
        assert codec.dumps(joined) == codec.dumps(content)
        assert runs.reach((stored["t"], stored["mt"]), WHERE) <= len(lineage)


def test_an_appended_chat_is_one_run_per_record_named_by_distance() -> None:
    """W1's shape: each record appends one message; its snapshot's table names each by its distance."""
    content: Content = ({"messages": []}, [])
    prov, lineage, rows = runs.EMPTY, [], {}
    for n in range(40):
        new = ({"messages": [*content[0]["messages"], {"i": n}], "step": n}, [])
        rows[f"r{n}"] = diff_checkpoint(*(content if n else ({}, [])), *new)
        prov = runs.provenance(prov, f"r{n}", rows[f"r{n}"])
        lineage.insert(0, f"r{n}")
        content = new
    stub, table, _ = runs.split(content, prov, lineage)
    assert stub[0]["messages"] == [] and table['["messages"]'][0] == [39, 0, 0, 1]
    assert table['["messages"]'][-1][0] == 0 and len(table['["messages"]']) == 40
    assert runs.join(stub, (table, {}), _resolver(lineage, rows), WHERE) == content
    assert runs.reach((table, {}), WHERE) == 40


def _chat() -> tuple[Content, runs.Table, list[str], dict[str, Delta]]:
    ops: Delta = [{"op": "set", "path": ["messages"], "value": list(range(40))}]
    prov = runs.provenance(runs.EMPTY, "r0", ops)
    content: Content = ({"messages": list(range(40))}, [])
    stub, table, _ = runs.split(content, prov, ["r0"])
    assert table == {'["messages"]': [[0, 0, 0, 40]]}
    return stub, table, ["r0"], {"r0": ops}


@pytest.mark.parametrize(
    "entry",
    [[0, 0, 1, 40], [0, 1, 0, 1], [0, 0, 0, 0]],
    ids=["too-many-items", "no-such-op", "empty-run"],
)
def test_a_run_naming_items_its_record_did_not_insert_is_a_broken_chain(entry: list[int]) -> None:
    stub, _, lineage, rows = _chat()
    with pytest.raises(BrokenChain):
        runs.join(stub, ({'["messages"]': [entry]}, {}), _resolver(lineage, rows), WHERE)


def test_a_run_into_another_list_is_a_broken_chain() -> None:
    """An op gives items only to the list at its own path (and target): not to the messages."""
    stub, table, lineage, rows = _chat()
    with pytest.raises(BrokenChain):
        runs.join((stub[0], []), ({}, table), _resolver(lineage, rows), WHERE)


def test_a_run_past_the_lineage_is_a_broken_chain() -> None:
    stub, _, lineage, rows = _chat()
    with pytest.raises(BrokenChain):
        runs.join(stub, ({'["messages"]': [[1, 0, 0, 1]]}, {}), _resolver(lineage, rows), WHERE)


@pytest.mark.parametrize(
    "entries",
    [[[0, 0, -1, 1]], [[0, 0, True, 1]], [[0, 0]], [{"items": 1}], [{"items": [], "x": 1}], ["x"]],
)
def test_malformed_entries_are_truncated_objects(entries: list[Any]) -> None:
    stub, _, lineage, rows = _chat()
    with pytest.raises(TruncatedObject):
        runs.join(stub, ({'["messages"]': entries}, {}), _resolver(lineage, rows), WHERE)
    with pytest.raises(TruncatedObject):
        runs.reach(({'["messages"]': entries},), WHERE)


def test_a_table_that_does_not_fit_its_content_is_a_truncated_object() -> None:
    stub, table, lineage, rows = _chat()
    for bad in ({"messages": [1]}, {"messages": 3}, {}):
        with pytest.raises(TruncatedObject):
            runs.join((bad, []), (table, {}), _resolver(lineage, rows), WHERE)
    with pytest.raises(BrokenChain):  # its runs name items inserted into another list
        runs.join(stub, ({'["messages", "x"]': table['["messages"]']}, {}), _resolver(lineage, rows), WHERE)


def test_a_table_naming_one_run_a_million_times_is_refused_before_it_is_built() -> None:
    """A small table may name one run over and over: refused by the count, like a page table."""
    stub, table, lineage, rows = _chat()
    times = limits.STATE_VALUES // 40 + 1
    with pytest.raises(ObjectTooLarge):
        runs.join(stub, ({'["messages"]': table['["messages"]'] * times}, {}), _resolver(lineage, rows), WHERE)
