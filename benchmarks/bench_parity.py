"""Parity APIs measured on a moto S3 server: message storage, protection, session flushes.

Prints a markdown table (and writes it to benchmarks/results/parity.md); figures are bytes and
request counts at the server, not timings to assert. Messages are ~500 bytes of prose-like text.

    .venv/bin/python benchmarks/bench_parity.py
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import ckpt_archive as ca
from ckpt_archive._sync import run_sync
from ckpt_archive.testing import S3Server

STEPS = 200
RESULTS = Path(__file__).with_name("results")
_rng = random.Random(7)
_WORDS = ["".join(_rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(_rng.randint(2, 9))) for _ in range(3000)]


def text(i: int) -> str:
    rng = random.Random(i)
    return " ".join(rng.choice(_WORDS) for _ in range(90))[:500]


def stored_bytes(archive: ca.ArchiveCheckpointer) -> int:
    return sum(info["size"] for info in run_sync(archive.store.find("")).values())


def messages_row(server: S3Server, protect: bool) -> list[str]:
    url = server.make_bucket(f"msgs-{int(protect)}-{time.monotonic_ns()}") + "/a"
    archive = ca.open_archive(url, storage_options=server.storage_options())
    messages: list[dict[str, str]] = []
    raw = 0
    server.reset_counts()
    started = time.perf_counter()
    for step in range(STEPS):
        messages.append({"role": "user" if step % 2 else "assistant", "content": text(step)})
        ckpt = ca.Checkpoint.new("t", {"turn": step}, step=step, messages=list(messages), protect=protect)
        raw += len(ca.codec.dumps({"state": ckpt.state, "messages": ckpt.messages}))
        archive.save(ckpt)
    elapsed = time.perf_counter() - started
    requests = server.total()
    server.reset_counts()
    fresh = ca.open_archive(url, storage_options=server.storage_options())
    latest = fresh.load("t")
    assert latest is not None and len(latest.messages) == STEPS
    load_requests = server.total()
    return [
        f"{STEPS} saves, messages{' + protection' if protect else ''}",
        f"{raw / 1e6:.2f} MB",
        f"{stored_bytes(archive) / 1e6:.3f} MB",
        f"{requests / STEPS:.1f}",
        str(load_requests),
        f"{elapsed * 1000 / STEPS:.1f} ms",
    ]


def session_row(server: S3Server) -> list[str]:
    url = server.make_bucket(f"sessions-{time.monotonic_ns()}") + "/a"
    store = ca.ArchiveManagedStateStore(url, server.storage_options())
    manager = ca.CheckpointManager("s", store)
    server.reset_counts()
    started = time.perf_counter()
    for i in range(STEPS):
        manager.checkpoint(ca.MessageEvent(role="user", content=text(i)), ca.RunState(seq=i + 1))
        if i % 10 == 9:
            manager.flush_sync()
    elapsed = time.perf_counter() - started
    requests = server.total()
    server.reset_counts()
    restored = ca.CheckpointManager.restore_sync("s", store)
    assert len(restored.events()) == STEPS
    restore_requests = server.total()
    size = sum(info["size"] for info in run_sync(store.store.find("")).values())
    return [
        f"{STEPS} events, flush every 10",
        f"{sum(len(text(i)) for i in range(STEPS)) / 1e6:.2f} MB",
        f"{size / 1e6:.3f} MB",
        f"{requests / (STEPS // 10):.1f} per flush",
        str(restore_requests),
        f"{elapsed * 1000 / (STEPS // 10):.1f} ms/flush",
    ]


def main() -> None:
    server = S3Server().start()
    try:
        rows = [messages_row(server, False), messages_row(server, True)]
        rows.append(session_row(server))
    finally:
        server.stop()
    head = ["workload", "raw JSON", "stored", "requests/save", "requests to load/restore", "time"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = [
        "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |"
        for row in [head, ["-" * w for w in widths], *rows]
    ]
    table = "\n".join(lines)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "parity.md").write_text(
        "# Parity benchmark (moto S3 over HTTP; requests counted at the server)\n\n" + table + "\n"
    )


if __name__ == "__main__":
    main()
