"""Stateful property test: ArchiveSaver behaves like LangGraph's InMemorySaver (the executable spec)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

pytest.importorskip("langgraph")

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from ckpt_archive.integrations.langgraph import ArchiveSaver

THREADS = ["t1", "t#2"]
NAMESPACES = ["", "sub:1|inner:2"]
_archives = itertools.count()


def _view(tup: CheckpointTuple | None) -> Any:
    if tup is None:
        return None
    c = tup.checkpoint
    return (
        tup.config["configurable"],
        (c["id"], c["channel_values"], c["channel_versions"], c["versions_seen"]),
        dict(tup.metadata),
        None if tup.parent_config is None else tup.parent_config["configurable"]["checkpoint_id"],
        tup.pending_writes,
    )


class SaverModel(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.ours = ArchiveSaver.from_url(f"memory://lg-model-{next(_archives)}", full_snapshot_interval=3)
        self.spec = InMemorySaver()
        self.heads: dict[tuple[str, str], dict[str, Any]] = {}  # latest config + values per (thread, ns)
        self.configs: list[dict[str, Any]] = []

    @rule(
        thread=st.sampled_from(THREADS),
        ns=st.sampled_from(NAMESPACES),
        fork=st.booleans(),
        appended=st.lists(st.text(max_size=6), max_size=3),
        scalar=st.one_of(st.none(), st.integers(0, 3)),
        step=st.integers(-1, 3),
    )
    def put(self, thread: str, ns: str, fork: bool, appended: list[str], scalar: int | None, step: int) -> None:
        head = self.heads.get((thread, ns))
        same = [
            c
            for c in self.configs
            if c["configurable"]["thread_id"] == thread and c["configurable"]["checkpoint_ns"] == ns
        ]
        parent_cfg = (same[0] if fork and same else None) if head is None or fork else head["config"]
        prev = head["values"] if head else {"messages": [], "n": None}
        versions = dict(head["versions"]) if head else {}
        values = dict(prev)
        new: dict[str, int] = {}
        if appended or "messages" not in versions:
            values["messages"] = [*prev["messages"], *appended]
            new["messages"] = versions.get("messages", 0) + 1
        if scalar is not None:
            values["n"] = scalar
            new["n"] = versions.get("n", 0) + 1
        versions.update(new)
        cp = generate_checkpoint(channel_values={k: v for k, v in values.items() if k in versions})
        cp["channel_versions"] = versions
        cp["versions_seen"] = {"node": dict(versions)}
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
        if parent_cfg is not None:
            config["configurable"]["checkpoint_id"] = parent_cfg["configurable"]["checkpoint_id"]
        meta = {"source": "loop", "step": step, "parents": {}}
        a = self.ours.put(config, cp, meta, new)  # type: ignore[arg-type]
        b = self.spec.put(config, cp, meta, new)  # type: ignore[arg-type]
        assert a == b
        self.configs.append(a)
        self.heads[(thread, ns)] = {"config": a, "values": values, "versions": versions}

    @precondition(lambda self: self.configs)
    @rule(data=st.data(), task=st.sampled_from(["task-a", "task-b"]), special=st.booleans())
    def put_writes(self, data: st.DataObject, task: str, special: bool) -> None:
        config = data.draw(st.sampled_from(self.configs))
        writes = [("ch", data.draw(st.integers(0, 9))), ("other", "x")]
        if special:
            writes.append(("__error__", data.draw(st.text(max_size=4))))
        self.ours.put_writes(config, writes, task, task_path=f"path-{task}")
        self.spec.put_writes(config, writes, task, task_path=f"path-{task}")

    @rule(thread=st.sampled_from(THREADS))
    def delete_thread(self, thread: str) -> None:
        self.ours.delete_thread(thread)
        self.spec.delete_thread(thread)
        self.configs = [c for c in self.configs if c["configurable"]["thread_id"] != thread]
        self.heads = {k: v for k, v in self.heads.items() if k[0] != thread}

    @rule(thread=st.sampled_from(THREADS), step=st.integers(-1, 3), limit=st.integers(1, 4))
    def list_filtered(self, thread: str, step: int, limit: int) -> None:
        conf = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        ours = [_view(t) for t in self.ours.list(conf, filter={"step": step}, limit=limit)]
        spec = [_view(t) for t in self.spec.list(conf, filter={"step": step}, limit=limit)]
        assert ours == spec

    @rule(data=st.data(), limit=st.one_of(st.none(), st.integers(1, 3)))
    def list_page(self, data: st.DataObject, limit: int | None) -> None:
        """A page of one namespace's history, newest first, optionally before one of its checkpoints."""
        thread, ns = data.draw(st.sampled_from(THREADS)), data.draw(st.sampled_from(NAMESPACES))
        conf = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
        mine = [c for c in self.configs if c["configurable"] == {**c["configurable"], **conf["configurable"]}]
        before = data.draw(st.sampled_from(mine)) if mine and data.draw(st.booleans()) else None
        ours = [_view(t) for t in self.ours.list(conf, before=before, limit=limit)]
        assert ours == [_view(t) for t in self.spec.list(conf, before=before, limit=limit)]

    @invariant()
    def same_latest_and_history(self) -> None:
        if not hasattr(self, "ours"):
            return
        for thread, ns in itertools.product(THREADS, NAMESPACES):
            conf = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
            assert _view(self.ours.get_tuple(conf)) == _view(self.spec.get_tuple(conf))
        for config in self.configs[-3:]:
            assert _view(self.ours.get_tuple(config)) == _view(self.spec.get_tuple(config))
        ours = sorted(t.checkpoint["id"] for t in self.ours.list(None))
        assert ours == sorted(t.checkpoint["id"] for t in self.spec.list(None))


SaverModel.TestCase.settings = settings(max_examples=15, stateful_step_count=20, deadline=None)
test_archive_saver_matches_in_memory_saver = SaverModel.TestCase
