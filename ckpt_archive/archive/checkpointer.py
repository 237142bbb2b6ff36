"""ArchiveCheckpointer: the async core over an ObjectStore, with the sync facade inherited.

Built in layers, each a module of its own (lowest first): ``root`` (settings,
caches, archive marker), ``manifest_reader`` (hint, folded manifest, log),
``state_reader`` (contents, rebuilt by ``chains``, the one chain replay, and
cached), ``writer`` (the save protocol, compaction). This module adds the protocol's reads and ``delete``; the public
integrity and maintenance methods come from ``integrity_api`` and
``maintenance_api``.
"""

from __future__ import annotations

from ..errors import CheckpointError, CorruptManifest
from ..model import Checkpoint
from ..protocol import Ids, Infos
from . import layout
from .batch import head_from_hint
from .content import state_key
from .integrity_api import IntegrityMixin
from .maintenance_api import MaintenanceMixin
from .manifest import id_entry_thread, unseal
from .manifest import record_info as _info
from .root import DEFAULT_GC_GRACE
from .writer import ArchiveWriter

__all__ = ["DEFAULT_GC_GRACE", "ArchiveCheckpointer", "state_key"]


class ArchiveCheckpointer(IntegrityMixin, MaintenanceMixin, ArchiveWriter):
    """Checkpoints of many threads under one root of any fsspec filesystem.

    ``gc_grace`` is how long an object stays on storage after it stopped being
    referenced (and how old an unreferenced object must be before ``gc`` treats
    it as an orphan). A cached manifest older than half of it is re-read, so no
    instance ever acts on a manifest that ``gc`` may have cut the log under.
    """

    async def _load(self, thread_id: str) -> Checkpoint | None:
        layout.thread_dir(thread_id)  # validates the id
        cached = self._manifests.get(thread_id)
        if cached is None:
            hint = await self._rooted(self._read_hint(thread_id))
            found = None if hint is None else await head_from_hint(self, thread_id, hint)
            if found is not None:
                rec, content = found
                self._hint_heads[thread_id] = rec["id"]  # the head this writer last read
                return self._checkpoint(thread_id, rec, content)
            m = await self._manifest(thread_id, hint=hint, hint_read=True)
        else:
            await self._check_root()
            m = await self._manifest(thread_id)
        if m.head is None:
            return None
        rec = m.records[m.head]
        return self._checkpoint(thread_id, rec, await self._content_of(m, m.head))

    async def _load_by_id(self, checkpoint_id: str) -> Checkpoint | None:
        data = await self._rooted(self.store.get_or_none(layout.id_key(checkpoint_id)))
        if data is None:
            return None
        thread_id = id_entry_thread(data, checkpoint_id)
        m = await self._manifest(thread_id)
        rec = m.records.get(checkpoint_id)
        if rec is None:
            return None
        return self._checkpoint(thread_id, rec, await self._content_of(m, checkpoint_id))

    async def _list(self, thread_id: str) -> Infos:
        layout.thread_dir(thread_id)
        m = await self._rooted(self._manifest(thread_id))
        return [_info(thread_id, rec) for rec in m.records.values()]

    async def _threads(self) -> Ids:
        return sorted((await self._thread_folders())[0])

    async def _thread_folders(self) -> tuple[list[str], dict[str, CheckpointError]]:
        """(thread ids, {folder: why} for folders whose thread id cannot be read).

        A folder named by the sha256 of a long id is named by its head hint or, when the hint is
        unusable, by its first commit (never collected): a damaged document of one thread never
        hides the others. ``verify`` reports the folders left unnamed."""
        await self._check_root()
        out, unnamed = [], {}
        for name in await self.store.list_dir(""):
            if not name.startswith(layout.THREAD_PREFIX):
                continue
            thread = layout.decode_id(name[len(layout.THREAD_PREFIX) :])
            if thread is None:
                try:
                    thread = await self._hashed_thread(name)
                except CheckpointError as exc:
                    unnamed[name] = exc
                    continue
                if thread is None:  # neither hint nor commit: nothing was ever committed there
                    continue
            out.append(thread)
        return out, unnamed

    async def _hashed_thread(self, folder: str) -> str | None:
        """The thread id that a hashed folder's hint or first commit records (it must hash to the folder)."""
        failure: CheckpointError | None = None
        for what, kind, key in (
            ("head hint", "head hint", f"{folder}/_head.json"),
            ("commit 1", "commit entry", f"{folder}/_log/{1:020d}.json"),
        ):
            data = await self.store.get_or_none(key)  # the commit only when the hint does not do
            if data is None:
                continue
            try:
                thread = unseal(data, f"{what} in {folder!r}", key=key, kind=kind).get("thread_id")
                if isinstance(thread, str) and thread and layout.thread_dir(thread) == folder:
                    return thread
                raise CorruptManifest(f"{what} names another thread ({thread!r})", key=key)
            except CheckpointError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
        return None

    async def _delete(self, thread_id: str) -> None:
        await self._check_root()
        m = await self._manifest(thread_id)
        await self.store.delete([layout.id_key(cid) for cid in m.records])
        await self.store.delete_prefix(layout.thread_dir(thread_id))
        self._manifests.pop(thread_id, None)
        self._folded_seq.pop(thread_id, None)
        for rec in m.records.values():
            self._states.pop(state_key(rec), None)
