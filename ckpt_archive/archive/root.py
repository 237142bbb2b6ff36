"""The bottom layer of ``ArchiveCheckpointer``: settings, per-instance caches and the archive marker.

The layers above it (``manifest_reader`` -> ``state_reader`` -> ``writer`` ->
``checkpointer``) share these caches, so they are created in one place.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable
from datetime import timedelta
from typing import TypeVar

from .. import codec
from ..protocol import AsyncCoreCheckpointer
from ..storage import ObjectStore
from . import layout
from .content import Content
from .crypto import Encryption
from .manifest import Manifest, now_iso, seal, unseal

T = TypeVar("T")

DEFAULT_GC_GRACE = timedelta(hours=1)


MARKER_VERSION = 2
"""The archive marker's ``format_version`` in archives this revision creates: in them a writer puts the
head hint beside its commit, so a hint may name a commit that never landed (FORMAT.md section 7).
Readers of earlier revisions, which would believe such a hint, refuse these archives
(``UnsupportedFormatVersion``) rather than misread them; archives with a version 1 marker keep the hint
after the commit."""


class ArchiveRoot(AsyncCoreCheckpointer):
    """One archive root: what every layer of ``ArchiveCheckpointer`` reads and caches (settings are
    documented on ``ArchiveCheckpointer``)."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        full_snapshot_interval: int = 10,
        url: str | None = None,
        state_cache: int = 32,
        gc_grace: timedelta = DEFAULT_GC_GRACE,
        encryption: Encryption | None = None,
    ) -> None:
        if full_snapshot_interval < 1:
            raise ValueError("full_snapshot_interval must be >= 1")
        if gc_grace < timedelta(0):
            raise ValueError("gc_grace must not be negative")
        self.gc_grace = gc_grace
        self._read_at: dict[str, float] = {}
        self._hint_heads: dict[str, str] = {}
        store.object_kind = layout.kind_of  # the size bound of each archive object, checked on read
        self.store = store
        self.url = url or store.root
        self.full_snapshot_interval = full_snapshot_interval
        self._manifests: dict[str, Manifest] = {}
        self._folded_seq: dict[str, int | None] = {}
        self._states: OrderedDict[str, Content] = OrderedDict()
        self._state_cache = state_cache
        self._hashers: OrderedDict[tuple[str, str], codec.PrefixHasher] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self._checked_root = False
        self.encryption = encryption
        self._archive_id = ""  # digest of the archive marker: binds ciphertexts to this archive
        self._zstd_commits = False  # the marker's "commits": "zstd" (set by _check_root)
        self._hint_with_commit = False  # a version 2 marker: the hint may go out beside its commit

    # -- small helpers -----------------------------------------------------------
    HASHERS = 16

    def _sha256(self, thread_id: str, name: str, raw: bytes) -> str:
        """sha256 of a thread's state or messages bytes, resumed from the previous ones of that thread
        (``codec.PrefixHasher``): saving or listing a growing chat hashes what changed, not all of it."""
        key = (thread_id, name)
        hasher = self._hashers.get(key)
        if hasher is None:
            hasher = self._hashers[key] = codec.PrefixHasher()
            while len(self._hashers) > self.HASHERS:
                self._hashers.popitem(last=False)
        else:
            self._hashers.move_to_end(key)
        return hasher.hexdigest(raw)

    def _lock(self, thread_id: str) -> asyncio.Lock:
        lock = self._locks.get(thread_id)
        if lock is None:
            lock = self._locks[thread_id] = asyncio.Lock()
        return lock

    async def _check_root(self) -> None:
        """Create or check the archive marker once per instance (format version of the archive)."""
        if self._checked_root:
            return
        data = await self.store.get_or_none(layout.ARCHIVE_MARKER)
        if data is None:
            marker = seal({"type": "archive", "created_at": now_iso(), "commits": "zstd"}, MARKER_VERSION)
            if not await self.store.put_if_absent(layout.ARCHIVE_MARKER, marker):
                marker = await self.store.get(layout.ARCHIVE_MARKER)
            data = marker
        doc = unseal(
            data, "archive marker", key=layout.ARCHIVE_MARKER, accept=(1, MARKER_VERSION), kind="archive marker"
        )
        self._archive_id = str(doc["digest"])
        self._zstd_commits = doc.get("commits") == "zstd"
        self._hint_with_commit = doc["format_version"] >= MARKER_VERSION
        self._checked_root = True

    async def _stored_commit(self, entry: bytes) -> bytes:
        """The bytes to store for a commit entry: zstd in archives whose marker says so (created by a
        writer whose readers accept it, FORMAT.md section 6), the sealed JSON itself otherwise, so
        that readers of earlier revisions keep reading the archives they created."""
        await self._check_root()
        return codec.compress(entry) if self._zstd_commits else entry

    async def _rooted(self, read: Awaitable[T]) -> T:
        """Run ``read`` alongside the root check; an archive-level error wins over the read's.

        Both run at once (one round trip, not two); which fails first is a race, so the
        error is chosen here: a bad marker explains everything below it.
        """
        root, out = await asyncio.gather(self._check_root(), read, return_exceptions=True)
        if isinstance(root, BaseException):
            if isinstance(out, BaseException):
                raise root from out
            raise root
        if isinstance(out, BaseException):
            raise out
        return out
