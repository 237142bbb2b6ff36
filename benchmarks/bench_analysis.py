"""Analysis benchmark: the readers of ckpt_archive.analysis and the CLI, on local disk and on S3 (moto).

Simulates agent runs with ``ckpt_archive.demo.simulate`` (a few threads of a few hundred steps), then
times each reader and counts the object-store requests it makes (at the S3 server). Prints a markdown
table and writes it to benchmarks/results/analysis.md.

    .venv/bin/python benchmarks/bench_analysis.py [--threads 3] [--min-steps 80] [--max-steps 120]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.dataset as ds

from ckpt_archive.analysis import changes_frame, checkpoints_frame, open_dataset, states
from ckpt_archive.demo import simulate
from ckpt_archive.testing import S3Server

RESULTS = Path(__file__).with_name("results")


def measure(fn: Callable[[], Any], server: S3Server | None) -> tuple[float, int | str, Any]:
    if server is not None:
        server.reset_counts()
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    return elapsed, server.total() if server is not None else "-", result


def run(url: str, opts: dict[str, Any], server: S3Server | None, thread: str) -> list[tuple[str, float, Any, str]]:
    rows = []

    def add(name: str, fn: Callable[[], Any], describe: Callable[[Any], str]) -> None:
        elapsed, requests, result = measure(fn, server)
        rows.append((name, elapsed, requests, describe(result)))

    add(
        "checkpoints_frame (all threads)",
        lambda: checkpoints_frame(url, storage_options=opts),
        lambda r: f"{len(r)} rows",
    )
    add(
        "changes_frame (one thread)",
        lambda: changes_frame(url, thread, storage_options=opts),
        lambda r: f"{len(r)} rows",
    )
    add(
        "states (one thread, all steps)",
        lambda: sum(1 for _ in states(url, thread, storage_options=opts)),
        lambda r: f"{r} states",
    )
    add(
        "open_dataset: full scan",
        lambda: open_dataset(url, storage_options=opts).to_table(),
        lambda r: f"{r.num_rows} rows",
    )
    add(
        "open_dataset: thread_id filter",
        lambda: open_dataset(url, storage_options=opts).to_table(filter=ds.field("thread_id") == thread),
        lambda r: f"{r.num_rows} rows",
    )
    if server is None:
        add(
            "DuckDB read_parquet (no import of ours)",
            lambda: duckdb.sql(
                f"SELECT thread_id, count(*) FROM read_parquet('{url}/thread_id=*/deltas/*.parquet', "
                "hive_partitioning = false) GROUP BY ALL"
            ).fetchall(),
            lambda r: f"{len(r)} groups",
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--min-steps", type=int, default=80)
    parser.add_argument("--max-steps", type=int, default=120)
    args = parser.parse_args()
    table = ["| backend | operation | seconds | requests | result |", "|---|---|---:|---:|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        local = f"{tmp}/archive"
        counts = simulate(local, threads=args.threads, steps=(args.min_steps, args.max_steps))
        thread = "customer-1000/session-0"
        for name, secs, req, res in run(local, {}, None, thread):
            table.append(f"| local | {name} | {secs:.3f} | {req} | {res} |")
        server = S3Server().start()
        try:
            s3 = server.make_bucket("bench-analysis") + "/archive"
            # the same runs on S3: simulate writes through the fsspec URL
            import ckpt_archive.demo as demo

            original = demo.open_archive
            demo.open_archive = lambda path, **kw: original(path, storage_options=server.storage_options(), **kw)  # type: ignore[assignment]
            try:
                simulate(s3, threads=args.threads, steps=(args.min_steps, args.max_steps))
            finally:
                demo.open_archive = original  # type: ignore[assignment]
            for name, secs, req, res in run(s3, server.storage_options(), server, thread):
                table.append(f"| s3 (moto) | {name} | {secs:.3f} | {req} | {res} |")
        finally:
            server.stop()
    text = (
        f"{counts['checkpoints']} checkpoints in {args.threads} threads "
        f"(steps {args.min_steps}-{args.max_steps} per thread)\n\n" + "\n".join(table) + "\n"
    )
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "analysis.md").write_text(text)


if __name__ == "__main__":
    main()
