"""The archive root of an ``Engine``: its settings and the archive marker (checked once per instance).

The thread logs (``log.ThreadLog``) and contents (``contents.Contents``) of the engine read through it;
it holds no per-thread state.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from datetime import timedelta
from typing import TypedDict, TypeVar

from ..errors import ArchiveMarkerMissing, ArchiveNotFound, GraceMismatch
from ..format import layout
from ..format.crypto import Encryption
from ..format.manifest import now_iso, seal, unseal
from ..format.schema import MAX_GC_GRACE_MS, check_marker, marker_grace
from ..storage import ObjectStore

T = TypeVar("T")

DEFAULT_GC_GRACE = timedelta(hours=1)
HINT_EVERY = 10
"""The default ``hint_every``: a plain delta writes its commit alone except once every 10 commits, one
hint per snapshot interval (the default 10). A save's compaction owes its fold to the next save, and the
hint naming that fold goes with the save after (no hint names a fold before it landed), which is when
this cadence falls due anyway: per 10 saves, the snapshot's objects, one fold and one hint besides the
commits (W1 at 5 ms a request: 1.41 requests per save, 1.52 with a hint every 5; the worst single save
4). The hint then trails by at most 9 and a cold reader probes 10 commits past it (``probe_window``) in
the round trip that reads the chain: 16 requests instead of 11 for a cold load, still 2 round trips
(docs/design/005-head-hint.md)."""


def manifest_ttl(gc_grace: timedelta) -> timedelta:
    """How long a reader or writer acts on a cached manifest before reading it again: half the
    grace period, so gc (which only removes what is older than the grace period) never cuts the log
    or removes a tombstoned object under a manifest still in use; at least 1 s, so a grace of 0 does
    not make every save re-read the thread."""
    return max(gc_grace / 2, timedelta(seconds=1))


def gc_floor(gc_grace: timedelta) -> timedelta:
    """The shortest grace ``gc`` accepts while writers may be running (``UnsafeGcGrace`` below it).

    One ``manifest_ttl`` covers a writer's cached manifest (a commit entry it has not seen is younger
    than its cache), a second one covers what a save does after it checked its cache: writing the
    payloads and committing them. A save slower than one ``manifest_ttl`` checks afterwards that its
    checkpoint is still whole (``ops.save.confirm``)."""
    return 2 * manifest_ttl(gc_grace)


class Settings(TypedDict, total=False):
    """An archive's settings, as ``ArchiveCheckpointer`` and ``Engine`` pass them on to ``Root``."""

    full_snapshot_interval: int
    url: str | None
    gc_grace: timedelta | None
    encryption: Encryption | None
    create: bool
    hint_every: int
    hint_idle: float | None
    probe_window: int | None


class Root:
    """One archive root: its settings (documented on ``ArchiveCheckpointer``) and its marker."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        full_snapshot_interval: int = 10,
        url: str | None = None,
        gc_grace: timedelta | None = None,
        encryption: Encryption | None = None,
        create: bool = False,
        hint_every: int = HINT_EVERY,
        hint_idle: float | None = None,
        probe_window: int | None = None,
    ) -> None:
        if full_snapshot_interval < 1:
            raise ValueError("full_snapshot_interval must be >= 1")
        if gc_grace is not None and gc_grace < timedelta(0):
            raise ValueError("gc_grace must not be negative")
        if gc_grace is not None and marker_grace(gc_grace) > MAX_GC_GRACE_MS:
            raise ValueError("gc_grace must be at most ten years (the longest an archive marker records)")
        store.object_kind = layout.kind_of  # the size bound of each archive object, checked on read
        self.store = store
        self.url = url or store.root
        self.full_snapshot_interval = full_snapshot_interval
        self.asked_grace = gc_grace
        """The ``gc_grace`` this process was opened with (None: not given); only a new archive takes it."""
        self.gc_grace = DEFAULT_GC_GRACE if gc_grace is None else gc_grace
        """The archive's grace (its marker's ``gc_grace_ms``) once ``check`` has read the marker; until
        then, the one a new archive would be created with."""
        self.encryption = encryption
        self.create = create  # a location holding other files may become an archive (first commit)
        if hint_every < 1:
            raise ValueError("hint_every must be >= 1")
        self.hint_every = hint_every
        """The head hint policy of this writer (``hint_due``; recorded nowhere: readers find the head
        whatever it is): a plain delta save writes only its commit entry, the hint goes with commits
        that write other objects anyway (snapshots, compactions, maintenance) and with a plain one once
        the newest hint is ``hint_every`` commits behind; 1 writes it with every commit."""
        if hint_idle is not None and not (0 <= hint_idle <= 3600):
            raise ValueError("hint_idle must be None or between 0 and 3600 seconds")
        self.hint_idle = hint_idle
        """Seconds after a plain delta commit that left the hint behind at which this writer puts it,
        unless the thread committed again meanwhile (``ThreadLog.hint_when_idle``): a burst of saves is
        one PUT each, and a cold reader that comes once the writer is idle finds the hint current (its
        head in the round trip that reads the chain). None: only ``hint_every`` says when."""
        if probe_window is not None and probe_window < 1:
            raise ValueError("probe_window must be None or >= 1")
        self._probe_window = probe_window
        self.archive_id = ""  # digest of the archive marker: binds ciphertexts to this archive
        self._checked = False
        self._empty_at = -1e9  # when a read last found no marker and nothing that forbids creating one

    @property
    def probe_window(self) -> int:
        """How many commits past a head hint this process probes in the round trip that reads the chain
                (``hint_probes``): as far as its own writes let a hint trail after a clean save, the smaller of
                ``hint_every`` and ``full_snapshot_interval`` (the save after every snapshot writes the hint, beside
        the snapshot's fold, so a snapshot trails it by fewer than the interval). Another writer's
                longer lag costs this reader a wider window's round trip (``next_window``), never a wrong head.
                Set (``open_archive(probe_window=...)``), it is that: 1 for readers of a writer whose hint is current
                once idle (``hint_idle``), which is when cold readers come (``ArchiveSaver.from_url``)."""
        if self._probe_window is not None:
            return self._probe_window
        return min(self.hint_every, self.full_snapshot_interval)

    @property
    def manifest_ttl(self) -> float:
        """``manifest_ttl`` of this archive's grace, in seconds."""
        return manifest_ttl(self.gc_grace).total_seconds()

    async def check(self, *, create: bool = False) -> None:
        """Check the archive marker once per instance (format version, archive id, the archive's grace).

        The grace the marker records replaces this instance's ``gc_grace`` (``GraceMismatch`` if it was
        opened with another one): writers, readers and gc of an archive all act on one grace, so none
        can cut the log under another's cached manifest.

        Only a commit (``create``) writes a marker, and only into a location that holds no thread,
        so reading never writes: without a marker, a location that is empty (or holds only session
        logs) reads as an empty archive, one holding other files is ``ArchiveNotFound`` (unless the
        archive was opened with ``create=True``), and one holding threads is ``ArchiveMarkerMissing``
        (a new marker would have a new archive id, under which no encrypted checkpoint decrypts).
        """
        if self._checked:
            return
        # a read that just found no marker (the first save's own) need not be repeated before creating one
        known_empty = create and time.monotonic() - self._empty_at < 1.0
        data = None if known_empty else await self.store.get_or_none(layout.ARCHIVE_MARKER)
        names: list[str] = []
        if data is None and not known_empty:
            names = await self.store.list_dir("")
            if any(layout.holds_threads(n) for n in names):
                data = await self.store.get_or_none(layout.ARCHIVE_MARKER)  # a first save's, since the GET
        if data is None:
            if any(layout.holds_threads(n) for n in names):
                raise ArchiveMarkerMissing(
                    f"{self.url!r} holds threads but its {layout.ARCHIVE_MARKER} is missing: restore it from "
                    "a copy of the archive (a new one would not decrypt encrypted checkpoints)"
                )
            foreign = sorted(n for n in names if not layout.root_name(n))
            if foreign and not self.create:
                raise ArchiveNotFound(
                    f"no archive at {self.url!r}: it holds other files ({', '.join(foreign[:3])}) and no "
                    f"{layout.ARCHIVE_MARKER}; point at an archive, or open it with create=True to start one there"
                )
            if not create:
                self._empty_at = time.monotonic()
                return  # nothing committed yet: reads see an empty archive, and nothing is written
            ms = marker_grace(self.gc_grace)
            marker = seal({"type": "archive", "created_at": now_iso(), "gc_grace_ms": ms})
            if not await self.store.put_if_absent(layout.ARCHIVE_MARKER, marker):
                marker = await self.store.get(layout.ARCHIVE_MARKER)
            data = marker
        doc = unseal(data, "archive marker", key=layout.ARCHIVE_MARKER, kind="archive marker")
        grace = check_marker(doc, key=layout.ARCHIVE_MARKER)
        if self.asked_grace is not None and marker_grace(self.asked_grace) != marker_grace(grace):
            raise GraceMismatch(
                f"archive {self.url!r} has gc_grace {grace.total_seconds():g} s (set when it was created), not "
                f"the {self.asked_grace.total_seconds():g} s it was opened with: open it without gc_grace (its "
                "own applies); a shorter gc while no process writes is gc(grace=..., unsafe_no_writers=True)"
            )
        self.gc_grace = grace
        self.archive_id = str(doc["digest"])
        self._checked = True

    async def rooted(self, read: Awaitable[T]) -> T:
        """Run ``read`` alongside the root check; an archive-level error wins over the read's.

        Both run at once (one round trip, not two); which fails first is a race, so the
        error is chosen here: a bad marker explains everything below it.
        """
        root, out = await asyncio.gather(self.check(), read, return_exceptions=True)
        if isinstance(root, BaseException):
            if isinstance(out, BaseException):
                raise root from out
            raise root
        if isinstance(out, BaseException):
            raise out
        return out
