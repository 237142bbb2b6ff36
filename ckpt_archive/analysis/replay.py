"""A LangGraph thread's ``DeltaChannel`` message lists rebuilt offline, as ``get_state`` rebuilds them.

Between its ``_DeltaSnapshot``s a ``DeltaChannel`` stores no value in the checkpoint (spec.md section 11:
the channel has a version and no cell); LangGraph rebuilds it from the nearest ancestor that holds one
(the seed) and every pending write to the channel on the LangGraph parent chain since, folded by the
channel's reducer. ``Views.of`` does the same from the archive alone: the thread's records (their states
carry their parents' and grandparents' write objects), the write objects no state carries (one listing of
the thread's writes folder, a GET each), merged as the saver merges them (``writes.merge``:
``(task_path, task_id, idx)`` order), folded by LangGraph's own ``_messages_delta_reducer`` (the
reducer LangGraph documents for a message ``DeltaChannel``; the archive does not store which one a graph
declared)
(``values.fold_messages``) on messages rebuilt from their JSON cells (``values.decode_message``: the
allowlisted classes only; no serde runs, so a channel whose writes are serde bytes stays absent, as a
channel whose writes are not messages does). Reading only: nothing is written, no code the archive
names is run.
"""

from __future__ import annotations

from typing import Any

from .._sync import run_sync
from ..archive import ArchiveCheckpointer
from ..format import langgraph as L
from ..format.content import Path
from ..format.langgraph import metadata_lg_ids as metadata_lg_ids  # one parser of the record key
from ..model import Checkpoint
from .conversation import view


def lg_ids(ckpt: Checkpoint) -> tuple[str, str | None] | None:
    """(LangGraph id, LangGraph parent id) of a record the saver wrote, else None."""
    return metadata_lg_ids(ckpt.metadata)


def load_named(archive: ArchiveCheckpointer, thread_id: str, name: str) -> Checkpoint | None:
    """The checkpoint of ``thread_id`` that ``name`` names: an archive id, or the LangGraph checkpoint id
    a LangGraph user knows (``get_state(config).config``; the record's metadata, spec.md section 11).
    The archive id is tried first and wins: it names one record and has the archive's ``~<thread>``
    form, which a LangGraph id (uuid6 text) never has, so both cannot match; of several records of one
    LangGraph id, the latest (the one LangGraph reads). None when neither names one of the thread."""
    ckpt = archive.load_by_id(name)
    if ckpt is not None and ckpt.thread_id == thread_id:
        return ckpt
    named = [i for i in archive.list(thread_id) if (metadata_lg_ids(i.metadata) or (None,))[0] == name]
    return archive.load_by_id(named[-1].checkpoint_id) if named else None


LOOKAHEAD = 16
"""Records after the newest one a walk asks for whose carried writes are read with it (``_Thread.states``)."""


class _Thread:
    """One archive thread's LangGraph lineage (its manifest: no state built) and the channels' values
    folded so far, by (LangGraph id, channel): a checkpoint's value is walked (``format.langgraph``, the
    walk ``get_delta_channel_history`` takes) from its parent to the nearest seed or value folded
    before, reading only the states and write objects of that range."""

    def __init__(self, archive: ArchiveCheckpointer, thread_id: str) -> None:
        self.archive, self.thread_id = archive, thread_id
        self.m = run_sync(archive.amanifest(thread_id))[0]
        self.lineage = L.Lineage(self.m)
        self.folded: dict[tuple[str, str], list[Any] | None] = {}
        self._index: dict[str, list[str]] | None = None  # the thread's write objects' names (one LIST)
        self.ids = list(self.m.records)  # commit order
        self.order = {rid: i for i, rid in enumerate(self.ids)}
        self.ahead_to = -1  # the records up to this index were read ahead (``states``)

    def states(self, wanted: dict[str, set[Path]]) -> dict[str, dict[str, Any]]:
        """The parts of records' states a walk reads (``Walk.parts``), as ``scan`` reads them: from the
        archive's part cache, the states it does not hold built in one walk (``ArchiveCheckpointer.aparts``).

        A frame over every checkpoint (``changes_frame``) asks, checkpoint after checkpoint, for the
        carried writes of the records just after each (a child carries its parent's writes, a grandchild
        the late ones): the ``LOOKAHEAD`` records after the newest one asked for are read in the same
        walk, so each record is built about once, not once per neighbour asking."""
        if not wanted:
            return {}
        newest = max(self.order.get(rid, -1) for rid in wanted)
        ahead: dict[str, set[Path]] = {}
        if newest >= self.ahead_to:  # the records past the last lookahead: the next block of them
            ahead = {rid: {("writes",)} for rid in self.ids[newest + 1 : newest + 1 + LOOKAHEAD] if rid not in wanted}
            self.ahead_to = newest + LOOKAHEAD
        got = run_sync(self.archive.aparts(self.thread_id, {**wanted, **ahead}, self.m))
        return {rid: L.partial(parts) for rid, parts in got.items() if rid in wanted}

    def objects(self, walk: L.Walk, states: dict[str, dict[str, Any]]) -> dict[str, L.Objects]:
        """Every write object of the walk's ancestors: those their carriers' states carry, and the ones
        no state carries (found in one LIST of the thread's writes, a GET each)."""
        from ..format import layout
        from ..integrations.langgraph import writes as W

        if self._index is None:
            self._index = run_sync(W.index_thread(self.archive.store, self.thread_id))
        out: dict[str, L.Objects] = {}
        for x in walk.lg_ids:
            held = out[x] = self.lineage.carried(x, states)
            rest = [n for n in self._index.get(layout.writes_dir(self.thread_id, x), []) if n not in held]
            if rest:
                held.update(run_sync(W.fetch(self.archive, self.thread_id, x, rest)))
        return out

    def value(self, x: str, channel: str) -> list[Any] | None:
        """The channel's messages at LangGraph checkpoint ``x`` (None: not a message list, or ``x`` is
        not in the thread): the seed's (or a value folded before), folded with the writes since by
        LangGraph's reducer; no seed: LangGraph starts the channel empty."""
        from ..integrations.langgraph import values

        if (x, channel) in self.folded:
            return self.folded[(x, channel)]
        rec = self.lineage.by_lg.get(x)
        if rec is None:
            return None
        h = None
        if self.lineage.orphan(rec):  # pruned to: its own state may hold the history (``folded``)
            h = L.folds(self.states({rec["id"]: {("folded",)}}).get(rec["id"]), [channel]).get(channel)
        if h is None:
            stops = {y: (channel,) for (y, ch) in self.folded if ch == channel}
            walk = L.plan(self.lineage, x, [channel], stops)
            states = self.states(walk.parts())
            h = L.scan(walk, [channel], states, self.objects(walk, states))[channel]
        base = (
            self.folded[(h.stop, channel)]
            if h.stop is not None
            else []
            if h.seed is None
            else values.seed_messages(h.seed)
        )
        value = None if base is None else values.fold_messages(base, [cell for _, _, cell in h.writes])
        self.folded[(x, channel)] = value
        return value


class Views:
    """Readable states (``conversation.view``) of an archive's checkpoints, with each LangGraph
    ``DeltaChannel`` message list that the checkpoint does not store rebuilt from the thread (read once
    per thread, on the first checkpoint that needs it)."""

    def __init__(self, archive: ArchiveCheckpointer) -> None:
        self.archive = archive
        self._threads: dict[str, _Thread] = {}
        self._dumps: dict[int, tuple[Any, dict[str, Any]]] = {}

    def of(self, ckpt: Checkpoint) -> dict[str, Any]:
        shown = view(ckpt.state)
        ids = lg_ids(ckpt)
        if ids is None or shown is ckpt.state:
            return shown
        from ..integrations.langgraph import values

        missing = values.replayed(ckpt.state)
        if not missing:
            return shown
        thread = self._threads.get(ckpt.thread_id)
        if thread is None:
            thread = self._threads[ckpt.thread_id] = _Thread(self.archive, ckpt.thread_id)
        for channel in missing:
            messages = thread.value(ids[0], channel)
            if messages is not None:
                shown[channel] = [self._readable(m) for m in messages]
        return dict(sorted(shown.items()))

    def _readable(self, message: Any) -> dict[str, Any]:
        """A message's JSON, once per message object (the folded lists share their messages)."""
        from ..integrations.langgraph import values

        hit = self._dumps.get(id(message))
        if hit is None or hit[0] is not message:
            hit = self._dumps[id(message)] = (message, values.readable_message(message))
        return hit[1]
