"""Hypothesis state machine: saves, forks, edits, pins, removals, prunes and gc in any order.

After every prune (and every other removal) each kept checkpoint loads, from a
fresh instance, to exactly the state the model says; nothing kept was removed;
a prune never removes a thread's newest checkpoint.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from datetime import timedelta
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import ckpt_archive as ca
from ckpt_archive import RetentionPolicy as RP
from ckpt_archive.format import parts, replay
from ckpt_archive.format.holders import Holders
from ckpt_archive.ops import history
from ckpt_archive.retention import PINNED_KEY

_urls = itertools.count()
THREADS = ["a", "b/c"]

changes = st.one_of(
    st.tuples(st.just("append"), st.text(max_size=6)),
    st.tuples(st.just("set"), st.integers(-5, 5)),
    st.tuples(st.just("drop"), st.none()),
)
policies = st.lists(
    st.one_of(
        st.integers(0, 6).map(RP.keep_last),
        st.integers(1, 4).map(RP.keep_every),
        st.just(RP.keep_pinned()),
        st.sampled_from([timedelta(0), timedelta(hours=1)]).map(RP.max_age),
        st.integers(0, 2).map(lambda r: RP.custom(lambda i: i.step % 3 == r)),
    ),
    max_size=3,
)


class RetentionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.url = f"memory://retention-machine-{next(_urls)}"
        self.archive = ca.open_archive(self.url, full_snapshot_interval=3)
        self.model: dict[str, OrderedDict[str, dict[str, Any]]] = {t: OrderedDict() for t in THREADS}
        self.versions: dict[str, int] = {}
        self.steps: dict[str, int] = {}
        self.forks = itertools.count()

    # -- helpers -----------------------------------------------------------------
    def _ids(self) -> list[tuple[str, str]]:
        return [(t, cid) for t, chain in self.model.items() for cid in chain]

    def _check_all(self) -> None:
        reader = ca.open_archive(self.url, full_snapshot_interval=3)
        for thread, chain in self.model.items():
            assert [i.checkpoint_id for i in reader.list(thread)] == list(chain)
            for cid, state in chain.items():
                loaded = reader.load_by_id(cid)
                assert loaded is not None and loaded.state == state, (thread, cid)
            history = [c.state for c in reader.history(thread)]
            assert history == list(chain.values())

    # -- rules -------------------------------------------------------------------
    @rule(thread=st.sampled_from(THREADS), run=st.lists(changes, min_size=1, max_size=7))
    def save_run(self, thread: str, run: list[tuple[str, Any]]) -> None:
        for change in run:
            self._save(thread, change, None)

    @rule(thread=st.sampled_from(THREADS), change=changes, data=st.data())
    def save(self, thread: str, change: tuple[str, Any], data: st.DataObject) -> None:
        self._save(thread, change, data)

    def _save(self, thread: str, change: tuple[str, Any], data: st.DataObject | None) -> None:
        chain = self.model[thread]
        parent = None
        if chain and data is not None and data.draw(st.booleans(), "fork from an earlier checkpoint"):
            parent = data.draw(st.sampled_from(list(chain)), "parent")
        base = chain[parent] if parent else (next(reversed(chain.values())) if chain else {"log": []})
        state = dict(base)
        kind, value = change
        if kind == "append":
            state["log"] = [*state.get("log", []), value]
        elif kind == "set":
            state["n"] = value
        else:
            state.pop("n", None)
        step = self.steps.get(thread, -1) + 1
        self.steps[thread] = step
        ckpt = ca.Checkpoint.new(thread, state, step=step, parent_id=parent)
        self.archive.save(ckpt)
        chain[ckpt.checkpoint_id] = state
        self.versions[ckpt.checkpoint_id] = 1

    @precondition(lambda self: self._ids())
    @rule(data=st.data(), value=st.integers(-1000, 1000))
    def edit(self, data: st.DataObject, value: int) -> None:
        thread, cid = data.draw(st.sampled_from(self._ids()), "target")
        version = self.versions[cid]
        if data.draw(st.booleans(), "stale"):
            try:
                self.archive.update_state(cid, {"stale": value}, version + 1)
                raise AssertionError("a stale expected_version was accepted")
            except ca.CheckpointVersionConflict:
                pass
        else:
            assert self.archive.update_state(cid, {"edited": value}, version) == version + 1
            self.versions[cid] = version + 1
            self.model[thread][cid] = {"edited": value}
        self._check_all()

    @precondition(lambda self: self._ids())
    @rule(data=st.data())
    def pin(self, data: st.DataObject) -> None:
        _, cid = data.draw(st.sampled_from(self._ids()), "pinned")
        self.archive.pin(cid)

    @precondition(lambda self: self._ids())
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        thread, cid = data.draw(st.sampled_from(self._ids()), "fork source")
        new_thread = f"fork-{next(self.forks)}"
        new_id = self.archive.fork(cid, new_thread)
        self.model[new_thread] = OrderedDict({new_id: self.model[thread][cid]})
        self.versions[new_id] = 1

    @rule(thread=st.sampled_from(THREADS), parts=policies, dry_run=st.booleans())
    def prune(self, thread: str, parts: list[RP], dry_run: bool) -> None:
        chain = self.model[thread]
        newest = next(reversed(chain)) if chain else None
        report = self.archive.prune(thread, RP.any_of(*parts), dry_run=dry_run)
        assert set(report.removed) | set(report.kept) == set(chain)
        assert not set(report.removed) & set(report.kept)
        if newest is not None:
            assert newest in report.kept and newest not in report.removed
        if not dry_run:
            for cid in report.removed:
                del chain[cid]
        self._check_all()

    @precondition(lambda self: self._ids())
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        thread = data.draw(st.sampled_from([t for t, c in self.model.items() if c]), "thread")
        ids = data.draw(st.lists(st.sampled_from(list(self.model[thread])), unique=True, max_size=3), "ids")
        report = self.archive.remove(thread, ids)
        assert set(report.removed) == set(ids)
        for cid in ids:
            del self.model[thread][cid]
        self._check_all()

    @rule(thread=st.sampled_from(THREADS))
    def compact(self, thread: str) -> None:
        self.archive.compact(thread)

    @rule()
    def gc(self) -> None:
        self.archive.gc(grace=timedelta(0), unsafe_no_writers=True)
        self._check_all()

    @invariant()
    def pins_survive_in_listing(self) -> None:
        for thread in THREADS:
            for info in self.archive.list(thread):
                assert info.metadata.get(PINNED_KEY) in (None, True)
                assert info.version == self.versions[info.checkpoint_id]

    @invariant()
    def segment_counts_follow_the_records(self) -> None:
        """The manifest's count of the segments holding history rows (``format.holders``), kept as
        each record changes (adds, compactions, merges' re-points, prunes' removes and re-bases), is
        the count of its records as they are."""
        for m in self.archive.engine.log.manifests.values():
            assert m.segments == Holders.of(m.records.values()).held, m.thread_id


TestRetentionMachine = RetentionMachine.TestCase
TestRetentionMachine.settings = settings(
    max_examples=20,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class SmallPartsMachine(RetentionMachine):
    """The same with manifest parts of 3 records and snapshots replaying lists of 2 items or more, so
    folds, overrides, re-seals and replays through pruned, re-based and edited lineages all happen."""

    def __init__(self) -> None:
        self._saved = parts.PART_SIZE, replay.LIST_ITEMS
        parts.PART_SIZE, replay.LIST_ITEMS = 3, 2
        super().__init__()

    def teardown(self) -> None:
        parts.PART_SIZE, replay.LIST_ITEMS = self._saved


TestSmallPartsMachine = SmallPartsMachine.TestCase
TestSmallPartsMachine.settings = TestRetentionMachine.settings


class SmallTiersMachine(RetentionMachine):
    """The same with segment merges of 2 (``history.SEGMENT_FANOUT``), so ``compact`` merges tiers
    often, between prunes, removes, edits, forks and gc: every kept checkpoint still loads after each
    compaction and each gc (retention never deletes what a kept checkpoint needs)."""

    def __init__(self) -> None:
        self._fanout = history.SEGMENT_FANOUT
        history.SEGMENT_FANOUT = 2
        super().__init__()

    def teardown(self) -> None:
        history.SEGMENT_FANOUT = self._fanout

    @rule(thread=st.sampled_from(THREADS))
    def compact(self, thread: str) -> None:
        self.archive.compact(thread)
        self._check_all()


TestSmallTiersMachine = SmallTiersMachine.TestCase
TestSmallTiersMachine.settings = TestRetentionMachine.settings
