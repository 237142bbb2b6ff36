"""S3 requests per ``get_delta_channel_history`` call, by the distance to the seed (moto, counted per request).

A chat graph whose ``messages`` is a ``DeltaChannel(_messages_delta_reducer)`` (LangGraph's snapshot every
100 updates), one ``invoke`` per turn appending one ~1 KB message (``durability="sync"``): LangGraph reads
the channel's history at the start of every turn, one write further from the seed each time. Counted:
the requests of each such call of the graph's own saver ("warm"), then of a newly opened saver reading
the latest checkpoint's history ("cold") and again ("cold again"). With ``--cold-at``, the cold read is
also taken after those turns (by the distance to the seed), twice: while the writer is in its burst
(its hint trailing, as a reader arriving mid-run finds it) and once the writer's idle hint went out
(``flush_hints``: what its ``hint_idle`` timer does a second after the last put), each broken down by
the kind of object read (hint, fold, part, log entry or probe, snapshot, segment, write object, LIST).
Writes ``results/history.json``.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_history.py [--turns 130] [--cold-at 30,130,250]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench_peers import RESULTS

CONFIG = {"configurable": {"thread_id": "chat"}}
BUCKET = "bench-history"
KINDS = (
    ("_head.json.zst", "hint"),
    (".manifest.json.zst", "fold"),
    ("/_log/", "log"),
    ("/_parts/", "part"),
    ("/snapshots/", "snapshot"),
    ("/deltas/", "segment"),
    ("/pages/", "page"),
    ("/_langgraph/writes/", "writes"),
    ("/_blobs/", "blob"),
    ("/_archive.json", "marker"),
)


def by_kind(log: list[tuple[str, str]]) -> dict[str, int]:
    """Requests by the kind of object they read (a LIST as itself, a write as ``PUT <kind>``)."""
    out: dict[str, int] = {}
    for method, path in log:
        kind = next((k for part, k in KINDS if part in path), "other")
        name = "LIST" if method == "LIST" else kind if method == "GET" else f"{method} {kind}"
        out[name] = out.get(name, 0) + 1
    return out


def cold_read(server: Any, url: str, opts: dict[str, Any]) -> dict[str, Any]:
    """A newly opened saver's history call on the latest checkpoint: its requests by kind (``total``: its
    GETs and LISTs; a ``PUT hint`` is the writer's idle hint going out meanwhile), its distance."""
    from ckpt_archive.integrations.langgraph import ArchiveSaver

    saver = ArchiveSaver.from_url(url, opts)
    server.reset_counts()
    out = saver.get_delta_channel_history(config=CONFIG, channels=["messages"])
    kinds = by_kind(list(server.log))
    reads = sum(n for k, n in kinds.items() if " " not in k)  # not the writer's idle hint, if it fired meanwhile
    return {"writes": len(out["messages"]["writes"]), "total": reads, "kinds": kinds}


def graph(saver: Any) -> Any:
    from ckpt_archive.integrations.langgraph.testing import delta_chat

    return delta_chat(saver)


def run(turns: int, cold_at: tuple[int, ...] = ()) -> dict[str, Any]:
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
        by_distance: list[dict[str, Any]] = []
        for turn in range(1, turns + 1):
            app.invoke({}, CONFIG, durability="sync")
            if turn in cold_at:  # busy: the writer's hint trails; idle: its idle hint (and owed fold) put
                busy = cold_read(server, url, opts)
                saver.archive.flush_hints()
                by_distance.append({"turn": turn, "busy": busy, "idle": cold_read(server, url, opts)})
        cold = ArchiveSaver.from_url(url, opts)
        reads: dict[str, Any] = {"cold_by_distance": by_distance}
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
    parser.add_argument("--cold-at", default="", help="turns after which to take the cold read, e.g. 30,130,250")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    cold_at = tuple(int(t) for t in args.cold_at.split(",") if t)
    result = run(max(args.turns, *cold_at), cold_at)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "history.json").write_text(json.dumps(result))
    by_writes: dict[int, int] = {}
    for call in result["warm"]:
        by_writes[call["writes"]] = max(by_writes.get(call["writes"], 0), sum(call["requests"].values()))
    print(f"warm: {len(result['warm'])} calls, mean {result['warm_mean']:.1f}, max {result['warm_max']} requests")
    for w in sorted(by_writes)[:: max(1, len(by_writes) // 10)]:
        print(f"  {w:4d} writes from the seed: {by_writes[w]} requests")
    print(f"cold: {result['cold']}; cold again: {result['cold again']}")
    for row in result["cold_by_distance"]:
        for when in ("busy", "idle"):
            got = row[when]
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(got["kinds"].items()))
            head = f"cold after {row['turn']} turns, writer {when}: {got['writes']} writes from the seed"
            print(f"{head}, {got['total']} requests ({kinds})")


if __name__ == "__main__":
    main()
