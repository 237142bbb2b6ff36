"""A snapshot's long lists, replayed from its lineage's history rows (``format.replay``, spec.md
section 13): the lineage walk, what it fetches, and the lists a replay went through, kept so that a
read of the snapshots on the way (LangGraph's ``list()`` builds newest first) replays nothing twice.

``ChainReader`` composes one ``Replays`` per read and is its ``Rows``: the records, the fetch and the
history rows all come from the reader, so a replay sees exactly what the chain replay sees (one read
of rows, one set of checks).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import MutableMapping, Sequence
from typing import Any, Protocol

from ..delta import Delta
from ..errors import BrokenChain, NeedsManifest
from ..format import layout, replay
from ..format import refs as R
from ..format.content import Content, state_key
from ..format.manifest import Record, history_ref

KEEP = 64
"""Snapshots whose replayed lists one read keeps (the engine keeps its own: ``Contents.lists``)."""
EXTEND = 64
"""Ancestors whose rows one more round trip fetches when a snapshot's ``ref.replay`` fell short (it
is a bound the writer took from the rows it held, ``ops.history.reach``: a prefetch, not a proof)."""

Replayed = dict[replay.Place, list[Any]]


class Rows(Protocol):
    """What a replay reads through: the ``ChainReader`` that composes it."""

    thread_id: str
    records: dict[str, Record] | None
    partial: bool

    def known(self, rec: Record) -> Content | None: ...
    async def fetch(self, keys: list[str]) -> None: ...
    async def history(self, rec: Record, inline: dict[str, Delta], within: replay.Scope | None = None) -> Delta: ...


class Shared(Protocol):
    """The engine's cache of replayed lists (``Contents``)."""

    def lists(self, key: str) -> Replayed | None: ...
    def remember_lists(self, key: str, lists: Replayed) -> None: ...


def rows_keys(rec: Record) -> set[str]:
    """The objects building full record ``rec`` from its parent reads: the segment holding its history
    rows and the blobs its record lists (its rows reference some of them)."""
    held = history_ref(rec) or {}
    out = {layout.blob_key(name, sealed="enc" in rec) for name in rec["ref"].get("blobs", ())}
    if R.kind(held) == R.SEGMENT:
        out.add(held["key"])
    return out


class Replays:
    """The replays of one read. ``shared``: the engine's cache, served from and filled (None: this
    read neither, e.g. the integrity API, which re-reads everything)."""

    def __init__(self, rows: Rows, shared: Shared | None, built: MutableMapping[str, int]) -> None:
        self.rows, self.shared, self.built = rows, shared, built
        self.kept: OrderedDict[str, Replayed] = OrderedDict()  # replayed, by state key
        self.walks: dict[tuple[str, int, int], list[Record]] = {}  # (record id, n, records) -> lineage

    def held(self, rec: Record) -> Replayed | None:
        """The lists of snapshot ``rec`` a replay already went through (this read's, or the engine's)."""
        key = state_key(rec)
        found = self.kept.get(key)
        if found is None and self.shared is not None:
            found = self.shared.lists(key)
        return found

    def keep(self, rec: Record, lists: Replayed) -> None:
        """Lists a replay went through at snapshot ``rec`` of the lineage: its own, if it is read next."""
        key = state_key(rec)
        self.kept.setdefault(key, {}).update(lists)
        self.kept.move_to_end(key)
        while len(self.kept) > KEEP:
            self.kept.popitem(last=False)
        if self.shared is not None and not self.rows.partial:  # what the hint alone told is not shared
            self.shared.remember_lists(key, lists)

    def lineage(self, rec: Record, n: int) -> list[Record]:
        """Up to ``n`` ancestors of ``rec``, nearest first, ending early at the lineage's root (a record
        whose parent is not in the manifest: its rows are against the empty content) or at one whose
        content this reader knows (its lists are a replay's base). Walked once per read and set of
        records: what to fetch and the replay ask it of the same snapshot; a content learnt since only
        makes the walk longer than needed (the replay stops at it), one forgotten since costs the
        replay a fetch (``EXTEND``)."""
        key = (str(rec["id"]), n, len(self.rows.records or ()))  # records a hint told may grow
        walked = self.walks.get(key)
        if walked is None:
            walked = self.walks[key] = self._walk(rec, n)
        return walked

    def _walk(self, rec: Record, n: int) -> list[Record]:
        out: list[Record] = []
        records = self.rows.records or {}
        at = rec
        while len(out) < n and (at is rec or self.rows.known(at) is None):
            parent_id = at.get("parent")
            parent = records.get(str(parent_id)) if parent_id is not None else None
            if parent is None:
                break
            out.append(parent)
            at = parent
        return out

    def keys(self, lineage: Sequence[Record]) -> set[str]:
        """The objects holding the rows of ``lineage`` (a walk: ``rec`` and its ``lineage``, only whose
        last may be known; a known content needs none)."""
        keys: set[str] = set()
        last = len(lineage) - 1
        for i, r in enumerate(lineage):
            if i == 0 or i < last or self.rows.known(r) is None:
                keys.update(rows_keys(r))
        return keys

    def prefetch(self, rec: Record) -> set[str]:
        """What the lineage ``ref.replay`` names reads: fetched with snapshot ``rec`` (``needed``)."""
        return self.keys([rec, *self.lineage(rec, int(rec["ref"]["replay"]))])

    async def replay(self, rec: Record, where: list[replay.Place], inline: dict[str, Delta]) -> Replayed:
        """The lists at ``where`` of snapshot ``rec``, replayed from its lineage's rows: from each
        list's nearest defining record (``replay.touches``, the root) or from the content this reader
        knows of an ancestor. The lineage ``ref.replay`` names is fetched with the snapshot
        (``prefetch``); when it falls short, ``EXTEND`` more ancestors in one more round trip."""
        cid, thread_id, records = rec["id"], self.rows.thread_id, self.rows.records
        if records is None:
            raise NeedsManifest("its snapshot replays lists from its ancestors", thread_id=thread_id, checkpoint_id=cid)
        lineage = [rec, *self.lineage(rec, int(rec["ref"]["replay"]))]
        rows: list[Delta] = []
        todo = list(where)
        scope = replay.within(where)
        start: dict[replay.Place, int] = {}
        base: dict[replay.Place, tuple[int, list[Any]]] = {}
        i = 0
        while todo:
            if i == len(lineage):
                more = self.lineage(lineage[-1], EXTEND)
                if not more or len(lineage) > len(records):  # the root, or a parent loop
                    raise BrokenChain(
                        f"no record of its lineage defines the list at {list(todo[0][1])!r}",
                        thread_id=thread_id,
                        checkpoint_id=cid,
                    )
                await self.rows.fetch(sorted(self.keys([lineage[-1], *more])))
                lineage += more
            r = lineage[i]
            known = self.rows.known(r) if i > 0 else None
            if known is not None:
                for place in todo:
                    value = replay.get(known, place)
                    if type(value) is not list:
                        raise BrokenChain(
                            f"its lineage's rows do not define the list at {list(place[1])!r}",
                            thread_id=thread_id,
                            checkpoint_id=cid,
                        )
                    base[place] = (i, value)
                break
            ops = await self.rows.history(r, inline, scope)
            rows.append(ops)
            root = r.get("parent") is None or str(r["parent"]) not in records
            if root and self.rows.partial and r.get("parent") is not None:  # rows of no segment the hint names
                raise NeedsManifest("its lineage leaves what the head hint names", thread_id=thread_id)
            for place in list(todo):
                if root or replay.touches(ops, place):
                    start[place] = i
                    todo.remove(place)
            i += 1
        self.built["replayed"] += len(rows)
        out: Replayed = {}
        passed: dict[int, Replayed] = {}  # lists at the snapshots on the way
        for place in where:
            at, value = base[place] if place in base else (start[place] + 1, None)
            marks = {at - 1 - j: j for j in range(1, at) if "replay" in lineage[j]["ref"]}
            values = replay.values(
                place, value, rows[at - 1 :: -1], {*marks, at - 1}, thread_id=thread_id, checkpoint_id=cid
            )
            out[place] = values[at - 1]
            for k, j in marks.items():
                passed.setdefault(j, {})[place] = values[k]
        for j, lists in passed.items():
            self.keep(lineage[j], lists)
        return out
