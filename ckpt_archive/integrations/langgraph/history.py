"""``get_delta_channel_history`` over the archive: the parent-chain walk of LangGraph's savers.

The walk itself (plan and scan) is ``format.langgraph``'s, the one the offline reader
(``analysis.replay``) takes too; this module reads what it plans, through the saver's caches.
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
from typing import Any

from ...format.langgraph import History as History  # the saver's history type: its home is the walk's
from ...format.langgraph import Lineage, folds, has_value, plan, record_lg_ids, scan, version
from ...format.manifest import Manifest
from . import writes as W
from .reading import SaverReads
from .reading import remember as _remember

MEMO_WRITES = 4096
"""Ancestors whose carried writes a saver keeps (``_memo``): a few MB for 1 KB messages."""
MEMO_SEEDS = 16
"""Seed entries a saver keeps (a ``_DeltaSnapshot`` holds the whole list as of its checkpoint)."""


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
    if info is None or target is None:
        return result
    folded: dict[str, History] = {}
    if lineage.orphan(info):  # a kept checkpoint of a prune: its fold ends the walk first
        folded = folds((await saver.states(at, [info["id"]], m)).get(info["id"]), channels)
    result.update(folded)
    remaining = [ch for ch in channels if ch not in folded]
    walk = plan(lineage, target, remaining)
    memo, seed_memo = saver._memo["writes"], saver._memo["seeds"]
    # what must be read: the states that decide, the seeds' and the carriers' the memo does not hold
    need = set(walk.decide)
    seeds: dict[tuple[str, str], Any] = {}  # (record id, channel) -> its entry, known without its state
    by_id = {a["id"]: a for a in walk.span}
    for rid, ch in walk.seeds:
        key = (at, version(by_id[rid]), ch)
        if key in seed_memo:
            seed_memo.move_to_end(key)
            seeds[(rid, ch)] = seed_memo[key]
        else:
            need.add(rid)
    carried: dict[str, W.Objects] = {}
    keys: dict[str, tuple[str, ...]] = {}
    for x, carriers in walk.carriers().items():
        keys[x] = (at, x, *sorted(version(r) for r in carriers))
        held = memo.get(keys[x])
        if held is not None:
            memo.move_to_end(keys[x])
            carried[x] = held
        else:
            need.update(r["id"] for r in carriers)
    lgs, recent = walk.lg_ids, walk.recent()

    # read: the states, and the objects' names, in one round trip
    states, names = await asyncio.gather(saver.states(at, sorted(need), m), saver.write_names(at, lgs, recent, exact))
    for x in lgs:
        if x not in carried:
            carried[x] = lineage.carried(x, states)
            _remember(memo, keys[x], carried[x], MEMO_WRITES)
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

    # scan, newest first, as InMemorySaver does (format.langgraph: the one walk)
    found = scan(walk, remaining, states, {x: {**carried[x], **read.get(x, {})} for x in lgs}, seeds)
    for rid, ch in walk.seeds:  # the seed entries read: the next walk needs no state for them
        entry = ((states.get(rid) or {}).get("channels") or {}).get(ch)
        if (rid, ch) not in seeds and has_value(entry):
            _remember(seed_memo, (at, version(by_id[rid]), ch), entry, MEMO_SEEDS)
    result.update(found)
    return result
