"""Long lists in snapshots are stored once: in the history rows (Parquet), and replayed on load.

A chat history of n messages copied into every snapshot grows as n^2 / interval; shared pages (an
earlier revision of the format) still stored each message beside its history row, and snapshot tails
re-stored the newest ones. Every record already has its history rows (``diff(base, content)``,
spec.md section 4), and those rows hold every item of every list once. So a snapshot stores each list
of at least ``LIST_ITEMS`` items (at any dict path of the state, and the message list) as ``[]``, and
names its *place*; a load rebuilds it from the rows of the snapshot's lineage (its record, its parent,
its parent's parent, ...):

* from the nearest record whose rows define the list whole -- a ``set`` or ``del`` of it or of a key
  enclosing it (``touches``); the lineage's root always does, its rows being against the empty
  content -- applying that record's and each later record's ops on the list, in order (``replay``);
* or from the list of a content the reader already holds for a record of the lineage (a proven
  content: the reader's cache), applying the later records' ops.

Nothing names an item: what is replayed is what the delta engine applies (``delta.apply``), so an
item replaced, removed, the list cut or summarised (a ``splice``) is exactly what a plain replay
gives, and the result is checked against the record's digests like any rebuilt content. There is no
provenance to go stale: retention keeps every kept record's rows against its kept parent (or the
empty content), which is all a replay needs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..delta import MESSAGES, Delta, apply
from ..errors import BrokenChain, TruncatedObject
from .content import Content

LIST_ITEMS = 32
"""Lists shorter than this stay in the snapshot: replaying them costs more than their items."""

MAX_PLACES = 4096
"""At most this many lists replayed per snapshot (a bound set before anything is replayed)."""

Place = tuple[str | None, tuple[str, ...]]
"""Where a replayed list lives: the ops' ``target`` (None: the state; ``"messages"``: the message
list, seen as ``{"messages": [...]}``) and its path of dict keys."""

MESSAGE_PLACE: Place = (MESSAGES, (MESSAGES,))

Scope = Callable[[str | None, Any], bool]
"""Which ops (by target and path) a read of history rows takes (``within``)."""


def _lists(state: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, value in state.items():
        if type(value) is list and len(value) >= LIST_ITEMS:
            yield (*path, key)
        elif type(value) is dict:
            yield from _lists(value, (*path, key))


def places(content: Content) -> list[Place]:
    """The places of ``content`` a snapshot stores as ``[]`` (state lists first, in key order)."""
    out: list[Place] = [(None, path) for path in _lists(content[0])]
    if len(content[1]) >= LIST_ITEMS:
        out.append(MESSAGE_PLACE)
    return out[:MAX_PLACES]


def _doc(content: Content, target: str | None) -> dict[str, Any]:
    return content[0] if target is None else {MESSAGES: content[1]}


def get(content: Content, place: Place) -> Any:
    """The value at ``place`` of ``content``; None when a key on the way is absent or not a dict."""
    target, path = place
    node: Any = _doc(content, target)
    for key in path:
        if type(node) is not dict or key not in node:
            return None
        node = node[key]
    return node


def _put(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """``doc`` with ``value`` at ``path`` (dicts on the way copied, never mutated)."""
    out = dict(doc)
    node = out
    for key in path[:-1]:
        child = node.get(key)
        child = dict(child) if type(child) is dict else {}
        node[key] = child
        node = child
    node[path[-1]] = value
    return out


def stub(content: Content, where: Iterable[Place]) -> Content:
    """``content`` with the list at each place replaced by ``[]``: what the snapshot stores."""
    state, messages = content
    for target, path in where:
        if target is None:
            state = _put(state, path, [])
        else:
            messages = []
    return state, messages


def fill(content: Content, lists: Mapping[Place, list[Any]]) -> Content:
    """The stored ``content`` (a ``stub``) with each place's replayed list put back."""
    state, messages = content
    for (target, path), value in lists.items():
        if target is None:
            state = _put(state, path, value)
        else:
            messages = value
    return state, messages


def encode(where: Iterable[Place]) -> list[list[str | None]]:
    """Places as the snapshot object stores them: ``[target, *path]`` (spec.md section 5)."""
    return [[target, *path] for target, path in where]


def decode(raw: Any, content: Content, *, thread_id: str, checkpoint_id: str) -> list[Place]:
    """The places a snapshot object names, each checked to be ``[]`` in its stored content; a malformed
    or repeated one is ``TruncatedObject`` (the snapshot does not fit what it says of itself)."""

    def bad(why: str) -> TruncatedObject:
        return TruncatedObject(
            f"snapshot's replayed lists are malformed: {why}", thread_id=thread_id, checkpoint_id=checkpoint_id
        )

    if not isinstance(raw, list) or len(raw) > MAX_PLACES:
        raise bad("not a list of at most 4096 places")
    out: list[Place] = []
    for entry in raw:
        if not (isinstance(entry, list) and len(entry) >= 2 and all(type(k) is str for k in entry[1:])):
            raise bad("a place is not [target, key, ...]")
        target, path = entry[0], tuple(entry[1:])
        if target is not None and (target, path) != MESSAGE_PLACE:
            raise bad(f"unknown target {target!r}")
        place: Place = (target, path)
        if place in out:
            raise bad("a place is named twice")
        if get(content, place) != []:
            raise bad(f"the stored value at {list(path)!r} is not []")
        out.append(place)
    return out


def _scope(place: Place) -> tuple[str | None, frozenset[tuple[str, ...]]]:
    """The ops a replay of ``place`` applies: its target, and its path and every prefix of it."""
    target, path = place
    return target, frozenset(path[:k] for k in range(1, len(path) + 1))


def _mine(rows: Delta, scope: tuple[str | None, frozenset[tuple[str, ...]]]) -> Delta:
    """The ops of ``rows`` that write the place or a key enclosing it."""
    target, prefixes = scope
    return [
        op
        for op in rows
        if type(op) is dict
        and op.get("target") == target
        and type(at := op.get("path")) is list
        and tuple(at) in prefixes
    ]


def within(where: Iterable[Place]) -> Scope:
    """Does an op (its target, its path) write one of the places or a key enclosing one: the ops a
    replay of ``where`` needs of each record (a reader parses no other value)."""
    scopes: dict[str | None, set[tuple[str, ...]]] = {}
    for place in where:
        scopes.setdefault(place[0], set()).update(_scope(place)[1])

    def takes(target: str | None, path: Any) -> bool:
        prefixes = scopes.get(target)
        return prefixes is not None and type(path) is list and tuple(path) in prefixes

    return takes


def touches(rows: Delta, place: Place) -> bool:
    """Do ``rows`` define the list at ``place`` whole (a ``set``/``del`` of it or of an enclosing key)?
    Then the records before them are not needed to replay it."""
    return any(op.get("op") in ("set", "del") for op in _mine(rows, _scope(place)))


def replay(
    place: Place, base: list[Any] | None, rows: Sequence[Delta], *, thread_id: str, checkpoint_id: str
) -> list[Any]:
    """The list at ``place`` after applying ``rows`` (each record's history rows, oldest first) to
    ``base`` (the list a proven content holds there), or, with no base, from nothing: the first rows
    must then define it (``touches``). ``BrokenChain`` when the rows do not give a list there."""
    last = len(rows) - 1
    return values(place, base, rows, {last}, thread_id=thread_id, checkpoint_id=checkpoint_id)[last]


def values(
    place: Place,
    base: list[Any] | None,
    rows: Sequence[Delta],
    at: Collection[int],
    *,
    thread_id: str,
    checkpoint_id: str,
) -> dict[int, list[Any]]:
    """``replay``, and the list after each ``rows[k]`` for ``k`` in ``at`` (the lists of the records a
    lineage passes: a reader keeps those of the snapshots on the way). ``-1``: ``base`` itself."""
    target, path = place
    if base is not None:
        doc = _put({}, path, base)
    elif target is not None:
        doc = {MESSAGES: []}  # the message list is never absent: its root's rows append to []
    else:
        doc = _put({}, path[:-1], {}) if len(path) > 1 else {}
    out: dict[int, list[Any]] = {}
    scope = _scope(place)
    for k in range(-1, len(rows)):
        if k >= 0:
            mine = _mine(rows[k], scope)
            if mine:
                doc = apply(doc, mine)
        if k in at:
            value: Any = doc
            for key in path:
                value = value.get(key) if type(value) is dict else None
            if type(value) is not list:
                raise BrokenChain(
                    f"the history rows of its lineage do not rebuild the list at {list(path)!r}",
                    thread_id=thread_id,
                    checkpoint_id=checkpoint_id,
                )
            out[k] = value
    return out
