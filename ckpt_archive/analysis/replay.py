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
from ..model import LANGGRAPH_KEY as LG_KEY
from ..model import Checkpoint
from .conversation import view


def lg_ids(ckpt: Checkpoint) -> tuple[str, str | None] | None:
    """(LangGraph id, LangGraph parent id) of a record the saver wrote, else None."""
    return metadata_lg_ids(ckpt.metadata)


def metadata_lg_ids(metadata: dict[str, Any]) -> tuple[str, str | None] | None:
    """``lg_ids`` from a record's (or a listing entry's) metadata."""
    marker = metadata.get(LG_KEY)
    if not isinstance(marker, dict) or not isinstance(marker.get("id"), str):
        return None
    parent = marker.get("parent")
    return marker["id"], parent if isinstance(parent, str) else None


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


class _Thread:
    """One archive thread's records by LangGraph id, their write objects, and the folded values."""

    def __init__(self, archive: ArchiveCheckpointer, thread_id: str) -> None:
        from ..integrations.langgraph import writes as W

        self.records: dict[str, Checkpoint] = {}
        self.parent: dict[str, str | None] = {}
        every = list(archive.history(thread_id))
        for ckpt in every:
            ids = lg_ids(ckpt)
            if ids is not None:  # a later record of the same LangGraph id wins (spec.md section 11)
                self.records[ids[0]], self.parent[ids[0]] = ckpt, ids[1]
        objects: dict[str, W.Objects] = {x: {} for x in self.records}
        for ckpt in every:  # a replaced record's carried copies count too (they are the same objects)
            held = ckpt.state.get("writes")
            for x in held if isinstance(held, dict) else ():
                if x in objects:
                    objects[x].update(W.carried(ckpt.state, x, f"checkpoint {ckpt.checkpoint_id!r}"))
        from ..format import layout

        index = run_sync(W.index_thread(archive.store, thread_id))
        contents = archive  # the archive's one encoding of stored values (blobs): its public API
        for x, held_objects in objects.items():
            rest = [n for n in index.get(layout.writes_dir(thread_id, x), []) if n not in held_objects]
            if rest:
                held_objects.update(run_sync(W.fetch(contents, thread_id, x, rest)))
        self.entries = {x: W.merge(objs) for x, objs in objects.items()}
        self.folded: dict[tuple[str, str], list[Any] | None] = {}

    def writes(self, x: str, channel: str) -> list[Any]:
        return [cell for _, _, ch, cell, _ in self.entries.get(x, []) if ch == channel]

    def value(self, x: str, channel: str) -> list[Any] | None:
        """The channel's messages at LangGraph checkpoint ``x`` (None: not a message list). Walks the
        parent chain down to a known value or a stored seed (a ``_DeltaSnapshot``), then folds upwards:
        the value at a checkpoint is its parent's folded with the parent's writes."""
        from ..integrations.langgraph import values

        chain: list[str] = []
        seen: set[str] = set()
        at: str | None = x
        while at is not None and (at, channel) not in self.folded:
            record = self.records.get(at)
            if record is None or at in seen:
                break  # the chain leaves the thread (pruned; or a forged cycle): the walk stops there
            seen.add(at)
            channels = record.state.get("channels")
            cell = channels.get(channel) if isinstance(channels, dict) else None
            if cell is not None:
                self.folded[(at, channel)] = values.seed_messages(cell)
                break
            chain.append(at)
            at = self.parent.get(at)
        for y in reversed(chain):
            parent = self.parent.get(y)
            if parent is None or (parent, channel) not in self.folded:
                self.folded[(y, channel)] = []  # no seed found: LangGraph starts the channel empty
                continue
            base = self.folded[(parent, channel)]
            self.folded[(y, channel)] = (
                None if base is None else values.fold_messages(base, self.writes(parent, channel))
            )
        return self.folded.get((x, channel))


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
