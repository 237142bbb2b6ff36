"""Where a save's time goes as a thread grows: W1 on local disk, the first vs the last 100 saves.

Prints a markdown table (and writes it to benchmarks/results/save_cpu.md): per save, the CPU time of
building the ``Checkpoint`` (its JSON check), of the writer's JSON check and private copy alone, and the
wall and CPU time of a whole native save and of an ``ArchiveSaver.put`` (CPU of every thread of the
process, so the I/O loop's work counts).

    .venv/bin/python benchmarks/bench_save_cpu.py [--steps 1000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_core import states
from peers import available, open_store

import ckpt_archive as ca
from ckpt_archive import codec

RESULTS = Path(__file__).with_name("results")


def _row(name: str, times: list[float]) -> dict[str, Any]:
    first, last = statistics.fmean(times[:100]) * 1000, statistics.fmean(times[-100:]) * 1000
    return {"what": name, "first": first, "last": last, "ratio": last / first if first else float("nan")}


def check_only(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The JSON check when a Checkpoint is built, then the writer's check and copy, without storage."""
    built, copied = [], []
    for step, state in enumerate(data):
        t0 = time.process_time()
        ckpt = ca.Checkpoint.new("cpu-check", state, step=step)
        t1 = time.process_time()
        codec.json_copy_raw(ckpt.state, "state", series=ckpt.thread_id)  # what the writer does first
        t2 = time.process_time()
        built.append(t1 - t0)
        copied.append(t2 - t1)
    return [_row("Checkpoint.new (JSON check), CPU", built), _row("writer's JSON check + private copy, CPU", copied)]


def whole_saves(store: str, data: list[dict[str, Any]], root: str) -> list[dict[str, Any]]:
    """Every save through the benchmark's store adapter (``peers.py``), as the peer benchmark runs it."""
    s = open_store(store, f"{root}/{store}", {})
    wall, cpu = [], []
    for step, state in enumerate(data):
        t0, c0 = time.perf_counter(), time.process_time()
        s.save("chat", step, state)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    s.close()
    what = "ArchiveSaver put" if store == "ArchiveSaver" else f"{store} save"
    return [_row(f"{what}, wall", wall), _row(f"{what}, CPU (all threads)", cpu)]


def report(rows: list[dict[str, Any]], steps: int) -> str:
    out = [
        f"W1 on local disk, {steps:,} steps (one ~1 KB message per step): mean ms per save over the first and "
        "the last 100 saves.",
        "",
        "| what | first 100 ms | last 100 ms | last / first |",
        "|---|---|---|---|",
    ]
    out += [f"| {r['what']} | {r['first']:.2f} | {r['last']:.2f} | {r['ratio']:.2f}x |" for r in rows]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    data = states(args.steps)
    rows = check_only(data)
    with tempfile.TemporaryDirectory() as root:
        for store in ("native", "ArchiveSaver"):
            if available(store):
                rows += whole_saves(store, data, root)
    text = report(rows, args.steps)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "save_cpu.md").write_text(text)


if __name__ == "__main__":
    main()
