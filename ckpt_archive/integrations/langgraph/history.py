"""``get_delta_channel_history`` over the archive: the parent-chain walk of LangGraph's savers.

The walk itself (plan and scan) is ``format.langgraph``'s, the one the offline reader
(``analysis.replay``) takes too; this module reads what it plans, through the archive's part cache.
Semantics are InMemorySaver's: walking from the target's parent towards the root, a channel stops
at the nearest ancestor whose stored entry has a value (the *seed*); that ancestor's own writes are
still collected. A checkpoint kept by ``prune``/``delete_for_runs`` whose ancestors went away carries
the history it needed in ``state["folded"]`` (seed and writes, as blobs), which ends the walk the same
way, so pruning never silently empties a ``DeltaChannel``.

The walk is planned on the manifest alone: each record's LangGraph metadata lists the channels it
stores a value for (``values``, written by ``ArchiveSaver._put``), so the ancestors up to the seed are
known before anything is read. Then, in one round trip, the parts of the states the walk needs are
read (``ArchiveCheckpointer.aparts``: the seeds' entries, and the carried writes of the states carrying
the ancestors' writes -- their own, children's and grandchildren's, ``writes.py``), from the archive's
part cache (keyed by record version, bounded, outliving its state cache) or built together in one walk,
while the objects' names are read (``SaverReads.write_names``: the folders of the ancestors without a
grandchild, such as the target's parent, whose writes may land during the target's put; no record may
carry those yet, and a new saver lists no more than the graph's own). Only the objects no state carries are read
apart, in a second round trip when there are any (kept by the archive too: ``ArchiveCheckpointer.held``). So the
walk at the start of each turn reads the manifest probe and one folder, whatever the distance to the
seed (spec.md section 11, "History walks", says what a saver so does not see).

Records written without ``values``, or whose state was replaced (version > 1), and the one record of a
walk that may hold ``folded`` (the oldest, when its LangGraph parent is not in the thread: removed by a
prune) are read to decide.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from ...format.langgraph import History as History  # the saver's history type: its home is the walk's
from ...format.langgraph import folds, partial, plan, scan
from ...format.manifest import Manifest
from . import writes as W
from .reading import SaverReads


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
    lineage = saver.lineage(at, m)
    info = lineage.by_lg.get(target) if target else None
    if info is None or target is None:
        return result
    folded: dict[str, History] = {}
    if lineage.orphan(info):  # a kept checkpoint of a prune: its fold ends the walk first
        own = await saver.archive.aparts(at, {info["id"]: {("folded",)}}, m)
        folded = folds(partial(own.get(info["id"], {})), channels)
    result.update(folded)
    remaining = [ch for ch in channels if ch not in folded]
    walk = plan(lineage, target, remaining)
    lgs, recent = walk.lg_ids, walk.recent()

    # read: the parts of the states (``Walk.parts``: the seeds' entries, what the carriers carry; from the
    # archive's part cache, ``ArchiveCheckpointer.aparts``), and the objects' names, in one round trip
    parts, names = await asyncio.gather(
        saver.archive.aparts(at, walk.parts(), m), saver.write_names(at, lgs, recent, exact)
    )
    states = {rid: partial(got) for rid, got in parts.items()}
    carried = {x: lineage.carried(x, states) for x in lgs}
    # then the objects no state carries (the target's parent's, landed during the target's put), once:
    # ``W.fetch`` serves an object read before from the archive's cache (``ArchiveCheckpointer.held``)
    todo = {x: rest for x in lgs if (rest := [n for n in names[x] if n not in carried[x]])}
    got = await asyncio.gather(*(W.fetch(saver.contents, at, x, ns) for x, ns in todo.items()))
    read: dict[str, W.Objects] = dict(zip(todo, got, strict=True))
    for x, objs in read.items():
        if objs and x in recent:  # the next put of a (grand)child carries these
            saver.known_writes(at, x, lineage.lg(lineage.by_lg[x])[1], objs)

    # scan, newest first, as InMemorySaver does (format.langgraph: the one walk)
    result.update(scan(walk, remaining, states, {x: {**carried[x], **read.get(x, {})} for x in lgs}))
    return result
