"""``Engine``: one archive's root, thread logs and contents, composed; what every operation takes.

Operations (``ckpt_archive.ops``) are functions over an ``Engine``; the facade
(``ArchiveCheckpointer``) holds one and calls them. Nothing here imports either.
"""

from __future__ import annotations

from typing import Unpack

from ..storage import ObjectStore
from .contents import Contents
from .log import ThreadLog
from .root import Root, Settings


class Engine:
    """The one object that owns an archive's caches: ``root`` (settings, marker), ``log`` (manifests,
    locks, THE commit), ``contents`` (state cache, digests, THE replay through ``contents.reader``)."""

    def __init__(self, store: ObjectStore, *, state_cache: int = 32, **settings: Unpack[Settings]) -> None:
        self.root = Root(store, **settings)
        self.log = ThreadLog(self.root)
        self.contents = Contents(self.root, state_cache=state_cache)
        self.store = store
        self.encryption = self.root.encryption
