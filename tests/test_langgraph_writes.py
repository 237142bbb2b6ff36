"""Pending writes: one object per ``put_writes`` call, carried by the next puts, read without a GET each.

Request counts are taken at a moto S3 server (``S3Server.log``); equality is against LangGraph's own
``InMemorySaver`` (hypothesis over puts, forks, writes, collection and prune).
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

import fsspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("langgraph")

from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from langgraph.checkpoint.memory import InMemorySaver

from ckpt_archive.integrations.langgraph import ArchiveSaver
from ckpt_archive.integrations.langgraph.testing import build_graph, run_turns
from ckpt_archive.testing import S3Server

WRITES = "/_langgraph/writes/"


def _config(thread: str = "t", **kw: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": "", **kw}}


def _put(saver: Any, parent: dict[str, Any], i: int) -> dict[str, Any]:
    cp = generate_checkpoint(channel_values={"turn": i})
    cp["channel_versions"] = {"turn": i + 1}
    return dict(saver.put(parent, cp, generate_metadata(step=i), {"turn": i + 1}))


def _channels(writes: list[tuple[str, str, Any]]) -> list[tuple[str, str]]:
    """Channel and value, without the ids LangGraph derives from checkpoint ids (tasks, interrupts)."""
    return sorted((channel, re.sub(r"id='[0-9a-f]{32}'", "id=*", repr(value))) for _, channel, value in writes)


def _requests(server: S3Server, kind: str, under: str = WRITES) -> int:
    return sum(1 for k, path in server.log if k == kind and under in path)


def test_put_writes_is_one_put_whatever_it_holds(s3_server: S3Server) -> None:
    """Regular and special writes in one call are one PUT; concurrent tasks' calls never share a key,
    and a later call keeps a stored regular write but replaces a special one (LangGraph's semantics)."""
    url = s3_server.make_bucket("lg-writes-one-put") + "/a"
    saver = ArchiveSaver.from_url(url, s3_server.storage_options(), hint_idle=None)  # no idle hint in the counts
    head = _put(saver, _config(), 0)
    s3_server.reset_counts()
    saver.put_writes(head, [("a", 1), ("__error__", "boom"), ("__interrupt__", "stop"), ("b", 2)], "task-1", "p")
    assert s3_server.requests["PUT"] == 1, s3_server.log

    async def tasks() -> None:
        await asyncio.gather(*(saver.aput_writes(head, [("c", n)], f"task-{n}", "p") for n in range(2, 10)))

    s3_server.reset_counts()
    asyncio.run(tasks())
    assert s3_server.requests["PUT"] == 8, s3_server.log
    saver.put_writes(head, [("a", "kept?"), ("__error__", "boom 2")], "task-1", "p")
    tup = ArchiveSaver.from_url(url, s3_server.storage_options()).get_tuple(_config())
    assert tup is not None
    assert tup.pending_writes == [
        ("task-1", "__interrupt__", "stop"),
        ("task-1", "__error__", "boom 2"),
        ("task-1", "a", 1),
        ("task-1", "b", 2),
        *[(f"task-{n}", "c", n) for n in range(2, 10)],
    ]


def test_list_and_history_read_no_write_object_but_the_heads(s3_server: S3Server) -> None:
    """A real graph run (durability="sync", on S3, where LangGraph puts a step's writes while it puts the
    next checkpoint): a cold ``list()``, ``get_state_history`` and ``get_delta_channel_history`` read the
    writes of every checkpoint but the newest from the states they build: at most 2 write objects GET and
    1 LIST of them, whatever the thread's length (before: one GET per checkpoint, and a LIST per ancestor
    in a history walk)."""
    url = s3_server.make_bucket("lg-writes-carried") + "/a"
    opts = s3_server.storage_options()
    graph = build_graph(ArchiveSaver.from_url(url, opts), delta=True)
    run_turns(graph, "t", 0, 6, "sync")
    expected = list(build_graph(ArchiveSaver.from_url(url, opts), delta=True).get_state_history(_config()))
    assert len(expected) > 30
    memory = InMemorySaver()
    run_turns(build_graph(memory, delta=True), "t", 0, 6, "sync")
    reference = [_channels(t.pending_writes) for t in memory.list(_config())]
    read_apart = _read_apart(ArchiveSaver.from_url(url, opts), opts, "lg-writes-carried")
    for what in ("list", "history", "delta"):
        cold = ArchiveSaver.from_url(url, opts)
        s3_server.reset_counts()
        if what == "list":
            listed = list(cold.list(_config()))
        elif what == "history":
            history = list(build_graph(cold, delta=True).get_state_history(_config()))
        else:
            delta = cold.get_delta_channel_history(config=_config(), channels=["messages"])["messages"]
        gets, lists = _requests(s3_server, "GET"), _requests(s3_server, "LIST")
        if what == "list":
            assert sum(1 for t in listed if t.pending_writes) >= 25
            assert [_channels(t.pending_writes) for t in listed] == reference  # task ids hash checkpoint ids
        elif what == "history":
            assert history == expected
        else:
            assert delta["writes"]
        if what == "history":  # LangGraph asks for the delta history of each checkpoint: one call each
            assert lists <= len(expected) + 1 and gets <= 2 * len(expected), (what, gets, lists)
        else:
            # the newest two checkpoints' objects, and writes that landed after their checkpoint's grandchild
            # was put (under load: carried by no state); no other object is read
            assert gets <= read_apart and lists <= 1, (what, gets, lists, read_apart)
    assert read_apart <= 8, read_apart  # late writes are the exception, not the rule


def _read_apart(saver: ArchiveSaver, opts: dict[str, Any], bucket: str) -> int:
    """Write objects of thread ``t`` a cold reader must GET: those no checkpoint's state carries (read
    through the archive API), and those of the two newest checkpoints (no grandchild yet: read at once,
    in the round trip that lists them)."""
    archive = saver.archive
    carried = {
        name
        for info in archive.list("t")
        for objects in (archive.load_by_id(info.checkpoint_id).state.get("writes") or {}).values()  # type: ignore[union-attr]
        for name in objects
    }
    keys = [k for k in fsspec.filesystem("s3", **opts).find(f"{bucket}/a{WRITES}t/") if k.endswith(".json.zst")]
    newest = sorted({k.rsplit("/", 2)[-2] for k in keys})[-2:]
    return sum(1 for k in keys if k.rsplit("/", 1)[-1] not in carried or k.rsplit("/", 2)[-2] in newest)


def test_writes_put_after_the_child_and_before_a_kill_stay_readable(tmp_path: Any) -> None:
    """A write that lands after its checkpoint's child was put (a replay, or a slow write), and writes of
    a head whose process died before the next put: a fresh saver reads them; collecting deletes only the
    objects a commit carries, and a prune that removes the carrying children keeps the kept ones' writes."""
    url = str(tmp_path / "archive")
    saver = ArchiveSaver.from_url(url)
    first = _put(saver, _config(), 0)
    saver.put_writes(first, [("a", "first")], "task-a")
    second = _put(saver, first, 1)
    saver.put_writes(first, [("late", "after the child")], "task-late")  # nothing will carry this one
    saver.put_writes(second, [("b", "head")], "task-b")  # then the process dies: no further put
    want = {
        first["configurable"]["checkpoint_id"]: [("task-a", "a", "first"), ("task-late", "late", "after the child")],
        second["configurable"]["checkpoint_id"]: [("task-b", "b", "head")],
    }

    def pending() -> dict[str, Any]:
        fresh = ArchiveSaver.from_url(url)
        return {t.config["configurable"]["checkpoint_id"]: t.pending_writes for t in fresh.list(_config())}

    assert pending() == want
    third = _put(saver, second, 2)  # carries task-b's (its parent's) and task-late's (its grandparent's)
    want[third["configurable"]["checkpoint_id"]] = []
    resumed = ArchiveSaver.from_url(url)  # a new process resumes as LangGraph does: get_tuple, then put
    saver.put_writes(third, [("c", "third")], "task-c")
    assert resumed.get_tuple(_config()) is not None
    fourth = _put(resumed, third, 3)  # carries task-c's, which it read with the head
    want[third["configurable"]["checkpoint_id"]] = [("task-c", "c", "third")]
    want[fourth["configurable"]["checkpoint_id"]] = []
    assert pending() == want
    collect = ArchiveSaver.from_url(url).maintenance.collect_writes
    assert asyncio.run(collect(timedelta(hours=1), unsafe_no_writers=True)) == 0  # younger than the grace
    assert asyncio.run(collect(timedelta(0), unsafe_no_writers=True)) == 4
    assert asyncio.run(collect(timedelta(0), unsafe_no_writers=True)) == 0
    assert pending() == want
    assert not list((tmp_path / "archive" / "_langgraph").rglob("*.zst"))
    saver = ArchiveSaver.from_url(url)
    infos = saver.archive.list("t")
    asyncio.run(saver.maintenance._remove("t", infos, infos[1:]))  # the children that carried first's go
    first_id = first["configurable"]["checkpoint_id"]
    assert pending() == {first_id: want[first_id]}


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 30)),  # child of the n-th checkpoint from the newest (a fork)
        st.tuples(
            st.just("writes"),
            st.integers(0, 30),
            st.sampled_from(["task-1", "task-2"]),
            st.lists(st.sampled_from(["a", "b", "__error__", "__interrupt__", "__resume__"]), min_size=1, max_size=3),
        ),
        st.tuples(st.just("collect")),
        st.tuples(st.just("reopen")),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_pending_writes_equal_in_memory_saver(ops: list[tuple[Any, ...]]) -> None:
    """Whatever the order of puts, forks, writes (duplicates, specials), collection and new processes,
    every checkpoint's pending writes equal InMemorySaver's."""
    url = f"memory://lg-writes-hypo-{abs(hash(tuple(map(str, ops))))}"
    ours, theirs = ArchiveSaver.from_url(url), InMemorySaver()
    ids: list[str] = []
    counter = 0
    for op in [("put", 0), *ops]:
        if op[0] == "put":
            parent = _config(checkpoint_id=ids[-1 - op[1] % len(ids)]) if ids else _config()
            counter += 1
            cfg = _put(ours, parent, counter)
            cp = generate_checkpoint(channel_values={"turn": counter})
            cp["id"] = cfg["configurable"]["checkpoint_id"]
            cp["channel_versions"] = {"turn": counter + 1}
            theirs.put(parent, cp, generate_metadata(step=counter), {"turn": counter + 1})
            ids.append(cfg["configurable"]["checkpoint_id"])
        elif op[0] == "writes":
            target = _config(checkpoint_id=ids[-1 - op[1] % len(ids)])
            writes = [(ch, f"{ch}-{counter}-{i}") for i, ch in enumerate(op[3])]
            counter += 1
            ours.put_writes(target, writes, op[2], "p")
            theirs.put_writes(target, writes, op[2], "p")
        elif op[0] == "collect":
            asyncio.run(ours.maintenance.collect_writes(timedelta(0), unsafe_no_writers=True))
        else:
            ours = ArchiveSaver.from_url(url)

    def key(w: tuple[str, str, Any]) -> tuple[str, str, str]:
        return (w[0], w[1], str(w[2]))

    got = {t.config["configurable"]["checkpoint_id"]: sorted(t.pending_writes, key=key) for t in ours.list(_config())}
    want = {
        t.config["configurable"]["checkpoint_id"]: sorted(t.pending_writes, key=key) for t in theirs.list(_config())
    }
    assert got == want
    fresh = ArchiveSaver.from_url(url)
    for lg_id in ids:
        tup = fresh.get_tuple(_config(checkpoint_id=lg_id))
        assert tup is not None and sorted(tup.pending_writes, key=key) == want[lg_id]
