"""ckpt_archive against its peers, same workloads, same run: W1 (one long chat thread) and W3 (many threads).

Stores (see ``peers.py``): ckpt_archive's native API and LangGraph ``ArchiveSaver`` (when installed),
``langgraph-checkpoint-objectstorage`` (zstd), LangGraph ``InMemorySaver`` and ``SqliteSaver``, and a naive
one-JSON-file-per-step baseline. Targets: local disk, and S3 = moto over HTTP on loopback with requests
counted at the server (``ckpt_archive.testing.S3Server``).

- W1: ``bench_core.states``: one thread, ``--steps`` steps, one ~1 KB message appended per step plus small
  counters. Bytes stored, save p50/p99 of the first and last 100 saves, load-latest / list all /
  list(limit=1) in a fresh process (each on a new store object), S3 requests per operation. ``--repeats``
  runs, medians reported.
- W3: ``--w3-threads`` threads x ``--w3-steps`` steps (``--full``: 10,000 x 20), then list threads, load
  100 random latest, prune every thread to keep_last 5 (+ gc for ours), bytes before/after.

Writes ``benchmarks/results/peers.json`` (raw), ``peers.md`` and PNG plots (see ``report.py``).

    .venv/bin/python benchmarks/bench_peers.py [--steps 1000 --repeats 3 --w3-threads 100 | --full | --smoke]
    .venv/bin/python benchmarks/bench_peers.py --w3-only --full --targets local   # W3 alone, at full size
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from bench_core import states
from peers import S3_STORES, STORES, available, has_retention, open_store
from report import OURS, render_peers, render_w3

from ckpt_archive.testing import S3Server

RESULTS = Path(__file__).with_name("results")
PEERS_PY = Path(__file__).with_name("peers.py")
BUCKET = "bench"


@contextmanager
def target(kind: str, tag: str) -> Iterator[tuple[str, dict[str, Any], S3Server | None]]:
    """A fresh location per run: a temp directory, or a fresh moto server and bucket (memory freed after)."""
    if kind == "local":
        tmp = tempfile.mkdtemp(prefix="bench-peers-")
        try:
            yield f"{tmp}/{tag}", {}, None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    server = S3Server().start()
    try:
        yield server.make_bucket(BUCKET) + f"/{tag}", server.storage_options(), server
    finally:
        # moto keeps its buckets in this process: reset them, or the next run finds the bucket (and the memory)
        urllib.request.urlopen(urllib.request.Request(server.endpoint + "/moto-api/reset", method="POST")).close()
        server.stop()


def split_log(log: list[tuple[str, str]], mark: str) -> dict[str, Counter[str]]:
    """Server requests per operation: the fresh reader reads ``<mark>/<op>`` after each operation."""
    out: dict[str, Counter[str]] = {}
    current: Counter[str] = Counter()
    for kind, path in log:
        if path.startswith(mark) and kind == "HEAD":
            continue  # s3fs checks the marker before reading it
        if path.startswith(mark):
            out[path.rsplit("/", 1)[-1]] = current
            current = Counter()
        else:
            current[kind] += 1
    return out


def fresh_process(store: str, url: str, opts: dict[str, Any], thread: str, server: S3Server | None) -> dict[str, Any]:
    mark = ""
    if server is not None:
        import s3fs

        fs = s3fs.S3FileSystem(**opts)
        mark = f"{BUCKET}/_mark"
        for op in ("warm", "load", "list", "list1"):
            fs.pipe_file(f"{mark}/{op}", b"")
        server.reset_counts()
    cmd = [sys.executable, str(PEERS_PY), store, url, json.dumps(opts), thread, mark]
    out: dict[str, Any] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    if server is not None:
        for op, counts in split_log(list(server.log), "/" + mark).items():
            out[f"req_{op}"] = sum(counts.values())
            out[f"list_{op}"] = counts["LIST"]
    return out


def in_process_reads(s: Any, thread: str) -> dict[str, Any]:
    """For InMemorySaver, which has no fresh process to read from."""
    out: dict[str, Any] = {}
    for op in ("load", "list", "list1"):
        t0 = time.perf_counter()
        if op == "load":
            out["messages"] = len(s.load(thread)["messages"])
        else:
            out["n_" + op] = s.list(thread, 1 if op == "list1" else None)
        out[op] = time.perf_counter() - t0
    return out


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q))


def read_out(
    s: Any, store: str, url: str, opts: dict[str, Any], thread: str, server: S3Server | None, r: dict[str, Any]
) -> dict[str, Any]:
    """After a workload: bytes as written and, for ours, after gc (superseded folded manifests and
    merged commit entries) into ``r``; then the reads, in a fresh process (InMemorySaver in process)."""
    r["bytes"] = s.nbytes()
    if store in OURS and has_retention():
        s.gc()
        r["bytes_gc"] = s.nbytes()
    if store == "InMemorySaver":
        reads = in_process_reads(s, thread)
    else:
        s.close()
        reads = fresh_process(store, url, opts, thread, server)
    r.update(reads)
    return reads


def run_w1(store: str, kind: str, data: list[dict[str, Any]]) -> dict[str, Any]:
    with target(kind, "w1") as (url, opts, server):
        s = open_store(store, url, opts)
        times, reqs, lists, r0 = [], [], 0, (0, 0)
        for step, state in enumerate(data):
            if server:
                server.reset_counts()
            t0 = time.perf_counter()
            s.save("chat", step, state)
            times.append(time.perf_counter() - t0)
            if server:
                reqs.append(server.total())
                lists += server.requests["LIST"]
                if step == 0:
                    r0 = server.total(), server.requests["LIST"]
        first, last = times[:100], times[-100:]
        r: dict[str, Any] = {
            "store": store,
            "target": kind,
            "saves": times,
            "first_p50": pct(first, 50),
            "first_p99": pct(first, 99),
            "last_p50": pct(last, 50),
            "last_p99": pct(last, 99),
            "first_mean": float(np.mean(first)),
            "last_mean": float(np.mean(last)),
        }
        if server:
            r["req_save"] = float(np.mean(reqs))
            r["req_save_max"] = max(reqs)
            r["save_lists"] = lists
            r["req_save_first"], r["save_lists_first"] = r0
            r["req_save_max_after_first"] = max(reqs[1:])
        reads = read_out(s, store, url, opts, "chat", server, r)
        assert reads["messages"] == len(data) and reads["n_list"] == len(data) and reads["n_list1"] == 1, reads
        return r


def run_w3(store: str, kind: str, threads: int, steps: int, seed: int = 7) -> dict[str, Any]:
    data = states(steps)
    names = [f"t{i:05d}" for i in range(threads)]
    with target(kind, "w3") as (url, opts, server):
        r: dict[str, Any] = {"store": store, "target": kind, "threads": threads, "steps": steps}

        def phase(name: str, fn: Any) -> Any:
            if server:
                server.reset_counts()
            t0 = time.perf_counter()
            value = fn()
            r[name] = time.perf_counter() - t0
            if server:
                r[f"req_{name}"] = server.total()
            return value

        s = open_store(store, url, opts)

        def save_all() -> None:
            for name in names:
                for step, state in enumerate(data):
                    s.save(name, step, state)

        phase("save", save_all)
        r["bytes"] = s.nbytes()
        reader = s if store == "InMemorySaver" else open_store(store, url, opts)
        assert phase("threads_list", reader.threads) == threads
        sample = random.Random(seed).sample(names, min(100, threads))
        loaded = phase("load100", lambda: [len(reader.load(n)["messages"]) for n in sample])
        assert loaded == [steps] * len(sample)
        if store in ("native", "ArchiveSaver") and not has_retention():
            r["prune"] = None
        else:
            phase("prune", lambda: s.prune(5))
            phase("gc", s.gc)
            r["bytes_after"] = s.nbytes()
            assert s.list(names[0]) == 5
        s.close()
        return r


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(runs[-1])  # non-numeric fields and the last run's save series (for the plots)
    for key, value in runs[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = float(np.median([run[key] for run in runs]))
    out["runs"] = len(runs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--w3-threads", type=int, default=100)
    parser.add_argument("--w3-steps", type=int, default=20)
    parser.add_argument("--full", action="store_true", help="W3 at full size: 10,000 threads x 20 steps")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check the harness in seconds")
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--targets", default="local,s3")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--merge", action="store_true", help="replace/add these stores' rows in peers.json")
    parser.add_argument(
        "--w3-only", action="store_true", help="W3 only, written to w3.json / w3.md (peers.json is left alone)"
    )
    args = parser.parse_args()
    if args.full:
        args.w3_threads = 10_000
    if args.smoke:
        args.steps, args.repeats, args.w3_threads, args.w3_steps = 30, 1, 3, 6
    stores = [s for s in args.stores.split(",") if available(s)]
    skipped = [s for s in args.stores.split(",") if not available(s)]
    data = states(args.steps)
    w1: list[dict[str, Any]] = []
    w3: list[dict[str, Any]] = []
    started = time.time()
    for kind in args.targets.split(","):
        for store in stores:
            if kind == "s3" and store not in S3_STORES:
                continue
            runs = []
            for _ in range(0 if args.w3_only else args.repeats):
                runs.append(run_w1(store, kind, data))
                print(f"W1 {kind:5} {store:20} {runs[-1]['bytes']:>12,} B  {time.time() - started:6.0f}s", flush=True)
            if runs:
                w1.append(median_of(runs))
            w3.append(run_w3(store, kind, args.w3_threads, args.w3_steps))
            print(f"W3 {kind:5} {store:20} save {w3[-1]['save']:.1f}s  {time.time() - started:6.0f}s", flush=True)
    params = {k: v for k, v in vars(args).items() if k not in ("out", "merge")}
    params["skipped"] = skipped
    params["command"] = " ".join(["benchmarks/bench_peers.py", *sys.argv[1:]])
    args.out.mkdir(parents=True, exist_ok=True)
    if args.w3_only:
        (args.out / "w3.json").write_text(json.dumps({"params": params, "w3": w3}, default=str))
        print(render_w3(args.out))
        return
    if args.merge:  # a store added later (say, once installed), same sizes, kept beside the earlier rows
        old = json.loads((args.out / "peers.json").read_text())
        ran = {(r["store"], r["target"]) for r in w1}
        w1 = [r for r in old["w1"] if (r["store"], r["target"]) not in ran] + w1
        w3 = [r for r in old["w3"] if (r["store"], r["target"]) not in ran] + w3
        order = {name: i for i, name in enumerate(STORES)}
        w1.sort(key=lambda r: (r["target"] != "local", order[r["store"]]))
        w3.sort(key=lambda r: (r["target"] != "local", order[r["store"]]))
        params["skipped"] = [s for s in old["params"]["skipped"] if s not in stores]
        params["command"] = f"{old['params']['command']}` then `{params['command']}"
    (args.out / "peers.json").write_text(json.dumps({"params": params, "w1": w1, "w3": w3}, default=str))
    print(render_peers(args.out))


if __name__ == "__main__":
    main()
