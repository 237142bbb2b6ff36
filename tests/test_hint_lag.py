"""The head hint may trail the log (the writer's ``hint_every``, a crashed writer, a slow writer's late
hint): whatever the sequence of saves, forks, maintenance commits and stale hints, a fresh reader's
``load`` returns exactly the head and state of the thread's manifest (LangGraph's saver:
tests/test_langgraph_saver.py). The property runs at the default policy, at 3 and at 1 (a hint with every
commit): readers' correctness never depends on the writer's choice, only their cost
(docs/design/005-head-hint.md)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive._sync import run_sync
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import Manifest, next_window, unseal
from ckpt_archive.model import uuid7
from ckpt_archive.storage import RoundTrips
from tests.test_archive import SimulatedCrash, grow
from tests.test_retention import fresh

_steps = st.lists(
    st.one_of(
        st.tuples(st.just("save"), st.integers(1, 3)),  # plain saves appended to the head
        st.tuples(st.just("fork"), st.integers(0, 1000)),  # a save whose parent is an older checkpoint
        st.tuples(st.just("pin"), st.integers(0, 1000)),  # a maintenance commit
        st.tuples(st.just("compact"), st.just(0)),
        st.tuples(st.just("old_hint"), st.integers(0, 1000)),  # put back a hint written earlier
        st.tuples(st.just("lost"), st.just(0)),  # a save losing the commit race: its hint went out anyway
        st.tuples(st.just("crash"), st.just(0)),  # the commit never lands (the process died), its hint did
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=100, deadline=None)
@given(_steps)
def test_a_fresh_load_always_finds_the_manifest_head(steps: list[tuple[str, int]]) -> None:
    fresh_load_finds_the_manifest_head(steps, 5)


@settings(max_examples=60, deadline=None)
@given(_steps, st.sampled_from([1, 3]))
def test_a_fresh_load_always_finds_the_manifest_head_whatever_the_writers_policy(
    steps: list[tuple[str, int]], every: int
) -> None:
    fresh_load_finds_the_manifest_head(steps, every)


def test_a_run_of_deltas_behind_the_hint_is_read_from_the_log_in_the_hints_round_trip() -> None:
    """The reader applies the whole run of deltas the hint trails by, each on its parent, in the round
    trip that checks the hint's commit: two round trips, also when an older hint is put back."""
    url = "memory://hint-lag-run-" + uuid7()
    archive = ca.open_archive(url, full_snapshot_interval=10, hint_every=4)
    saved = grow(archive, "t", range(6), [])  # seqs 1..6: the hint last written at seq 5
    hint = unseal(run_sync(archive.store.get(layout.head_key("t"))), "hint", kind="head hint")
    assert hint["seq"] == 5
    saved += grow(archive, "t", range(6, 8), [])  # seqs 7 and 8 trail it too: a run of three
    assert unseal(run_sync(archive.store.get(layout.head_key("t"))), "hint", kind="head hint")["seq"] == 5
    for more in (False, True):
        if more:  # seq 9 rewrites the hint (4 commits after 5): put the old one back
            old = run_sync(archive.store.get(layout.head_key("t")))
            saved += grow(archive, "t", range(8, 9), [])
            run_sync(archive.store.put(layout.head_key("t"), old))
        trips = RoundTrips(ca.open_store(url), latency=0.01)
        loaded = ca.ArchiveCheckpointer(trips).load("t")
        assert loaded is not None and loaded.checkpoint_id == saved[-1].checkpoint_id
        assert loaded.state == saved[-1].state
        assert trips.depth == 2 and trips.requests["list_dir"] == 0, trips.calls


def _windows(behind: int, window: int) -> int:
    """The whole windows a reader probing ``window`` commits (then ``next_window``) finds past a hint."""
    whole = 0
    while behind >= window:
        behind, window, whole = behind - window, next_window(window), whole + 1
    return whole


@pytest.mark.parametrize("behind", [9, 10, 51])  # < 64: a thread holds at most 64 inline deltas
def test_a_hint_further_behind_than_the_window_costs_a_round_trip_per_window_never_a_list(behind: int) -> None:
    """A writer may let the hint trail by more than readers probe at once (``hint_every`` is its choice,
    recorded nowhere): a reader that finds the whole window there probes a wider one, so it still finds
    the head, with no LIST; a hint fewer than the reader's window behind (``Root.probe_window``, 10 by
    default: what its own writes leave, ``min(hint_every, full_snapshot_interval)``) costs a fresh reader
    2 round trips; just under, at and well past that window."""
    url = "memory://hint-behind-" + uuid7()
    archive = ca.open_archive(url, full_snapshot_interval=1000, hint_every=1000)
    saved = grow(archive, "t", range(1 + behind), [])  # the hint at seq 1 (the snapshot), then deltas
    assert unseal(run_sync(archive.store.get(layout.head_key("t"))), "hint", kind="head hint")["seq"] == 1
    for read in ("load", "list"):
        trips = RoundTrips(ca.open_store(url), latency=0.005)
        reader = ca.ArchiveCheckpointer(trips)
        if read == "load":
            loaded = reader.load("t")
            assert loaded is not None and loaded.state == saved[-1].state
        else:
            assert [i.checkpoint_id for i in reader.list("t")] == [c.checkpoint_id for c in saved]
        assert trips.requests["list_dir"] == trips.requests["find"] == 0, trips.calls
        window = reader.engine.root.probe_window
        assert window == 10 and trips.depth == 2 + _windows(behind, window), (read, trips.depth)  # one per whole window


def fresh_load_finds_the_manifest_head(steps: list[tuple[str, int]], every: int) -> None:
    url = "memory://hint-lag-" + uuid7()
    archive = ca.open_archive(url, full_snapshot_interval=4, hint_every=every)
    store = archive.store
    saved: list[ca.Checkpoint] = []
    hints: list[bytes] = []
    messages: list[Any] = []

    def save(parent: str | None = None, writer: ca.ArchiveCheckpointer = archive) -> None:
        messages.append({"role": "user", "content": f"message {len(saved)} " + "x" * 50})
        ckpt = ca.Checkpoint.new("t", {"messages": list(messages), "n": len(saved)}, step=len(saved), parent_id=parent)
        writer.save(ckpt)
        saved.append(ckpt)
        hints.append(run_sync(store.get(layout.head_key("t"))))

    def lost() -> None:
        """Another writer commits first; ours, on the older head, loses (its hint is put with its commit)."""
        archive.load("t")
        rival = ca.open_archive(url, full_snapshot_interval=4, hint_every=every)
        rival.load("t")
        save(writer=rival)
        loser = ca.Checkpoint.new("t", {"messages": [], "n": -1}, step=len(saved))
        with pytest.raises(ca.CheckpointConflict):
            archive.save(loser)
        assert fresh(archive).load("t").checkpoint_id != loser.checkpoint_id  # type: ignore[union-attr]

    def crash() -> None:
        real = store.put_if_absent

        async def commit_dies(key: str, data: bytes) -> bool:
            if "/_log/" in key:
                raise SimulatedCrash("died before the commit landed")
            return await real(key, data)

        store.put_if_absent = commit_dies  # type: ignore[method-assign]
        try:
            with pytest.raises(SimulatedCrash):
                save()
        finally:
            del store.put_if_absent

    save()
    for kind, arg in steps:
        if kind == "save":
            for _ in range(arg):
                save()
        elif kind == "fork":
            save(saved[arg % len(saved)].checkpoint_id)
        elif kind == "pin":
            archive.pin(saved[arg % len(saved)].checkpoint_id)
        elif kind == "compact":
            archive.compact("t")
        elif kind == "lost":
            lost()
        elif kind == "crash":
            crash()
        else:
            run_sync(store.put(layout.head_key("t"), hints[arg % len(hints)]))
        m = run_sync(fresh(archive).engine.log.manifest("t"))
        assert_as_from_the_log(fresh(archive), m)
        head = m.records[m.head]
        loaded = fresh(archive).load("t")
        assert loaded is not None and loaded.checkpoint_id == head["id"], (kind, arg)
        want = next(c for c in saved if c.checkpoint_id == head["id"])
        assert loaded.state == want.state and loaded.metadata == fresh(archive).load_by_id(want.checkpoint_id).metadata  # type: ignore[union-attr]


def assert_as_from_the_log(reader: ca.ArchiveCheckpointer, m: Manifest) -> None:
    """``m`` (read from the hint: its fold, the commits its ``appends`` stand for, the log after) holds
    exactly what folding the log itself gives (a LIST of ``_log/``, the newest fold, every entry after)."""
    log = run_sync(reader.engine.log._rebuild(m.thread_id, None, cache=False))
    assert (m.seq, m.head, list(m.records.items()), m.inline, m.tombstones) == (
        log.seq,
        log.head,
        list(log.records.items()),
        log.inline,
        log.tombstones,
    )


def test_a_fresh_reader_takes_the_commits_after_the_fold_from_the_hints_chain() -> None:
    """A hint names its fold and says the commits after it each appended the next of its chain's records
    (``appends``): a fresh reader reads the fold, the hint's own commit (its sha256 checked) and the probe
    past it, not the entries between: a snapshot interval of them (10 here), however far the seed."""
    url = "memory://hint-appends-" + uuid7()
    archive = ca.open_archive(url, full_snapshot_interval=10, hint_every=1)
    saved = grow(archive, "t", range(19), [])  # snapshots at seqs 1 and 11 (compacting), deltas after
    archive.flush_hints()
    hint = unseal(run_sync(archive.store.get(layout.head_key("t"))), "hint", kind="head hint")
    fold, seq = hint["manifest_seq"], hint["seq"]
    assert fold is not None and seq == 19 and hint["appends"] == seq - fold > 1, hint.get("appends")
    trips = RoundTrips(ca.open_store(url), latency=0.005)
    reader = ca.ArchiveCheckpointer(trips)
    assert [i.checkpoint_id for i in reader.list("t")] == [c.checkpoint_id for c in saved]
    read = {key for _, key, _ in trips.calls if "/_log/" in key}
    between = {layout.log_key("t", s) for s in range(fold + 1, seq)}
    assert not read & between and layout.log_key("t", seq) in read, sorted(read)
    assert trips.requests["list_dir"] == trips.requests["find"] == 0 and trips.depth == 2, trips.calls
    assert_as_from_the_log(reader, run_sync(reader.engine.log.manifest("t")))


def test_a_hint_whose_commit_lost_the_race_is_not_taken_for_the_log() -> None:
    """A hint carrying ``appends`` beside a commit that lost (another entry at its seq) says nothing of
    the log: the reader folds the entries themselves, and finds the winner's head."""
    url = "memory://hint-appends-lost-" + uuid7()
    archive = ca.open_archive(url, full_snapshot_interval=10, hint_every=1)
    saved = grow(archive, "t", range(15), [])
    archive.flush_hints()
    ours = run_sync(archive.store.get(layout.head_key("t")))
    rival = ca.open_archive(url, full_snapshot_interval=10, hint_every=1000)
    rival.load("t")
    saved += grow(rival, "t", range(15, 16), [])  # seq 16, its hint not put
    doc = unseal(ours, "hint", kind="head hint")
    assert doc["appends"] > 1
    # the loser's hint of seq 16: our manifest's, one more delta on it, whose commit never landed
    m = run_sync(fresh(archive).engine.log.manifest("t"))
    assert m.seq == 16
    forged = run_sync(fresh(archive).engine.log._rebuild("t", None, cache=False))
    forged.seq = 15
    forged.run_from = doc["manifest_seq"]
    run_sync(archive.store.put(layout.head_key("t"), forged.hint(doc["manifest_seq"], b"not the entry at 15")))
    reader = fresh(archive)
    got = run_sync(reader.engine.log.manifest("t"))
    assert got.head == saved[-1].checkpoint_id and got.seq == 16
    assert_as_from_the_log(reader, got)
