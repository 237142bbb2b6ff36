"""Bytes stored by LangGraph checkpointers for the same deterministic chat run.

The run (``ckpt_archive.integrations.langgraph.testing``): ``--turns`` turns of a ``StateGraph`` with
``add_messages``: a question, a tool call stopped by an ``interrupt()`` approval, the tool result and
the answer (4 messages and ~6 checkpoints per turn). Compared:

* ArchiveSaver on local disk: the size of every file under the archive root;
* LangGraph's InMemorySaver: the bytes of its stored blobs (checkpoints, channel blobs, writes);
* SqliteSaver (``langgraph-checkpoint-sqlite``, the ``bench`` extra): the database file(s); skipped
  cleanly when not installed.

Usage: ``python benchmarks/bench_langgraph.py [--turns 50]``; prints a table and writes it to
``benchmarks/results/bench_langgraph.txt``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ckpt_archive.integrations.langgraph import ArchiveSaver
from ckpt_archive.integrations.langgraph.testing import build_graph, run_turns, summary


def _dir_bytes(root: str) -> int:
    return sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file())


def _run(saver: Any, turns: int) -> tuple[float, dict[str, Any]]:
    graph = build_graph(saver)
    start = time.perf_counter()
    run_turns(graph, "bench", 0, turns)
    elapsed = time.perf_counter() - start
    return elapsed, summary(graph.get_state({"configurable": {"thread_id": "bench"}}).values)


def ours(turns: int, tmp: str) -> tuple[int, float, dict[str, Any]]:
    root = os.path.join(tmp, "archive")
    elapsed, final = _run(ArchiveSaver.from_url(root), turns)
    return _dir_bytes(root), elapsed, final


def in_memory(turns: int, tmp: str) -> tuple[int, float, dict[str, Any]]:
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    elapsed, final = _run(saver, turns)
    total = sum(len(b[1]) for b in saver.blobs.values())
    for namespaces in saver.storage.values():
        for checkpoints in namespaces.values():
            total += sum(len(c[0][1]) + len(c[1][1]) for c in checkpoints.values())
    total += sum(len(w[2][1]) for writes in saver.writes.values() for w in writes.values())
    return total, elapsed, final


def sqlite(turns: int, tmp: str) -> tuple[int, float, dict[str, Any]] | None:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        return None
    path = os.path.join(tmp, "checkpoints.sqlite")
    conn = sqlite3.connect(path, check_same_thread=False)
    elapsed, final = _run(SqliteSaver(conn), turns)
    conn.commit()
    conn.close()
    size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    return size, elapsed, final


PEERS: list[tuple[str, Callable[[int, str], Any]]] = [
    ("ckpt_archive ArchiveSaver (local disk)", ours),
    ("LangGraph InMemorySaver (stored blobs)", in_memory),
    ("langgraph-checkpoint-sqlite SqliteSaver (db file)", sqlite),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    args = parser.parse_args(argv)
    rows: list[tuple[str, int, float]] = []
    reference: dict[str, Any] | None = None
    for name, fn in PEERS:
        with tempfile.TemporaryDirectory() as tmp:
            result = fn(args.turns, tmp)
        if result is None:
            print(f"skipped {name}: not installed (pip install 'ckpt-archive[bench]')", file=sys.stderr)
            continue
        size, elapsed, final = result
        if reference is None:
            reference = final
        elif final != reference:
            raise SystemExit(f"{name} ended in a different state than ArchiveSaver; sizes are not comparable")
        rows.append((name, size, elapsed))
    base = rows[0][1]
    lines = [
        f"LangGraph chat run: {args.turns} turns (4 messages, ~6 checkpoints per turn), same final state",
        f"{'saver':<52} {'bytes stored':>14} {'bytes/turn':>11} {'vs ours':>8} {'run s':>7}",
    ]
    for name, size, elapsed in rows:
        lines.append(f"{name:<52} {size:>14,} {size // args.turns:>11,} {size / base:>7.1f}x {elapsed:>7.2f}")
    text = "\n".join(lines)
    print(text)
    out = Path(__file__).parent / "results" / "bench_langgraph.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
