"""A LangGraph thread read offline as a conversation (issue 21): analysis frames, CLI, DuckDB alone.

The graph is the issue's (``integrations/langgraph/testing.tool_agent``: an agent on
``FakeMessagesListChatModel`` calling a tool through a ``ToolNode``, then a ~1 KB answer; every third
call fails), saved by ``ArchiveSaver`` with its defaults. What a user reads (``messages_frame``,
``ckpt-archive show``/``diff``, the DuckDB query of docs/guides/langgraph.md) must be the conversation
the LangGraph API shows, and "what changed" must be the graph's channels, never LangGraph's bookkeeping.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

import duckdb
import orjson
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import ckpt_archive as ca
from ckpt_archive.analysis import changes_frame, message_row, messages_frame, view
from ckpt_archive.cli import app
from ckpt_archive.integrations.langgraph import ArchiveSaver, strict_serde
from ckpt_archive.integrations.langgraph.encoding import SerdeCodec
from ckpt_archive.integrations.langgraph.testing import chat, tool_agent
from ckpt_archive.integrations.langgraph.values import is_bookkeeping, readable_cell
from tests.test_langgraph_values import messages as generated_messages

ROOT = Path(__file__).resolve().parent.parent
TURNS = int(os.environ.get("CONVERSATION_TURNS", "30"))
"""Turns of the module's run: 30 in ``make test`` (seconds); ``CONVERSATION_TURNS=200`` for the issue's size."""
ROLES = ["user", "assistant", "tool", "assistant"]
BOOKKEEPING = ("branch:", "__start__", "__pregel", "versions_seen", "channel_versions", "updated_channels")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("CKPT_ARCHIVE_"):
            monkeypatch.delenv(name)


def run_graph(url: str, turns: int, thread: str = "chat") -> list[Any]:
    """``turns`` turns of the issue's graph into ``url``; the API's messages at the end."""
    saver = ArchiveSaver.from_url(url)
    graph = tool_agent(saver, turns, fail_every=3)
    chat(graph, thread, turns)
    saver.archive.compact(thread)  # may merge segments: the merged-away ones stay until gc
    saver.archive.gc(grace=timedelta(0), unsafe_no_writers=True)  # this test is the archive's only writer
    return list(graph.get_state({"configurable": {"thread_id": thread}}).values["messages"])


@pytest.fixture(scope="module")
def lg(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[Any]]:
    url = str(tmp_path_factory.mktemp("conversation") / "lg")
    return url, run_graph(url, TURNS)


def expected_rows(api: list[Any]) -> list[tuple[Any, ...]]:
    """(type, text, tool calls, tool_call_id, tool name, status) of each message as the API has it."""
    out = []
    for m in api:
        calls = [{k: c[k] for k in ("name", "args", "id")} for c in getattr(m, "tool_calls", [])] or None
        is_tool = m.type == "tool"
        out.append((m.type, m.content, calls, getattr(m, "tool_call_id", None), m.name if is_tool else None,
                    m.status if is_tool else None))  # fmt: skip
    return out


def _calls(text: str | None) -> Any:
    return [{k: c[k] for k in ("name", "args", "id")} for c in json.loads(text)] if text else None


def test_messages_frame_is_the_conversation_the_api_shows(lg: tuple[str, list[Any]]) -> None:
    url, api = lg
    assert len(api) == 4 * TURNS and sum(getattr(m, "status", "") == "error" for m in api) == TURNS // 3
    rows = messages_frame(url, "chat", backend="arrow").to_pylist()
    got = [
        (r["type"], r["text"], _calls(r["tool_calls"]), r["tool_call_id"], r["name"] if r["type"] == "tool" else None,
         r["status"])
        for r in rows
    ]  # fmt: skip
    assert got == expected_rows(api)
    frame = messages_frame(url, "chat")
    assert list(frame["index"]) == list(range(len(api))) and set(frame.role) == {"user", "assistant", "tool"}
    assert list(frame.id) == [m.id for m in api]
    failed = frame[frame.status == "error"]
    assert len(failed) == TURNS // 3 and all("lookup failed" in t for t in failed.text)
    polars = messages_frame(url, "chat", backend="polars")
    assert polars["text"].to_list() == list(frame.text)
    # any checkpoint's conversation: the first with messages has just the question
    first = next(i for i in ca.open_archive(url).list("chat") if i.step == 1)
    assert list(messages_frame(url, "chat", checkpoint_id=first.checkpoint_id).text) == ["question-0"]


def test_changes_frame_of_a_langgraph_thread_is_the_graphs_channels_only(lg: tuple[str, list[Any]]) -> None:
    url, api = lg
    changes = changes_frame(url, "chat")
    assert set(changes.key) == {"messages"}  # no checkpoint/versions_seen/branch:to:*/__start__/writes rows
    assert not any(b in p for p in changes.path for b in BOOKKEEPING)
    appended = [m for v in changes[changes.op == "append"].value for m in json.loads(v)]
    first = json.loads(changes[changes.op == "set"].value.iloc[0])
    assert [message_row(m)["text"] for m in first + appended] == [m.content for m in api]
    # replayed, the changes give every checkpoint's readable state
    archive = ca.open_archive(url)
    state: dict[str, Any] = {}
    by_id = {c.checkpoint_id: view(c.state) for c in archive.history("chat")}
    for ckpt_id, rows in changes.groupby("checkpoint_id", sort=False):
        ops = [
            {"op": r.op, "path": json.loads(r.path)} | ({} if r.value is None else {"value": json.loads(r.value)})
            for r in rows.itertuples()
        ]
        state = ca.apply(state, ops)
        assert state == by_id[ckpt_id]


def test_the_readable_view_leaves_out_every_bookkeeping_channel(lg: tuple[str, list[Any]]) -> None:
    url, _ = lg
    for ckpt in ca.open_archive(url).history("chat"):
        channels = set(ckpt.state["channels"])
        shown = set(view(ckpt.state))
        assert shown == {c for c in channels if not is_bookkeeping(c)} <= {"messages"}
    for name in ("__start__", "branch:to:agent", "branch:to:tools", "__pregel_tasks", "start:agent", "__interrupt__"):
        assert is_bookkeeping(name), name
    for name in ("messages", "__root__", "notes", "branch", "_private"):
        assert not is_bookkeeping(name), name


def cli(*args: str) -> str:
    """The real entry point, piped (not a terminal), at 80 columns."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("CKPT_ARCHIVE_")}
    env |= {"COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "ckpt_archive.cli", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def cli_json(*args: str) -> str:
    """The typer app in this process (CliRunner), for the many JSON calls: as fast as a function call."""
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})
    assert result.exit_code == 0, (result.output, result.stderr)
    return result.stdout


def test_cli_show_prints_a_langgraph_thread_as_a_conversation(lg: tuple[str, list[Any]]) -> None:
    url, api = lg
    text = cli("show", "chat", "--url", url)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    latest = ArchiveSaver.from_url(url).get_tuple({"configurable": {"thread_id": "chat"}})
    assert latest is not None
    lg_id = latest.config["configurable"]["checkpoint_id"]
    assert lines[1].split()[:3] == ["langgraph", "checkpoint", lg_id]  # the id LangGraph's API gives
    assert lines[2] == f"messages ({len(api)}):"
    body = lines[3:]
    assert len(body) == len(api)
    assert body[0].split() == ["0", "user", "question-0"]
    assert body[1].split() == ["1", "assistant", "->", 'lookup({"query":', '"q-0"})']
    assert body[2].split() == ["2", "tool", "lookup", "[success]:", "result", "for", "q-0"]
    assert body[3].startswith("   3 assistant answer-0 xxx") and body[3].endswith("...")
    assert re.match(r"\s+10 tool\s+lookup \[error\]: Error: ValueError\('lookup failed for fail-2", body[10])
    assert not any(b in text for b in (*BOOKKEEPING, "msgpack", '"items"', '"json"'))
    shown = json.loads(cli_json("show", "chat", "--url", url, "--json"))
    assert set(shown["state"]) == {"messages"} and shown["state"]["messages"][2]["tool_call_id"] == "call-0"
    one = cli("show", "chat", "--url", url, "--key", "messages")
    assert one.splitlines()[2:5] == body[:3]
    raw = json.loads(cli_json("show", "chat", "--url", url, "--json", "--raw"))
    assert "checkpoint" in raw["state"] and "items" in raw["state"]["channels"]["messages"]


def test_cli_diff_of_a_langgraph_step_shows_the_new_messages_and_no_bookkeeping(lg: tuple[str, list[Any]]) -> None:
    url, _ = lg
    infos = ca.open_archive(url).list("chat")
    turn_start = infos[-6].checkpoint_id  # before the last turn's question: the turn's 4 messages
    text = cli("diff", "chat", "--from", turn_start, "--url", url)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), lines  # the header too: split before its arrow
    assert lines[:2] == [f"chat: {turn_start}", f"      -> {infos[-1].checkpoint_id}"]  # both ids whole
    lines = lines[1:]
    assert lines[1] == "~ messages += 4 messages"
    assert [line.split()[:2] for line in lines[2:]] == [[str(4 * TURNS - 4 + i), r] for i, r in enumerate(ROLES)]
    assert not any(b in text for b in BOOKKEEPING)
    for older, newer in zip(infos[-12:], infos[-11:], strict=False):  # step by step: only the graph's channels
        pair = ("--from", older.checkpoint_id, "--to", newer.checkpoint_id)
        d = json.loads(cli_json("diff", "chat", *pair, "--url", url, "--json"))
        paths = [c["path"] for kind in ("added", "changed", "removed") for c in d[kind]]
        assert all(p[0] == "messages" for p in paths), paths
    raw = json.loads(cli_json("diff", "chat", "--url", url, "--json", "--raw"))
    assert any(c["path"][0] == "checkpoint" for c in raw["changed"])


def documented_query(root: str) -> str:
    """The DuckDB query of docs/guides/langgraph.md ("Reading a conversation with DuckDB"), as printed."""
    guide = (ROOT / "docs" / "guides" / "langgraph.md").read_text()
    section = guide[guide.index("### Reading a conversation with DuckDB") :]
    sql = section[section.index("```sql") + len("```sql") : section.index("```", section.index("```sql") + 6)]
    return sql.replace("<root>", root)


def duckdb_rows(url: str) -> list[tuple[Any, ...]]:
    rows = duckdb.sql(documented_query(url)).fetchall()
    return [(t, text, _calls(calls), tcid, name, status) for _, t, text, calls, tcid, name, status in rows]


def test_duckdb_alone_reads_every_message_of_a_langgraph_run_in_order(lg: tuple[str, list[Any]]) -> None:
    url, api = lg
    rows = duckdb_rows(url)
    assert rows == expected_rows(api)  # every message, in order, with its type, text, tool calls, results
    markers = [f"question-{t}" for t in range(TURNS)] + [f"answer-{t} " for t in range(TURNS)]
    markers += [f"for q-{t}" if t % 3 != 2 else f"failed for fail-{t}" for t in range(TURNS)]
    markers += [f'"query":"{"fail" if t % 3 == 2 else "q"}-{t}"' for t in range(TURNS)]
    text = "\n".join(str(r[1]) + json.dumps(r[2], separators=(",", ":")) for r in rows)
    assert sum(m in text for m in markers) == len(markers) == 4 * TURNS
    assert [r[5] for r in rows if r[0] == "tool"].count("error") == TURNS // 3


READ_PARQUET = "read_parquet('<root>/thread_id=*/deltas/*.parquet', hive_partitioning = false)"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(generated_messages, min_size=1, max_size=6))
def test_any_stored_message_reads_as_langchain_shows_it(msgs: list[Any]) -> None:
    """``message_row`` and the guide's DuckDB query read a stored message cell (``SerdeCodec``, as the
    saver stores it) as LangChain shows the message: type, ``message.text``, tool calls, tool results.
    A message JSON cannot hold exactly (``additional_kwargs={"": inf}``) is the serde's pair, by design
    (spec.md section 11): the archive cannot read inside it, so it is checked as such and left out."""
    from ckpt_archive.integrations.langgraph.values import message_cell

    serde = [m for m in msgs if message_cell(m, None) is None]
    for m in serde:
        assert set(readable_cell(SerdeCodec(strict_serde(), {}).encode_channel([m], None))[0]) == {"$serde", "bytes"}
    msgs = [m for m in msgs if message_cell(m, None) is not None]
    if not msgs:
        return
    cells = orjson.loads(orjson.dumps(SerdeCodec(strict_serde(), {}).encode_channel(msgs, None)))
    readable = readable_cell(cells)
    assert len(readable) == len(msgs)
    expected = []
    for m, cell in zip(msgs, readable, strict=True):
        assert isinstance(cell, dict) and cell["type"] == m.type  # every generated message is stored as JSON
        row = message_row(cell)
        calls = [{k: c[k] for k in ("name", "args", "id")} for c in getattr(m, "tool_calls", [])] or None
        status = m.status if m.type == "tool" else None
        assert (row["type"], row["text"], _calls(row["tool_calls"]), row["tool_call_id"], row["status"]) == (
            m.type, m.text, calls, getattr(m, "tool_call_id", None), status)  # fmt: skip
        expected.append((m.type, m.text, calls, getattr(m, "tool_call_id", None), status))
    table = pa.table(
        {
            "thread_id": ["chat"],
            "checkpoint_id": ["c"],
            "step": [1],
            "op_index": [0],
            "op": ["set"],
            "path": ['["channels","messages"]'],
            "value": [orjson.dumps(cells).decode()],
        }
    )
    con = duckdb.connect()
    con.register("history_rows", table)
    rows = con.sql(documented_query("").replace(READ_PARQUET.replace("<root>", ""), "history_rows")).fetchall()
    got = [(t, text, _calls(c), tcid, status) for _, t, text, c, tcid, _, status in rows]
    assert got == expected
