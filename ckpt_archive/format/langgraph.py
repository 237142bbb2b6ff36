"""LangGraph's records in an archive (spec.md section 11), pure: their lineage, the pending writes their
states carry, and THE walk of a ``DeltaChannel``'s LangGraph parent chain.

Pure (no I/O, no ``langgraph`` import), so that both readers of a ``DeltaChannel`` walk the chain one way:
the saver's ``get_delta_channel_history`` (``integrations/langgraph/history.py``: the stored cells, for
LangGraph to fold) and the offline reader (``analysis/replay.py``: the messages folded by LangGraph's
reducer, on archives read where the ``langgraph`` extra is not installed). Each plans a walk on the
manifest's records (``plan``), reads the states and write objects the plan names its own way (caches,
round trips), and hands them to ``scan``.

Semantics are InMemorySaver's: walking from the target's parent towards the root, a channel stops at the
nearest ancestor whose stored entry has a value (the *seed*); that ancestor's own writes are still
collected. A checkpoint kept by a prune whose ancestors went away carries the history it needed in
``state["folded"]`` (seed and writes), which ends the walk the same way. A caller that already knows the
channel's value at some ancestor (the offline reader's folded values) passes it as a ``stop``: the walk
ends there as at a seed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..errors import CheckpointError
from ..model import LANGGRAPH_KEY
from .content import Path
from .manifest import Manifest, Record

Entry = tuple[str, int, str, Any, str]  # task_id, idx, channel, cell, task_path
Obj = list[Any]  # [task_id, task_path, [[idx, channel, <cell>], ...]]: one put_writes call
Objects = dict[str, Obj]  # object name -> its writes
State = Mapping[str, Any]


# -- LangGraph ids ---------------------------------------------------------------------------------
def metadata_lg_ids(metadata: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """(LangGraph id, LangGraph parent id) from a record's (or a listing entry's) metadata, or None when
    the record is not the saver's (spec.md section 11: ``ckpt_archive.langgraph``)."""
    marker = metadata.get(LANGGRAPH_KEY)
    if not isinstance(marker, dict) or not isinstance(marker.get("id"), str):
        return None
    parent = marker.get("parent")
    return marker["id"], parent if isinstance(parent, str) else None


def lg_of(metadata: Mapping[str, Any], checkpoint_id: str) -> tuple[str, str | None]:
    """``metadata_lg_ids``, a record that is not the saver's being its own LangGraph id, with no parent."""
    return metadata_lg_ids(metadata) or (checkpoint_id, None)


def record_lg_ids(rec: Record) -> tuple[str, str | None]:
    """``lg_of`` of a manifest record (no ``CheckpointInfo`` built)."""
    return lg_of(rec.get("metadata") or {}, rec["id"])


def ends(rec: Record) -> set[str] | None:
    """The channels ``rec`` stores a value for, from its metadata (``values``); None when only its state
    can say (no ``values``, or a state replaced since its put: version > 1)."""
    values = ((rec.get("metadata") or {}).get(LANGGRAPH_KEY) or {}).get("values")
    if type(values) is not list or int(rec.get("version", 1)) != 1:
        return None
    return {v for v in values if type(v) is str}


def has_value(entry: Any) -> bool:
    """Does a stored channel entry hold a value (the seed of a walk)?"""
    return entry is not None


def version(rec: Record) -> str:
    """A record version's name: what a cache of anything derived from its state is keyed by."""
    return f"{rec['id']}@{int(rec.get('version', 1))}"


# -- pending writes carried by states --------------------------------------------------------------
def checked(obj: Any, where: str) -> Obj:
    """An object's writes as stored (in its own object or carried by a state), checked for shape: whoever
    wrote the archive chose them, and a malformed one is a typed error naming where it was."""
    ok = type(obj) is list and len(obj) == 3 and type(obj[0]) is str and type(obj[1]) is str
    if ok and type(obj[2]) is list:
        for e in obj[2]:
            if not (type(e) is list and len(e) == 3 and type(e[0]) is int and type(e[1]) is str):
                ok = False
                break
    else:
        ok = False
    if not ok:
        raise CheckpointError(f"pending writes {where} are malformed: {str(obj)[:100]}; delete them")
    return obj  # type: ignore[no-any-return]


def carried(state: State | None, checkpoint_id: str, where: str) -> Objects:
    """The objects of ``checkpoint_id`` a state carries (``state["writes"]``), checked."""
    held = (state or {}).get("writes")
    if held is None:
        return {}
    if not isinstance(held, dict) or not isinstance(held.get(checkpoint_id, {}), dict):
        raise CheckpointError(f"pending writes carried by {where} are malformed; delete the checkpoint")
    return {str(n): checked(o, f"{n!r} carried by {where}") for n, o in held.get(checkpoint_id, {}).items()}


def merge(objects: Mapping[str, Obj]) -> list[Entry]:
    """A checkpoint's writes from its objects, in ``(task_path, task_id, idx)`` order: objects apply in
    name (call) order; a regular ``(task_id, idx)`` keeps its first value, a special one its last."""
    found: dict[tuple[str, int], Entry] = {}
    for name in sorted(objects):
        task_id, task_path, writes = objects[name]
        for idx, channel, blob in writes:
            key = (task_id, idx)
            if idx >= 0 and key in found:
                continue
            found[key] = (task_id, idx, channel, blob, task_path)
    return sorted(found.values(), key=lambda e: (e[4], e[0], e[1]))


# -- the lineage -----------------------------------------------------------------------------------
class Lineage:
    """The LangGraph lineage of one archive thread, from its manifest records (nothing else built).

    ``base``: a lineage built before from an earlier manifest of the thread. When ``m``'s records start
    with ``base``'s (the same records in the same order: commits since only added records), only the
    records after them are read, onto copies of ``base``'s maps (``base`` is never changed: another walk
    may hold it); otherwise (a prune, a replaced state, another thread) it is built from every record.
    Either way it equals ``Lineage(m)``: a saver's history walks, one a turn, each extend the last one's
    (``SaverReads.lineage``) rather than reading every record of the thread again."""

    def __init__(self, m: Manifest, base: Lineage | None = None) -> None:
        self.thread_id = m.thread_id
        self.records: list[Record] = list(m.records.values())
        self.by_lg: dict[str, Record] = {}
        self.kids: dict[str, list[Record]] = {}
        self.ids: dict[str, tuple[str, str | None]] = {}
        """Archive record id -> its ``record_lg_ids``, read once per record (``lg``): a walk asks them of
        every ancestor it passes, several times, and a turn's walk passes hundreds."""
        start = len(base.records) if base is not None and self._extend(base) else 0
        self.read = len(self.records) - start
        """How many records this lineage read the LangGraph ids of (all but those it took from ``base``)."""
        copied: set[str] = set()  # the kids lists of base's this one appended to (copied first)
        for rec in self.records[start:] if start else self.records:
            lg, parent = self.ids[rec["id"]] = record_lg_ids(rec)
            self.by_lg[lg] = rec  # a later put of the same id replaces the earlier one
            if parent is not None:  # every record, replaced ones too
                if start and parent not in copied:
                    self.kids[parent] = list(self.kids.get(parent, ()))
                    copied.add(parent)
                self.kids.setdefault(parent, []).append(rec)

    def _extend(self, base: Lineage) -> bool:
        """Take ``base``'s maps when this lineage's records start with ``base``'s: the same records (one
        list comparison, by identity first), or records a compaction replaced by copies that point at
        their moved rows (the same id, version and metadata, so the same place in the lineage: the
        copies are put in their place). False, and nothing taken, otherwise."""
        n = len(base.records)
        if base.thread_id != self.thread_id or n > len(self.records):
            return False
        if self.records[:n] == base.records:
            self.by_lg, self.kids, self.ids = dict(base.by_lg), dict(base.kids), dict(base.ids)
            return True
        moved: dict[int, Record] = {}
        for old, new in zip(base.records, self.records, strict=False):
            if old is not new:
                if old["id"] != new["id"] or old.get("version") != new.get("version"):
                    return False
                if old.get("metadata") != new.get("metadata"):
                    return False
                moved[id(old)] = new
        self.by_lg = {lg: moved.get(id(r), r) for lg, r in base.by_lg.items()}
        self.kids = {p: [moved.get(id(r), r) for r in rs] for p, rs in base.kids.items()}
        self.ids = dict(base.ids)  # a copy keeps its record's id and metadata, so its LangGraph ids
        return True

    def lg(self, rec: Record) -> tuple[str, str | None]:
        """``record_lg_ids`` of a record of this lineage, as read when the lineage was built."""
        got = self.ids.get(rec["id"])
        return record_lg_ids(rec) if got is None else got

    def ancestors(self, cursor: str | None) -> Iterable[Record]:
        """The records from LangGraph id ``cursor`` towards the root, until the chain leaves the thread
        (pruned) or meets itself (a forged cycle: the walk stops there)."""
        seen: set[str] = set()
        while cursor is not None and cursor not in seen:
            rec = self.by_lg.get(cursor)
            if rec is None:
                return
            seen.add(cursor)
            yield rec
            cursor = self.lg(rec)[1]

    def orphan(self, rec: Record) -> bool:
        """Is ``rec``'s LangGraph parent gone from the thread (a prune)? Only such a record holds ``folded``."""
        parent = self.lg(rec)[1]
        return parent is not None and parent not in self.by_lg

    def grandkids(self, lg_id: str) -> list[Record]:
        return [g for k in self.kids.get(lg_id, []) for g in self.kids.get(self.lg(k)[0], [])]

    def carriers(self, lg_id: str) -> list[Record]:
        """The records whose states may carry ``lg_id``'s writes: its own, its children's, its grandchildren's."""
        own = self.by_lg.get(lg_id)
        found = [*([own] if own is not None else []), *self.kids.get(lg_id, []), *self.grandkids(lg_id)]
        return list({r["id"]: r for r in found}.values())

    def carried(self, lg_id: str, states: Mapping[str, State]) -> Objects:
        """The objects of ``lg_id`` that the states of its carriers (those in ``states``) carry."""
        objects: Objects = {}
        for r in self.carriers(lg_id):
            where = f"checkpoint {r['id']!r} of thread {self.thread_id!r}"
            objects.update(carried(states.get(r["id"]), lg_id, where))
        return objects


# -- the walk --------------------------------------------------------------------------------------
@dataclass
class History:
    """One channel's history as stored: ``seed`` a channel entry or None, ``writes`` (task_id, channel,
    cell) oldest first; ``stop``: the LangGraph id of the ancestor whose value the caller gave (``plan``'s
    ``stops``) where the walk ended instead of at a seed (the writes then apply to that value)."""

    seed: Any = None
    writes: list[tuple[str, str, Any]] = field(default_factory=list)
    stop: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"writes": [list(w) for w in self.writes]}
        if self.seed is not None:
            out["seed"] = self.seed
        return out

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> History:
        return cls(doc.get("seed"), [(w[0], w[1], w[2]) for w in doc.get("writes", [])])


def folds(state: State | None, channels: Iterable[str]) -> dict[str, History]:
    """The histories a pruned-to checkpoint's own state holds (``folded``) for ``channels``: they end the
    walk at the target itself (read its state first when ``Lineage.orphan`` says it may hold them)."""
    held = (state or {}).get("folded") or {}
    return {ch: History.from_json(held[ch]) for ch in channels if ch in held}


@dataclass
class Walk:
    """One walk planned on the manifest: ``span``, the target's ancestors newest first up to where every
    channel ends as far as their metadata says; ``decide``, the record ids whose states say what they
    end (no ``values``, or a pruned-to record that may hold ``folded``); ``seeds``, (record id, channel)
    of the seeds their metadata names (their entries are in their states)."""

    lineage: Lineage
    channels: list[str]
    span: list[Record]
    decide: set[str]
    seeds: set[tuple[str, str]]
    stops: Mapping[str, Collection[str]]

    @cached_property
    def lg_ids(self) -> list[str]:
        """The span's LangGraph ids, newest first."""
        return [self.lineage.lg(a)[0] for a in self.span]

    def recent(self) -> list[str]:
        """The span's LangGraph ids without a grandchild: where write objects may land that no state
        carries yet (a put carries its parent's and grandparent's)."""
        return [x for x in self.lg_ids if not self.lineage.grandkids(x)]

    def carriers(self) -> dict[str, list[Record]]:
        """Each ancestor's LangGraph id -> the records whose states may carry its writes."""
        return {x: self.lineage.carriers(x) for x in self.lg_ids}

    def parts(self) -> dict[str, set[Path]]:
        """What the walk reads of each record's state (record id -> paths in it, for
        ``ArchiveCheckpointer.aparts``): what decides the ends of a record in ``decide``, the seeds'
        entries, the writes each carrier carries. Read them, then pass ``partial`` of each to ``scan``."""
        wanted: dict[str, set[Path]] = {}
        for rid in self.decide:
            wanted.setdefault(rid, set()).update(DECIDE)
        for rid, ch in self.seeds:
            wanted.setdefault(rid, set()).add(("channels", ch))
        for carriers in self.carriers().values():
            for r in carriers:
                wanted.setdefault(r["id"], set()).add(("writes",))
        return wanted


DECIDE: tuple[Path, ...] = (("channels",), ("folded",))
"""What a record whose metadata does not say which channels it ends is read for (``Walk.parts``)."""


def partial(got: Mapping[Path, Any]) -> dict[str, Any]:
    """The parts read of a state (``Walk.parts``) as the state ``scan`` and ``Lineage.carried`` read
    (only those keys). Parts may be shared with a cache and are never mutated: a key within a part
    read whole is left to the whole."""
    state: dict[str, Any] = {}
    whole = {path[0] for path in got if len(path) == 1}
    for path, value in got.items():
        if value is None:
            continue
        if len(path) == 1:
            state[path[0]] = value
        elif path[0] not in whole:
            state.setdefault(path[0], {})[path[1]] = value
    return state


def plan(
    lineage: Lineage, target: str, channels: Iterable[str], stops: Mapping[str, Collection[str]] | None = None
) -> Walk:
    """The walk of ``channels`` from the LangGraph parent of ``target`` (which must be in ``lineage``):
    the ancestors up to each channel's seed (or the ``stops`` the caller gives: LangGraph id -> channels
    whose value there it knows), planned on the records' metadata alone."""
    stops = stops or {}
    channels = list(channels)
    span: list[Record] = []
    decide: set[str] = set()
    seeds: set[tuple[str, str]] = set()
    planning = set(channels)
    for a in lineage.ancestors(lineage.lg(lineage.by_lg[target])[1]):
        if not planning:
            break
        span.append(a)
        known = ends(a)
        if known is None or lineage.orphan(a):
            decide.add(a["id"])  # its state says which channels it ends (values, folded)
        stopped = planning & set(stops.get(lineage.lg(a)[0], ()))
        seeds.update((a["id"], ch) for ch in planning & (known or set()) - stopped)
        planning -= (known or set()) | stopped
    return Walk(lineage, channels, span, decide, seeds, stops)


def scan(
    walk: Walk,
    channels: Iterable[str],
    states: Mapping[str, State],
    objects: Mapping[str, Objects],
    known: Mapping[tuple[str, str], Any] | None = None,
) -> dict[str, History]:
    """The histories of ``channels`` along a planned walk, newest first as InMemorySaver scans: each
    ancestor's writes (``objects``: its LangGraph id -> every object of it, carried or read apart,
    merged in call order), then whether it ends a channel: a ``stop`` of the plan, a stored value in its
    state (``states``: record id -> state, those read) or, for a state not read, the seed entry
    ``known`` holds ((record id, channel) -> entry, for the plan's ``seeds``), or a ``folded`` history.
    A channel that reaches the end of the span unended has no seed: LangGraph starts it empty."""
    channels = list(channels)
    known = known or {}
    result = {ch: History() for ch in channels}
    remaining = set(channels)
    newest_first: dict[str, list[tuple[str, str, Any]]] = {ch: [] for ch in channels}
    for a in walk.span:
        if not remaining:
            break
        x = walk.lineage.lg(a)[0]
        for task_id, _, channel, cell, _ in reversed(merge(objects.get(x, {}))):
            if channel in remaining:
                newest_first[channel].append((task_id, channel, cell))
        state = states.get(a["id"])
        stored = (state or {}).get("channels") or {}
        folded = (state or {}).get("folded") or {}
        ended = ends(a) if state is None else {ch for ch in remaining if has_value(stored.get(ch))}
        stopped = set(walk.stops.get(x, ()))
        for ch in list(remaining):
            if ch in stopped:
                result[ch].stop = x
            elif ended is not None and ch in ended:
                result[ch].seed = stored[ch] if state is not None else known[(a["id"], ch)]
            elif ch in folded:
                old = History.from_json(folded[ch])
                newest_first[ch].extend(reversed(old.writes))
                result[ch].seed = old.seed
            else:
                continue
            remaining.discard(ch)
    for ch, collected in newest_first.items():
        result[ch].writes = list(reversed(collected))
    return result
