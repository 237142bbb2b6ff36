"""W1 through a LangGraph graph: ArchiveSaver against PostgresSaver, with and without a DeltaChannel.

The graph: one node in a loop, one superstep per step; each step appends one ~1 KB message (the W1
text of ``bench_core.message``) to ``messages`` and sets small counters, ``--steps`` steps in one thread,
``durability="sync"``. ``messages`` is declared either way LangGraph offers:

* ``add_messages``: a plain reducer channel; the saver gets the whole list as a blob whenever it changes;
* ``DeltaChannel(_messages_delta_reducer)`` (LangGraph 1.2, beta): the checkpoint stores only a sentinel,
  the step's write (``put_writes``) is the delta, and a ``_DeltaSnapshot`` of the list is stored every
  100 updates; loading replays the writes since the snapshot (``get_delta_channel_history``).

Savers: ``ArchiveSaver`` on local disk and ``PostgresSaver`` (``langgraph-checkpoint-postgres``) on a real
PostgreSQL server this script starts on loopback (``pg_server.py``), one fresh database per run.
Measured: bytes stored (ours: every file under the root, and after gc; Postgres: ``pg_total_relation_size``
of its three tables, heap + TOAST + indexes, as left by the run and after ``VACUUM FULL``), the duration of
every ``put`` and of the ``put_writes`` before it, then in a fresh process, each on a newly opened saver:
``get_tuple`` (latest), ``get_delta_channel_history`` of ``messages``, ``graph.get_state`` (the state with
``messages`` rebuilt), list all and list(limit=1).

Then issue 21's real graph, turn by turn (``turn_times``): ``testing.tool_agent`` (an agent on
``FakeMessagesListChatModel`` asking a tool, then a ~1 KB answer; a ``ToolNode``), ``--turns`` turns in
one thread, ``durability="sync"``, one graph per saver (``TURN_SAVERS``), the savers interleaved turn by
turn (turn t of each before turn t+1 of any, the order rotated each turn) so a noisy neighbour on the
machine lands on all of them alike; per turn, the wall time of ``invoke`` and the time inside the saver's
``put`` and ``put_writes``. Writes ``results/postgres.json`` and ``postgres.md``.

    .venv/bin/python benchmarks/bench_postgres.py [--steps 1000 --repeats 3 --turns 200]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any, TypedDict

import numpy as np
from bench_core import message
from bench_peers import RESULTS, median_of, pct
from peers import available, open_store
from pg_server import PostgresServer, missing
from report import ms

THREAD = "chat"
CONFIG = {"configurable": {"thread_id": THREAD}}
SAVERS = [
    ("ArchiveSaver", "add_messages"),
    ("ArchiveSaver", "DeltaChannel"),
    ("PostgresSaver", "DeltaChannel"),
    ("PostgresSaver", "add_messages"),
]
PEER = ("PostgresSaver", "DeltaChannel")  # the ratios are against this row
TURN_SAVERS = [
    ("ArchiveSaver", "add_messages"),
    ("ArchiveSaver", "DeltaChannel"),
    ("PostgresSaver", "DeltaChannel"),
    ("PostgresSaver", "add_messages"),
    ("InMemorySaver", "add_messages"),  # LangGraph's own cost, with a saver that does no I/O
]
TURN_SNAPSHOTS = 100
"""``snapshot_frequency`` of the tool graph's ``DeltaChannel`` (``delta_messages_state``'s default)."""


def build_graph(checkpointer: Any, channel: str, steps: int) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    if channel == "DeltaChannel":
        from langgraph.channels.delta import DeltaChannel
        from langgraph.graph.message import _messages_delta_reducer

        reducer: Any = DeltaChannel(_messages_delta_reducer)  # as LangGraph's docstring declares it
    else:
        reducer = add_messages

    # functional form: the annotation must be evaluated here (this module's annotations are strings)
    fields = {"messages": Annotated[list[Any], reducer], "step": int, "tokens": int, "tool_calls": int}
    State = TypedDict("State", fields, total=False)  # type: ignore[misc]

    rng = random.Random(42)
    texts = [message(rng, i) for i in range(steps)]

    def chat(s: dict[str, Any]) -> dict[str, Any]:
        i = s.get("step", -1) + 1
        m = texts[i]
        kind = HumanMessage if m["role"] == "user" else AIMessage
        return {"messages": [kind(m["content"], id=m["id"])], "step": i, "tokens": i * 257, "tool_calls": i // 3}

    g: Any = StateGraph(State)
    g.add_node("chat", chat)
    g.add_edge(START, "chat")
    g.add_conditional_edges("chat", lambda s: END if s["step"] + 1 >= steps else "chat", ["chat", END])
    return g.compile(checkpointer=checkpointer)


class Timed:
    """The wall time of each ``put`` of a saver, and of the ``put_writes`` since the one before.

    Wraps the two methods on the instance (the graph's loop looks them up there); ``put_writes`` keeps its
    ``task_path`` parameter, which the loop checks the signature for.
    """

    def __init__(self, saver: Any) -> None:
        self.puts: list[float] = []
        self.writes: list[float] = []
        self._pending = 0.0
        put, put_writes = saver.put, saver.put_writes

        def timed_put(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            t0 = time.perf_counter()
            out = put(config, checkpoint, metadata, new_versions)
            self.puts.append(time.perf_counter() - t0)
            self.writes.append(self._pending)
            self._pending = 0.0
            return out

        def timed_put_writes(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            t0 = time.perf_counter()
            put_writes(config, writes, task_id, task_path)
            self._pending += time.perf_counter() - t0

        saver.put, saver.put_writes = timed_put, timed_put_writes


def turn_times(graphs: dict[Any, tuple[Any, Timed]], turns: int) -> dict[Any, dict[str, list[float]]]:
    """Turns ``0..turns-1`` of ``testing.ask`` on every graph, interleaved: turn t of each graph before
    turn t+1 of any, the order rotated by one each turn. Per graph: each turn's wall time (``turn``) and
    the time its saver spent in ``put`` and ``put_writes`` during it (``saver``, from its ``Timed``)."""
    from ckpt_archive.integrations.langgraph.testing import ask

    def spent(t: Timed) -> float:
        return sum(t.puts) + sum(t.writes) + t._pending

    out: dict[Any, dict[str, list[float]]] = {key: {"turn": [], "saver": []} for key in graphs}
    order = list(graphs)
    for turn in range(turns):
        for key in order:
            graph, timer = graphs[key]
            before = spent(timer)
            t0 = time.perf_counter()
            ask(graph, THREAD, turn)
            out[key]["turn"].append(time.perf_counter() - t0)
            out[key]["saver"].append(spent(timer) - before)
        order = order[1:] + order[:1]
    return out


def turn_summary(times: dict[str, list[float]]) -> dict[str, float]:
    """p50 of the turn and of the saver's share, and the last 50 turns' p50 over the first 50's."""
    turn, saver = times["turn"], times["saver"]
    k = max(1, min(50, len(turn) // 4))
    return {
        "turn_p50": pct(turn, 50),
        "turn_p90": pct(turn, 90),
        "saver_p50": pct(saver, 50),
        "turn_growth": pct(turn[-k:], 50) / pct(turn[:k], 50),
        "saver_growth": pct(saver[-k:], 50) / pct(saver[:k], 50),
    }


def run_turns(turns: int, pg: PostgresServer | None, tag: str) -> list[dict[str, Any]]:
    """One interleaved run of the tool graph through ``TURN_SAVERS`` (those available)."""
    from ckpt_archive.integrations.langgraph.testing import tool_agent

    with tempfile.TemporaryDirectory(prefix="bench-pg-turns-") as tmp:
        stores, graphs = [], {}
        for store, channel in TURN_SAVERS:
            if store == "PostgresSaver" and pg is None:
                continue
            where = pg.create_database(f"{tag}_{channel}".lower()) if store == "PostgresSaver" and pg else ""
            s = open_store(store, where or f"{tmp}/{channel}", {})
            stores.append(s)
            delta = TURN_SNAPSHOTS if channel == "DeltaChannel" else 0
            graphs[store, channel] = (tool_agent(s.saver, turns, delta=delta), Timed(s.saver))
        times = turn_times(graphs, turns)
        rows = []
        for (store, channel), (graph, timer) in graphs.items():
            state = graph.get_state(CONFIG).values
            assert len(state["messages"]) == 4 * turns, (store, channel, len(state["messages"]))
            summary = turn_summary(times[store, channel])
            rows.append({"store": store, "channel": channel, "puts": len(timer.puts), **summary})
        for s in stores:
            s.close()
        return rows


def fresh_reads(store: str, channel: str, where: str, steps: int) -> dict[str, Any]:
    """In this (fresh) process: each read on a newly opened saver, as ``peers.fresh_read`` times them."""
    open_store(store, where, {}).close()  # imports and the first connection, not timed
    build_graph(None, channel, steps)  # the graph's imports, not timed either
    out: dict[str, Any] = {}
    for op in ("load", "load_again", "history", "state", "state_history", "list", "list1"):
        gc.collect()  # as peers.fresh_read: a collection owed by the imports lands in no timed read
        built = 0.0  # building the graph (1,000 message texts) is the benchmark's, not the read's
        t0 = time.perf_counter()
        s = open_store(store, where, {})
        if op in ("load", "load_again"):  # the first read in a process, then the same on another new saver
            assert s.saver.get_tuple(CONFIG) is not None
        elif op == "history":
            h = s.saver.get_delta_channel_history(config=CONFIG, channels=["messages"])["messages"]
            out["history_writes"] = len(h["writes"])
        elif op == "state":
            tb = time.perf_counter()
            graph = build_graph(s.saver, channel, steps)
            built = time.perf_counter() - tb
            out["messages"] = len(graph.get_state(CONFIG).values["messages"])
        elif op == "state_history":  # LangGraph's history view: the 10 newest states, each rebuilt
            tb = time.perf_counter()
            graph = build_graph(s.saver, channel, steps)
            built = time.perf_counter() - tb
            out["n_state_history"] = len(list(graph.get_state_history(CONFIG, limit=10)))
        else:
            out["n_" + op] = s.list(THREAD, 1 if op == "list1" else None)
        out[op] = time.perf_counter() - t0 - built
        s.close()
    return out


def run(store: str, channel: str, steps: int, pg: PostgresServer | None, tag: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-pg-") as tmp:
        if store == "PostgresSaver":
            assert pg is not None
            where = pg.create_database(tag)
        else:
            where = f"{tmp}/archive"
        s = open_store(store, where, {})
        timer = Timed(s.saver)
        graph = build_graph(s.saver, channel, steps)
        t0 = time.perf_counter()
        graph.invoke({"step": -1}, {**CONFIG, "recursion_limit": steps + 10}, durability="sync")
        r: dict[str, Any] = {"store": store, "channel": channel, "run": time.perf_counter() - t0}
        puts, writes = timer.puts, timer.writes
        saves = [p + w for p, w in zip(puts, writes, strict=True)]
        for name, xs in (("put", puts), ("save", saves)):
            r[f"{name}_first_p50"], r[f"{name}_last_p50"] = pct(xs[:100], 50), pct(xs[-100:], 50)
            r[f"{name}_first_mean"], r[f"{name}_last_mean"] = float(np.mean(xs[:100])), float(np.mean(xs[-100:]))
        r["checkpoints"] = len(puts)
        r["bytes"] = s.nbytes()
        if store == "PostgresSaver":
            s.vacuum_full()  # type: ignore[attr-defined]
            r["bytes_compact"] = s.nbytes()
        else:
            s.gc()
            r["bytes_compact"] = s.nbytes()
        s.close()
        cmd = [sys.executable, __file__, "--read", store, channel, where, str(steps)]
        reads = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        assert (
            reads["messages"] == steps
            and reads["n_state_history"] == 10
            and reads["n_list"] == r["checkpoints"]
            and reads["n_list1"] == 1
        ), reads
        r.update(reads)
        return r


def _row(r: dict[str, Any], peer: dict[str, Any] | None) -> str:
    def vs(key: str) -> str:
        return f" ({r[key] / peer[key]:.2f}x)" if peer and peer is not r and peer[key] else ""

    return (
        f"| {r['store']} | {r['channel']} | {r['checkpoints']:.0f} | {r['bytes']:,.0f}{vs('bytes')} "
        f"| {r['bytes_compact']:,.0f}{vs('bytes_compact')} "
        f"| {ms(r['put_first_p50'])} / {ms(r['put_last_p50'])} | {ms(r['put_first_mean'])} / {ms(r['put_last_mean'])} "
        f"| {ms(r['save_first_mean'])} / {ms(r['save_last_mean'])}{vs('save_last_mean')} | {r['run']:.1f} "
        f"| {ms(r['load'])} / {ms(r['load_again'])} | {ms(r['history'])} ({r['history_writes']:.0f}) "
        f"| {ms(r['state'])}{vs('state')} | {ms(r['state_history'])}{vs('state_history')} "
        f"| {ms(r['list'])}{vs('list')} | {ms(r['list1'])} |"
    )


TURN_PEER = ("PostgresSaver", "DeltaChannel")


def render_turns(p: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    peer = next((r for r in rows if (r["store"], r["channel"]) == TURN_PEER), None)

    def vs(r: dict[str, Any], key: str) -> str:
        return f" ({r[key] / peer[key]:.2f}x)" if peer and peer is not r and peer[key] else ""

    lines = [
        "",
        f"**Issue 21's tool graph, turn by turn**: `testing.tool_agent` (an agent on `FakeMessagesListChatModel` "
        f"asking a `lookup` tool, then a ~1 KB answer; a `ToolNode`), {p['turns']} turns in one thread "
        f"({rows[0]['puts']:.0f} puts), durability=sync, `messages` with `add_messages` or a `DeltaChannel` "
        f"(snapshot every {TURN_SNAPSHOTS} updates); the savers interleaved turn by turn (the order rotated "
        "each turn). Turn: the wall time of one `invoke` (a question to the answer: 5 puts, 4 put_writes, "
        "the DeltaChannel's history read); saver: the time inside its `put` and `put_writes` during the "
        "turn; growth: p50 of the last 50 turns over the first 50. In parentheses: the ratio to "
        "PostgresSaver + DeltaChannel.",
        "",
        "| saver | messages channel | turn p50 ms | turn p90 ms | saver p50 ms a turn | turn growth | saver growth |",
        "|---" * 7 + "|",
    ]
    for r in rows:
        lines.append(
            f"| {r['store']} | {r['channel']} | {ms(r['turn_p50'])}{vs(r, 'turn_p50')} | {ms(r['turn_p90'])} "
            f"| {ms(r['saver_p50'])}{vs(r, 'saver_p50')} | {r['turn_growth']:.2f} | {r['saver_growth']:.2f} |"
        )
    return lines


def render(out: Path) -> str:
    data = json.loads((out / "postgres.json").read_text())
    p, rows = data["params"], data["rows"]
    lines = [
        f"Command: `.venv/bin/python {p['command']}`; medians of {p['repeats']} runs.",
        "",
        f"**W1 as a graph**: one thread, {p['steps']} supersteps, one ~1 KB message appended per step, "
        "durability=sync; `messages` declared with `add_messages` or with LangGraph 1.2's "
        "`DeltaChannel(_messages_delta_reducer)` (snapshot every 100 updates). PostgresSaver: "
        f"`langgraph-checkpoint-postgres` {p.get('pg_saver', '?')} on PostgreSQL {p.get('pg_version', '?')}, "
        "a server started on loopback (TCP 127.0.0.1) with initdb's defaults (fsync on). Bytes: ours every "
        "file under the root (compacted: after gc); Postgres `pg_total_relation_size` of `checkpoints`, "
        "`checkpoint_blobs`, `checkpoint_writes` (heap + TOAST + indexes; compacted: after `VACUUM FULL`). "
        "put: the saver's `put`; save: `put` plus the `put_writes` before it (the DeltaChannel's delta). "
        "Reads in a fresh process, each on a newly opened saver after an untimed full gc (get_tuple: the "
        "process's first read, then "
        "again on another new saver); history = `get_delta_channel_history` of "
        "`messages` (writes returned); get_state rebuilds `messages`; state history: "
        "`graph.get_state_history(config, limit=10)`, the 10 newest states. In parentheses: the ratio to "
        "PostgresSaver + DeltaChannel.",
        "",
        "| saver | messages channel | checkpoints | bytes stored | bytes compacted | put p50 ms first / last 100 "
        "| put mean ms first / last 100 | save mean ms first / last 100 | run s | get_tuple ms first / again "
        "| history ms (writes) | get_state ms | get_state_history(limit=10) ms | list all ms | list limit=1 ms |",
        "|---" * 15 + "|",
    ]
    peer = next((r for r in rows if (r["store"], r["channel"]) == PEER), None)
    lines += [_row(r, peer) for r in rows]
    lines += render_turns(p, data.get("turns", []))
    if p.get("skipped"):
        lines += ["", p["skipped"]]
    text = "\n".join(lines) + "\n"
    (out / "postgres.md").write_text(text)
    return text


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {"pg_saver": version("langgraph-checkpoint-postgres"), "langgraph": version("langgraph")}


def main() -> None:
    if sys.argv[1:2] == ["--read"]:
        store, channel, where, steps = sys.argv[2:6]
        print(json.dumps(fresh_reads(store, channel, where, int(steps))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--turns", type=int, default=200, help="turns of the tool graph (0: not run)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    params: dict[str, Any] = {
        "steps": args.steps,
        "repeats": args.repeats,
        "turns": args.turns,
        "command": " ".join(["benchmarks/bench_postgres.py", *sys.argv[1:]]),
    }
    savers = SAVERS
    if not available("ArchiveSaver"):
        raise SystemExit("ckpt_archive.integrations.langgraph missing: install ckpt-archive[langgraph]")
    reason = missing()
    if reason:
        params["skipped"] = f"PostgresSaver skipped: {reason}."
        print(params["skipped"], file=sys.stderr)
        savers = [s for s in SAVERS if s[0] != "PostgresSaver"]
    rows = []
    with PostgresServer() if not reason else nullcontext() as pg:
        if pg is not None:
            params.update(versions(), pg_version=pg.version())
        for store, channel in savers:
            runs = [run(store, channel, args.steps, pg, f"r{i}_{channel}".lower()) for i in range(args.repeats)]
            rows.append(median_of(runs))
            print(f"{store:14} {channel:13} {rows[-1]['bytes']:>13,.0f} B  {rows[-1]['run']:.1f}s", flush=True)
        turn_rows: list[dict[str, Any]] = []
        if args.turns:
            runs = [run_turns(args.turns, pg, f"turns{i}") for i in range(args.repeats)]
            turn_rows = [median_of([run[j] for run in runs]) for j in range(len(runs[0]))]
            for r in turn_rows:
                print(f"turns {r['store']:14} {r['channel']:13} p50 {ms(r['turn_p50'])} ms", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    data = {"params": params, "rows": rows, "turns": turn_rows}
    (args.out / "postgres.json").write_text(json.dumps(data, default=str))
    print(render(args.out))


if __name__ == "__main__":
    main()
