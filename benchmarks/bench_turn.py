"""Where a LangGraph turn on local disk goes: wall and CPU a turn, and thread-pool jobs a turn by saver method.

The issue's tool graph (``tool_agent``: a tool call, then a ~1 KB answer; 4 messages a turn) on
``ArchiveSaver.from_url`` over a temporary folder, ``durability="sync"``; ``--delta K`` makes
``messages`` a ``DeltaChannel`` snapshotting every K updates (0: ``add_messages``). Counted over the
second half of the turns: every job handed to the I/O loop's thread pool (each one a hop and a wake-up
the loop waits on), attributed to the saver method entered last when it was handed over (LangGraph
runs a superstep's put_writes on several threads: between put and put_writes the split is only
indicative; the total is exact). No peer here:
``bench_postgres.py`` compares turns with PostgresSaver. Writes ``results/turn_local.json``.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_turn.py [--turns 100] [--delta 100]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_peers import RESULTS

METHODS = ("get_tuple", "put", "put_writes", "get_delta_channel_history", "list")


class CountingPool(ThreadPoolExecutor):
    """The loop's default executor, counting the jobs handed to it by the method ``current`` names."""

    def __init__(self) -> None:
        super().__init__(thread_name_prefix="bench-turn")
        self.current = "graph"
        self.jobs: Counter[str] = Counter()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.jobs[self.current] += 1
        return super().submit(fn, *args, **kwargs)


def run(turns: int, delta: int) -> dict[str, Any]:
    from ckpt_archive._sync import io_loop
    from ckpt_archive.integrations.langgraph import ArchiveSaver
    from ckpt_archive.integrations.langgraph.testing import ask, tool_agent

    pool = CountingPool()
    io_loop().set_default_executor(pool)
    calls: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as root:
        saver = ArchiveSaver.from_url(str(Path(root) / "a"))
        for name in METHODS:
            plain = getattr(saver, name)

            def counted(*args: Any, _plain: Any = plain, _name: str = name, **kwargs: Any) -> Any:
                pool.current, before = _name, pool.current
                calls[_name] += 1
                try:
                    return _plain(*args, **kwargs)
                finally:
                    pool.current = before

            setattr(saver, name, counted)
        graph = tool_agent(saver, turns, delta=delta)
        half = turns // 2
        for t in range(half):
            ask(graph, "t", t)
        pool.jobs.clear()
        calls.clear()
        wall, cpu = time.perf_counter(), time.process_time()
        for t in range(half, turns):
            ask(graph, "t", t)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        saver.archive.close()
    n = turns - half
    return {
        "turns": turns,
        "delta": delta,
        "measured_turns": n,
        "wall_ms_per_turn": round(1000 * wall / n, 2),
        "cpu_ms_per_turn": round(1000 * cpu / n, 2),
        "jobs_per_turn": round(sum(pool.jobs.values()) / n, 2),
        "by_method": {
            k: {"calls_per_turn": round(calls[k] / n, 2), "jobs_per_turn": round(pool.jobs[k] / n, 2)}
            for k in sorted(set(calls) | set(pool.jobs))
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--delta", type=int, default=100, help="DeltaChannel snapshot every K updates; 0: add_messages")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for turn_local.json")
    args = parser.parse_args()
    result = run(args.turns, args.delta)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "turn_local.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
