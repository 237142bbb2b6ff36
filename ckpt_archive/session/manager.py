"""CheckpointManager: a session's event log and run state, recorded together, flushed append-only."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from .._sync import run_async, run_sync
from ..errors import CheckpointError
from ..model import check_identifier
from .events import (
    RunState,
    SessionEvent,
    check_run_state,
    event_from_doc,
    event_to_doc,
    run_state_from_doc,
)
from .stores import FlushBatch, ManagedStateStore


class CheckpointManager:
    """Keeps one session's events and run state; ``checkpoint(event, run_state)`` applies both or neither.

    Everything that can fail (validating and serialising the event, checking the run
    state) happens before the log is touched, and the append and the state change happen
    under one lock that every reader takes too, so no reader ever sees an event without
    its state. ``flush()`` writes only the events added since the previous flush.
    """

    def __init__(self, session_id: str, store: ManagedStateStore | None = None) -> None:
        self._session_id = check_identifier(session_id, "session_id")
        self._lock = threading.Lock()
        self._events: list[SessionEvent] = []
        self._docs: list[dict[str, Any]] = []
        self._run_state = RunState()
        self._store = store
        self._flushed_events = 0
        self._flushes = 0
        self._flush_lock: asyncio.Lock | None = None  # lives on the I/O loop
        self._pending: FlushBatch | None = None  # a flush sent without a known outcome

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def store(self) -> ManagedStateStore | None:
        return self._store

    def with_store(self, store: ManagedStateStore) -> CheckpointManager:
        """Flush to ``store`` from now on (returns self). The next flush sends the whole log to it."""
        with self._lock:
            self._store = store
            self._flushed_events = 0
            self._flushes = 0
            self._pending = None
        return self

    # -- recording -------------------------------------------------------------
    def checkpoint(self, event: SessionEvent, run_state: RunState) -> None:
        """Append ``event`` and set ``run_state``, atomically: both are applied or neither is."""
        doc = event_to_doc(event)
        state = check_run_state(run_state)
        with self._lock:  # nothing below can raise
            self._events.append(event)
            self._docs.append(doc)
            self._run_state = state

    def events(self) -> list[SessionEvent]:
        with self._lock:
            return list(self._events)

    def run_state(self) -> RunState:
        with self._lock:
            return self._run_state

    def load_checkpoint(self) -> tuple[list[SessionEvent], RunState]:
        """The log and the run state as one consistent pair."""
        with self._lock:
            return list(self._events), self._run_state

    @property
    def unflushed(self) -> int:
        """Events recorded since the last successful flush."""
        with self._lock:
            return len(self._docs) - self._flushed_events

    # -- persistence -----------------------------------------------------------
    async def flush(self) -> int:
        """Write the events added since the last flush (and the run state) to the store.

        Returns how many events were written (0: nothing changed, no request made).
        Raises SessionFlushConflict when another manager flushed this session first.
        """
        return await run_async(self._flush())

    def flush_sync(self) -> int:
        return run_sync(self._flush())

    async def _flush(self) -> int:
        store = self._store
        if store is None:
            raise CheckpointError(f"session {self._session_id!r} has no store: call with_store(store) first")
        if self._flush_lock is None:
            self._flush_lock = asyncio.Lock()
        async with self._flush_lock:
            written = 0
            if self._pending is not None:  # the last attempt's outcome is unknown: send the same batch again
                written += await self._send(store, self._pending)
            with self._lock:
                first, seq = self._flushed_events, self._flushes + 1
                docs, state = self._docs[first:], self._run_state
            if docs:
                self._pending = FlushBatch(seq, first, docs, state.model_dump(mode="json"))
                written += await self._send(store, self._pending)
            return written

    async def _send(self, store: ManagedStateStore, batch: FlushBatch) -> int:
        await store.append(self._session_id, batch)  # an error leaves the batch pending
        with self._lock:
            self._flushed_events, self._flushes = batch.first_event + len(batch.events), batch.flush_seq
        self._pending = None
        return len(batch.events)

    @classmethod
    async def restore(cls, session_id: str, store: ManagedStateStore) -> CheckpointManager:
        """A manager holding what ``store`` has for the session (empty if nothing was flushed)."""
        return await run_async(cls._restore(session_id, store))

    @classmethod
    def restore_sync(cls, session_id: str, store: ManagedStateStore) -> CheckpointManager:
        return run_sync(cls._restore(session_id, store))

    @classmethod
    async def _restore(cls, session_id: str, store: ManagedStateStore) -> CheckpointManager:
        manager = cls(session_id, store)
        stored = await store.load(session_id)
        if stored is None:
            return manager
        where = f"session {session_id!r}"
        events = [event_from_doc(doc, f"event {i} of {where}") for i, doc in enumerate(stored.events)]
        manager._events = events
        manager._docs = [event_to_doc(e) for e in events]
        manager._run_state = run_state_from_doc(stored.run_state, f"run state of {where}")
        manager._flushed_events, manager._flushes = len(events), stored.flushes
        return manager
