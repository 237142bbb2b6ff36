"""Real LangGraph graphs on ArchiveSaver: equal to InMemorySaver, resumed in a new process, time travel.

Every scenario runs its first half here, stops at an ``interrupt()`` approval, and ONE child process
(started once for all scenarios, to keep the suite fast) resumes each from the archive on disk and runs
the remaining turns. Each final state must equal the same run on LangGraph's ``InMemorySaver``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ckpt_archive.integrations.langgraph import ArchiveSaver
from ckpt_archive.integrations.langgraph.testing import build_graph, run_turns, summary

CHILD = textwrap.dedent(
    """
    import json, sys
    from langgraph.types import Command
    from ckpt_archive.integrations.langgraph import ArchiveSaver
    from ckpt_archive.integrations.langgraph.testing import build_graph, run_turns, summary
    out = {}
    for name, spec in json.loads(sys.argv[1]).items():
        graph = build_graph(ArchiveSaver.from_url(spec["url"]), delta=spec["delta"], subgraph=spec["subgraph"])
        config = {"configurable": {"thread_id": "t"}}
        pending = graph.get_state(config)
        assert pending.next == ("approve",), (name, pending.next)
        half, turns, durability = spec["half"], spec["turns"], spec["durability"]
        graph.invoke(Command(resume=f"yes {half}"), config, durability=durability)
        run_turns(graph, "t", half + 1, turns, durability)
        out[name] = summary(graph.get_state(config).values)
    print(json.dumps(out))
    """
)

SCENARIOS: dict[str, dict[str, Any]] = {
    "fifty": {"turns": 50, "durability": "async", "delta": False, "subgraph": False},
    "sync": {"turns": 4, "durability": "sync", "delta": False, "subgraph": False},
    "async": {"turns": 4, "durability": "async", "delta": False, "subgraph": False},
    "exit": {"turns": 4, "durability": "exit", "delta": False, "subgraph": False},
    "delta": {"turns": 12, "durability": "async", "delta": True, "subgraph": False},
    "subgraph": {"turns": 4, "durability": "sync", "delta": False, "subgraph": True},
}


def _reference(spec: dict[str, Any]) -> dict[str, Any]:
    graph = build_graph(InMemorySaver(), delta=spec["delta"], subgraph=spec["subgraph"])
    run_turns(graph, "t", 0, spec["turns"], spec["durability"])
    result: dict[str, Any] = json.loads(
        json.dumps(summary(graph.get_state({"configurable": {"thread_id": "t"}}).values))
    )
    return result


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run each scenario's first half here, then resume all of them in one new process."""
    specs = {}
    for name, spec in SCENARIOS.items():
        url = str(tmp_path_factory.mktemp(name) / "archive")
        half = spec["turns"] // 2
        graph = build_graph(ArchiveSaver.from_url(url), delta=spec["delta"], subgraph=spec["subgraph"])
        run_turns(graph, "t", 0, half, spec["durability"])
        question = {"messages": [HumanMessage(f"question {half}", id=f"human-{half}")]}
        graph.invoke(question, {"configurable": {"thread_id": "t"}}, durability=spec["durability"])
        specs[name] = {**spec, "url": url, "half": half}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(specs)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_fifty_turns_resumed_in_new_process_equals_in_memory(resumed: dict[str, Any]) -> None:
    got = resumed["fifty"]
    assert got == _reference(SCENARIOS["fifty"])
    assert len(got["messages"]) == 200 and got["turns"] == 50
    assert got["log"][-1] == "approved call-49: yes 49"


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_durability_modes_resume_in_new_process(resumed: dict[str, Any], durability: str) -> None:
    assert resumed[durability] == _reference(SCENARIOS[durability])
    assert resumed[durability]["turns"] == 4


def test_delta_channel_field_resumed_in_new_process(resumed: dict[str, Any]) -> None:
    try:
        from langgraph.channels.delta import DeltaChannel  # noqa: F401
    except ImportError:
        pytest.skip("installed langgraph has no DeltaChannel (the field falls back to a plain reducer)")
    got = resumed["delta"]
    assert got == _reference(SCENARIOS["delta"])
    assert len(got["notes"]) == 24  # two agent steps per turn, replayed across DeltaChannel snapshots


def test_subgraph_resumed_in_new_process(resumed: dict[str, Any]) -> None:
    got = resumed["subgraph"]
    assert got == _reference(SCENARIOS["subgraph"])
    assert any(entry.startswith("sub saw") for entry in got["log"])


def test_subgraph_namespaces_are_listed_and_deleted(tmp_path: Path) -> None:
    saver = ArchiveSaver.from_url(f"memory://{tmp_path.name}-sub")
    graph = build_graph(saver, subgraph=True)
    run_turns(graph, "t", 0, 2, "sync")
    config = {"configurable": {"thread_id": "t"}}
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in saver.list(config)}
    assert "" in namespaces and any(ns.startswith("sub:") for ns in namespaces)
    saver.delete_thread("t")
    assert list(saver.list(config)) == []


def _time_travel(saver: Any) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    graph = build_graph(saver)
    config = {"configurable": {"thread_id": "tt"}}
    run_turns(graph, "tt", 0, 3, "sync")
    history = list(graph.get_state_history(config))
    # the checkpoint right after turn 1's answer: replay from it, and fork it with update_state
    target = next(s for s in history if s.values.get("turns") == 1 and not s.next)
    replayed = graph.invoke({"messages": [HumanMessage("replay q", id="human-replay")]}, target.config)
    forked_cfg = graph.update_state(target.config, {"messages": [HumanMessage("forked", id="human-fork")]})
    forked = graph.get_state(forked_cfg).values
    return history, summary(replayed), summary(forked)


def test_time_travel_replay_and_fork_match_in_memory(tmp_path: Path) -> None:
    h_ours, replay_ours, fork_ours = _time_travel(ArchiveSaver.from_url(f"memory://{tmp_path.name}-tt"))
    h_ref, replay_ref, fork_ref = _time_travel(InMemorySaver())
    assert [summary(s.values) for s in h_ours] == [summary(s.values) for s in h_ref]
    assert [s.next for s in h_ours] == [s.next for s in h_ref]
    assert replay_ours == replay_ref and fork_ours == fork_ref
    assert fork_ours["messages"][-1][1] == "forked" and fork_ours["turns"] == 1
    assert replay_ours["__interrupt__"][0]["args"] == {"a": 3, "b": 7}


def test_interrupt_pending_write_is_visible(tmp_path: Path) -> None:
    saver = ArchiveSaver.from_url(f"memory://{tmp_path.name}-int")
    graph = build_graph(saver)
    config = {"configurable": {"thread_id": "i"}}
    graph.invoke({"messages": [HumanMessage("q", id="h")]}, config)
    state = graph.get_state(config)
    assert state.next == ("approve",) and state.interrupts[0].value["tool"] == "calculator"
    graph.invoke(Command(resume="ok"), config)
    assert graph.get_state(config).values["log"] == ["approved call-0: ok"]


def _turn(graph: Any, turn: int, config: dict[str, Any], run: str | None = None) -> None:
    """One turn; with ``run``, each of its two invocations gets its own run id (LangGraph replays a reused one)."""
    ask = {**config, "metadata": {"run_id": f"{run}-{turn}-ask"}} if run else config
    resume = {**config, "metadata": {"run_id": f"{run}-{turn}-resume"}} if run else config
    graph.invoke({"messages": [HumanMessage(f"question {turn}", id=f"human-{turn}")]}, ask)
    graph.invoke(Command(resume=f"yes {turn}"), resume)


def _needs_delta_channel() -> None:
    try:
        from langgraph.channels.delta import DeltaChannel  # noqa: F401
    except ImportError:
        pytest.skip("installed langgraph has no DeltaChannel")


def test_prune_keep_latest_keeps_delta_channel_history(tmp_path: Path) -> None:
    _needs_delta_channel()
    saver = ArchiveSaver.from_url(f"memory://{tmp_path.name}-prune")
    graph = build_graph(saver, delta=True)
    config = {"configurable": {"thread_id": "t"}}
    run_turns(graph, "t", 0, 5, "async")
    before = summary(graph.get_state(config).values)
    assert len(before["notes"]) == 10
    latest = saver.get_tuple(config)
    assert latest is not None and "notes" not in latest.checkpoint["channel_values"]  # rebuilt by replay
    saver.prune(["t"], strategy="keep_latest")
    assert len(list(saver.list(config))) == 1
    assert summary(graph.get_state(config).values) == before
    _turn(graph, 5, config)
    assert summary(graph.get_state(config).values) == _reference(
        {"turns": 6, "durability": "async", "delta": True, "subgraph": False}
    )


def test_delete_for_runs_keeps_later_runs_whole(tmp_path: Path) -> None:
    _needs_delta_channel()
    saver = ArchiveSaver.from_url(f"memory://{tmp_path.name}-runs")
    graph = build_graph(saver, delta=True)
    config = {"configurable": {"thread_id": "t"}}
    for turn in range(5):
        _turn(graph, turn, config, "old" if turn < 3 else "new")
    before = summary(graph.get_state(config).values)
    old = [f"old-{turn}-{step}" for turn in range(3) for step in ("ask", "resume")]
    saver.delete_for_runs(old)
    runs = {t.metadata.get("run_id") for t in saver.list(config)}
    assert runs == {f"new-{turn}-{step}" for turn in (3, 4) for step in ("ask", "resume")}
    assert summary(graph.get_state(config).values) == before
    _turn(graph, 5, config)
    assert summary(graph.get_state(config).values) == _reference(
        {"turns": 6, "durability": "async", "delta": True, "subgraph": False}
    )
