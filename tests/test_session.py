"""Session checkpoint manager: event log + run state recorded together, append-only flushes, restore."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive._sync import run_sync
from ckpt_archive.format.layout import events_key as batch_key
from ckpt_archive.session import (
    ArchiveManagedStateStore,
    CheckpointManager,
    Durability,
    FlushBatch,
    InMemoryManagedStateStore,
    ManagedStateStore,
    MessageEvent,
    RunState,
    SessionStatus,
    StatusChanged,
    StoredSession,
    ToolCall,
    ToolResult,
)
from ckpt_archive.session import events as events_mod
from ckpt_archive.testing import S3Server

from .conftest import BACKENDS

STORES = ["in-memory", *(f"archive-{b}" for b in BACKENDS)]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, archive_url: Any) -> ManagedStateStore:
    if request.param == "in-memory":
        return InMemoryManagedStateStore()
    url, opts = archive_url(request.param.removeprefix("archive-"))
    return ArchiveManagedStateStore(url, opts)


def script(manager: CheckpointManager, n: int, start: int = 0) -> None:
    """A little agent run: status, message, tool call, tool result... with a consistent run state."""
    for i in range(start, start + n):
        kind = i % 4
        seq = len(manager.events()) + 1
        if kind == 0:
            manager.checkpoint(StatusChanged(status=SessionStatus.RUNNING), RunState(seq=seq, status="running"))
        elif kind == 1:
            manager.checkpoint(MessageEvent(role="user", content={"text": f"turn {i}"}), RunState(seq=seq))
        elif kind == 2:
            call = ToolCall(tool_call_id=f"call-{i}", name="search", arguments={"q": i})
            manager.checkpoint(call, RunState(seq=seq, pending_tool_ids=(f"call-{i}",), status="waiting-for-tool"))
        else:
            result = ToolResult(tool_call_id=f"call-{i - 1}", output=[i, "ok"])
            manager.checkpoint(result, RunState(seq=seq, status=SessionStatus.RUNNING))


def test_initial_state() -> None:
    m = CheckpointManager("s")
    assert m.session_id == "s" and m.store is None
    assert m.events() == [] and m.run_state() == RunState()
    assert m.run_state().seq == 0 and m.run_state().pending_tool_ids == ()
    assert m.run_state().status == SessionStatus.QUEUED
    assert m.load_checkpoint() == ([], RunState())


def test_checkpoint_records_event_and_state_together() -> None:
    m = CheckpointManager("s")
    script(m, 6)
    events, state = m.load_checkpoint()
    assert len(events) == 6 and state.seq == 6
    assert [e.type for e in events] == ["status", "message", "tool_call", "tool_result", "status", "message"]
    assert m.run_state() == state


def test_events_round_trip_as_json() -> None:
    events = [
        StatusChanged(status="failed", reason="boom"),
        MessageEvent(role="assistant", content=["a", {"b": 1.5}]),
        ToolCall(tool_call_id="c", name="t", arguments={"x": None}),
        ToolResult(tool_call_id="c", output="err", is_error=True),
    ]
    for event in events:
        doc = json.loads(json.dumps(events_mod.event_to_doc(event)))
        assert events_mod.event_from_doc(doc) == event
    with pytest.raises(ca.InvalidState, match="SessionEvent"):
        events_mod.event_from_doc({"type": "telepathy"})
    with pytest.raises(ca.InvalidState, match="content"):
        MessageEvent(role="user", content={"when": object()})
    with pytest.raises(ca.InvalidState, match="status"):
        StatusChanged(status="sleeping")


def test_bad_event_or_state_changes_nothing() -> None:
    m = CheckpointManager("s")
    script(m, 2)
    before = m.load_checkpoint()
    with pytest.raises(ca.InvalidState):
        m.checkpoint(MessageEvent.model_construct(role="user", content={1, 2}), RunState(seq=3))  # not JSON
    with pytest.raises(ca.InvalidState):
        m.checkpoint({"type": "message"}, RunState(seq=3))  # type: ignore[arg-type]
    with pytest.raises(ca.InvalidState):
        m.checkpoint(MessageEvent(role="user", content="x"), {"seq": 3})  # type: ignore[arg-type]
    assert m.load_checkpoint() == before


def test_exception_in_the_middle_applies_neither(monkeypatch: pytest.MonkeyPatch) -> None:
    """The event is already serialised when checking the run state fails: still nothing is applied."""
    m = CheckpointManager("s")
    script(m, 3)
    before = m.load_checkpoint()
    serialised: list[Any] = []
    real = events_mod.event_to_doc

    def spy(event: Any) -> dict[str, Any]:
        serialised.append(event)
        return real(event)

    def boom(run_state: Any) -> RunState:
        raise RuntimeError("crash between the event and the state")

    import ckpt_archive.session.manager as manager_mod

    monkeypatch.setattr(manager_mod, "event_to_doc", spy)
    monkeypatch.setattr(manager_mod, "check_run_state", boom)
    with pytest.raises(RuntimeError, match="crash"):
        m.checkpoint(MessageEvent(role="user", content="lost"), RunState(seq=4))
    assert serialised, "the failure happened after the event was processed"
    assert m.load_checkpoint() == before
    assert m.unflushed == 3


def test_readers_never_see_an_event_without_its_state() -> None:
    m = CheckpointManager("s")
    stop = threading.Event()
    seen: list[tuple[int, int]] = []

    def read() -> None:
        while not stop.is_set():
            events, state = m.load_checkpoint()
            seen.append((len(events), state.seq))

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(2000):
        m.checkpoint(MessageEvent(role="user", content=i), RunState(seq=i + 1))
    stop.set()
    reader.join()
    assert seen and all(n == seq for n, seq in seen)


# -- stores ----------------------------------------------------------------------------------------


def test_durability_is_honest(archive_url: Any) -> None:
    assert InMemoryManagedStateStore().durability == Durability.VOLATILE
    assert not InMemoryManagedStateStore().durability.survives_process_loss
    for backend, expected in (("local", True), ("memory", False), ("s3", True)):
        url, opts = archive_url(backend)
        assert ArchiveManagedStateStore(url, opts).durability.survives_process_loss is expected
    assert isinstance(InMemoryManagedStateStore(), ManagedStateStore)


def test_flush_and_restore(store: ManagedStateStore) -> None:
    assert CheckpointManager.restore_sync("s", store).load_checkpoint() == ([], RunState())
    m = CheckpointManager("s").with_store(store)
    assert m.store is store
    assert asyncio.run(m.flush()) == 0  # nothing to write
    script(m, 5)
    assert asyncio.run(m.flush()) == 5
    assert m.unflushed == 0
    script(m, 3, start=5)
    assert m.flush_sync() == 3
    restored = asyncio.run(CheckpointManager.restore("s", store))
    assert restored.load_checkpoint() == m.load_checkpoint()
    assert restored.unflushed == 0
    script(restored, 2, start=8)  # the restored manager carries on where the log ends
    assert restored.flush_sync() == 2
    assert len(CheckpointManager.restore_sync("s", store).events()) == 10
    assert CheckpointManager.restore_sync("other", store).events() == []


class Recording:
    """A ManagedStateStore that records the batches it is handed, then passes them on to the real one."""

    def __init__(self, inner: ManagedStateStore) -> None:
        self.inner, self.batches = inner, []  # type: ignore[var-annotated]

    @property
    def durability(self) -> Durability:
        return self.inner.durability

    async def append(self, session_id: str, batch: FlushBatch) -> None:
        self.batches.append(batch)
        await self.inner.append(session_id, batch)

    async def load(self, session_id: str) -> StoredSession | None:
        return await self.inner.load(session_id)


def test_flush_appends_only_new_events(store: ManagedStateStore) -> None:
    rec = Recording(store)
    m = CheckpointManager("s", rec)
    script(m, 4)
    m.flush_sync()
    script(m, 2, start=4)
    m.flush_sync()
    assert [(b.flush_seq, b.first_event, len(b.events)) for b in rec.batches] == [(1, 0, 4), (2, 4, 2)]
    assert rec.batches[1].run_state == m.run_state().model_dump(mode="json")


def test_archive_flush_is_one_put_of_the_new_rows(s3_server: S3Server, s3_url: str) -> None:
    store = ArchiveManagedStateStore(s3_url, s3_server.storage_options())
    m = CheckpointManager("chat/1", store)
    script(m, 40)
    m.flush_sync()
    script(m, 3, start=40)
    s3_server.reset_counts()
    m.flush_sync()
    assert dict(s3_server.requests) == {"PUT": 1}
    rows = pq.read_table(io.BytesIO(run_sync(store.store.get(batch_key("chat/1", 2)))))
    assert rows.num_rows == 3 and rows.column("event_index").to_pylist() == [40, 41, 42]


def test_events_are_queryable_like_deltas(tmp_path: Any) -> None:
    store = ArchiveManagedStateStore(str(tmp_path))
    for sid in ("a b", "c/d"):
        m = CheckpointManager(sid, store)
        script(m, 4)
        m.flush_sync()
        script(m, 4, start=4)
        m.flush_sync()
    rows = duckdb.sql(
        f"""select session_id, count(*) as n, max(event_index) as last
            from read_parquet('{tmp_path}/session_id=*/events/*.parquet', hive_partitioning=true)
            where type = 'tool_call' group by session_id order by session_id"""
    ).fetchall()
    assert rows == [("a b", 2, 6), ("c/d", 2, 6)]


def test_flush_conflict_between_two_managers(store: ManagedStateStore) -> None:
    first = CheckpointManager("s", store)
    script(first, 2)
    first.flush_sync()
    a = CheckpointManager.restore_sync("s", store)
    b = CheckpointManager.restore_sync("s", store)
    script(a, 1, start=2)
    script(b, 2, start=10)
    a.flush_sync()
    with pytest.raises(ca.SessionFlushConflict, match="'s'"):
        b.flush_sync()
    assert b.unflushed == 2 and len(b.events()) == 4  # the loser keeps its events
    stored = CheckpointManager.restore_sync("s", store)
    assert stored.load_checkpoint() == a.load_checkpoint()  # never merged
    fresh = CheckpointManager("s", store)  # a manager that never restored also conflicts
    script(fresh, 1)
    with pytest.raises(ca.CheckpointConflict):
        fresh.flush_sync()


def test_concurrent_flushes_race_cleanly(store: ManagedStateStore) -> None:
    managers = [CheckpointManager("race", store) for _ in range(6)]
    for i, m in enumerate(managers):
        script(m, i + 1)

    async def flush_all() -> list[Any]:
        return await asyncio.gather(*(m.flush() for m in managers), return_exceptions=True)

    results = asyncio.run(flush_all())
    winners = [m for m, r in zip(managers, results, strict=True) if not isinstance(r, Exception)]
    assert len(winners) == 1
    assert all(isinstance(r, ca.SessionFlushConflict) for r in results if isinstance(r, Exception))
    assert CheckpointManager.restore_sync("race", store).load_checkpoint() == winners[0].load_checkpoint()


def test_with_store_sends_the_whole_log_to_the_new_store() -> None:
    one, two = InMemoryManagedStateStore(), InMemoryManagedStateStore()
    m = CheckpointManager("s", one)
    script(m, 3)
    m.flush_sync()
    assert m.with_store(two) is m and m.store is two
    assert m.flush_sync() == 3
    assert CheckpointManager.restore_sync("s", two).events() == m.events()


def test_flush_without_store_is_a_typed_error() -> None:
    m = CheckpointManager("s")
    script(m, 1)
    with pytest.raises(ca.CheckpointError, match="with_store"):
        m.flush_sync()


def test_tampered_flush_is_detected(tmp_path: Any) -> None:
    store = ArchiveManagedStateStore(str(tmp_path))
    m = CheckpointManager("s", store)
    script(m, 4)
    m.flush_sync()
    path = tmp_path / batch_key("s", 1)
    table = pq.read_table(path)
    events = table.column("event").to_pylist()
    events[1] = json.dumps({"type": "message", "role": "user", "content": "forged"})
    table = table.set_column(table.schema.get_field_index("event"), "event", pa.array(events, pa.string()))
    pq.write_table(table, path)
    with pytest.raises(ca.DigestMismatch):
        CheckpointManager.restore_sync("s", store)
    path.write_bytes(b"not parquet")
    with pytest.raises(ca.TruncatedObject):
        CheckpointManager.restore_sync("s", store)


# -- another process -------------------------------------------------------------------------------

CHILD = """
import json, sys
from ckpt_archive.session import ArchiveManagedStateStore, CheckpointManager, MessageEvent, RunState
url, opts = sys.argv[1], json.loads(sys.argv[2])
m = CheckpointManager.restore_sync("s", ArchiveManagedStateStore(url, opts))
events, state = m.load_checkpoint()
m.checkpoint(MessageEvent(role="child", content=len(events)), RunState(seq=state.seq + 1))
try:
    m.flush_sync()
    flushed = "ok"
except Exception as exc:
    flushed = type(exc).__name__
print(json.dumps({"events": [e.model_dump(mode="json") for e in events], "seq": state.seq, "flush": flushed}))
"""


def child(url: str, opts: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url, json.dumps(opts)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_restore_in_a_fresh_process(archive_url: Callable[..., Any], backend: str) -> None:
    url, opts = archive_url(backend)
    store = ArchiveManagedStateStore(url, opts)
    m = CheckpointManager("s", store)
    script(m, 5)
    m.flush_sync()
    seen = child(url, opts)
    assert seen["flush"] == "ok" and seen["seq"] == 5
    assert seen["events"] == [e.model_dump(mode="json") for e in m.events()]
    back = CheckpointManager.restore_sync("s", store)
    assert len(back.events()) == 6 and back.events()[-1] == MessageEvent(role="child", content=5)
    # this process did not see the child's flush: its next flush conflicts instead of merging
    script(m, 1, start=5)
    with pytest.raises(ca.SessionFlushConflict):
        m.flush_sync()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.one_of(st.integers(1, 4), st.just(0)), max_size=20))
def test_restore_returns_exactly_what_was_flushed(plan: list[int]) -> None:
    """Any interleaving of checkpoints (n>0 events) and flushes (0): a restore sees the last flush."""
    store = InMemoryManagedStateStore()
    m = CheckpointManager("h", store)
    flushed = m.load_checkpoint()
    for step in plan:
        if step == 0:
            m.flush_sync()
            flushed = m.load_checkpoint()
        else:
            script(m, step, start=len(m.events()))
    assert CheckpointManager.restore_sync("h", store).load_checkpoint() == flushed


def test_retrying_a_flush_that_landed_is_not_a_conflict(store: ManagedStateStore) -> None:
    """A flush whose outcome was unknown (timeout after the PUT landed) can be sent again safely."""
    m = CheckpointManager("s", store)
    script(m, 3)
    batch = FlushBatch(1, 0, [events_mod.event_to_doc(e) for e in m.events()], m.run_state().model_dump(mode="json"))
    run_sync(store.append("s", batch))
    run_sync(store.append("s", batch))  # the same bytes again: accepted
    other = FlushBatch(1, 0, batch.events[:1], batch.run_state)
    with pytest.raises(ca.SessionFlushConflict):
        run_sync(store.append("s", other))
    assert CheckpointManager.restore_sync("s", store).load_checkpoint() == m.load_checkpoint()


class LosesReplies(Recording):
    """The first append lands in the real store, but the caller sees an error (a timeout after the PUT)."""

    def __init__(self, inner: ManagedStateStore) -> None:
        super().__init__(inner)
        self.fail_next = True

    async def append(self, session_id: str, batch: FlushBatch) -> None:
        await super().append(session_id, batch)
        if self.fail_next:
            self.fail_next = False
            raise OSError("connection reset after the write")


def test_flush_after_an_unknown_outcome_resends_the_same_batch(store: ManagedStateStore) -> None:
    flaky = LosesReplies(store)
    m = CheckpointManager("s", flaky)
    script(m, 3)
    with pytest.raises(OSError):
        m.flush_sync()
    assert m.unflushed == 3
    script(m, 2, start=3)  # more events arrive before the retry
    assert m.flush_sync() == 5
    assert [(b.flush_seq, b.first_event, len(b.events)) for b in flaky.batches] == [(1, 0, 3), (1, 0, 3), (2, 3, 2)]
    assert CheckpointManager.restore_sync("s", store).load_checkpoint() == m.load_checkpoint()
