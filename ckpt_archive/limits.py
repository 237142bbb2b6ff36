"""How big each kind of stored object may be: one table, used by every writer and every reader.

An archive is often written by someone else, so a reader must not let a stored object decide how
much memory it takes: a 62 KB zstd frame can expand to gigabytes. Each kind of object gets a bound
on its decoded size, derived from what a writer can produce, and a reader refuses an object over it
(``ObjectTooLarge``) before decoding it: by the stored size (``ObjectStore.get``: on local disk before
the read, by ``fstat``; on object stores by a ranged read of at most one byte past it), by the content
size a zstd frame declares in its header (``codec.decompress``), by the row counts and sizes a
Parquet footer declares and by the page headers it points to (``objects.SegmentReader``).

Bytes are not the whole cost: parsing JSON builds one Python object per value, and a value can
take one byte of text (``[],`` is three bytes and 64 of objects; an 11 KB frame of them decoded to
127 MiB, and parsing it took 4.1 GB). So each kind also gets a bound on the values a parse may build
(``VALUES``), counted on the decoded bytes before they are parsed (``values``: the structural
characters ``, [ {``, at C speed, never fewer than the values there are), and refused
(``ObjectTooLarge``) over it: a parse then costs at most ``VALUE_BYTES`` per value plus a few times
its bytes.

Writers never produce more, because the same table refuses it at write time (``StateTooLarge``):
the state is checked before a save writes anything (bytes and values), a delta too big to stay
inline is stored as a full snapshot instead (as is one past ``MAX_INLINE_DELTAS`` inline deltas, or
past ``INLINE_TOTAL_BYTES`` of them), and a head hint, fold or manifest part over its bound is simply
not written (they are optional: readers fold the log).
"""

from __future__ import annotations

from .errors import ObjectTooLarge, StateTooLarge

MiB = 1 << 20

STATE_BYTES = 256 * MiB
"""The largest state plus messages (their canonical JSON together) a save or an edit accepts."""

STATE_VALUES = 4 * MiB
"""The most JSON values (``values``) a state plus messages may hold, so that a snapshot within its
bounds costs a reader at most ~400 MB of objects (``VALUE_BYTES`` each) beside its bytes. A chat holds
~30 values per KB: this is ~140 MB of chat JSON in one checkpoint. What it refuses is millions of tiny
values (numbers one by one: keep arrays like those outside the checkpoint)."""

VALUE_BYTES = 96
"""What parsing one JSON value (one ``values`` count) may allocate, at most: measured with orjson 3.13
on CPython 3.11, per count, ``[[],[],...]`` 32 bytes, ``[{},...]`` 36, ``[0.5,...]`` 32, ``["ab",...]``
59, ``[{"a":0},...]`` 96 (a one-member dict, for two counts), ``["\u00e9",...]`` 88."""

BLOB_MIN_BYTES = 64 * 1024
"""A string value of at least this many bytes of UTF-8 is stored once, as an archive-wide blob object,
and referenced from where it is (``format.blobs``; docs/design/006-blobs.md has the measurement)."""

INLINE_OPS_BYTES = 1 * MiB
"""The largest delta (its operations' canonical JSON, as stored) kept inline in a commit entry; a
checkpoint whose delta is bigger is stored as a full snapshot."""

INLINE_TOTAL_BYTES = 2 * MiB
"""The inline deltas of one thread together: a delta that would take them past it is stored as a full
snapshot (which moves them all to one segment). So a head hint or a fold carries at most this much
of ops, and their bounds stay small."""

MAX_INLINE_DELTAS = 64
"""Inline deltas a thread may hold: the next delta is stored as a full snapshot, which moves them
all to one segment. So hints, folds and segments carry at most this many inline deltas."""

DOCUMENT_BYTES = 32 * MiB
"""A commit entry (a record and at most ``INLINE_OPS_BYTES`` of ops, or the id lists of a maintenance
commit: ~600,000 ids), a folded manifest (the records no sealed part holds, at most
``INLINE_TOTAL_BYTES`` of inline ops, tombstones) and a sealed manifest part (records, without ops)."""

HINT_BYTES = 4 * MiB
"""A head hint: the chain from the head's snapshot (at most ``INLINE_TOTAL_BYTES`` of inline ops and
the records, a few hundred bytes each). Hints hold a few KB in practice; a writer does not write one
over this (a reader folds the log instead)."""

SMALL_BYTES = 1 * MiB
"""The archive marker: a few fixed fields (the bound of a document holding two ids of at most 64 KiB of
UTF-8 each, up to six bytes of JSON per byte)."""

ROW_GROUP_ROWS = 1 << 21
"""Rows of one row group of a delta segment: a writer closes a row group at ``GROUP_BYTES`` (2 MiB) of
ops, so it holds at most that plus one checkpoint's ``INLINE_OPS_BYTES``, each op at least ~35 bytes
of JSON (~90,000 rows); this bound leaves room for a writer grouping differently."""

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


# decoded bytes (uncompressed document, snapshot; for a segment: the Parquet object itself,
# and the uncompressed size of one row group its footer declares)
LIMITS: dict[str, int] = {
    "archive marker": SMALL_BYTES,
    "commit entry": DOCUMENT_BYTES,
    "head hint": HINT_BYTES,
    "langgraph writes": DOCUMENT_BYTES,  # one put_writes call of the LangGraph saver
    "folded manifest": DOCUMENT_BYTES,
    "manifest part": DOCUMENT_BYTES,
    # the state and messages once (less the lists it replays), and ids
    "snapshot": 2 * STATE_BYTES + MiB,
    # one string value of a state (its UTF-8 bytes): no bigger than the state that holds it
    "blob": STATE_BYTES,
    # MAX_INLINE_DELTAS deltas of at most INLINE_OPS_BYTES each, in Parquet (ids dictionary-encoded)
    # a segment holds the thread's inline deltas, at most INLINE_TOTAL_BYTES of ops together, in Parquet
    # (ids dictionary-encoded, paths and values as text; incompressible values stay about their size)
    "delta segment": 4 * INLINE_TOTAL_BYTES,
    "row group": 4 * INLINE_TOTAL_BYTES,
    # one full record's history rows too big for the above (``layout.HISTORY_SUFFIX``): at most its
    # content, once, as JSON text (paths, ids and op names beside it), like a snapshot
    "history segment": 2 * STATE_BYTES + MiB,
    "history row group": 2 * STATE_BYTES + MiB,
}
LIMITS["object"] = max(LIMITS.values())
"""An object of a kind the caller does not name (tests, tools): the largest bound of all."""

# JSON values a parse may build (``values``), so that a parse costs at most ``VALUE_BYTES`` times this
# (plus a few times its bytes); a kind whose bound is not below its bytes needs no count
VALUES: dict[str, int] = {
    "archive marker": SMALL_BYTES,
    # ~25 per record, 1 per id of a maintenance commit; at most 96 MiB of objects
    "commit entry": 1 * MiB,
    "head hint": MiB // 2,
    "folded manifest": 1 * MiB,
    "manifest part": 2 * MiB,  # a part of 32,768 records (level 3) holds ~1.3M
    # the state and messages once, and the envelope
    "snapshot": STATE_VALUES + MiB,
    # the paths and values of a segment's row group, parsed one by one: the text of the thread's inline
    # deltas, at most INLINE_TOTAL_BYTES, and a count is a byte of that text (so a writer never exceeds it)
    "row group": INLINE_TOTAL_BYTES,
    "history row group": STATE_VALUES + MiB,
}
VALUES["langgraph writes"] = VALUES["commit entry"]  # serde blobs as base64 strings: few values
VALUES["blob"] = LIMITS["blob"]  # a string, never parsed: no count can exceed its bytes, so none is made
VALUES["object"] = max(VALUES.values())


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


def values(raw: bytes) -> int:
    """An upper bound on the JSON values parsing ``raw`` builds, less one: its ``,`` ``[`` ``{``
    characters (inside strings too, so never fewer). Every element of a container but the first
    follows a comma, and every container opens with a bracket, however deep: one count per object a
    parse makes (a dict's members, after a comma each, with their dict). Three C-speed passes."""
    return raw.count(b",") + raw.count(b"[") + raw.count(b"{")


def may_exceed(kind: str, size: int) -> bool:
    """Can ``size`` bytes of JSON hold more values than a ``kind`` holds? A document of V values takes
    at least 2V - 1 bytes (a byte of each value, a comma or opening bracket before each but the first,
    a closing bracket for each container), so one of at most twice the bound cannot, and is not
    counted: the small documents, and most others, cost nothing."""
    return (size + 1) // 2 > VALUES[kind]


def over_values(kind: str, raw: bytes) -> int | None:
    """The values ``raw`` may hold (``values``) when that is more than a ``kind`` holds, else None."""
    if not may_exceed(kind, len(raw)):
        return None
    count = values(raw)
    return count if count > VALUES[kind] else None


def check_values(
    kind: str,
    count: int | None,
    what: str,
    *,
    key: str | None = None,
    thread_id: str | None = None,
    checkpoint_id: str | None = None,
) -> None:
    """Refuse a ``kind`` document of ``count`` values (``over_values``; None: within) before it is parsed."""
    if count is not None and count > VALUES[kind]:
        raise ObjectTooLarge(
            f"{what} holds more JSON values than any {kind} holds ({VALUES[kind]}; counted {count}): refused "
            "(a JSON bomb or a damaged object; delete or restore it)",
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            key=key,
        )


def fits(kind: str, raw: bytes) -> bool:
    """Would readers accept ``raw`` as a ``kind`` document (its bytes and its values)?"""
    return len(raw) <= LIMITS[kind] and over_values(kind, raw) is None


def check_state(*raws: bytes) -> None:
    """Refuse a state plus messages (``raws``: their canonical JSON) over ``STATE_BYTES`` or
    ``STATE_VALUES``, before a save or an edit writes anything (its snapshots would be refused by
    every reader)."""
    size = sum(map(len, raws))
    if size > STATE_BYTES:
        raise StateTooLarge(
            f"state and messages are {size} bytes of JSON, more than a checkpoint may hold ({STATE_BYTES}); "
            "keep large values (files, blobs) outside the checkpoint and store a reference to them"
        )
    count = sum(map(values, raws)) if (size + 1) // 2 > STATE_VALUES else 0
    if count > STATE_VALUES:
        raise StateTooLarge(
            f"state and messages hold {count} JSON values, more than a checkpoint may hold ({STATE_VALUES}); "
            "keep large arrays (embeddings, tables) outside the checkpoint and store a reference to them"
        )


def check_written(
    kind: str,
    raw: bytes,
    what: str,
    advice: str = "keep large values (files, blobs, arrays) outside the checkpoint and store a reference to them",
) -> None:
    """Refuse to write a ``kind`` document that readers would refuse (its bytes, its values); ``advice``
    says what the caller can do instead."""
    if len(raw) > LIMITS[kind]:
        raise StateTooLarge(f"{what} is {len(raw)} bytes, more than a {kind} may hold ({LIMITS[kind]}); {advice}")
    count = over_values(kind, raw)
    if count is not None:
        raise StateTooLarge(f"{what} holds {count} JSON values, more than a {kind} may hold ({VALUES[kind]}); {advice}")
