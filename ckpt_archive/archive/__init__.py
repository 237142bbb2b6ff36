"""The archive facade: ``open_archive`` and ``ArchiveCheckpointer`` over the engine (the format itself
is ``ckpt_archive.format``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..engine.root import HINT_EVERY
from ..format.crypto import Encryption
from ..ops.verify import Problem, RestoredState, VerifyReport
from ..storage import ObjectStore, open_store
from .checkpointer import ArchiveCheckpointer

__all__ = [
    "ArchiveCheckpointer",
    "Encryption",
    "ObjectStore",
    "Problem",
    "RestoredState",
    "VerifyReport",
    "open_archive",
]


def open_archive(
    url: str,
    storage_options: dict[str, Any] | None = None,
    full_snapshot_interval: int = 10,
    *,
    single_writer: bool = False,
    gc_grace: timedelta | None = None,
    encryption: Encryption | None = None,
    create: bool = False,
    hint_every: int = HINT_EVERY,
    hint_idle: float | None = None,
    probe_window: int | None = None,
) -> ArchiveCheckpointer:
    """Open an archive at any fsspec URL: a path, file://, memory://, s3://, gs://, az://.

    Opening writes nothing, and neither does reading: the first save creates the archive (its
    ``_archive.json`` marker) in an empty location. ``create=True`` lets it start one in a location
    that already holds other files; without it, such a location is ``ArchiveNotFound``.

    ``gc_grace``: how long objects stay after a prune removed them (readers holding an
    older manifest keep working), and how old leftovers must be before ``gc`` deletes them. It is
    the archive's, recorded in its marker by the save that creates it (1 h if not given): every
    process uses that one, and opening an existing archive with another raises ``GraceMismatch``.

    ``hint_every``: this writer's head hint policy (recorded nowhere; readers find the latest
    checkpoint whatever it is, only their cost changes): a plain delta save writes its commit entry
    alone, the hint goes with snapshots, compactions and maintenance, and with a plain delta once the
    newest hint is ``hint_every`` commits behind (10, one per snapshot interval; 1: with every commit,
    which also makes the deletion of a newest commit entry detectable, docs/guarantees.md).

    ``hint_idle``: seconds after a plain delta save that left the hint behind at which this writer puts
    it anyway, unless it saved to the thread again meanwhile (None: never; ``ArchiveSaver.from_url``:
    ``SAVER_HINT_IDLE``). A burst of saves stays one PUT each, and a reader that comes once the writer
    is idle reads the head as cheaply as with a hint at every commit (docs/design/005-head-hint.md).
    ``probe_window``: how many commits past a head hint this reader probes beside the chain (None: the
    smaller of ``hint_every`` and ``full_snapshot_interval``; a hint further behind costs a round trip
    per window, never a wrong head).
    """
    store = open_store(url, storage_options, single_writer=single_writer)
    return ArchiveCheckpointer(
        store,
        full_snapshot_interval=full_snapshot_interval,
        url=url,
        gc_grace=gc_grace,
        encryption=encryption,
        create=create,
        hint_every=hint_every,
        hint_idle=hint_idle,
        probe_window=probe_window,
    )
