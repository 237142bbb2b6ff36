"""diff/apply between two JSON states: the one delta engine every checkpointer uses.

A delta is a list of operations, each ``{"op", "path", "value"}``:

* ``set``    -- replace (or create) the value at ``path``;
* ``del``    -- remove the key at ``path``;
* ``append`` -- extend the list at ``path`` by ``value`` (a list). A list that
  grew by appending (chat history) therefore costs each new element once;
* ``splice`` -- edit the list at ``path`` in place: ``value`` is
  ``{"at": i, "remove": r, "insert": [items]}``, and the list becomes
  ``list[:i] + insert + list[i + r:]``. A list cut, summarised (a prefix replaced by
  one item), or with an item replaced or removed costs only the items that changed,
  so every item enters the history once however the list is edited.

``path`` is the list of dict keys from the state's root. An op may carry
``"target": "messages"``: it then applies to the checkpoint's message list seen
as the document ``{"messages": [...]}`` (so a growing list is an ``append`` of
the new messages); ops without a target apply to the state. Nested dicts are
diffed recursively, so changing one field of a large sub-document stores one
op. Equality is JSON equality: ``True`` differs from ``1`` and ``1`` from ``1.0``,
which Python's ``==`` would conflate.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable
from itertools import islice
from typing import Any

from .codec import dumps, extends
from .errors import BrokenChain

Op = dict[str, Any]
Delta = list[Op]
OPS = frozenset({"set", "del", "append", "splice"})
SPLICE_KEYS = frozenset({"at", "remove", "insert"})
MESSAGES = "messages"
_WALK_KEYS = 32


def json_equal(a: Any, b: Any) -> bool:
    """Equality that keeps JSON's types apart (bool vs int vs float), at C speed.

    Canonical JSON texts are equal exactly when the values are equal as JSON.
    """
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if type(a) is float:  # 0.0 == -0.0, but their JSON texts (and what a load gives back) differ
        return bool(a == b) and math.copysign(1.0, a) == math.copysign(1.0, b)
    if type(a) is not dict and type(a) is not list:
        return bool(a == b)
    return dumps(a) == dumps(b)


def diff(old: dict[str, Any], new: dict[str, Any]) -> Delta:
    """Operations that turn ``old`` into ``new`` (``apply(old, diff(old, new)) == new``)."""
    ops: Delta = []
    _diff_dict(old, new, [], ops)
    return ops


def _diff_dict(old: dict[str, Any], new: dict[str, Any], path: list[str], ops: Delta) -> None:
    for key in old:
        if key not in new:
            ops.append({"op": "del", "path": [*path, key], "value": None})
    for key, value in new.items():
        if key not in old:
            ops.append({"op": "set", "path": [*path, key], "value": value})
            continue
        before = old[key]
        if before is value:
            continue
        sub = [*path, key]
        if type(before) is list and type(value) is list:
            _diff_list(before, value, sub, ops)
            continue
        both = type(before) is dict and type(value) is dict and value
        if both and len(value) <= _WALK_KEYS:  # walking a small dict beats serialising both sides whole
            _diff_dict(before, value, sub, ops)
        elif json_equal(before, value):
            continue
        elif both:
            _diff_dict(before, value, sub, ops)
        else:
            ops.append({"op": "set", "path": sub, "value": value})


def _diff_list(before: list[Any], value: list[Any], path: list[str], ops: Delta) -> None:
    """Nothing, an ``append``, a ``splice`` or a ``set``: the cheapest op that turns ``before`` into ``value``.

    The common case costs no serialisation (the new list starts with the very objects of the old one,
    or the old one is empty: an append of the new items); then one canonical text of each list tells equal lists and an
    extension apart (``codec.extends``). Only a list edited in place pays one more pass, item by item
    from each end (identity first, then the item's text), for the common prefix ``p`` and suffix
    ``s``: a ``splice`` at ``p`` of the items in between, unless a ``set`` of the new list is smaller
    (nearly every item changed)."""
    if len(value) >= len(before) and all(map(operator.is_, before, value)):  # same objects (or none): same JSON
        if len(value) > len(before):
            ops.append({"op": "append", "path": path, "value": value[len(before) :]})
        return
    old, new = dumps(before), dumps(value)
    if old == new:
        return
    if extends(old, new):
        ops.append({"op": "append", "path": path, "value": value[len(before) :]})
        return
    if before and value:
        edit = _splice(before, value)
        if edit["remove"] < len(before) and len(dumps(edit)) < len(new):  # some item kept, and smaller
            ops.append({"op": "splice", "path": path, "value": edit})
            return
    ops.append({"op": "set", "path": path, "value": value})


def _common(before: Iterable[Any], value: Iterable[Any], limit: int) -> int:
    """How many leading items of two sequences (at most ``limit``) are equal as JSON: identity first
    (shared objects, the usual case, cost no text), then the items' canonical texts."""
    count = 0
    for a, b in islice(zip(before, value, strict=False), limit):
        if a is not b and (type(a) is not type(b) or dumps(a) != dumps(b)):
            break
        count += 1
    return count


def _splice(before: list[Any], value: list[Any]) -> dict[str, Any]:
    """The splice value turning ``before`` into ``value``: around the longest common prefix and suffix."""
    n, m = len(before), len(value)
    p = _common(before, value, min(n, m))
    s = _common(reversed(before), reversed(value), min(n, m) - p)
    return {"at": p, "remove": n - p - s, "insert": value[p : m - s]}


def apply(old: dict[str, Any], delta: Delta) -> dict[str, Any]:
    """Apply ``delta`` to ``old`` without mutating it (containers on touched paths are copied)."""
    root = dict(old)
    copied: set[int] = {id(root)}
    for op in delta:
        kind, path = (op.get("op"), op.get("path")) if isinstance(op, dict) else (None, None)
        if not isinstance(kind, str) or kind not in OPS or not isinstance(path, list) or not path:
            raise BrokenChain(f"delta has a malformed operation: {_short(op)}")
        parent = root
        for key in path[:-1]:
            child = parent.get(key) if isinstance(key, str) else None
            if type(child) is not dict:
                raise BrokenChain(f"delta path {path!r} does not exist in the base state")
            if id(child) not in copied:
                child = dict(child)
                copied.add(id(child))
                parent[key] = child
            parent = child
        last = path[-1]
        if not isinstance(last, str):
            raise BrokenChain(f"delta path {path!r} has a non-string key")
        if kind == "set":
            parent[last] = op.get("value")
        elif kind == "del":
            if last not in parent:
                raise BrokenChain(f"delta removes {path!r}, which the base state does not have")
            del parent[last]
        elif kind == "append":
            current, extra = parent.get(last), op.get("value")
            if type(current) is not list or type(extra) is not list:
                raise BrokenChain(f"delta appends to {path!r}, which is not a list in the base state")
            parent[last] = current + extra
        else:
            parent[last] = _spliced(parent.get(last), op.get("value"), path)
    return root


def _spliced(current: Any, edit: Any, path: list[str]) -> list[Any]:
    """``current`` edited by a splice value, which must fit it: ``at`` and ``remove`` non-negative ints
    (not bools) within the list, ``insert`` a list, and no other key."""
    if type(current) is not list:
        raise BrokenChain(f"delta splices {path!r}, which is not a list in the base state")
    if type(edit) is not dict or edit.keys() != SPLICE_KEYS:
        raise BrokenChain(f"delta splices {path!r} with a malformed value: {_short(edit)}")
    at, remove, insert = edit["at"], edit["remove"], edit["insert"]
    if type(at) is not int or type(remove) is not int or type(insert) is not list:
        raise BrokenChain(f"delta splices {path!r} with a malformed value: {_short(edit)}")
    if at < 0 or remove < 0 or at + remove > len(current):
        raise BrokenChain(
            f"delta splices {path!r} at {at} removing {remove}, outside the base state's list of {len(current)}"
        )
    return current[:at] + insert + current[at + remove :]


def _short(op: Any) -> str:
    text = repr(op)
    return text if len(text) <= 200 else text[:200] + "..."


def diff_checkpoint(
    old_state: dict[str, Any], old_messages: list[Any], new_state: dict[str, Any], new_messages: list[Any]
) -> Delta:
    """State ops, then message ops (tagged ``target: messages``) between two checkpoints' content."""
    ops = diff(old_state, new_state)
    ops.extend({**op, "target": MESSAGES} for op in diff({MESSAGES: old_messages}, {MESSAGES: new_messages}))
    return ops


def apply_checkpoint(state: dict[str, Any], messages: list[Any], delta: Delta) -> tuple[dict[str, Any], list[Any]]:
    """Apply a ``diff_checkpoint`` delta (or a plain state delta) to a checkpoint's content."""
    state_ops: Delta = []
    message_ops: Delta = []
    for op in delta:
        target = op.get("target") if isinstance(op, dict) else None
        if target is None:
            state_ops.append(op)
        elif target == MESSAGES:
            message_ops.append(op)
        else:
            raise BrokenChain(f"delta op has an unknown target {target!r}: {_short(op)}")
    if state_ops:
        state = apply(state, state_ops)
    if message_ops:
        messages = apply({MESSAGES: messages}, message_ops)[MESSAGES]
        if type(messages) is not list:
            raise BrokenChain("delta turns the message list into something else")
    return state, messages
