"""What a saver's puts already stored of a list channel, kept from put to put (``Lists``): so that the
elements a list still starts with are checked in a few C-speed passes (``same_prefix`` for a list of
LangChain messages, else ``kept_prefix``), not one Python call per element, and only the new ones are
encoded (``encoding.encode_channel``). A cell that a check does not keep is stored anew: the checks
may miss, never keep a changed element.
"""

from __future__ import annotations

import operator
from itertools import chain, compress
from typing import Any, NamedTuple

import orjson
from langchain_core.messages import BaseMessage

from . import values as V


class Values(NamedTuple):
    """A run of values (the field values of a list of messages, flattened, or their extra fields), kept
    so that the same run met again is checked in C-speed passes (``Values.holds``). Each value is an
    atom (a str, an int, a bool or None: immutable, so the object kept is its value), an empty
    container (a dict or a list, which it still is when it is still empty: no other dict or list is
    ``==`` to it), or anything else JSON holds exactly (a dict or a list with items, a float, whose
    JSON text tells ``0.0`` from ``-0.0``), kept as its canonical text and a private copy."""

    types: list[type]
    atom: list[bool]
    atoms: list[Any]
    empty: list[bool]
    full: list[bool]
    text: bytes  # the canonical text of the full ones, one JSON array
    known: list[Any]  # a private copy of the full ones

    @staticmethod
    def of(values: list[Any]) -> Values | None:
        """The ``Values`` of ``values``, or None when one is neither an atom nor JSON exactly."""
        types = list(map(type, values))
        if not all(map(_JSON_TYPES.__contains__, types)):
            return None  # checked first: nothing below runs code of a type of the user's
        atom = list(map(_ATOM_TYPES.__contains__, types))
        empty = list(map(operator.and_, map(_CONTAINER_TYPES.__contains__, types), map(operator.not_, values)))
        full = list(map(operator.not_, map(operator.or_, atom, empty)))
        kept = list(compress(values, full))
        text = V.dumps(kept)
        if text is None:
            return None
        known: list[Any] = orjson.loads(text)
        if not V.same_json(kept, known, text):
            return None
        return Values(types, atom, list(compress(values, atom)), empty, full, text, known)

    def holds(self, values: list[Any]) -> bool:
        """Are ``values`` (a list as long) those kept: the same types exactly (no subclass, no 1 for
        True), the atoms ``==`` (a str met again is usually the very object), the empty containers
        still empty, the rest the same JSON (``same_json``)?"""
        return (
            list(map(type, values)) == self.types
            and list(compress(values, self.atom)) == self.atoms
            and not any(map(len, compress(values, self.empty)))
            and V.same_json(list(compress(values, self.full)), self.known, self.text)
        )

    def __add__(self, other: object) -> Values:
        """The ``Values`` of this run then ``other``'s."""
        assert isinstance(other, Values)
        text = _join(self.text, other.text)
        return Values(
            self.types + other.types,
            self.atom + other.atom,
            self.atoms + other.atoms,
            self.empty + other.empty,
            self.full + other.full,
            text,
            self.known + other.known,
        )


class Same(NamedTuple):
    """What the cells of a list of LangChain messages were made from (``same_objects``), so that the
    messages a list still starts with are checked in C-speed passes, none a Python call per message
    (``same_prefix``): each message's class, its number of fields, their names, their values and its
    extra fields (``Values``)."""

    classes: list[type]
    lengths: list[int]
    names: list[Any]
    fields: Values
    extra: Values

    def __add__(self, other: object) -> Same:
        """The ``Same`` of these messages then ``other``'s."""
        assert isinstance(other, Same)
        return Same(
            self.classes + other.classes,
            self.lengths + other.lengths,
            self.names + other.names,
            self.fields + other.fields,
            self.extra + other.extra,
        )


Held = tuple[list[Any], bytes, list[Any], tuple[bool, ...], Same | None]
Lists = dict[int, Held]
"""id of a list's ``items`` a put stored -> (those cells, the canonical text of their views as one JSON
array, a private copy of the views, which cells are messages, and for a list of messages only what
their cells were made from, ``Same``): what a saver keeps from put to put so that the
elements a list still starts with are checked in one pass (``same_prefix``, else ``kept_prefix``).
A cell's view is the JSON value an element must be to keep it: a ``json`` cell's value, a scalar cell
itself, and for a message cell the message's field values as they were when it was stored (``_fields``)."""
LISTS_KEPT = 256
LISTS_BYTES = 128 << 20
"""At most this many lists, of at most this much text together, before the cache starts over (one entry
per channel list of each thread's newest put: a put replaces its parent's)."""


def _fields(message: BaseMessage) -> list[Any]:
    """What a message's cell is made from, besides its class: its field values and extra fields (its
    dump, ``_short`` or ``_full``, and whether that rebuilds it, are a function of these and the class)."""
    return [message.__dict__, message.__pydantic_extra__]


def _join(a: bytes, b: bytes) -> bytes:
    """The text of the JSON array of ``a``'s items then ``b``'s (both JSON array texts)."""
    if a == b"[]":
        return b
    return a if b == b"[]" else a[:-1] + b"," + b[1:]


_DICT = operator.attrgetter("__dict__")
_EXTRA = operator.attrgetter("__pydantic_extra__")
_ATOM_TYPES = frozenset((str, int, bool, type(None)))
_CONTAINER_TYPES = frozenset((dict, list))
_JSON_TYPES = frozenset((str, int, bool, type(None), dict, list, float))


def same_objects(messages: list[Any]) -> Same | None:
    """``Same`` of ``messages`` (LangChain messages whose cells were just made or kept from them), or None
    when a field value is of another type (such a list is checked by its views, ``kept_prefix``)."""
    dicts = list(map(_DICT, messages))
    fields = Values.of(list(chain.from_iterable(map(dict.values, dicts))))
    extra = Values.of(list(map(_EXTRA, messages)))
    if fields is None or extra is None:
        return None
    return Same(list(map(type, messages)), list(map(len, dicts)), list(chain.from_iterable(dicts)), fields, extra)


def same_prefix(values: list[Any], held: Held) -> bool:
    """Do the first ``len(cells)`` elements of ``values`` keep their cells (``held``: a ``Lists`` entry of
    messages, with its ``Same``)? Each is a message of the same class with the same field names, whose
    field values and extra fields are those kept (``Values.holds``). Values, never identities: a message
    changed in place fails it, a copy of it (the one ``get_tuple`` handed out) passes it. Decides what
    ``kept_prefix`` decides for such a list, in C-speed passes over its fields (no Python call per
    element) and without serialising the long strings of a chat again. False (check the views then)
    when ``held`` has no ``Same``."""
    same = held[4]
    k = len(held[0])
    if same is None or len(values) < k:
        return False
    head = values[:k]
    if list(map(type, head)) != same.classes:
        return False
    dicts = list(map(_DICT, head))
    if list(map(len, dicts)) != same.lengths or list(chain.from_iterable(dicts)) != same.names:
        return False
    return same.fields.holds(list(chain.from_iterable(map(dict.values, dicts)))) and same.extra.holds(
        list(map(_EXTRA, head))
    )


def _views(cells: list[Any], values: list[Any]) -> tuple[list[Any], tuple[bool, ...]] | None:
    """The views of ``cells`` (see ``Lists``), the cells of ``values``, and which are messages; None when
    one is another kind (a serde pair, a tagged container): such a list is checked element by element."""
    views: list[Any] = []
    flags: list[bool] = []
    for c, v in zip(cells, values, strict=True):
        t = type(c)
        if t is str or t is int or t is float or t is bool:
            views.append(c)
            flags.append(False)
        elif t is dict and len(c) == 1 and V.JSON in c:
            views.append(c[V.JSON])
            flags.append(False)
        elif t is dict and "type" in c and not (V.TAGS & c.keys()) and type(v) is V.MESSAGES.get(c["type"]):
            views.append(_fields(v))
            flags.append(True)
        else:
            return None
    return views, tuple(flags)


def kept_prefix(values: list[Any], held: Held) -> bool:
    """Do the first ``len(cells)`` elements of ``values`` keep their cells (``held``: a ``Lists`` entry)?
    Each element is its view's JSON value exactly -- for a message cell, a message of the same class
    whose field values are exactly those it had when its cell was made, so its cell would be the same --
    which ``same_json`` decides for the whole prefix at once (the strict text of a JSON array is its
    elements' texts joined, and a JSON text splits one way only). Values, never identities: an element
    changed in place fails it."""
    cells, text, known, flags, _ = held
    k = len(cells)
    if len(values) < k:
        return False
    head = values[:k]
    if True in flags:
        for i, is_message in enumerate(flags):
            if is_message:
                m = head[i]
                if type(m) is not V.MESSAGES.get(cells[i]["type"]):
                    return False
                head[i] = _fields(m)
    return V.same_json(head, known, text)


def keep_list(lists: Lists, items: list[Any], values: list[Any], held: Held | None, k: int, same: bool = False) -> None:
    """Note ``items`` (the cells a put stored for the list ``values``) in ``lists``; ``held``: the entry
    of the first ``k`` cells, which it extends (only the new cells are viewed and serialised), or None
    (all are); ``same``: ``same_prefix`` held for them (so ``held``'s ``Same`` extends too; else a
    list of messages takes its ``Same`` anew). Views that are not exactly JSON (a tuple in a message's
    metadata) are not kept: a check against them would never hold."""
    if held is not None:
        lists.pop(id(held[0]), None)  # the parent's list: its successor is the one a next put starts from
    start = k if held is not None else 0
    viewed = _views(items[start:], values[start:])
    if viewed is None:
        return
    views, flags = viewed
    tail = V.dumps(views)
    if tail is None:
        return
    known = orjson.loads(tail)  # a private copy: the message objects may change after the put
    if not V.same_json(views, known, tail):
        return
    if held is not None and k:
        text = _join(held[1], tail)
        known, flags = held[2] + known, held[3] + flags
    else:
        text = tail
    objects: Same | None = None
    if flags and all(flags):  # a list of messages: what their cells were made from
        kept = held[4] if held is not None and k and same else None
        if kept is not None:
            fresh = same_objects(values[k : len(items)])
            objects = None if fresh is None else kept + fresh
        else:
            objects = same_objects(values[: len(items)])
    if len(lists) >= LISTS_KEPT or sum(len(e[1]) for e in lists.values()) + len(text) > LISTS_BYTES:
        lists.clear()
    lists[id(items)] = (items, text, known, flags, objects)
