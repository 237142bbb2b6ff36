"""The format's commit actions (``format/actions.py``): one constructor per action the spec lists, of
exactly the shape the spec gives, the one list of names the fold checks against, and no action written
by hand anywhere else in the package."""

from __future__ import annotations

import ast
import pathlib
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckpt_archive.errors import UnsupportedFormatVersion
from ckpt_archive.format import actions as A
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import Manifest, unseal

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ckpt_archive"
SPEC = (ROOT / "docs" / "format" / "spec.md").read_text()
T = "t"
SHA = "a" * 64


def spec_shapes() -> dict[str, set[str]]:
    """Action name -> the top-level keys of its shape, from every ``{"action": ...}`` the spec lists
    (sections 6 and 10)."""
    shapes: dict[str, set[str]] = {}
    for span in re.findall(r'^- `(\{"action": "\w+".*?\})` —', SPEC, flags=re.M | re.S):
        depth, keys, after_colon = 0, [], False
        for tok in re.finditer(r'"([^"]*)"|[{}\[\]:,]', span):
            text = tok.group(0)
            if text in "{[":
                depth += 1
            elif text in "}]":
                depth -= 1
            elif text == ":":
                after_colon = True
                continue
            elif text == ",":
                pass
            elif depth == 1 and not after_colon:
                keys.append(tok.group(1))
            after_colon = False
        name = re.match(r'\{"action": "(\w+)"', span)
        assert name is not None
        shapes[name.group(1)] = set(keys)
    return shapes


def record(cid: str, *, kind: str = "full", ref: dict[str, Any] | None = None, parent: str | None = None) -> dict:
    ref = ref or {"type": "snapshot", "key": layout.snapshot_key(T, 0, cid), "sha256": SHA, "size": 10}
    return {
        "id": cid,
        "parent": parent,
        "step": 0,
        "kind": kind,
        "depth": 0 if kind == "full" else 1,
        "created_at": "2026-01-01T00:00:00+00:00",
        "metadata": {},
        "fields": {},
        "ref": ref,
        "bytes": 10,
        "version": 1,
        "state_sha256": SHA,
        "messages_sha256": SHA,
    }


def one_of_each() -> list[A.Action]:
    """Every constructor once, each action valid in this order."""
    snap = layout.snapshot_key(T, 0, "a")
    seg = layout.segment_key(T, 1, "0" * 16)
    return [
        A.add(record("a")),
        A.add(record("b", kind="delta", ref={"type": "inline"}, parent="a"), [{"op": "set", "path": ["x"], "v": 1}]),
        A.add(record("c", kind="delta", ref={"type": "empty"}, parent="b")),
        A.compact(seg, SHA, 99, {"b": (0, 40)}, ["c"]),
        A.pin("a", {"ckpt_archive.pinned": True}),
        A.rebase("b", A.snapshot_fields({"type": "snapshot", "key": snap, "sha256": SHA, "size": 5}, 5, {})),
        A.edit("a", A.snapshot_fields({"type": "snapshot", "key": snap, "sha256": SHA, "size": 6}, 6, {}), 2),
        A.remove(["c"]),
        A.tombstone({seg: 99}, "2026-01-02T00:00:00+00:00"),
        A.purge([seg]),
    ]


def test_the_names_are_the_specs() -> None:
    assert set(A.ACTIONS) == set(spec_shapes()) == {"add", "compact", "remove", "update", "tombstone", "purge"}
    assert {a["action"] for a in one_of_each()} == set(A.ACTIONS)


@pytest.mark.parametrize("action", one_of_each(), ids=lambda a: a["action"])
def test_each_constructor_writes_the_specs_shape(action: A.Action) -> None:
    shape = spec_shapes()[action["action"]]
    if action["action"] == "add" and action["record"]["ref"]["type"] != "inline":
        shape = shape - {"ops"}  # "ops is present iff record.ref.type == inline"
    assert set(action) == shape


def test_update_shapes() -> None:
    """The re-base, edit and pin shapes of spec.md section 10."""
    ref = {"type": "snapshot", "key": layout.snapshot_key(T, 3, "x"), "sha256": SHA, "size": 7}
    fields = A.snapshot_fields(ref, 7, {"state_sha256": SHA, "messages_sha256": SHA})
    assert A.rebase("x", fields) == {"action": "update", "id": "x", "set": fields}
    assert fields == {"kind": "full", "depth": 0, "ref": ref, "bytes": 7, "state_sha256": SHA, "messages_sha256": SHA}
    assert A.edit("x", fields, 3)["set"] == {**fields, "version": 3}
    assert "version" not in fields  # the re-base fields are left as they were
    assert A.pin("x", {"k": 1}) == {"action": "update", "id": "x", "set": {"metadata": {"k": 1}}}
    assert A.purge(iter(["k"])) == {"action": "purge", "keys": ["k"]}


def test_constructors_refuse_what_the_spec_rules_out() -> None:
    with pytest.raises(ValueError, match="no ops"):
        A.add(record("a"), [])
    with pytest.raises(ValueError, match="cannot set"):
        A.update("a", {"parent": "b"})  # a reader ignores it: never written
    with pytest.raises(ValueError, match="full snapshot"):
        A.rebase("a", {"metadata": {}})
    assert A.add(record("b", kind="delta", ref={"type": "inline"}, parent="a"))["ops"] == []


def entry(m: Manifest, actions: list[A.Action]) -> dict[str, Any]:
    return unseal(m.commit_entry(actions), "test", kind="commit entry")


def test_the_fold_reads_every_action_written() -> None:
    m = Manifest(T)
    for action in one_of_each():
        m.apply_entry(entry(m, [action]))
    assert list(m.records) == ["a", "b"] and m.head == "b"
    assert m.records["a"]["version"] == 2 and m.records["a"]["metadata"] == {"ckpt_archive.pinned": True}
    assert m.records["b"]["kind"] == "full" and not m.inline and not m.tombstones


@pytest.mark.parametrize("name", ["ad", "Add", "delete", ""])
def test_the_fold_refuses_any_other_name(name: str) -> None:
    m = Manifest(T)
    doc = entry(m, [A.add(record("a"))])
    doc["actions"].append({"action": name})
    with pytest.raises(UnsupportedFormatVersion, match="unknown action"):
        m.apply_entry(doc)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["save", "delta", "empty", "compact", "remove", "pin"]), max_size=12))
def test_folding_what_the_constructors_build(steps: list[str]) -> None:
    """Any history built from the constructors, each entry sealed and read back, folds to what the
    spec says (a model: records in commit order, the head, the inline deltas)."""
    m = Manifest(T)
    order: list[str] = []
    inline: set[str] = set()
    for i, step in enumerate(steps):
        cid, head = f"c{i}", m.head
        if step == "save" or head is None:
            action: A.Action = A.add(record(cid))
            order.append(cid)
        elif step in ("delta", "empty"):
            ref = {"type": "inline" if step == "delta" else "empty"}
            ops = [{"op": "set", "path": ["n"], "v": i}] if step == "delta" else None
            action = A.add(record(cid, kind="delta", ref=ref, parent=head), ops)
            order.append(cid)
            inline |= {cid} if step == "delta" else set()
        elif step == "compact":
            action = A.compact(layout.segment_key(T, i, "0" * 16), SHA, 9, {c: (0, 1) for c in sorted(inline)}, [])
            inline = set()
        elif step == "remove":
            action = A.remove([head])
            order.remove(head)
            inline.discard(head)
        else:
            action = A.pin(head, {"ckpt_archive.pinned": True})
        m.apply_entry(entry(m, [action]))
        assert list(m.records) == order and set(m.inline) == inline
        assert m.head == (order[-1] if order else None)


def test_no_action_is_written_by_hand() -> None:
    """Every commit action in the package is built by a constructor of ``format/actions.py``: no dict
    display with an ``"action"`` key anywhere else."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "format" / "actions.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "action" for k in node.keys
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
