"""Provenance of list items and the run tables built from it (design note 008, steps 3-5).

Not wired yet: no snapshot is written or read through this module (snapshots still store pages and a
tail, spec.md section 5); it is the tested core the next step wires into ``ChainReader`` and the save.

*Provenance.* Every item of a list of a content was inserted by one history row (an ``append``, a
``splice``'s ``insert`` or a ``set`` of the list) of one record: its provenance is the token
``(record id, op index, item index)``. The provenance of a record's content is
``prov(R) = apply(rows(R), prov(base(R)))`` with ``prov(empty) = ({}, [])``, computed by the delta
engine itself (``delta.apply_checkpoint``) over a mirror of the content whose list items are tokens:
``tokens`` turns a record's rows into the same ops with tokens in place of the items they insert, so
provenance follows the content by construction (no second copy of ``apply``). Items a row does not
insert as a list's items (a ``set`` of an enclosing key, of a list nested in a value) have no
provenance (``None``): a snapshot stores them literally.

*Run tables.* A list of at least ``RUN_ITEMS`` items is stored as entries, in order: a run
``[d, op, first, count]`` -- items ``first .. first + count - 1`` of those that op ``op`` of the record
``d`` parents up the snapshot's own lineage inserted (0: the snapshot's record itself) -- or a
literal ``{"items": [...]}``. Runs name ancestors by distance, not by checkpoint id: a W1 snapshot
of 1,000 messages holds 1,000 one-item runs, and an id has ~6 bytes zstd cannot take (1,000 steps:
546,108 bytes of run tables named by id, 50,027 by distance; ``benchmarks/bench_run_tables.py``).
Distances stay valid while every record up to the farthest named one stays in the manifest (a
record whose parent is removed is a chain root: retention re-writes the snapshots that reach past
it) and under copies and tier merges, which keep parents and rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .. import codec, limits
from ..delta import MESSAGES, Delta, apply_checkpoint
from ..errors import BrokenChain, ObjectTooLarge, TruncatedObject

RUN_ITEMS = 32
"""Lists shorter than this stay literal in a snapshot (a run costs more than a short list's items)."""

Token = tuple[str, int, int] | None
"""(record id, op index, item index) of a list item, None when it has no provenance."""
Prov = tuple[dict[str, Any], list[Any]]
"""The provenance of a content (state, messages): the content's dicts, each list's items as tokens."""
Table = dict[str, list[Any]]
"""A run table: list path (JSON) -> entries (runs and literal items, in order)."""
Content = tuple[dict[str, Any], list[Any]]
Target = tuple[int, tuple[str, ...]]
"""Where an op writes: 0 (the state) or 1 (the messages, seen as ``{"messages": [...]}``), and its path."""
EMPTY: Prov = ({}, [])


def blank(value: Any) -> Any:
    """The provenance of a value no row inserted item by item: its dicts, its lists' items ``None``."""
    if type(value) is dict:
        return {k: blank(v) for k, v in value.items()}
    if type(value) is list:
        return [None] * len(value)
    return None


def tokens(record_id: str, ops: Delta) -> Delta:
    """``ops`` (a record's history rows, plain) with the items they insert replaced by their tokens:
    what ``delta.apply_checkpoint`` applies to a provenance. A malformed op is passed on as it is (the
    apply refuses it as it refuses it on the content)."""
    out: Delta = []
    for i, op in enumerate(ops):
        value = op.get("value") if isinstance(op, dict) else None
        kind = op.get("op") if isinstance(op, dict) else None
        if kind == "append" and type(value) is list:
            value = [(record_id, i, j) for j in range(len(value))]
        elif kind == "splice" and type(value) is dict and type(value.get("insert")) is list:
            value = {**value, "insert": [(record_id, i, j) for j in range(len(value["insert"]))]}
        elif kind == "set":
            value = [(record_id, i, j) for j in range(len(value))] if type(value) is list else blank(value)
        else:
            out.append(op)
            continue
        out.append({**op, "value": value})
    return out


def provenance(base: Prov, record_id: str, ops: Delta) -> Prov:
    """``prov(R) = apply(rows(R), prov(base(R)))``: the provenance of the content ``ops`` (the record's
    plain history rows) build from the base content whose provenance is ``base``."""
    return apply_checkpoint(*base, tokens(record_id, ops))


def _lists(
    doc: dict[str, Any], prov: dict[str, Any], least: int, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], list[Any], list[Any]]]:
    for key, value in doc.items():
        mirror = prov.get(key) if type(prov) is dict else None
        if type(value) is list and len(value) >= least:
            yield (
                (*path, key),
                value,
                mirror if type(mirror) is list and len(mirror) == len(value) else [None] * len(value),
            )
        elif type(value) is dict:
            yield from _lists(value, mirror if type(mirror) is dict else {}, least, (*path, key))


def _entries(items: list[Any], marks: list[Any], distance: Mapping[str, int]) -> list[Any]:
    out: list[Any] = []
    for item, mark in zip(items, marks, strict=True):
        d = distance.get(mark[0]) if type(mark) is tuple else None
        last = out[-1] if out else None
        if d is None or mark is None:
            if type(last) is dict:
                last["items"].append(item)
            else:
                out.append({"items": [item]})
        elif type(last) is list and last[0] == d and last[1] == mark[1] and last[2] + last[3] == mark[2]:
            last[3] += 1
        else:
            out.append([d, mark[1], mark[2], 1])
    return out


def split(content: Content, prov: Prov, lineage: list[str], *, least: int = RUN_ITEMS) -> tuple[Content, Table, Table]:
    """(content with its long lists emptied, state run table, messages run table). ``content``: as the
    snapshot stores it (blob references in place of large strings, as its rows hold them); ``prov``:
    its provenance; ``lineage``: the snapshot's record id, its parent's, ... as far as its manifest
    holds them (an item inserted by a record off it is stored literally); ``least``: the shortest list
    given a table (``RUN_ITEMS``)."""
    distance = {cid: d for d, cid in enumerate(lineage)}
    state, messages = content
    tables: list[Table] = []
    stubs: list[dict[str, Any]] = []
    for doc, mirror in ((state, prov[0]), ({MESSAGES: messages}, {MESSAGES: prov[1]})):
        table: Table = {}
        for path, items, marks in _lists(doc, mirror, least):
            table[codec.dumps(list(path)).decode()] = _entries(items, marks, distance)
        tables.append(table)
        stubs.append(_emptied(doc, {tuple(codec.loads(p)) for p in table}) if table else doc)
    return (stubs[0], stubs[1][MESSAGES]), tables[0], tables[1]


def _emptied(doc: dict[str, Any], paths: set[tuple[str, ...]], path: tuple[str, ...] = ()) -> dict[str, Any]:
    out = dict(doc)
    for key, value in doc.items():
        sub = (*path, key)
        if sub in paths:
            out[key] = []
        elif type(value) is dict and any(p[: len(sub)] == sub for p in paths):
            out[key] = _emptied(value, paths, sub)
    return out


def inserted(op: Any) -> list[Any] | None:
    """The items an op inserts into the list at its path (None: it inserts none as list items)."""
    if not isinstance(op, dict):
        return None
    kind, value = op.get("op"), op.get("value")
    if kind in ("append", "set") and type(value) is list:
        return value
    if kind == "splice" and type(value) is dict and type(value.get("insert")) is list:
        return list(value["insert"])
    return None


Where = dict[str, Any]


def _run(entry: Any, where: Where) -> tuple[int, int, int, int] | None:
    if type(entry) is dict:
        if entry.keys() != {"items"} or type(entry["items"]) is not list:
            raise TruncatedObject("run table has a malformed entry", **where)
        return None
    if type(entry) is not list or len(entry) != 4 or any(type(x) is not int or x < 0 for x in entry):
        raise TruncatedObject("run table has a malformed entry", **where)
    return entry[0], entry[1], entry[2], entry[3]


def reach(tables: tuple[Table, ...], where: Where) -> int:
    """How many records up the lineage the tables' runs name (0: none): what the snapshot's record
    must list (``ref.reach``), so retention, gc and verify know the dependency from the manifest."""
    most = -1
    for table in tables:
        if type(table) is not dict:
            raise TruncatedObject("run table is not an object", **where)
        for entries in table.values():
            if type(entries) is not list:
                raise TruncatedObject("run table has a malformed entry", **where)
            for entry in entries:
                run = _run(entry, where)
                if run is not None:
                    most = max(most, run[0])
    return most + 1


def join(
    stub: Content,
    tables: tuple[Table, Table],
    rows: Callable[[int], tuple[Delta, tuple[Target, ...]]],
    where: Where,
) -> Content:
    """Inverse of ``split``: each list rebuilt from its entries. ``rows(d)``: the history rows (as
    stored) of the record ``d`` parents up the lineage, and the path each op of them must have to give
    items to the list of a table path (``BrokenChain`` when there is no such record). A run naming an
    op that inserted no items at that list's path, or fewer than it takes, is ``BrokenChain``; tables
    joining into more than a state holds (``limits.STATE_VALUES`` items, ``STATE_BYTES`` of JSON:
    a small table may name one run a million times) are refused, ``ObjectTooLarge``, before any list
    is built."""
    sizes: dict[tuple[int, int], list[int]] = {}  # prefix sums of item JSON sizes, per op named
    items = size = 0
    plans: list[tuple[int, tuple[str, ...], list[Any]]] = []
    for which, table in enumerate(tables):
        for path_json, entries in table.items():
            path = codec.loads(path_json)
            if type(path) is not list or not path or any(type(k) is not str for k in path):
                raise TruncatedObject("run table has a malformed path", **where)
            target = (which, tuple(path))
            parts: list[Any] = []
            for entry in entries:
                run = _run(entry, where)
                if run is None:
                    items += len(entry["items"])
                    size += len(codec.dumps(entry["items"]))
                    parts.append(entry["items"])
                    continue
                d, i, first, count = run
                ops, paths = rows(d)
                got = inserted(ops[i]) if i < len(ops) else None
                if got is None or paths[i] != target or first + count > len(got) or count == 0:
                    raise BrokenChain("a run names items its record's rows did not insert there", **where)
                if (d, i) not in sizes:
                    acc = [0]
                    for item in got:
                        acc.append(acc[-1] + len(codec.dumps(item)) + 1)
                    sizes[d, i] = acc
                items += count
                size += sizes[d, i][first + count] - sizes[d, i][first]
                parts.append((got, first, count))
            plans.append((which, tuple(path), parts))
    if items > limits.STATE_VALUES or size > limits.STATE_BYTES:
        raise ObjectTooLarge(
            f"snapshot's run tables join into {items} items, {size} bytes of JSON, more than a state holds "
            f"({limits.STATE_VALUES} values, {limits.STATE_BYTES} bytes): refused (a forged or damaged "
            "snapshot; delete or restore it)",
            **where,
        )
    state, messages = stub
    docs = (dict(state), {MESSAGES: messages})
    for which, path, parts in plans:
        built: list[Any] = []
        for part in parts:
            if type(part) is tuple:
                got, first, count = part
                built.extend(got[first : first + count])
            else:
                built.extend(part)
        _put(docs[which], path, built, where)
    return docs[0], docs[1][MESSAGES]


def _put(doc: dict[str, Any], path: tuple[str, ...], value: list[Any], where: Where) -> None:
    parent = doc
    for key in path[:-1]:
        child = parent.get(key)
        if type(child) is not dict:
            raise TruncatedObject("snapshot's run table does not fit its content", **where)
        child = dict(child)
        parent[key] = child
        parent = child
    if parent.get(path[-1]) != []:
        raise TruncatedObject("snapshot's run table does not fit its content", **where)
    parent[path[-1]] = value


def targets(ops: Delta) -> tuple[Target, ...]:
    """Where each op of a record's rows writes (``Target``): what ``join`` matches a run's table path
    against, so a run gives a list only items inserted into that very list."""
    out: list[Target] = []
    for op in ops:
        path = op.get("path") if isinstance(op, dict) else None
        keys = tuple(path) if type(path) is list and all(type(k) is str for k in path) else ()
        out.append((1 if isinstance(op, dict) and op.get("target") == MESSAGES else 0, keys))
    return tuple(out)
