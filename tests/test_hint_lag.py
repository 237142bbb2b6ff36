"""The head hint may trail the log (HINT_LAG, a crashed writer, a slow writer's late hint): whatever the
sequence of saves, forks, maintenance commits and stale hints, a fresh reader's ``load`` returns exactly
the head and state of the thread's manifest (LangGraph's saver: tests/test_langgraph_saver.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive._sync import run_sync
from ckpt_archive.format import layout
from ckpt_archive.model import uuid7
from tests.test_archive import SimulatedCrash
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
    url = "memory://hint-lag-" + uuid7()
    archive = ca.open_archive(url, full_snapshot_interval=4)
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
        rival = ca.open_archive(url, full_snapshot_interval=4)
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
        head = m.records[m.head]
        loaded = fresh(archive).load("t")
        assert loaded is not None and loaded.checkpoint_id == head["id"], (kind, arg)
        want = next(c for c in saved if c.checkpoint_id == head["id"])
        assert loaded.state == want.state and loaded.metadata == fresh(archive).load_by_id(want.checkpoint_id).metadata  # type: ignore[union-attr]
