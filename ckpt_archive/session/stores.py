"""Where a session manager flushes to: the ManagedStateStore protocol and its two implementations.

A flush is one batch: the events added since the previous flush plus the run state
after them. Batch ``n`` of a session is created only if batch ``n`` does not exist
yet (put-if-absent), so two managers flushing the same session race for the same
name and the loser gets ``SessionFlushConflict``; nothing is ever merged silently.
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa
import pyarrow.parquet as pq

from .. import codec, versions
from ..errors import DigestMismatch, SessionFlushConflict, TruncatedObject, UnsupportedFormatVersion
from ..format import layout
from ..model import check_identifier
from ..storage import ObjectStore, open_store


class Durability(StrEnum):
    """Whether a completed flush survives the loss of the process that made it."""

    VOLATILE = "volatile"
    DURABLE = "durable"

    @property
    def survives_process_loss(self) -> bool:
        return self is Durability.DURABLE


@dataclass(frozen=True, slots=True)
class FlushBatch:
    """Events ``first_event ..`` (JSON documents) and the run state after them; ``flush_seq`` from 1."""

    flush_seq: int
    first_event: int
    events: list[dict[str, Any]]
    run_state: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StoredSession:
    events: list[dict[str, Any]]
    run_state: dict[str, Any]
    flushes: int


@runtime_checkable
class ManagedStateStore(Protocol):
    @property
    def durability(self) -> Durability: ...

    async def append(self, session_id: str, batch: FlushBatch) -> None:
        """Store ``batch`` as flush ``batch.flush_seq``; SessionFlushConflict if another flush has that number.

        Idempotent: appending the very batch already stored (a retry after an unknown outcome) succeeds.
        """
        ...

    async def load(self, session_id: str) -> StoredSession | None:
        """Every flushed event in order and the last run state; None if nothing was flushed."""
        ...


def _conflict(session_id: str, seq: int) -> SessionFlushConflict:
    return SessionFlushConflict(
        f"session {session_id!r} already has flush {seq}: another manager flushed it first; nothing of "
        "this flush was stored. Restore the session and apply your events again."
    )


def fold(session_id: str, batches: list[FlushBatch]) -> StoredSession | None:
    if not batches:
        return None
    events: list[dict[str, Any]] = []
    for n, batch in enumerate(batches, start=1):
        if batch.flush_seq != n or batch.first_event != len(events):
            raise TruncatedObject(
                f"flush {batch.flush_seq} of session {session_id!r} does not follow the previous one "
                f"(expected flush {n} starting at event {len(events)})"
            )
        events.extend(batch.events)
    return StoredSession(events, batches[-1].run_state, len(batches))


class InMemoryManagedStateStore:
    """Process-local store, for tests and single-process use: a flush is lost with the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, list[FlushBatch]] = {}

    @property
    def durability(self) -> Durability:
        return Durability.VOLATILE

    async def append(self, session_id: str, batch: FlushBatch) -> None:
        check_identifier(session_id, "session_id")
        copy = FlushBatch(batch.flush_seq, batch.first_event, codec.loads(codec.dumps(batch.events)), batch.run_state)
        with self._lock:
            batches = self._sessions.setdefault(session_id, [])
            if len(batches) >= batch.flush_seq:
                if batches[batch.flush_seq - 1] == copy:
                    return  # a retry of a flush that landed
                raise _conflict(session_id, batch.flush_seq)
            if len(batches) != batch.flush_seq - 1:
                raise SessionFlushConflict(f"session {session_id!r}: flush {batch.flush_seq} skips a flush")
            batches.append(copy)

    async def load(self, session_id: str) -> StoredSession | None:
        with self._lock:
            batches = list(self._sessions.get(session_id, []))
        found = fold(session_id, batches)
        return (
            None
            if found is None
            else StoredSession(codec.loads(codec.dumps(found.events)), found.run_state, found.flushes)
        )


SESSION_PREFIX = layout.SESSION_PREFIX
EVENT_SCHEMA = pa.schema(
    [
        ("flush_seq", pa.int64()),
        ("event_index", pa.int64()),
        ("type", pa.string()),
        ("event", pa.string()),
    ]
)
_META = "ckpt_archive."


session_dir = layout.session_dir


def encode_batch(session_id: str, batch: FlushBatch) -> bytes:
    """One Parquet file per flush: a row per event; run state and a digest in the file metadata."""
    header = {
        "session_id": session_id,
        "flush_seq": batch.flush_seq,
        "first_event": batch.first_event,
        "run_state": batch.run_state,
    }
    rows = {
        "flush_seq": [batch.flush_seq] * len(batch.events),
        "event_index": list(range(batch.first_event, batch.first_event + len(batch.events))),
        "type": [str(e.get("type")) for e in batch.events],
        "event": [codec.dumps(e).decode() for e in batch.events],
    }
    meta = {
        f"{_META}format_version": str(versions.FORMAT_VERSION),
        f"{_META}session": codec.dumps(header).decode(),
        f"{_META}sha256": codec.sha256(codec.dumps({**header, "events": batch.events})),
    }
    buf = io.BytesIO()
    pq.write_table(pa.table(rows, schema=EVENT_SCHEMA.with_metadata(meta)), buf, compression="zstd")
    return buf.getvalue()


def decode_batch(data: bytes, *, session_id: str, key: str) -> FlushBatch:
    try:
        table = pq.read_table(io.BytesIO(data))
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    except Exception as exc:  # pyarrow raises many types for garbage input
        raise TruncatedObject(f"session flush is not a readable Parquet file ({type(exc).__name__})", key=key) from None
    version = meta.get(f"{_META}format_version")
    if not versions.readable(version):
        raise UnsupportedFormatVersion(f"session flush {key!r} has format_version {version!r}")
    try:
        header = codec.loads(meta[f"{_META}session"])
        events = [codec.loads(e) for e in table.column("event").to_pylist()]
    except Exception as exc:
        raise TruncatedObject(f"session flush cannot be decoded ({type(exc).__name__})", key=key) from None
    if codec.sha256(codec.dumps({**header, "events": events})) != meta.get(f"{_META}sha256"):
        raise DigestMismatch("session flush's content differs from its recorded digest", key=key)
    if header.get("session_id") != session_id:
        raise TruncatedObject(f"session flush belongs to session {header.get('session_id')!r}", key=key)
    return FlushBatch(int(header["flush_seq"]), int(header["first_event"]), events, header["run_state"])


class ArchiveManagedStateStore:
    """Sessions under any archive URL: ``session_id=<enc>/events/<flush:020d>.parquet``.

    Events are Parquet rows (hive-partitioned by session like deltas by thread), so pyarrow,
    DuckDB or polars can query them. Durable unless the URL is ``memory://``.
    """

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None, *, single_writer: bool = False):
        self.store = open_store(url, storage_options, single_writer=single_writer)
        self.url = url

    @classmethod
    def from_store(cls, store: ObjectStore) -> ArchiveManagedStateStore:
        self = cls.__new__(cls)
        self.store, self.url = store, store.root
        return self

    @property
    def durability(self) -> Durability:
        return Durability.DURABLE if self.store.durable else Durability.VOLATILE

    async def append(self, session_id: str, batch: FlushBatch) -> None:
        key = layout.events_key(session_id, batch.flush_seq)  # one conditional PUT per flush, nothing else
        data = encode_batch(session_id, batch)
        if not await self.store.put_if_absent(key, data):
            if await self.store.get_or_none(key) == data:
                return  # a retry of a flush whose first attempt landed (an unknown outcome): same bytes
            raise _conflict(session_id, batch.flush_seq)

    async def load(self, session_id: str) -> StoredSession | None:
        folder = layout.events_dir(session_id)
        names = [n for n in await self.store.list_dir(folder) if n.endswith(layout.EVENTS_SUFFIX) and n[:20].isdigit()]
        keys = [f"{folder}/{n}" for n in sorted(names)]
        datas = await self.store.get_many(keys)
        batches = []
        for key, data in zip(keys, datas, strict=True):
            if data is None:
                raise TruncatedObject(f"session flush vanished while reading session {session_id!r}", key=key)
            batches.append(decode_batch(data, session_id=session_id, key=key))
        return fold(session_id, batches)
