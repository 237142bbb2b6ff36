"""W2: the LangGraph issue's tool-using chat graph, ``--turns`` turns, through every LangGraph saver.

The graph is ``ckpt_archive.integrations.langgraph.testing.build_graph`` (fake deterministic model and a
calculator tool, an ``interrupt()`` approval per turn; 4 messages and ~6 checkpoints per turn), driven by
its ``run_turns`` with ``durability="sync"`` so every checkpoint is written before the step returns.
Savers: ``ArchiveSaver`` and ``langgraph-checkpoint-objectstorage`` (zstd) on local disk and S3 (moto,
requests counted at the server), ``SqliteSaver`` and ``InMemorySaver``. Measured: wall time of the run,
bytes stored, requests, then get_state / history (list all) / list(limit=1) in a fresh process. The final
states of all savers must be equal. Writes ``results/graph.json`` and ``results/graph.md``.

    .venv/bin/python benchmarks/bench_graph.py [--turns 50 --repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench_peers import RESULTS, median_of, read_out, target
from peers import open_store
from report import ms


def graph_module() -> Any:
    try:
        from ckpt_archive.integrations.langgraph import testing
    except ImportError:
        return None
    return testing


SAVERS = [
    ("ArchiveSaver", "local"),
    ("objectstorage-zstd", "local"),
    ("SqliteSaver", "local"),
    ("InMemorySaver", "local"),
    ("ArchiveSaver", "s3"),
    ("objectstorage-zstd", "s3"),
]


def run_w2(store: str, kind: str, turns: int, g: Any) -> dict[str, Any]:
    with target(kind, "w2") as (url, opts, server):
        s = open_store(store, url, opts)
        graph = g.build_graph(s.saver)
        if server:
            server.reset_counts()
        t0 = time.perf_counter()
        g.run_turns(graph, "w2", 0, turns, durability="sync")
        r: dict[str, Any] = {"store": store, "target": kind, "run": time.perf_counter() - t0}
        if server:
            r["req_run"], r["list_run"] = server.total(), server.requests["LIST"]
        r["final"] = g.summary(graph.get_state({"configurable": {"thread_id": "w2"}}).values)
        r["checkpoints"] = read_out(s, store, url, opts, "w2", server, r)["n_list"]
        return r


def _bytes(r: dict[str, Any]) -> str:
    after = r.get("bytes_gc", r["bytes"])
    return f"{r['bytes']:,.0f}" + (f" ({after:,.0f} after gc)" if after != r["bytes"] else "")


def render(out: Path) -> str:
    data = json.loads((out / "graph.json").read_text())
    p, rows = data["params"], data["rows"]
    lines = [
        f"Command: `.venv/bin/python {p['command']}`; medians of {p['repeats']} runs.",
        "",
        f"**W2**: the LangGraph 50-turn-style tool-using graph, {p['turns']} turns "
        f"({rows[0]['checkpoints']:.0f} checkpoints, {rows[0]['messages']:.0f} messages), durability=sync.",
        "",
        "| saver | target | run s | ms per checkpoint | bytes stored | get_state ms | history ms | list limit=1 ms "
        "| requests in run (per checkpoint) | LIST in run | req get_state / history / limit=1 |",
        "|---" * 11 + "|",
    ]
    for r in rows:
        req = lst = reads = "n/a"
        if "req_run" in r:
            req = f"{r['req_run']:,.0f} ({r['req_run'] / r['checkpoints']:.1f})"
            lst = f"{r['list_run']:,.0f}"
            reads = f"{r['req_load']:.0f} / {r['req_list']:.0f} / {r['req_list1']:.0f}"
        lines.append(
            f"| {r['store']} | {r['target']} | {r['run']:.1f} | {r['run'] / r['checkpoints'] * 1000:.1f} "
            f"| {_bytes(r)} | {ms(r['load'])} | {ms(r['list'])} | {ms(r['list1'])} | {req} | {lst} | {reads} |"
        )
    if p.get("skipped"):
        lines += ["", p["skipped"]]
    text = "\n".join(lines) + "\n"
    (out / "graph.md").write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--targets", default="local,s3")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    g = graph_module()
    params: dict[str, Any] = {
        "turns": args.turns,
        "repeats": args.repeats,
        "command": " ".join(["benchmarks/bench_graph.py", *sys.argv[1:]]),
    }
    rows = []
    if g is None:
        params["skipped"] = "W2 skipped: ckpt_archive.integrations.langgraph (ArchiveSaver and its test graph) missing."
    else:
        for store, kind in SAVERS:
            if kind not in args.targets.split(","):
                continue
            runs = [run_w2(store, kind, args.turns, g) for _ in range(args.repeats)]
            rows.append(median_of(runs))
            print(f"W2 {kind:5} {store:20} {rows[-1]['run']:.1f}s", flush=True)
        finals = {json.dumps(r.pop("final"), sort_keys=True, default=str) for r in rows}
        assert len(finals) == 1, "savers disagree on the final state"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "graph.json").write_text(json.dumps({"params": params, "rows": rows}, default=str))
    print(render(args.out))


if __name__ == "__main__":
    main()
