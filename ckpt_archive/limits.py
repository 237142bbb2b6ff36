"""How big each kind of stored object may be: one table, used by every writer and every reader.

An archive is often written by someone else, so a reader must not let a stored object decide how
much memory it takes: a 62 KB zstd frame can expand to gigabytes. Each kind of object gets a bound
on its decoded size, derived from what a writer can produce, and a reader refuses an object over it
(``ObjectTooLarge``) before decoding it: by the stored size (``ObjectStore.get``: on local disk before
the read, by ``fstat``; on object stores by a ranged read of at most one byte past it), by the content
size a zstd frame declares in its header (``codec.decompress``), by the row counts and sizes a
Parquet footer declares and by the page headers it points to (``objects.SegmentReader``).

Writers never produce more, because the same table refuses it at write time (``StateTooLarge``):
the state is checked before a save writes anything, a delta too big to stay inline is stored as a
full snapshot instead (as is one past ``MAX_INLINE_DELTAS`` inline deltas), and a head hint, fold
or manifest part over its bound is simply not written (they are optional: readers fold the log).
"""

from __future__ import annotations

from .errors import ObjectTooLarge, StateTooLarge

MiB = 1 << 20

STATE_BYTES = 256 * MiB
"""The largest state plus messages (their canonical JSON together) a save or an edit accepts."""

INLINE_OPS_BYTES = 1 * MiB
"""The largest delta (its operations' canonical JSON, as stored) kept inline in a commit entry; a
checkpoint whose delta is bigger is stored as a full snapshot."""

MAX_INLINE_DELTAS = 64
"""Inline deltas a thread may hold: the next delta is stored as a full snapshot, which moves them
all to one segment. So hints, folds and segments carry at most this many inline deltas."""

DOCUMENT_BYTES = 128 * MiB
"""Manifest documents: one commit entry (a record and at most ``INLINE_OPS_BYTES`` of ops, or the
id lists of a maintenance commit), a head hint and a folded manifest (at most
``MAX_INLINE_DELTAS * INLINE_OPS_BYTES`` = 64 MiB of inline ops and the records around them), a
sealed manifest part (its records, without ops)."""

SMALL_BYTES = 1 * MiB
"""The archive marker: a few fixed fields (the bound of a document holding two ids of at most 64 KiB of
UTF-8 each, up to six bytes of JSON per byte)."""

ROW_GROUP_ROWS = 1 << 21
"""Rows of one row group of a delta segment: at most 64 checkpoints of at most ``INLINE_OPS_BYTES``
of ops, each op at least ~35 bytes of JSON."""

FOOTER_ITEMS = 4 * MAX_INLINE_DELTAS
"""Elements of one list in a segment's Parquet footer (pyarrow reserves a list's declared length
before reading it): its longest is its row groups, at most one per inline delta it took in."""

FOOTER_STRING_BYTES = 1 * MiB
"""One string of a segment's Parquet footer: the thread id (at most 64 KiB of UTF-8) is its longest."""

EXPORT_HEADER_BYTES = DOCUMENT_BYTES
"""``export.json`` of a portable export (``transfer``): per thread its id (at most 64 KiB of UTF-8, up
to six bytes of JSON each), its member's name and its count; the writer refuses an export of more
threads than this holds (export them in several files)."""

EXPORT_LINE_BYTES = STATE_BYTES + DOCUMENT_BYTES
"""One checkpoint of a portable export, one JSON line: its state and messages (``STATE_BYTES`` of JSON
at most) and its other fields, which one commit entry holds (``DOCUMENT_BYTES``)."""

EXPORT_TAR_HEADER_BYTES = SMALL_BYTES
"""What a tar stream may hold between two members' data: the next member's header blocks (a pax
header for a long name), end-of-archive blocks and tarfile's read-ahead (10 KiB). ``tarfile`` reads
a pax or GNU long-name header whole, so it is bounded before tarfile sees it."""

EXPORT_WINDOW_BYTES = 8 * MiB
"""The zstd window of a portable export: the writer's is 4 MiB (level 10, ``window_log`` 22); a
reader refuses a frame that asks for more (a decoder allocates its window whole)."""


def export_member_bytes(checkpoints: int) -> int:
    """The largest ``threads/<n>.jsonl`` member an export writes for a thread of ``checkpoints``
    checkpoints (their lines, each at most ``EXPORT_LINE_BYTES`` with its newline)."""
    return checkpoints * EXPORT_LINE_BYTES


# decoded bytes (uncompressed document, page, snapshot; for a segment: the Parquet object itself,
# and the uncompressed size of one row group its footer declares)
LIMITS: dict[str, int] = {
    "archive marker": SMALL_BYTES,
    "commit entry": DOCUMENT_BYTES,
    "head hint": DOCUMENT_BYTES,
    "folded manifest": DOCUMENT_BYTES,
    "manifest part": DOCUMENT_BYTES,
    # the state and messages once, plus page tables (at most ~1.05x the lists they stand for) and ids
    "snapshot": 2 * STATE_BYTES + MiB,
    "page": STATE_BYTES + MiB,
    # MAX_INLINE_DELTAS deltas of at most INLINE_OPS_BYTES each, in Parquet (ids dictionary-encoded)
    "delta segment": 4 * MAX_INLINE_DELTAS * INLINE_OPS_BYTES,
    "row group": 4 * MAX_INLINE_DELTAS * INLINE_OPS_BYTES,
}
LIMITS["object"] = max(LIMITS.values())
"""An object of a kind the caller does not name (tests, tools): the largest bound of all."""


def stored_limit(kind: str) -> int:
    """The most bytes an object of ``kind`` can take as stored: its decoded bound plus what zstd (or an
    encryption envelope) adds to incompressible data."""
    limit = LIMITS[kind]
    return limit + limit // 128 + 64 * 1024


def check_read(
    kind: str,
    size: int,
    what: str,
    *,
    key: str | None = None,
    thread_id: str | None = None,
    checkpoint_id: str | None = None,
) -> None:
    """Refuse ``size`` bytes of a ``kind`` object before they are allocated."""
    limit = LIMITS[kind]
    if size > limit:
        raise ObjectTooLarge(
            f"{what} would take {size} bytes, more than any {kind} holds ({limit}): refused "
            "(a decompression bomb or a damaged object; delete or restore it)",
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            key=key,
        )


def read_end(kind: str | None) -> int | None:
    """Where a read of an object of ``kind`` stops: one byte past its stored bound (None: no bound), so
    a bigger object costs a reader that many bytes, never its whole size (``check_cut`` then refuses it)."""
    return None if kind is None else stored_limit(kind) + 1


def check_cut(kind: str | None, data: bytes, *, key: str | None = None) -> bytes:
    """``data`` as a read stopped at ``read_end(kind)`` got it, refused when the stop cut it short."""
    if kind is not None:
        check_stored(kind, len(data), key=key, at_least=True)
    return data


def check_stored(kind: str, size: int, *, key: str | None = None, at_least: bool = False) -> None:
    """Refuse a stored object of ``kind`` bigger than a writer stores, before reading it (or all of it:
    ``at_least``, ``size`` is what a read bounded to one byte past the limit got, not the object's size)."""
    limit = stored_limit(kind)
    if size > limit:
        raise ObjectTooLarge(
            f"{kind} object is {size} bytes{' or more' if at_least else ''}, more than any {kind} is stored "
            f"in ({limit}): refused "
            "(not written by ckpt_archive, or damaged; delete or restore it)",
            key=key,
        )


def fits(kind: str, size: int) -> bool:
    return size <= LIMITS[kind]


def check_state(size: int) -> None:
    """Refuse a state plus messages of ``size`` bytes of canonical JSON over ``STATE_BYTES``, before a
    save or an edit writes anything (its snapshots would be refused by every reader)."""
    if size > STATE_BYTES:
        raise StateTooLarge(
            f"state and messages are {size} bytes of JSON, more than a checkpoint may hold ({STATE_BYTES}); "
            "keep large values (files, blobs) outside the checkpoint and store a reference to them"
        )


def check_written(kind: str, size: int, what: str) -> None:
    """Refuse to write a ``kind`` object that readers would refuse."""
    if size > LIMITS[kind]:
        raise StateTooLarge(
            f"{what} is {size} bytes, more than a {kind} may hold ({LIMITS[kind]}); keep large values "
            "(files, blobs) outside the checkpoint and store a reference to them"
        )
