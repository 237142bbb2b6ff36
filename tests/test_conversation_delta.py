"""A LangGraph thread whose ``messages`` is a ``DeltaChannel`` (LangGraph 1.2) read offline (issue 21).

Between the channel's ``_DeltaSnapshot``s a checkpoint stores no value for ``messages``; the offline
reader (``analysis.replay.Views``: ``messages_frame``, ``changes_frame``, ``ckpt-archive show``/``diff``)
must show the conversation ``get_state(config).values["messages"]`` gives at every checkpoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import duckdb
import pytest

pytest.importorskip("langgraph.channels.delta")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.graph import START, StateGraph
from typer.testing import CliRunner

import ckpt_archive as ca
from ckpt_archive.analysis import changes_frame, messages_frame, view
from ckpt_archive.cli import app
from ckpt_archive.integrations.langgraph import ArchiveSaver
from ckpt_archive.integrations.langgraph.testing import chat, delta_messages_state, tool_agent
from tests.test_conversation import _calls, expected_rows

ROOT = Path(__file__).resolve().parent.parent

TURNS = 6
SNAPSHOT_EVERY = 5


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("CKPT_ARCHIVE_"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def dg(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, list[Any]]]:
    """The issue's tool agent with ``messages`` a DeltaChannel; the API's messages at every checkpoint."""
    url = str(tmp_path_factory.mktemp("delta") / "lg")
    graph = tool_agent(ArchiveSaver.from_url(url), TURNS, fail_every=3, delta=SNAPSHOT_EVERY)
    chat(graph, "chat", TURNS)
    ArchiveSaver.from_url(url).archive.compact("chat")  # the newest rows into the Parquet (for DuckDB)
    config = {"configurable": {"thread_id": "chat"}}
    api = {
        s.config["configurable"]["checkpoint_id"]: list(s.values.get("messages", []))
        for s in graph.get_state_history(config)
    }
    return url, api


def lg_id(info: Any) -> str:
    return str(info.metadata["ckpt_archive.langgraph"]["id"])


def shown(messages: list[Any]) -> list[tuple[Any, ...]]:
    return [(m.id, m.type, m.text) for m in messages]


def test_messages_frame_of_every_checkpoint_is_what_get_state_shows(dg: tuple[str, dict[str, list[Any]]]) -> None:
    url, api = dg
    infos = ca.open_archive(url).list("chat")
    archive = ca.open_archive(url)
    stored = [i for i in infos if "messages" in archive.load_by_id(i.checkpoint_id).state["channels"]]  # type: ignore[union-attr]
    assert 0 < len(stored) < len(infos) // 2  # most checkpoints store no value: the test is about those
    for info in infos:
        rows = messages_frame(url, "chat", checkpoint_id=info.checkpoint_id, backend="arrow").to_pylist()
        assert [(r["id"], r["type"], r["text"]) for r in rows] == shown(api[lg_id(info)]), info.step
        by_lg = messages_frame(url, "chat", checkpoint_id=lg_id(info), backend="arrow").to_pylist()
        assert by_lg == rows  # named by its LangGraph id, the same checkpoint
    latest = messages_frame(url, "chat")
    assert len(latest) == 4 * TURNS and list(latest.status[latest.role == "tool"]).count("error") == TURNS // 3


LONG_TURNS = 30
"""A thread of 150 records whose ``messages`` snapshots every 20 updates (5 turns: 25 records)."""
BUILT_MOST = 45
"""States a ``messages_frame`` of one checkpoint may build: the records back to its seed (at most 25),
the carriers of their writes past them (its child and grandchild), and the start of its chain (a full
snapshot every 10 records); never the thread's 150."""


def test_messages_frame_builds_only_the_states_back_to_the_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The offline reader walks a ``DeltaChannel`` from the checkpoint to its seed (the walk
    ``get_delta_channel_history`` takes: ``format.langgraph``), building only the states of that range
    (before: every state of the thread on the first checkpoint without a stored value, 4.8 s at 1,000
    checkpoints). States built are counted at the one replay (``ChainReader._step``: one per record
    whose content is built, a snapshot decoded or a delta applied)."""
    from ckpt_archive.engine.chains import ChainReader
    from ckpt_archive.integrations.langgraph import values

    url = str(tmp_path / "lg")
    # interval 10 (from_url's default is 30): the bound counts the walk's range, plus a chain from its snapshot
    graph = tool_agent(ArchiveSaver.from_url(url, full_snapshot_interval=10), LONG_TURNS, delta=20)
    chat(graph, "chat", LONG_TURNS)
    config = {"configurable": {"thread_id": "chat"}}
    api = {
        s.config["configurable"]["checkpoint_id"]: list(s.values["messages"]) for s in graph.get_state_history(config)
    }
    archive = ca.open_archive(url)
    infos = archive.list("chat")
    assert len(infos) >= 5 * LONG_TURNS
    replayed = [i for i in infos if values.replayed(archive.load_by_id(i.checkpoint_id).state)]  # type: ignore[union-attr]
    built = [0]
    step = ChainReader._step

    async def counted(self: ChainReader, *args: Any, **kw: Any) -> Any:
        built[0] += 1
        return await step(self, *args, **kw)

    monkeypatch.setattr(ChainReader, "_step", counted)
    costs = []
    for info in replayed[:: len(replayed) // 6] + replayed[-1:]:
        built[0] = 0
        rows = messages_frame(url, "chat", checkpoint_id=info.checkpoint_id, backend="arrow").to_pylist()
        costs.append(built[0])
        assert [(r["id"], r["type"], r["text"]) for r in rows] == shown(api[lg_id(info)]), info.step
    assert max(costs) <= BUILT_MOST, costs


def test_a_pruned_thread_reads_offline_as_get_state(tmp_path: Path) -> None:
    """``prune(keep_latest)`` folds the history the kept checkpoint needs into its state (``folded``);
    the offline reader ends its walk there as the saver does (the one walk, ``format.langgraph``), so
    the conversation survives the prune (before: the reader's own walk stopped at the missing parent and
    showed an empty conversation)."""
    url = str(tmp_path / "lg")
    saver = ArchiveSaver.from_url(url)
    graph = tool_agent(saver, TURNS, delta=100)
    chat(graph, "chat", TURNS)
    config = {"configurable": {"thread_id": "chat"}}
    saver.prune(["chat"])
    want = list(graph.get_state(config).values["messages"])
    assert len(want) == 4 * TURNS and len(ca.open_archive(url).list("chat")) == 1
    rows = messages_frame(url, "chat", backend="arrow").to_pylist()
    assert [(r["id"], r["type"], r["text"]) for r in rows] == shown(want)


def test_changes_frame_of_a_delta_channel_thread_only_appends(dg: tuple[str, dict[str, list[Any]]]) -> None:
    url, api = dg
    changes = changes_frame(url, "chat")
    assert set(changes.key) == {"messages"}
    assert list(changes.op).count("set") == 1 and set(changes.op) == {"set", "append"}  # never removed, set again
    latest = api[lg_id(ca.open_archive(url).list("chat")[-1])]
    appended = [m for v in changes[changes.op == "append"].value for m in json.loads(v)]
    first = json.loads(changes[changes.op == "set"].value.iloc[0])
    assert [m["content"] for m in first + appended] == [m.content for m in latest]


def documented_delta_query(root: str) -> str:
    """The DuckDB query of docs/guides/langgraph.md ("A `DeltaChannel` conversation"), as printed."""
    guide = (ROOT / "docs" / "guides" / "langgraph.md").read_text()
    section = guide[guide.index("### A `DeltaChannel` conversation") :]
    start = section.index("```sql") + len("```sql")
    return section[start : section.index("```", start)].replace("<root>", root)


def test_duckdb_alone_reads_every_message_of_a_delta_channel_thread(dg: tuple[str, dict[str, list[Any]]]) -> None:
    url, api = dg
    latest = api[lg_id(ca.open_archive(url).list("chat")[-1])]
    rows = duckdb.sql(documented_delta_query(url)).fetchall()
    got = [(t, text, _calls(calls), tcid, name, status) for _, t, text, calls, tcid, name, status in rows]
    assert got == expected_rows(latest)  # every message, in order: type, text, tool calls, tool results
    assert len(got) == 4 * TURNS and [r[5] for r in got if r[0] == "tool"].count("error") == TURNS // 3


def run_cli(*args: str) -> str:
    """The real entry point, piped, at 80 columns."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("CKPT_ARCHIVE_")}
    env |= {"COLUMNS": "80", "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, "-c", "from ckpt_archive.cli import main; main()", *args],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_cli_show_and_diff_name_a_checkpoint_by_its_langgraph_id(dg: tuple[str, dict[str, list[Any]]]) -> None:
    url, api = dg
    infos = ca.open_archive(url).list("chat")
    archive = ca.open_archive(url)
    target = next(i for i in reversed(infos) if "messages" not in archive.load_by_id(i.checkpoint_id).state["channels"])  # type: ignore[union-attr]  # fmt: skip
    by_lg = run_cli("show", "chat", "--checkpoint", lg_id(target), "--url", url)
    lines = by_lg.splitlines()
    assert lines[0].split()[3] == target.checkpoint_id and lines[1].split()[2] == lg_id(target)
    n = len(api[lg_id(target)])
    assert f"messages ({n}):" in lines and all(len(line) <= 80 for line in lines)
    for named in (lg_id(target), target.checkpoint_id):  # in process: the same checkpoint either way
        done = CliRunner().invoke(app, ["show", "chat", "--checkpoint", named, "--url", url, "--json"])
        body = json.loads(done.stdout)
        assert body["checkpoint_id"] == target.checkpoint_id
        assert [m["content"] for m in body["state"]["messages"]] == [m.content for m in api[lg_id(target)]]
    parent = infos[infos.index(target) - 1]
    text = run_cli("diff", "chat", "--from", lg_id(parent), "--to", lg_id(target), "--url", url)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0] == f"chat: {parent.checkpoint_id}" and lines[1].split() == ["->", target.checkpoint_id]
    added = len(api[lg_id(target)]) - len(api[lg_id(parent)])
    assert "removed" not in text and (added == 0 or f"~ messages += {added} message" in text)


def test_an_id_of_no_checkpoint_of_the_thread_is_one_clear_line(dg: tuple[str, dict[str, list[Any]]]) -> None:
    url, _ = dg
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("CKPT_ARCHIVE_")}
    env |= {"COLUMNS": "80", "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, "-c", "from ckpt_archive.cli import main; main()", "show", "chat", "--checkpoint",
         "1f000000-0000-6000-8000-000000000000", "--url", url],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "neither an archive nor a LangGraph id" in done.stderr
    assert "Traceback" not in done.stderr


# -- any sequence of appends, replacements by id and removals: the offline view is the API's -----------------
def echo_graph(checkpointer: Any) -> Any:
    """START -> a node that writes nothing: each invoke's input is the step's write to ``messages``."""
    g: Any = StateGraph(delta_messages_state(3))
    g.add_node("noop", lambda state: {})
    g.add_edge(START, "noop")
    return g.compile(checkpointer=checkpointer)


op = st.tuples(st.sampled_from(["add", "replace", "remove"]), st.integers(0, 5), st.text(max_size=8))
ops = st.lists(op, min_size=1, max_size=3)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.lists(ops, min_size=1, max_size=6))
def test_any_add_replace_remove_sequence_reads_offline_as_get_state(tmp_path: Path, batches: list[Any]) -> None:
    url = str(tmp_path / uuid.uuid4().hex)
    graph = echo_graph(ArchiveSaver.from_url(url))
    config = {"configurable": {"thread_id": "t"}}
    ids: list[str] = []
    n = 0
    for batch in batches:
        update: list[Any] = []
        for op, at, text in batch:
            if op == "add" or not ids:
                n += 1
                ids.append(f"m{n}")
                update.append((HumanMessage if n % 2 else AIMessage)(text, id=ids[-1]))
            elif op == "replace":
                update.append(AIMessage(f"edited {text}", id=ids[at % len(ids)]))
            else:
                update.append(RemoveMessage(id=ids.pop(at % len(ids))))
        graph.invoke({"messages": update}, config)
    api = {
        s.config["configurable"]["checkpoint_id"]: s.values.get("messages", []) for s in graph.get_state_history(config)
    }
    for info in ca.open_archive(url).list("t"):
        rows = messages_frame(url, "t", checkpoint_id=info.checkpoint_id, backend="arrow").to_pylist()
        assert [(r["id"], r["type"], r["text"]) for r in rows] == shown(api[lg_id(info)])
    assert view(ca.open_archive(url).load("t").state) is not None  # type: ignore[union-attr]


def forged(url: str, records: list[tuple[str, str | None, dict[str, Any]]]) -> None:
    """Records that claim to be the LangGraph saver's: (LangGraph id, LangGraph parent, channels)."""
    archive = ca.open_archive(url)
    for step, (lg, parent, channels) in enumerate(records):
        state = {"checkpoint": {"id": lg, "channel_versions": {"messages": step + 1}}, "channels": channels}
        meta = {"ckpt_archive.langgraph": {"id": lg, "parent": parent}}
        archive.save(ca.Checkpoint(thread_id="t", state=state, step=step, metadata=meta))


def test_a_forged_parent_cycle_ends_and_a_foreign_message_is_a_typed_error(tmp_path: Path) -> None:
    """Hostile records: LangGraph parents forming a cycle end the walk (no seed: empty, as LangGraph
    starts); a write whose message names a class outside the allowlist is ``UnreadableValue``, not built."""
    url = str(tmp_path / "a")
    forged(url, [("a", "b", {}), ("b", "a", {})])
    assert messages_frame(url, "t").empty
    url = str(tmp_path / "b")
    evil = {"type": "os.system", "content": "echo pwned"}
    seed = {"snapshot": {"items": [{"type": "human", "content": "hi", "id": "h"}]}}
    forged(url, [("a", None, {"messages": seed}), ("b", "a", {})])
    archive = ca.open_archive(url)
    b = archive.load("t")
    writes = {"a": {"w.json.zst": ["task", "~p", [[0, "messages", {"items": [evil]}]]]}}
    archive.save(ca.Checkpoint(thread_id="t", parent_id=b.checkpoint_id, step=2,  # type: ignore[union-attr]
                               state={**b.state, "writes": writes}, metadata=b.metadata))  # type: ignore[union-attr]  # fmt: skip
    from ckpt_archive.errors import CheckpointError

    with pytest.raises(CheckpointError, match="does not construct"):
        messages_frame(url, "t")


def test_diff_header_fits_80_columns_for_a_long_thread_id(tmp_path: Path) -> None:
    """Archive ids embed the thread: a long thread puts the thread, then ``from``/``to``, on lines of
    their own, ids whole (the one-line form of ``test_conversation`` for a short one)."""
    url = str(tmp_path / "a")
    archive = ca.open_archive(url)
    thread = "customer-1000/session-0"
    first = archive.save(ca.Checkpoint(thread_id=thread, state={"turn": 1}))
    second = archive.save(ca.Checkpoint(thread_id=thread, parent_id=first, step=1, state={"turn": 2}))
    lines = run_cli("diff", thread, "--url", url).splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[:4] == [f"{thread}:", f"  from {first}", f"  to   {second}", "~ turn 1 -> 2"]
