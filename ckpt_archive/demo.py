"""`make demo`: simulate agent runs into a local archive and show what a user wants to see.

Run as ``python -m ckpt_archive.demo [PATH]`` (default ./demo-archive; recreated each run).
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import time
from datetime import timedelta
from pathlib import Path

from rich.console import Console
from rich.table import Table

from . import codec
from .archive import open_archive
from .format import layout
from .model import Checkpoint

TOOLS = ["search", "calculator", "calendar", "weather", "sql"]


def simulate(path: str, threads: int = 5, steps: tuple[int, int] = (150, 300), seed: int = 7) -> dict[str, int]:
    """Write a few agent runs; returns {"full_copy_bytes", "full_copy_zstd_bytes", "checkpoints"}."""
    rng = random.Random(seed)
    archive = open_archive(path, full_snapshot_interval=10)
    full_json = full_zstd = count = 0
    for t in range(threads):
        thread = f"customer-{1000 + t}/session-{t}"
        messages: list[dict[str, object]] = []
        state: dict[str, object] = {}
        for step in range(rng.randint(*steps)):
            role = "user" if step % 3 == 0 else ("tool" if step % 3 == 2 else "assistant")
            text = " ".join(
                rng.choice(["plan", "the", "invoice", "refund", "order", "agent", "ok"]) for _ in range(150)
            )
            message: dict[str, object] = {"role": role, "content": text, "id": f"m{step}"}
            if role == "tool":
                message["tool"] = rng.choice(TOOLS)
            messages.append(message)
            state = {
                "messages": list(messages),
                "turn": step,
                "tokens_used": step * 731,
                "scratchpad": {"goal": "resolve the ticket", "attempt": step // 7, "last_tool": message.get("tool")},
            }
            pending = ["agent"] if role != "assistant" else ["tools"]
            ckpt = Checkpoint.new(thread, state, step=step, pending_nodes=pending, metadata={"node": pending[0]})
            archive.save(ckpt)
            raw = codec.dumps(state)
            full_json += len(raw)
            full_zstd += len(codec.compress(raw))
            count += 1
        archive.compact(thread)  # close the open segment so Parquet readers see every delta
    return {"full_copy_bytes": full_json, "full_copy_zstd_bytes": full_zstd, "checkpoints": count}


def disk_usage(path: str) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    path = os.path.abspath(argv[0] if argv else "demo-archive")
    if os.path.exists(path):
        if not os.path.exists(os.path.join(path, layout.ARCHIVE_MARKER)):
            raise SystemExit(f"{path} exists and is not a ckpt_archive archive; refusing to overwrite it")
        shutil.rmtree(path)
    console = Console()
    started = time.perf_counter()
    totals = simulate(path)
    elapsed = time.perf_counter() - started
    archive = open_archive(path)
    written = disk_usage(path)
    # Superseded commit entries and folded manifests; a service keeps the default 1 h grace period.
    archive.gc(grace=timedelta(0), unsafe_no_writers=True)
    stored = disk_usage(path)

    table = Table(title=f"Threads in {path}")
    table.add_column("thread", no_wrap=True, min_width=len(max(archive.threads(), key=len, default="")))
    for col in ("checkpoints", "full", "delta", "bytes", "step", "msgs"):
        table.add_column(col, justify="right", no_wrap=True)
    for thread in archive.threads():
        infos = archive.list(thread)
        latest = archive.load(thread)
        assert latest is not None
        table.add_row(
            thread,
            str(len(infos)),
            str(sum(i.kind == "full" for i in infos)),
            str(sum(i.kind == "delta" for i in infos)),
            f"{sum(i.stored_bytes for i in infos):,}",
            str(latest.step),
            str(len(latest.state["messages"])),
        )
    console.print(table)
    console.print(
        f"{totals['checkpoints']:,} checkpoints saved in {elapsed:.1f} s. Bytes on disk: {written:,} as written, "
        f"[bold]{stored:,}[/bold] after gc (everything, manifest included); a full JSON copy per step would be "
        f"{totals['full_copy_bytes']:,} "
        f"([bold]{totals['full_copy_bytes'] / stored:.0f}x[/bold] more), a zstd copy per step "
        f"{totals['full_copy_zstd_bytes']:,} ({totals['full_copy_zstd_bytes'] / stored:.1f}x more)."
    )
    thread = archive.threads()[0]
    latest = archive.load(thread)
    assert latest is not None
    last = latest.state["messages"][-1]
    console.print(
        f"\nLatest checkpoint of [bold]{thread}[/bold]: id {latest.checkpoint_id}, step {latest.step}, "
        f"{len(latest.state['messages'])} messages, last from {last['role']!r}: {str(last['content'])[:60]}..., "
        f"scratchpad {latest.state['scratchpad']}; "
        + (
            f"nodes still to run when it was saved (a resume starts there): {', '.join(latest.pending_nodes)}"
            if latest.pending_nodes
            else "no node was left to run when it was saved"
        ),
        soft_wrap=True,
    )
    query = (
        "SELECT thread_id, op, count(*) AS ops, sum(length(value)) AS value_bytes "
        f"FROM read_parquet('{path}/{layout.DELTA_GLOB}', hive_partitioning=false) "
        "GROUP BY ALL ORDER BY thread_id, op"
    )
    console.print("\nThe deltas are plain Parquet; DuckDB reads them with no code of ours:")
    if shutil.which("duckdb"):
        console.print(f'  duckdb -c "{query}"', soft_wrap=True)
    else:
        console.print(f'  python -c "import duckdb; duckdb.sql(\\"{query}\\").show()"', soft_wrap=True)
    try:
        import duckdb
    except ImportError:
        console.print("  (pip install duckdb to run it here)")
        return
    for row in duckdb.sql(query).fetchall():  # type: ignore[union-attr]
        console.print("  " + "  ".join(str(v) for v in row), soft_wrap=True, highlight=False)


if __name__ == "__main__":
    main()
