"""``Engine``: one archive's root, thread logs and contents, composed; what every operation takes.

Operations (``ckpt_archive.ops``) are functions over an ``Engine``; the facade
(``ArchiveCheckpointer``) holds one and calls them. Nothing here imports either.
"""

from __future__ import annotations

from datetime import timedelta

from ..archive.crypto import Encryption
from ..archive.store import ObjectStore
from .contents import Contents
from .log import ThreadLog
from .root import DEFAULT_GC_GRACE, Root


class Engine:
    """The one object that owns an archive's caches: ``root`` (settings, marker), ``log`` (manifests,
    locks, THE commit), ``contents`` (state cache, digests, THE replay through ``contents.reader``)."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        full_snapshot_interval: int = 10,
        url: str | None = None,
        state_cache: int = 32,
        gc_grace: timedelta = DEFAULT_GC_GRACE,
        encryption: Encryption | None = None,
        create: bool = False,
    ) -> None:
        self.root = Root(
            store,
            full_snapshot_interval=full_snapshot_interval,
            url=url,
            gc_grace=gc_grace,
            encryption=encryption,
            create=create,
        )
        self.log = ThreadLog(self.root)
        self.contents = Contents(self.root, state_cache=state_cache)

    @property
    def store(self) -> ObjectStore:
        return self.root.store

    @property
    def encryption(self) -> Encryption | None:
        return self.root.encryption

    @property
    def gc_grace(self) -> timedelta:
        return self.root.gc_grace
