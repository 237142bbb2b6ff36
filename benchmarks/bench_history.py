"""S3 requests per ``get_delta_channel_history`` call, by the distance to the seed (moto, counted per request).

A chat graph whose ``messages`` is a ``DeltaChannel(_messages_delta_reducer)`` (LangGraph's snapshot every
100 updates), one ``invoke`` per turn appending one ~1 KB message (``durability="sync"``): LangGraph reads
the channel's history at the start of every turn, one write further from the seed each time. Counted:
the requests of each such call of the graph's own saver ("warm"), then of a newly opened saver reading
the latest checkpoint's history ("cold") and again ("cold again"). Writes ``results/history.json``.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_history.py [--turns 130]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench_peers import RESULTS

CONFIG = {"configurable": {"thread_id": "chat"}}
BUCKET = "bench-history"


def graph(saver: Any) -> Any:
    from ckpt_archive.integrations.langgraph.testing import delta_chat

    return delta_chat(saver)


def run(turns: int) -> dict[str, Any]:
    from ckpt_archive.integrations.langgraph import ArchiveSaver
    from ckpt_archive.testing import S3Server

    server = S3Server().start()
    try:
        url = server.make_bucket(BUCKET) + "/a"
        opts = server.storage_options()
        saver = ArchiveSaver.from_url(url, opts)
        calls: list[tuple[int, dict[str, int]]] = []
        plain = saver.get_delta_channel_history

        def counted(*, config: Any, channels: Any) -> Any:
            server.reset_counts()
            out = plain(config=config, channels=channels)
            calls.append((len(out["messages"]["writes"]), dict(server.requests)))
            return out

        saver.get_delta_channel_history = counted  # type: ignore[method-assign]
        app = graph(saver)
        for _ in range(turns):
            app.invoke({}, CONFIG, durability="sync")
        cold = ArchiveSaver.from_url(url, opts)
        reads = {}
        for what in ("cold", "cold again"):
            server.reset_counts()
            cold.get_delta_channel_history(config=CONFIG, channels=["messages"])
            reads[what] = dict(server.requests)
    finally:
        server.stop()
    totals = [sum(r.values()) for _, r in calls]
    return {
        "turns": turns,
        "warm": [{"writes": w, "requests": r} for w, r in calls],
        "warm_mean": sum(totals) / max(len(totals), 1),
        "warm_max": max(totals, default=0),
        **reads,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=130)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    result = run(args.turns)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "history.json").write_text(json.dumps(result))
    by_writes: dict[int, int] = {}
    for call in result["warm"]:
        by_writes[call["writes"]] = max(by_writes.get(call["writes"], 0), sum(call["requests"].values()))
    print(f"warm: {len(result['warm'])} calls, mean {result['warm_mean']:.1f}, max {result['warm_max']} requests")
    for w in sorted(by_writes)[:: max(1, len(by_writes) // 10)]:
        print(f"  {w:4d} writes from the seed: {by_writes[w]} requests")
    print(f"cold: {result['cold']}; cold again: {result['cold again']}")


if __name__ == "__main__":
    main()
