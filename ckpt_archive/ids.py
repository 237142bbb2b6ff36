"""Ids: what a storable id is, its reversible encoding into one key segment, and the checkpoint ids the
archive mints (each names the thread it was minted for, so ``load_by_id`` finds it with the id alone).

Pure (no I/O); ``model`` (the records) and ``format.layout`` (the keys) both build on it.

The encoding (spec.md section 2): ids are percent-encoded (RFC 3986 unreserved characters kept), which
is the encoding hive partitioning readers (pyarrow, DuckDB) undo. An encoded id longer than
``MAX_SEGMENT`` is replaced by ``@`` + its sha256 (``@`` is always escaped by the normal encoding, so
the two forms never collide); the original id is recorded inside the thread's objects.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
import uuid
from typing import Any
from urllib.parse import quote, unquote

from .errors import InvalidIdentifier

MAX_SEGMENT = 180
_HASHED = re.compile(r"@[0-9a-f]{64}")
MINTED_SEPARATOR = "~"
"""Between the UUIDv7 and the thread's folder segment in a minted checkpoint id (spec.md section 2)."""
_UUID_CHARS = 36
_LOW = (1 << 32) - 1

_uuid7_lock = threading.Lock()
_uuid7_last = 0


def uuid7() -> str:
    """A time-ordered UUIDv7 string, strictly increasing within this process."""
    return str(uuid.UUID(int=_next_uuid7(None)))


def _next_uuid7(tag: int | None) -> int:
    """A UUIDv7 as an int, greater than every one before in this process; its low 32 bits are ``tag``
    when given (``mint_checkpoint_id``), random otherwise."""
    global _uuid7_last
    with _uuid7_lock:
        ms = time.time_ns() // 1_000_000
        rand = int.from_bytes(os.urandom(10), "big")
        # 48-bit ms | 4-bit version | 12 bits + 62 bits of randomness (monotonic within a ms)
        rand_a, rand_b = (rand >> 62) & 0xFFF, rand & ((1 << 62) - 1)
        value = (ms << 80) | (0x7 << 76) | rand_a << 64 | (0b10 << 62) | rand_b
        low = value & _LOW if tag is None else tag
        value = (value & ~_LOW) | low
        if value <= _uuid7_last:
            value = (((_uuid7_last >> 32) + 1) << 32) | low
        _uuid7_last = value
    return value


def _tag(segment: str) -> int:
    """The 32 bits of a minted id that bind its UUID to its thread segment."""
    return int.from_bytes(hashlib.sha256(segment.encode("utf-8")).digest()[:4], "big")


def check_identifier(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidIdentifier(f"{what} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidIdentifier(f"{what} must not be empty")
    if len(value.encode("utf-8", "surrogatepass")) > 64 * 1024:
        raise InvalidIdentifier(f"{what} is longer than 64 KiB")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidIdentifier(f"{what} is not valid unicode (lone surrogate)") from None
    return value


def encode_id(value: str, what: str = "id") -> str:
    check_identifier(value, what)
    enc = quote(value, safe="-_.~")
    if len(enc) > MAX_SEGMENT:
        return "@" + hashlib.sha256(value.encode("utf-8")).hexdigest()
    return enc


def decode_id(segment: str) -> str | None:
    """The id a segment encodes, or None for a hashed (long) id."""
    return None if segment.startswith("@") else unquote(segment)


def mint_checkpoint_id(thread_id: str) -> str:
    """A new checkpoint id for ``thread_id``: a UUIDv7 (time-ordered) whose low 32 bits are the first
    four bytes of the sha256 of the thread's encoded folder segment (``encode_id``), ``~``, and that
    segment, so the id alone says which thread folder holds it. The bound bits make an id that merely
    ends in ``~<segment>`` (a suffix appended to a minted id, ``typed``'s edits) a foreign one. Ids of
    one process still sort by creation time (the UUIDs are strictly increasing)."""
    segment = encode_id(thread_id, "thread_id")
    return f"{uuid.UUID(int=_next_uuid7(_tag(segment)))}{MINTED_SEPARATOR}{segment}"


def minted_thread_segment(checkpoint_id: str) -> str | None:
    """The thread folder segment a minted checkpoint id names (``mint_checkpoint_id``), or None for an
    id that is not in that form (a foreign one: LangGraph's, a user's): a UUIDv7, ``~``, a segment
    ``encode_id`` can produce, the UUID's low 32 bits bound to it."""
    head, sep, segment = checkpoint_id[:_UUID_CHARS], checkpoint_id[_UUID_CHARS : _UUID_CHARS + 1], checkpoint_id[37:]
    if sep != MINTED_SEPARATOR or not segment:
        return None
    try:
        value = uuid.UUID(head)
        if str(value) != head or value.version != 7 or value.int & _LOW != _tag(segment):
            return None
        if segment.startswith("@"):
            return segment if _HASHED.fullmatch(segment) else None
        return segment if encode_id(unquote(segment, errors="strict")) == segment else None
    except (ValueError, InvalidIdentifier):  # UnicodeDecodeError is a ValueError
        return None
