"""Saves and loads on S3 with a network round trip added to every request: what sequential round trips cost.

On moto over loopback a request costs a few ms of server CPU, and requests sent together are served one
after another, so concurrency barely shows; a real object store answers in ~10-30 ms whatever runs
beside. ``ckpt_archive.testing.FsspecRoundTrips(latency=...)`` adds that delay to every request client side
(concurrent requests wait together) and counts the sequential round trips of each operation.

W1's first ``--steps`` steps through each store on a fresh moto server; per save: wall time, sequential
round trips, requests (counted at the server); then a new store object loads the latest checkpoint
(after a first load by another one has set up the S3 client: connection set-up is not timed).

Then issue 21's tool graph on S3 (``--turns`` turns of ``testing.tool_agent``, durability=sync) through
ArchiveSaver and ObjectStorageSaver, each with ``messages`` as ``add_messages`` and as a ``DeltaChannel``,
on one moto server that adds the latency to every request at the server (``S3Server(latency=...)``: the
peers' requests and s3fs's paginated listings too), the savers interleaved turn by turn
(``bench_postgres.turn_times``): turn p50 and requests a turn, against ObjectStorageSaver with
``add_messages``.

    .venv/bin/python benchmarks/bench_rtt.py [--steps 200 --latency-ms 20 --turns 100]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_core import states
from peers import available, open_store

from ckpt_archive.testing import FsspecRoundTrips, S3Server

RESULTS = Path(__file__).with_name("results")
PUT_CLASS = ("PUT", "POST", "LIST")
"""S3's PUT-class request kinds as the server counts them (COPY is a PUT); the rest are GET-class."""
STORES = ["native", "ArchiveSaver", "objectstorage-zstd"]
GRAPH_SAVERS = [
    ("ArchiveSaver", "add_messages"),
    ("ArchiveSaver", "DeltaChannel"),
    ("objectstorage-zstd", "add_messages"),
]
"""ObjectStorageSaver with a ``DeltaChannel`` is left out: it has no history read of its own, and
LangGraph's default walk (``BaseCheckpointSaver.get_delta_channel_history``) made 181 requests a turn
over the first 10 turns here, its turn p50 5.7 s and growing (6.8x the row with ``add_messages``)."""
GRAPH_PEER = ("objectstorage-zstd", "add_messages")  # the ratios are against this row


def fs_of(store: Any) -> Any:
    if hasattr(store, "archive"):
        return store.archive.store.fs
    saver = store.saver
    return saver.archive.store.fs if hasattr(saver, "archive") else saver.fs


def run(name: str, steps: int, latency: float) -> dict[str, Any]:
    server = S3Server().start()
    try:
        url = server.make_bucket(f"rtt-{name.lower()}") + "/w1"  # moto keeps buckets per process
        opts = server.storage_options()
        data = states(steps)
        s = open_store(name, url, opts)
        s.save("chat", 0, data[0])  # creates the archive: not measured
        trips = FsspecRoundTrips(fs_of(s), latency=latency)
        times, depths, reqs, puts = [], [], [], []
        for step, state in enumerate(data[1:], 1):
            trips.reset()
            server.reset_counts()
            t0 = time.perf_counter()
            s.save("chat", step, state)
            times.append((time.perf_counter() - t0) * 1000)
            depths.append(trips.depth)
            reqs.append(server.total())
            puts.append(sum(n for kind, n in server.requests.items() if kind in PUT_CLASS))
        s.close()
        shared = {**opts, "skip_instance_cache": False}  # the reader's S3 client is set up by a first load
        open_store(name, url, shared).load("chat")
        reader = open_store(name, url, shared)
        trips = FsspecRoundTrips(fs_of(reader), latency=latency)
        server.reset_counts()
        t0 = time.perf_counter()
        assert len(reader.load("chat")["messages"]) == steps
        load_ms = (time.perf_counter() - t0) * 1000
        return {
            "store": name,
            "save_mean": float(np.mean(times)),
            "save_p50": float(np.percentile(times, 50)),
            "save_p99": float(np.percentile(times, 99)),
            "rt_mean": float(np.mean(depths)),
            "rt_max": max(depths),
            "req_mean": float(np.mean(reqs)),
            "req_max": max(reqs),  # the worst single save (issue 20: <= 4)
            "put_class_mean": float(np.mean(puts)),  # S3's PUT-class requests (PUT, POST, LIST) per save
            "put_class_max": max(puts),
            "load": load_ms,
            "rt_load": trips.depth,
            "req_load": server.total(),
        }
    finally:
        server.stop()


def graph_turns(turns: int, latency: float) -> list[dict[str, Any]]:
    """The tool graph through ``GRAPH_SAVERS`` (those installed) on one moto server adding ``latency`` to
    every request, interleaved turn by turn; requests per turn counted at the server, by bucket."""
    from bench_postgres import THREAD, TURN_SNAPSHOTS, Timed, turn_summary, turn_times

    from ckpt_archive.integrations.langgraph.testing import tool_agent

    server = S3Server(latency=latency).start()
    try:
        opts = server.storage_options()
        graphs, buckets, stores = {}, {}, []
        for i, (store, channel) in enumerate(GRAPH_SAVERS):
            if not available(store):
                continue
            bucket = f"turns-{i}"
            s = open_store(store, server.make_bucket(bucket) + "/lg", opts)
            stores.append(s)
            delta = TURN_SNAPSHOTS if channel == "DeltaChannel" else 0
            graphs[store, channel] = (tool_agent(s.saver, turns, delta=delta), Timed(s.saver))
            buckets[store, channel] = f"/{bucket}"
        server.reset_counts()
        times = turn_times(graphs, turns)
        log = list(server.log)
        rows = []
        for key, (graph, timer) in graphs.items():
            state = graph.get_state({"configurable": {"thread_id": THREAD}}).values
            assert len(state["messages"]) == 4 * turns, (key, len(state["messages"]))
            mine = [kind for kind, path in log if path.startswith(buckets[key] + "/") or path == buckets[key]]
            rows.append(
                {
                    "store": key[0],
                    "channel": key[1],
                    "puts": len(timer.puts),
                    "req_turn": len(mine) / turns,
                    "list_turn": mine.count("LIST") / turns,
                    **turn_summary(times[key]),
                }
            )
        for s in stores:
            s.close()
        return rows
    finally:
        server.stop()


def render_graph(rows: list[dict[str, Any]], turns: int, latency_ms: float) -> str:
    if not rows:
        return ""
    peer = next((r for r in rows if (r["store"], r["channel"]) == GRAPH_PEER), None)

    def vs(r: dict[str, Any], key: str) -> str:
        return f" ({r[key] / peer[key]:.2f}x)" if peer and peer is not r and peer[key] else ""

    lines = [
        "",
        f"**Issue 21's tool graph on S3**: `testing.tool_agent`, {turns} turns ({rows[0]['puts']:.0f} puts), "
        f"durability=sync, on one moto server adding {latency_ms:g} ms to every request at the server "
        "(`S3Server(latency=...)`, so every saver's requests, listings included, pay it); the savers "
        "interleaved turn by turn. Requests counted at the server. In parentheses: the ratio to "
        "ObjectStorageSaver (zstd) with `add_messages`.",
        "",
        "| saver | messages channel | turn p50 ms | turn p90 ms | requests a turn (LIST) | turn growth |",
        "|---" * 6 + "|",
    ]
    for r in rows:
        lines.append(
            f"| {r['store']} | {r['channel']} | {r['turn_p50'] * 1000:.1f}{vs(r, 'turn_p50')} "
            f"| {r['turn_p90'] * 1000:.1f} | {r['req_turn']:.1f} ({r['list_turn']:.1f}) | {r['turn_growth']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def render(rows: list[dict[str, Any]], steps: int, latency_ms: float) -> str:
    lines = [
        f"Command: `.venv/bin/python benchmarks/bench_rtt.py --steps {steps} --latency-ms {latency_ms:g}`: W1's "
        f"first {steps} steps on moto, {latency_ms:g} ms added to every request (`FsspecRoundTrips(latency=...)`).",
        "",
        "| store | save mean ms | save p50 ms | save p99 ms | round trips per save (mean / max) | requests per save "
        "| load latest ms (new store object) | load round trips / requests |",
        "|---" * 8 + "|",
    ]
    for r in rows:
        lines.append(
            f"| {r['store']} | {r['save_mean']:.1f} | {r['save_p50']:.1f} | {r['save_p99']:.1f} "
            f"| {r['rt_mean']:.2f} / {r['rt_max']} | {r['req_mean']:.2f} | {r['load']:.1f} "
            f"| {r['rt_load']} / {r['req_load']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--turns", type=int, default=100, help="turns of the tool graph on S3 (0: not run)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = [run(name, args.steps, args.latency_ms / 1000) for name in args.stores.split(",") if available(name)]
    graph = graph_turns(args.turns, args.latency_ms / 1000) if args.turns and available("ArchiveSaver") else []
    text = render(rows, args.steps, args.latency_ms) + render_graph(graph, args.turns, args.latency_ms)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rtt.json").write_text(json.dumps(rows))
    (args.out / "rtt_graph.json").write_text(json.dumps(graph))
    (args.out / "rtt.md").write_text(text)
    print(text)
    for r in rows:
        print(
            f"{r['store']}: requests per save {r['req_mean']:.3f} (max {r['req_max']}), "
            f"PUT-class {r['put_class_mean']:.3f} (max {r['put_class_max']})"
        )


if __name__ == "__main__":
    main()
