"""The first read in a fresh process against the second, and where the difference goes.

Builds W1 once per store (``--steps`` steps: the native API with ``bench_core.states``; ``ArchiveSaver``
through the graph of ``bench_postgres.build_graph``, ``messages`` as ``add_messages`` and as
``DeltaChannel``; ``PostgresSaver`` with ``DeltaChannel`` on a server started as ``bench_postgres.py`` does,
when one can be), then ``--repeats`` rounds, the stores alternating, each read in a fresh process that
does what ``bench_postgres.fresh_reads`` / ``peers.fresh_read`` do: imports, one untimed open, then
``load`` (native ``load`` / ``get_tuple``) on a newly opened store, then the same on another new one.

Each timed read also reports how long CPython's cyclic garbage collector ran inside it, per generation
(``gc.callbacks``): a full (generation 2) collection walks every tracked object of the process, most of
them made by imports, and runs in whichever operation first allocates enough after them. Which read
that is depends on where the imports left the collector's counters, so a first read without a full
collection has not escaped it: the last column shows in which of the process's reads it landed.
Found with this script (1,000 steps, local disk): the first ``ArchiveSaver.get_tuple`` held the process's
first full collection (~75 ms of ~100 ms); ``analysis.dataset`` now imports ``pyarrow.dataset`` (and
pandas with it, ~25,000 objects) only in ``open_dataset``, so every full collection is that much cheaper,
and in these processes the first one moved to the 9th read (~70 ms there), which is luck, not a saving.

``--settled`` also runs every read with ``gc.collect()`` after the untimed open (what the read costs
without the imports' pending collection); ``--profile`` prints cProfile's top lines of one first read
(the I/O loop's thread included).

    .venv/bin/python benchmarks/bench_first_read.py [--steps 1000 --repeats 5 --settled --profile]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from bench_core import states
from bench_postgres import CONFIG, THREAD, build_graph
from peers import open_store
from pg_server import PostgresServer, missing

CASES = [("native", ""), ("ArchiveSaver", "add_messages"), ("ArchiveSaver", "DeltaChannel")]
READS = 6  # reads per process: the first, "again", and more to see where the first full collection lands
PG_CASE = ("PostgresSaver", "DeltaChannel")  # the peer of bench_postgres.py, when a server can be started


class GcClock:
    """Milliseconds the collector ran, and collections, per generation, since the last ``take``."""

    def __init__(self) -> None:
        self.ms = [0.0, 0.0, 0.0]
        self.runs = [0, 0, 0]
        self._t0 = 0.0
        gc.callbacks.append(self._tick)

    def _tick(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.ms[info["generation"]] += (time.perf_counter() - self._t0) * 1000
            self.runs[info["generation"]] += 1

    def take(self) -> dict[str, Any]:
        out = {"gc2_ms": self.ms[2], "gc_ms": sum(self.ms), "runs": list(self.runs)}
        self.ms, self.runs = [0.0, 0.0, 0.0], [0, 0, 0]
        return out


def read_once(store: str, where: str) -> None:
    s = open_store(store, where, {})
    if store == "native":
        s.load(THREAD)
    else:
        assert s.saver.get_tuple(CONFIG) is not None
    s.close()


def profile_read(store: str, where: str) -> None:
    """cProfile of one read, on this thread and on the I/O loop's (where the archive's coroutines run)."""
    import cProfile
    import pstats

    from ckpt_archive._sync import io_loop

    main, loop = cProfile.Profile(), cProfile.Profile()
    io_loop().call_soon_threadsafe(loop.enable)
    main.enable()
    read_once(store, where)
    main.disable()
    io_loop().call_soon_threadsafe(loop.disable)
    time.sleep(0.05)
    for name, prof in (("caller's thread", main), ("I/O loop thread", loop)):
        print(f"-- {name}", file=sys.stderr)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(12)


def child(store: str, channel: str, where: str, settled: bool, profile: bool) -> dict[str, Any]:
    clock = GcClock()
    open_store(store, where, {}).close()  # imports and the first open, untimed (as fresh_reads does)
    if store != "native":
        build_graph(None, channel, 10)  # the graph's imports
    if settled:
        gc.collect()
    out: dict[str, Any] = {"objects": len(gc.get_objects()), "warm_gc": clock.take()}
    for op in ("first", "again", *(f"read{i}" for i in range(3, READS + 1))):
        if profile and op == "first":
            profile_read(store, where)
            continue
        t0 = time.perf_counter()
        read_once(store, where)
        out[op] = (time.perf_counter() - t0) * 1000
        out[op + "_gc"] = clock.take()
    return out


def build(root: str, steps: int, pg: PostgresServer | None) -> dict[tuple[str, str], str]:
    """The archives under ``root``: those there already are kept (an earlier ``--root``)."""
    paths = {}
    for store, channel in cases(pg):
        if store == "PostgresSaver":
            assert pg is not None
            where = paths[(store, channel)] = pg.create_database("first_read")
        else:
            where = paths[(store, channel)] = f"{root}/{store}-{channel or 'native'}"
            if Path(where).exists():
                continue
        s = open_store(store, where, {})
        if store == "native":
            for i, state in enumerate(states(steps)):
                s.save(THREAD, i, state)
        else:
            graph = build_graph(s.saver, channel, steps)
            graph.invoke({"step": -1}, {**CONFIG, "recursion_limit": steps + 10}, durability="sync")
        s.close()
    return paths


def cases(pg: PostgresServer | None) -> list[tuple[str, str]]:
    return [*CASES, PG_CASE] if pg is not None else CASES


def landed(r: dict[str, Any]) -> str:
    """The reads of one process in which a full collection ran (1 = the first), with its ms."""
    ops = ["first", "again", *(f"read{i}" for i in range(3, READS + 1))]
    hits = [f"{i}:{r[op + '_gc']['gc2_ms']:.0f}" for i, op in enumerate(ops, 1) if r[op + "_gc"]["runs"][2]]
    return ",".join(hits) or "none"


def fmt(xs: list[float]) -> str:
    return f"{min(xs):.1f}–{max(xs):.1f} (median {sorted(xs)[len(xs) // 2]:.1f})"


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        store, channel, where, settled, profile = sys.argv[2:7]
        print(json.dumps(child(store, channel, where, settled == "1", profile == "1")))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--settled", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--root", help="where the archives are built, kept and reused (default: a temp dir)")
    args = parser.parse_args()
    reason = missing()
    if reason:
        print(f"PostgresSaver skipped: {reason}", file=sys.stderr)
    with (
        tempfile.TemporaryDirectory(prefix="bench-first-") as tmp,
        PostgresServer() if not reason else nullcontext() as pg,
    ):
        root = args.root or tmp
        paths = build(root, args.steps, pg)
        modes = ["0", "1"] if args.settled else ["0"]
        got: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for _ in range(args.repeats):
            for case in cases(pg):
                for mode in modes:
                    cmd = [sys.executable, __file__, "--child", *case, paths[case], mode, "0"]
                    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
                    got.setdefault((*case, mode), []).append(r)
        if args.profile:
            for case in cases(pg):
                print(f"--- cProfile, first read: {case}", file=sys.stderr, flush=True)
                cmd = [sys.executable, __file__, "--child", *case, paths[case], "0", "1"]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    print(f"steps={args.steps} repeats={args.repeats}; ms, min–max (median) over the repeats")
    print(
        "| store | messages | gc settled | objects | first read | of which full gc | again | of which full gc "
        f"| full gc in reads 1..{READS} (each process) |"
    )
    print("|---" * 9 + "|")
    for (store, channel, mode), rs in got.items():
        print(
            f"| {store} | {channel or '-'} | {'yes' if mode == '1' else 'no'} | {rs[0]['objects']:,} "
            f"| {fmt([r['first'] for r in rs])} | {fmt([r['first_gc']['gc2_ms'] for r in rs])} "
            f"| {fmt([r['again'] for r in rs])} | {fmt([r['again_gc']['gc2_ms'] for r in rs])} "
            f"| {' '.join(landed(r) for r in rs)} |"
        )


if __name__ == "__main__":
    main()
