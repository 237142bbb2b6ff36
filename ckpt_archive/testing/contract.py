"""The checkpointer contract, shipped so that any checkpointer or backend can prove itself.

Like langgraph-checkpoint-conformance for LangGraph savers: subclass ``CheckpointerContract`` in a
pytest module and provide the ``cp`` fixture; every test then runs against your checkpointer::

    import pytest
    from ckpt_archive.testing.contract import CheckpointerContract

    class TestMine(CheckpointerContract):
        snapshot_interval = 4  # or None if the checkpointer stores only full copies

        @pytest.fixture
        def cp(self, tmp_path):
            return open_my_checkpointer(tmp_path, full_snapshot_interval=4)

The tests use only the public ``Checkpointer`` protocol (plus ``history``, ``update_state`` and
``remove``), so what they assert is what a user may rely on. Needs pytest (the ``dev`` extra).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

import ckpt_archive as ca
from ckpt_archive import Checkpointer
from ckpt_archive.format import layout

__all__ = ["CheckpointerContract", "chat"]


def chat(thread: str, n: int, cp: Checkpointer) -> list[ca.Checkpoint]:
    saved, messages = [], []
    for step in range(n):
        messages.append({"role": "user" if step % 2 else "assistant", "content": f"message {step} " * 5})
        ckpt = ca.Checkpoint.new(
            thread,
            {"messages": list(messages), "counter": step, "profile": {"name": "x", "turns": step}},
            step=step,
            pending_nodes=[f"node-{step}"],
        )
        cp.save(ckpt)
        saved.append(ckpt)
    return saved


class CheckpointerContract:
    """Every checkpointer's behaviour, one test per promise. Subclasses provide the ``cp`` fixture."""

    snapshot_interval: int | None = 4
    """The full-snapshot interval the ``cp`` fixture was opened with; ``None`` for a checkpointer that
    stores every checkpoint as a full copy."""

    @pytest.fixture
    def cp(self) -> Checkpointer:
        raise NotImplementedError("provide a `cp` fixture returning a fresh, empty checkpointer")

    def test_empty(self, cp: Checkpointer) -> None:
        assert cp.load("nobody") is None
        assert cp.load_by_id("no-such-id") is None
        assert cp.list("nobody") == []
        assert cp.threads() == []

    def test_round_trip_every_field(self, cp: Checkpointer) -> None:
        created = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
        first = ca.Checkpoint(
            thread_id="t",
            step=0,
            state={"a": 1, "b": [1, 2], "c": {"d": None, "e": 1.5, "f": True}, "s": "ünïcødé"},
            pending_nodes=["n1", "n2"],
            metadata={"source": "input", "writes": {"x": [1]}},
            created_at=created,
            cleared_interrupt="approve",
            attempts={"tool": 2},
            child_ledger={"child-1": {"status": "done"}},
            run_id="run-1",
            node_id="agent",
            messages=[{"role": "user", "content": "hi"}],
        ).protect(ca.binding_digest("token-1"))
        cp.save(first)
        second = ca.Checkpoint.new(
            "t",
            {"a": 2, "b": [1, 2, 3], "c": {"d": None, "e": 1.5, "f": False}},
            step=1,
            messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello", "n": 1.0}],
            run_id="run-1",
            node_id="tools",
            protect=True,
        )
        second = second.with_cleared_interrupt("review").with_metadata("k", [1, "two"])
        cp.save(second)
        legacy = ca.Checkpoint.new("t", {"a": 3}, step=2)  # no run, node, messages or protection
        cp.save(legacy)
        for original, parent in (
            (first, None),
            (second, first.checkpoint_id),
            (legacy, second.checkpoint_id),
        ):
            loaded = cp.load_by_id(original.checkpoint_id)
            assert loaded is not None
            assert loaded.parent_id == parent
            assert loaded.model_dump(exclude={"parent_id"}) == original.model_dump(exclude={"parent_id"})
            assert loaded.integrity_status() == original.integrity_status()
        assert cp.load_by_id(first.checkpoint_id).integrity_status(ca.binding_digest("token-1")) == "verified"  # type: ignore[union-attr]
        assert cp.load_by_id(legacy.checkpoint_id).integrity_status() == "unprotected"  # type: ignore[union-attr]
        latest = cp.load("t")
        assert latest is not None and latest.checkpoint_id == legacy.checkpoint_id
        assert latest.state == legacy.state and latest.messages == []

    def test_chat_history_loads_every_step(self, cp: Checkpointer) -> None:
        saved = chat("chat", 11, cp)
        for ckpt in saved:
            loaded = cp.load_by_id(ckpt.checkpoint_id)
            assert loaded is not None and loaded.state == ckpt.state and loaded.step == ckpt.step
        infos = cp.list("chat")
        assert [i.checkpoint_id for i in infos] == [c.checkpoint_id for c in saved]
        assert [i.step for i in infos] == list(range(11))
        assert all(i.thread_id == "chat" and i.stored_bytes >= 0 for i in infos)
        assert infos[0].parent_id is None
        assert [i.parent_id for i in infos[1:]] == [c.checkpoint_id for c in saved[:-1]]

    def test_delta_kinds_follow_interval(self, cp: Checkpointer) -> None:
        chat("k", 9, cp)
        kinds = [i.kind for i in cp.list("k")]
        if self.snapshot_interval is None:
            assert set(kinds) == {"full"}
        else:
            assert kinds == ["full" if step % self.snapshot_interval == 0 else "delta" for step in range(9)]

    def test_threads_and_delete(self, cp: Checkpointer) -> None:
        a = chat("a", 3, cp)
        chat("b", 2, cp)
        assert cp.threads() == ["a", "b"]
        cp.delete("a")
        assert cp.threads() == ["b"]
        assert cp.load("a") is None
        assert cp.list("a") == []
        assert cp.load_by_id(a[0].checkpoint_id) is None
        assert cp.load("b") is not None
        cp.delete("never-existed")

    def test_loaded_state_is_a_private_copy(self, cp: Checkpointer) -> None:
        chat("p", 3, cp)
        loaded = cp.load("p")
        assert loaded is not None
        loaded.state["messages"].append("mutated")
        loaded.state["profile"]["name"] = "mutated"
        again = cp.load("p")
        assert again is not None
        assert "mutated" not in again.state["messages"] and again.state["profile"]["name"] == "x"

    @pytest.mark.parametrize(
        "thread",
        [
            "a/b/c",
            "../../etc",
            "..",
            ".",
            "with space",
            "ünïcødé 🧵",
            "x" * 1024,
            "%2F",
            "@hash",
            layout.THREAD_PREFIX + "z",  # an id that looks like a thread folder
            "a\\b",
        ],
    )
    def test_hostile_thread_ids(self, cp: Checkpointer, thread: str) -> None:
        saved = chat(thread, 3, cp)
        assert cp.load(thread) is not None
        assert cp.load(thread).state == saved[-1].state  # type: ignore[union-attr]
        assert cp.threads() == [thread]
        assert [i.checkpoint_id for i in cp.list(thread)] == [c.checkpoint_id for c in saved]

    def test_duplicate_id_refused_and_a_resave_is_idempotent(self, cp: Checkpointer) -> None:
        ckpt = ca.Checkpoint.new("d", {"a": 1})
        cp.save(ckpt)
        nxt = ca.Checkpoint.new("d", {"a": 2}, step=1)
        cp.save(nxt)
        # the same checkpoint again (a save retried after an unknown outcome): its id, nothing new
        assert cp.save(ckpt) == ckpt.checkpoint_id and cp.save(nxt) == nxt.checkpoint_id
        assert [i.checkpoint_id for i in cp.list("d")] == [ckpt.checkpoint_id, nxt.checkpoint_id]
        others = [ckpt.with_state({"a": 3}), ckpt.with_metadata("m", 1), ckpt.model_copy(update={"step": 5})]
        others += [ckpt.with_state({"a": True}), ckpt.with_state({"a": 1.0})]  # == in Python, not as JSON
        for other in others:
            with pytest.raises(ca.DuplicateCheckpointId):
                cp.save(other)
        with pytest.raises(ca.DuplicateCheckpointId):  # the same id in another thread
            cp.save(ckpt.model_copy(update={"thread_id": "other"}))
        assert [i.checkpoint_id for i in cp.list("d")] == [ckpt.checkpoint_id, nxt.checkpoint_id]
        assert cp.load("d").state == nxt.state  # type: ignore[union-attr]

    def test_unknown_parent_refused(self, cp: Checkpointer) -> None:
        cp.save(ca.Checkpoint.new("u", {"a": 1}))
        with pytest.raises(ca.CheckpointNotFound):
            cp.save(ca.Checkpoint.new("u", {"a": 2}, step=1, parent_id="nope"))

    def test_fork_from_earlier_checkpoint(self, cp: Checkpointer) -> None:
        saved = chat("f", 6, cp)
        fork = ca.Checkpoint.new("f", {"forked": True}, step=2, parent_id=saved[1].checkpoint_id)
        cp.save(fork)
        latest = cp.load("f")
        assert latest is not None and latest.checkpoint_id == fork.checkpoint_id
        assert latest.parent_id == saved[1].checkpoint_id and latest.state == {"forked": True}
        for ckpt in saved:
            assert cp.load_by_id(ckpt.checkpoint_id).state == ckpt.state  # type: ignore[union-attr]

    def test_async_twins(self, cp: Checkpointer) -> None:
        async def run() -> None:
            first = ca.Checkpoint.new("as", {"m": [1]}, step=0)
            second = ca.Checkpoint.new("as", {"m": [1, 2]}, step=1)
            assert await cp.asave(first) == first.checkpoint_id
            await cp.asave(second)
            assert (await cp.aload("as")).state == {"m": [1, 2]}  # type: ignore[union-attr]
            assert (await cp.aload_by_id(first.checkpoint_id)).state == {"m": [1]}  # type: ignore[union-attr]
            assert [i.step for i in await cp.alist("as")] == [0, 1]
            assert await cp.athreads() == ["as"]
            await cp.adelete("as")
            assert await cp.aload("as") is None

        asyncio.run(run())

    def test_protocol(self, cp: Any) -> None:
        assert isinstance(cp, Checkpointer)

    def test_history_oldest_first_full_states(self, cp: Any) -> None:
        saved = chat("hist", 9, cp)
        fork = ca.Checkpoint.new("hist", {"forked": 1}, step=4, parent_id=saved[3].checkpoint_id)
        cp.save(fork)
        history = cp.history("hist")
        first = next(history)
        assert first.checkpoint_id == saved[0].checkpoint_id
        rest = list(history)
        assert [c.checkpoint_id for c in [first, *rest]] == [c.checkpoint_id for c in [*saved, fork]]
        assert [c.state for c in [first, *rest]] == [c.state for c in [*saved, fork]]
        assert list(cp.history("nobody")) == []

        async def collect() -> list[Any]:
            return [c.step async for c in cp.ahistory("hist")]

        assert asyncio.run(collect()) == [*range(9), 4]

    def test_update_state_optimistic_versions(self, cp: Any) -> None:
        saved = chat("ed", 7, cp)
        target = saved[2]
        assert [i.version for i in cp.list("ed")] == [1] * 7
        assert cp.update_state(target.checkpoint_id, {"edited": True}, 1) == 2
        with pytest.raises(ca.CheckpointVersionConflict):
            cp.update_state(target.checkpoint_id, {"edited": False}, 1)
        assert cp.load_by_id(target.checkpoint_id).state == {"edited": True}
        for c in saved:
            if c is not target:
                assert cp.load_by_id(c.checkpoint_id).state == c.state  # dependents keep their own state
        assert [i.version for i in cp.list("ed")] == [1, 1, 2, 1, 1, 1, 1]
        assert asyncio.run(cp.aupdate_state(target.checkpoint_id, {"edited": 3}, 2)) == 3
        with pytest.raises(ca.CheckpointNotFound):
            cp.update_state("missing", {}, 1)

    def test_remove_named_checkpoints(self, cp: Any) -> None:
        saved = chat("rm", 8, cp)
        doomed = [saved[1].checkpoint_id, saved[5].checkpoint_id, saved[7].checkpoint_id]
        dry = cp.remove("rm", doomed, dry_run=True)
        assert dry.dry_run and dry.removed == doomed and len(cp.list("rm")) == 8
        report = cp.remove("rm", [*doomed, "unknown"])
        assert report.removed == doomed and set(report.kept) == {c.checkpoint_id for c in saved} - set(doomed)
        assert [i.checkpoint_id for i in cp.list("rm")] == [
            c.checkpoint_id for c in saved if c.checkpoint_id not in doomed
        ]
        for c in saved:
            loaded = cp.load_by_id(c.checkpoint_id)
            assert (loaded is None) if c.checkpoint_id in doomed else (loaded is not None and loaded.state == c.state)
        assert cp.load("rm").checkpoint_id == saved[6].checkpoint_id
        assert asyncio.run(cp.aremove("rm", [saved[0].checkpoint_id])).removed == [saved[0].checkpoint_id]
