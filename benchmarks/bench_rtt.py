"""Saves and loads on S3 with a network round trip added to every request: what sequential round trips cost.

On moto over loopback a request costs a few ms of server CPU, and requests sent together are served one
after another, so concurrency barely shows; a real object store answers in ~10-30 ms whatever runs
beside. ``ckpt_archive.testing.FsspecRoundTrips(latency=...)`` adds that delay to every request client side
(concurrent requests wait together) and counts the sequential round trips of each operation.

W1's first ``--steps`` steps through each store on a fresh moto server; per save: wall time, sequential
round trips, requests (counted at the server); then a new store object loads the latest checkpoint
(after a first load by another one has set up the S3 client: connection set-up is not timed).

    .venv/bin/python benchmarks/bench_rtt.py [--steps 200 --latency-ms 20]
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
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = [run(name, args.steps, args.latency_ms / 1000) for name in args.stores.split(",") if available(name)]
    text = render(rows, args.steps, args.latency_ms)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rtt.json").write_text(json.dumps(rows))
    (args.out / "rtt.md").write_text(text)
    print(text)
    for r in rows:
        print(
            f"{r['store']}: requests per save {r['req_mean']:.3f} (max {r['req_max']}), "
            f"PUT-class {r['put_class_mean']:.3f} (max {r['put_class_max']})"
        )


if __name__ == "__main__":
    main()
