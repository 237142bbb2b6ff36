"""Core benchmark: a 1,000-step growing chat on local disk and on S3 (moto over HTTP).

Prints a markdown table (and writes it to benchmarks/results/core.md): bytes stored against a
full-copy-per-step baseline, save and load-latest times, and object-store requests per operation
counted at the S3 server.

    .venv/bin/python benchmarks/bench_core.py [--steps 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import fsspec

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive.testing import S3Server

RESULTS = Path(__file__).with_name("results")
WORDS = [
    "".join(random.Random(i).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(random.Random(-i).randint(2, 9)))
    for i in range(3000)
]


def message(rng: random.Random, step: int) -> dict[str, Any]:
    """About 1 KB of text from a 3,000-word vocabulary: compresses like prose (~2.5-3x), not like a repeat."""
    text = " ".join(rng.choice(WORDS) for _ in range(170))[:1000]
    return {"role": "user" if step % 2 else "assistant", "content": text, "id": f"msg-{step}"}


def states(steps: int) -> list[dict[str, Any]]:
    rng = random.Random(42)
    messages: list[dict[str, Any]] = []
    out = []
    for step in range(steps):
        messages.append(message(rng, step))
        out.append({"messages": list(messages), "step": step, "tokens": step * 257, "tool_calls": step // 3})
    return out


LOAD_SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
import ckpt_archive as ca
t1 = time.perf_counter()
archive = ca.open_archive(sys.argv[1], storage_options=json.loads(sys.argv[2]))
latest = archive.load("chat")
t2 = time.perf_counter()
infos = archive.list("chat")
t3 = time.perf_counter()
print(json.dumps({"load": t2 - t1, "list": t3 - t2, "messages": len(latest.state["messages"]), "n": len(infos)}))
"""


def fresh_process(url: str, opts: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT, url, json.dumps(opts)], check=True, capture_output=True, text=True
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def stored_bytes(fs: fsspec.AbstractFileSystem, root: str) -> int:
    return sum(int(info["size"]) for info in fs.find(root, detail=True).values())


def run(
    target: str, url: str, opts: dict[str, Any], data: list[dict[str, Any]], server: S3Server | None
) -> dict[str, Any]:
    archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=10)
    times, reqs_delta, reqs_full, lists = [], [], [], []
    for step, state in enumerate(data):
        if server:
            server.reset_counts()
        t = time.perf_counter()
        archive.save(ca.Checkpoint.new("chat", state, step=step))
        times.append(time.perf_counter() - t)
        if server and step >= 20:
            (reqs_full if step % 10 == 0 else reqs_delta).append(server.total())
            lists.append(server.requests["LIST"])
    result: dict[str, Any] = {"target": target, "saves": times}
    fs, root = fsspec.core.url_to_fs(url, **opts)
    result["bytes"] = stored_bytes(fs, root)
    # superseded commit entries and folds; nothing a checkpoint needs
    archive.gc(grace=timedelta(0), unsafe_no_writers=True)
    result["bytes_gc"] = stored_bytes(fs, root)
    if server:
        server.reset_counts()
    loads = [fresh_process(url, opts) for _ in range(3)]
    result["load"] = statistics.median(x["load"] for x in loads)
    result["list"] = statistics.median(x["list"] for x in loads)
    assert loads[0]["messages"] == len(data) and loads[0]["n"] == len(data)
    if server:
        result["req_load_list"] = server.total() / 3
        result["req_list_ops"] = server.requests["LIST"]
        server.reset_counts()
        reader = ca.open_archive(url, storage_options=opts)
        reader.load("chat")
        result["req_load"] = server.total()
        server.reset_counts()
        ca.open_archive(url, storage_options=opts).list("chat")
        result["req_list"] = server.total()
        result["req_delta"] = statistics.mean(reqs_delta)
        result["req_full"] = statistics.mean(reqs_full)
        result["save_lists"] = sum(lists)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    data = states(args.steps)
    full_json = sum(len(codec.dumps(s)) for s in data)
    full_zstd = sum(len(codec.compress(codec.dumps(s))) for s in data)
    floor = len(codec.compress(codec.dumps(data[-1])))
    results = []
    tmp = tempfile.mkdtemp(prefix="bench-core-")
    try:
        results.append(run("local disk", f"{tmp}/archive", {}, data, None))
        server = S3Server().start()
        try:
            url = server.make_bucket("bench") + "/archive"
            results.append(run("S3 (moto, HTTP)", url, server.storage_options(), data, server))
        finally:
            server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ms = 1000.0
    lines = [
        f"Workload: one thread, {args.steps:,} steps, one ~1 KB message appended per step plus small counters; "
        "`full_snapshot_interval=10`.",
        f"Baselines: a full JSON copy per step = {full_json:,} bytes; a zstd copy per step = {full_zstd:,} bytes; "
        f"floor (zstd of the final state, i.e. of the distinct content) = {floor:,} bytes.",
        "",
        "| target | bytes stored | after gc | vs JSON copies | vs zstd copies | vs floor | save mean ms | "
        "save p99 ms | first-100 / last-100 save ms | load latest (fresh process) ms | list all ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        s = r["saves"]
        p99 = sorted(s)[int(len(s) * 0.99) - 1]
        lines.append(
            f"| {r['target']} | {r['bytes']:,} | {r['bytes_gc']:,} | 1/{full_json / r['bytes_gc']:.0f} | "
            f"1/{full_zstd / r['bytes_gc']:.1f} | {r['bytes_gc'] / floor:.1f}x | {statistics.mean(s) * ms:.1f} | "
            f"{p99 * ms:.1f} | "
            f"{statistics.mean(s[:100]) * ms:.1f} / {statistics.mean(s[-100:]) * ms:.1f} | {r['load'] * ms:.0f} | "
            f"{r['list'] * ms:.0f} |"
        )
    s3 = results[-1]
    lines += [
        "",
        "S3 requests per operation, counted at the server:",
        "",
        "| operation | requests | LIST |",
        "|---|---|---|",
        f"| save, delta step (mean) | {s3['req_delta']:.2f} | 0 |",
        f"| save, snapshot step (mean, incl. segment compaction and folded manifest) | {s3['req_full']:.2f} | 0 |",
        f"| all {args.steps:,} saves | | {s3['save_lists']} |",
        f"| load latest, fresh reader | {s3['req_load']} | 0 |",
        f"| list all {args.steps:,} checkpoints, fresh reader | {s3['req_list']} | 0 |",
    ]
    table = "\n".join(lines)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "core.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
