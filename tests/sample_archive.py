"""A small, realistic archive for the analysis, CLI and notebook tests (deterministic content).

Three threads of an agent that chats and calls tools; timestamps are spread over
the past weeks so that age-based retention has something to do. ``support/alice``
has a fork; ``research 42`` is left with an open segment (inline deltas not yet
compacted) unless ``compact=True``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import ckpt_archive as ca

THREADS = {"support/alice": 24, "support/bob": 13, "research 42": 17}
NOW = datetime.now(UTC)


def state_at(thread: str, step: int) -> dict[str, Any]:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{thread} turn {i}"} for i in range(step + 1)
    ]
    tools = [
        {"tool": ["search", "fetch", "calc"][i % 3], "ok": i % 5 != 3, "ms": 10 * (i % 7 + 1)} for i in range(step // 2)
    ]
    state: dict[str, Any] = {
        "messages": messages,
        "tool_calls": tools,
        "plan": {
            "goal": f"help {thread}",
            "stage": ["draft", "search", "answer"][step % 3],
            "tries": step // 4,
        },
        "turn": step,
    }
    if step % 6 == 5:
        state["scratch"] = {"note": "x" * (20 * step)}
    return state


def build(
    url: str,
    storage_options: dict[str, Any] | None = None,
    *,
    compact: bool = False,
    only: tuple[str, ...] | None = None,
) -> ca.ArchiveCheckpointer:
    archive = ca.open_archive(url, storage_options=storage_options, full_snapshot_interval=5)
    for n, (thread, steps) in enumerate(THREADS.items()):
        if only is not None and thread not in only:
            continue
        start = NOW - timedelta(days=40 - 17 * n)  # 40, 23 and 6 days ago
        parent: str | None = None
        ids = []
        for step in range(steps):
            ckpt = ca.Checkpoint(
                thread_id=thread,
                state=state_at(thread, step),
                step=step,
                parent_id=parent,
                created_at=start + timedelta(hours=step),
                metadata={
                    "node": ["agent", "tools"][step % 2],
                    "source": "loop",
                    "cost": round(0.01 * step, 2),
                },
            )
            archive.save(ckpt)
            parent = ckpt.checkpoint_id
            ids.append(parent)
        if thread == "support/alice":  # a fork from step 10: another answer was tried
            forked = state_at(thread, 11)
            forked["plan"]["stage"] = "retry"
            fork = ca.Checkpoint(
                thread_id=thread,
                state=forked,
                step=11,
                parent_id=ids[10],
                created_at=start + timedelta(hours=steps + 1),
                metadata={"node": "agent", "source": "fork", "cost": 0.5},
            )
            archive.save(fork)
        if compact or thread != "research 42":
            archive.compact(thread)
    return archive


if __name__ == "__main__":  # python -m tests.sample_archive ./sample-archive [--compact]
    import sys

    build(sys.argv[1], compact="--compact" in sys.argv)


_SHARED: dict[str, tuple[str, dict[str, Any]]] = {}


def shared(backend: str, tmp_root: Any, s3_server: Any) -> tuple[str, dict[str, Any]]:
    """One compacted sample archive per backend for the whole test session (read-only users only)."""
    if backend not in _SHARED:
        if backend == "local":
            url, opts = str(tmp_root / "shared-sample-archive"), {}
        else:
            url, opts = s3_server.make_bucket("shared-sample") + "/archive", s3_server.storage_options()
        build(url, opts, compact=True)
        _SHARED[backend] = (url, opts)
    return _SHARED[backend]
