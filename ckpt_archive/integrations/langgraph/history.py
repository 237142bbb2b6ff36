"""``get_delta_channel_history`` over the archive: the parent-chain walk of LangGraph's savers.

Semantics are InMemorySaver's: walking from the target's parent towards the root, a channel stops
at the nearest ancestor whose stored entry has a value (the *seed*); that ancestor's own writes are
still collected. A checkpoint kept by ``prune``/``delete_for_runs`` whose ancestors went away carries
the history it needed in ``state["folded"]`` (seed and writes, as blobs), which ends the walk the same
way, so pruning never silently empties a ``DeltaChannel``.

The walk is planned on the manifest alone: each record's LangGraph metadata lists the channels it
stores a value for (``values``, written by ``ArchiveSaver._put``), so the ancestors up to the seed are
known before anything is read. Then, in one round trip, the states that hold what the walk needs are
built together (``ops.reads.contents``; served from the caches when held): the seeds', and the states
carrying the ancestors' writes (their own, children's and grandchildren's, ``writes.py``), while the
objects' names are read (``SaverReads.write_names``: one LIST of the thread the first time a saver
reads it, then only the folders of the ancestors without a grandchild, such as the target's parent,
whose writes may land during the target's put). Only the objects no state carries are read apart, in
a second round trip when there are any. What a walk learns of records and objects that never change
(the carried writes of an ancestor, keyed by the records that carry them; a seed's entry; an object
read apart) is kept by the saver (``_memo``), so the walk at the start of each turn reads the
manifest probe and one folder, whatever the distance to the seed (spec.md section 11, "History
walks", says what a saver so does not see).

Records written without ``values``, or whose state was replaced (version > 1), and the one record of a
walk that may hold ``folded`` (the oldest, when its LangGraph parent is not in the thread: removed by a
prune) are read to decide.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ...format.manifest import Manifest, Record
from . import writes as W
from .encoding import LG_KEY
from .reading import SaverReads, record_lg_ids
from .reading import remember as _remember


@dataclass
class History:
    """One channel's history as stored blobs: ``seed`` is a channel entry or None, writes oldest first."""

    seed: Any = None
    writes: list[tuple[str, str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"writes": [list(w) for w in self.writes]}
        if self.seed is not None:
            out["seed"] = self.seed
        return out

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> History:
        return cls(doc.get("seed"), [(w[0], w[1], w[2]) for w in doc.get("writes", [])])


MEMO_WRITES = 4096
"""Ancestors whose carried writes a saver keeps (``_memo``): a few MB for 1 KB messages."""
MEMO_SEEDS = 16
"""Seed entries a saver keeps (a ``_DeltaSnapshot`` holds the whole list as of its checkpoint)."""


def _has_value(entry: Any) -> bool:
    return entry is not None


def _ends(rec: Record) -> set[str] | None:
    """The channels ``rec`` stores a value for, from its metadata; None when only its state can say
    (no ``values``, or a state replaced since its put: version > 1)."""
    values = ((rec.get("metadata") or {}).get(LG_KEY) or {}).get("values")
    if type(values) is not list or int(rec.get("version", 1)) != 1:
        return None
    return {v for v in values if type(v) is str}


def _version(rec: Record) -> str:
    return f"{rec['id']}@{int(rec.get('version', 1))}"


class Lineage:
    """The LangGraph lineage of one archive thread, from its manifest records (nothing else built)."""

    def __init__(self, m: Manifest) -> None:
        self.by_lg: dict[str, Record] = {}
        self.kids: dict[str, list[Record]] = {}
        for rec in m.records.values():
            lg, parent = record_lg_ids(rec)
            self.by_lg[lg] = rec  # a later put of the same id replaces the earlier one
            if parent is not None:
                self.kids.setdefault(parent, []).append(rec)  # every record, replaced ones too

    def ancestors(self, cursor: str | None) -> list[Record]:
        out: list[Record] = []
        seen: set[str] = set()
        while cursor is not None and cursor not in seen:
            rec = self.by_lg.get(cursor)
            if rec is None:
                break
            seen.add(cursor)
            out.append(rec)
            cursor = record_lg_ids(rec)[1]
        return out

    def orphan(self, rec: Record) -> bool:
        """Is ``rec``'s LangGraph parent gone from the thread (a prune)? Only such a record holds ``folded``."""
        parent = record_lg_ids(rec)[1]
        return parent is not None and parent not in self.by_lg

    def grandkids(self, lg_id: str) -> list[Record]:
        return [g for k in self.kids.get(lg_id, []) for g in self.kids.get(record_lg_ids(k)[0], [])]

    def carriers(self, lg_id: str) -> list[Record]:
        """The records whose states may carry ``lg_id``'s writes: its own, its children's, its grandchildren's."""
        own = self.by_lg.get(lg_id)
        found = [*([own] if own is not None else []), *self.kids.get(lg_id, []), *self.grandkids(lg_id)]
        return list({r["id"]: r for r in found}.values())


async def collect_history(
    saver: SaverReads, at: str, m: Manifest, target: str | None, channels: Iterable[str], *, exact: bool = False
) -> dict[str, History]:
    """The history of ``channels`` at LangGraph checkpoint ``target`` of archive thread ``at``, from
    its manifest ``m`` (the module docstring says what is read).

    ``exact``: also the objects of every ancestor that no state carries (found by one recursive LIST
    of the thread's writes): what a prune folds into the checkpoint it keeps, before it deletes the
    ancestors' objects."""
    channels = list(channels)
    result = {ch: History() for ch in channels}
    lineage = Lineage(m)
    info = lineage.by_lg.get(target) if target else None
    if info is None:
        return result
    remaining = set(channels)
    if lineage.orphan(info):  # a kept checkpoint of a prune: its fold ends the walk first
        state = (await saver.states(at, [info["id"]], m)).get(info["id"]) or {}
        for ch, doc in (state.get("folded") or {}).items():
            if ch in remaining:
                result[ch] = History.from_json(doc)
                remaining.discard(ch)
    memo, seed_memo = saver._memo["writes"], saver._memo["seeds"]
    seeds: dict[tuple[str, str], Any] = {}  # (record id, channel) -> its entry, known without its state
    # plan: the ancestors up to every channel's seed, and what must be read of them
    span: list[Record] = []
    need: set[str] = set()  # record ids whose states are read
    planning = set(remaining)
    for a in lineage.ancestors(record_lg_ids(info)[1]):
        if not planning:
            break
        span.append(a)
        ends = _ends(a)
        if ends is None or lineage.orphan(a):
            need.add(a["id"])  # its state says which channels it ends (values, folded)
        for ch in planning & (ends or set()):
            key = (at, _version(a), ch)
            if key in seed_memo:
                seed_memo.move_to_end(key)
                seeds[(a["id"], ch)] = seed_memo[key]
            else:
                need.add(a["id"])
        planning -= ends or set()
    carried: dict[str, W.Objects] = {}
    keys: dict[str, tuple[str, ...]] = {}
    for a in span:
        x = record_lg_ids(a)[0]
        carriers = lineage.carriers(x)
        keys[x] = (at, x, *sorted(_version(r) for r in carriers))
        held = memo.get(keys[x])
        if held is not None:
            memo.move_to_end(keys[x])
            carried[x] = held
        else:
            need.update(r["id"] for r in carriers)
    lgs = [record_lg_ids(a)[0] for a in span]
    recent = [x for x in lgs if not lineage.grandkids(x)]

    # read: the states, and the objects' names, in one round trip
    states, names = await asyncio.gather(saver.states(at, sorted(need), m), saver.write_names(at, lgs, recent, exact))
    for a in span:
        x = record_lg_ids(a)[0]
        if x not in carried:
            objects: W.Objects = {}
            for r in lineage.carriers(x):
                objects.update(W.carried(states.get(r["id"]), x, f"checkpoint {r['id']!r} of thread {at!r}"))
            carried[x] = objects
            _remember(memo, keys[x], objects, MEMO_WRITES)
    # then the objects no state carries (the target's parent's, landed during the target's put), once
    object_memo = saver._memo["objects"]
    read: dict[str, W.Objects] = {}
    todo: dict[str, list[str]] = {}
    for x in lgs:
        for n in names[x]:
            if n in carried[x]:
                continue
            held = object_memo.get((at, x, n))
            if held is not None:
                read.setdefault(x, {})[n] = held
            else:
                todo.setdefault(x, []).append(n)
    got = await asyncio.gather(*(W.fetch(saver.contents, at, x, ns) for x, ns in todo.items()))
    for x, objs in zip(todo, got, strict=True):
        read.setdefault(x, {}).update(objs)
        for n, obj in objs.items():
            _remember(object_memo, (at, x, n), obj, MEMO_WRITES)
        if objs and x in recent:  # the next put of a (grand)child carries these
            saver.known_writes(at, x, record_lg_ids(lineage.by_lg[x])[1], objs)

    # scan, newest first, as InMemorySaver does
    newest_first: dict[str, list[tuple[str, str, Any]]] = {ch: [] for ch in channels}
    for a in span:
        if not remaining:
            break
        x = record_lg_ids(a)[0]
        for task_id, _, channel, blob, _ in reversed(W.merge({**carried[x], **read.get(x, {})})):
            if channel in remaining:
                newest_first[channel].append((task_id, channel, blob))
        state = states.get(a["id"])
        stored = (state or {}).get("channels", {})
        folded = (state or {}).get("folded") or {}
        ends = _ends(a) if state is None else {ch for ch in remaining if _has_value(stored.get(ch))}
        for ch in list(remaining):
            if ends is not None and ch in ends:
                if state is not None:
                    result[ch].seed = stored[ch]
                    _remember(seed_memo, (at, _version(a), ch), stored[ch], MEMO_SEEDS)
                else:
                    result[ch].seed = seeds[(a["id"], ch)]
            elif ch in folded:
                old = History.from_json(folded[ch])
                newest_first[ch].extend(reversed(old.writes))
                result[ch].seed = old.seed
            else:
                continue
            remaining.discard(ch)
    for ch, collected in newest_first.items():
        if collected:  # channels folded at the target itself collected nothing here
            result[ch].writes = list(reversed(collected))
    return result
