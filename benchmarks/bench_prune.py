"""Pruning benchmark: one thread of 10,000 checkpoints on S3 (moto over HTTP) pruned down to the last 100.

The thread is written by the real ``ArchiveCheckpointer`` into ``memory://`` (so building
it takes seconds, not the minutes of 10,000 sequential HTTP saves), then every object is uploaded to
the moto server as is. The measured phases run against S3 with a fresh instance, and the requests are
counted at the server (``S3Server``):

* ``prune`` -- one manifest commit (remove + re-base + tombstones); nothing is deleted yet;
* ``gc`` -- after the grace period (here ``grace=0``): the tombstoned objects and the superseded log
  are deleted in batches;
* ``load kept`` -- every kept checkpoint loaded by id from another fresh instance.

Prints a markdown table and writes it to benchmarks/results/prune.md.

    .venv/bin/python benchmarks/bench_prune.py [--checkpoints 10000] [--keep 100] [--interval 10]

The default run uses 2,000 checkpoints (about a minute, mostly uploading to moto).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import fsspec

import ckpt_archive as ca
from ckpt_archive._sync import run_sync
from ckpt_archive.testing import S3Server

RESULTS = Path(__file__).with_name("results")


def build(checkpoints: int, interval: int) -> dict[str, bytes]:
    """The archive's objects, written into this process's memory (``memory://``) by the real writer."""
    store = ca.open_store(f"memory://bench-build-{uuid.uuid4().hex}")
    archive = ca.ArchiveCheckpointer(store, full_snapshot_interval=interval)
    rng = random.Random(7)
    messages: list[dict[str, Any]] = []
    for step in range(checkpoints):
        messages.append(
            {"role": "user" if step % 2 else "assistant", "content": f"turn {step} " + "x" * rng.randint(50, 300)}
        )
        messages = messages[-40:]  # a sliding context window: the state stays a few KB
        state = {"messages": list(messages), "step": step, "tokens": step * 211}
        archive.save(ca.Checkpoint.new("agent-run", state, step=step))
    archive.compact("agent-run")
    keys = sorted(run_sync(store.find("")))
    objects = dict(zip(keys, run_sync(store.get_many(keys)), strict=True))
    run_sync(store.delete_prefix(""))
    return {k: d for k, d in objects.items() if d is not None}


def upload(server: S3Server, url: str, objects: dict[str, bytes]) -> None:
    fs, root = fsspec.core.url_to_fs(url, **server.storage_options())

    async def put_all() -> None:
        gate = asyncio.Semaphore(64)

        async def one(key: str, data: bytes) -> None:
            async with gate:
                await fs._pipe_file(f"{root}/{key}", data)

        await asyncio.gather(*(one(k, d) for k, d in objects.items()))

    run_sync(put_all())


def counts(server: S3Server) -> dict[str, int]:
    return dict(server.requests)


def row(phase: str, seconds: float, req: dict[str, int], note: str) -> str:
    cells = [req.get(m, 0) for m in ("GET", "PUT", "LIST", "POST", "DELETE")]
    return f"| {phase} | {seconds:.2f} | " + " | ".join(str(c) for c in cells) + f" | {sum(req.values())} | {note} |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoints", type=int, default=2_000, help="10000 for the retention guide figure (~5 min)")
    parser.add_argument("--keep", type=int, default=100)
    parser.add_argument("--interval", type=int, default=10)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log: one line per request

    t = time.perf_counter()
    objects = build(args.checkpoints, args.interval)
    built = time.perf_counter() - t
    size = sum(len(d) for d in objects.values())
    print(f"built {args.checkpoints} checkpoints: {len(objects)} objects, {size / 1e6:.1f} MB in {built:.1f} s")

    server = S3Server().start()
    try:
        url = server.make_bucket("bench-prune") + "/archive"
        t = time.perf_counter()
        upload(server, url, objects)
        print(f"uploaded to moto in {time.perf_counter() - t:.1f} s")
        opts = server.storage_options()
        lines = [
            f"Prune one thread of {args.checkpoints:,} checkpoints (snapshot every {args.interval}) down to the "
            f"last {args.keep} on S3 (moto over HTTP); requests counted at the server.",
            "",
            "| phase | seconds | GET | PUT | LIST | POST | DELETE | requests | result |",
            "|---|---|---|---|---|---|---|---|---|",
        ]

        archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=args.interval)
        server.reset_counts()
        t = time.perf_counter()
        report = archive.prune("agent-run", ca.RetentionPolicy.keep_last(args.keep))
        lines.append(
            row(
                "prune",
                time.perf_counter() - t,
                counts(server),
                f"{len(report.removed):,} removed, {len(report.kept)} kept, {len(report.rebased)} re-based, "
                f"{report.objects_freed:,} objects / {report.bytes_freed / 1e6:.2f} MB tombstoned",
            )
        )

        server.reset_counts()
        t = time.perf_counter()
        gc = ca.open_archive(url, storage_options=opts).gc(grace=timedelta(0), unsafe_no_writers=True)
        lines.append(
            row(
                "gc (grace 0)",
                time.perf_counter() - t,
                counts(server),
                f"{gc.objects_deleted:,} objects / {gc.bytes_freed / 1e6:.2f} MB deleted "
                f"({gc.tombstones_purged} payloads, {gc.manifests:,} log/manifest)",
            )
        )

        reader = ca.open_archive(url, storage_options=opts)
        server.reset_counts()
        t = time.perf_counter()
        kept = reader.list("agent-run")
        for info in kept:
            assert reader.load_by_id(info.checkpoint_id) is not None
        lines.append(row("load kept", time.perf_counter() - t, counts(server), f"{len(kept)} checkpoints load"))
        left = run_sync(reader.store.find(""))
        lines += [
            "",
            f"Objects before: {len(objects):,} ({size / 1e6:.1f} MB); after gc: {len(left):,} "
            f"({sum(i['size'] for i in left.values()) / 1e6:.2f} MB).",
        ]
    finally:
        server.stop()

    table = "\n".join(lines)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "prune.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
