"""The LangGraph hot path: what one ``put`` and one ``get_tuple`` cost must not grow with the thread.

Counted, not timed: records turned into listing entries per ``get_tuple`` (it rebuilt one for every
record of the thread), PUTs per ``put``, and files created per ``put`` on local disk.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

from ckpt_archive.integrations.langgraph import ArchiveSaver
from ckpt_archive.integrations.langgraph import reading as lg_reading
from ckpt_archive.ops import reads as ops_reads


def _config(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _grow(saver: ArchiveSaver, thread: str, n: int, parent: dict[str, Any] | None = None) -> dict[str, Any]:
    cfg = parent or _config(thread)
    for i in range(n):
        cp = generate_checkpoint(channel_values={"turn": i, "note": f"step {i}"})
        cp["channel_versions"] = {"turn": i + 1, "note": i + 1}
        cfg = saver.put(cfg, cp, generate_metadata(step=i), {"turn": i + 1, "note": i + 1})
    return cfg


class _Built:
    """Counts the records turned into ``CheckpointInfo`` (``record_info``) while it is installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = ops_reads.record_info

        def counting(thread_id: str, rec: Any) -> Any:
            self.n += 1
            return real(thread_id, rec)

        monkeypatch.setattr(ops_reads, "record_info", counting)
        monkeypatch.setattr(lg_reading, "record_info", counting)


@pytest.mark.parametrize("cold", [False, True])
def test_get_tuple_of_the_head_builds_records_independent_of_thread_length(
    monkeypatch: pytest.MonkeyPatch, cold: bool
) -> None:
    """``get_tuple`` of the latest checkpoint, and of the head named by its id, answers from the head
    after one probe of the log: it builds 1 record however long the thread (before: one per record)."""
    built: dict[int, list[int]] = {}
    for n in (10, 120):
        url = f"memory://lg-hot-get-{n}-{cold}"
        writer = ArchiveSaver.from_url(url)
        last = _grow(writer, "t", n)
        writer.put_writes(last, [("note", "pending")], "task-1", "p")
        counter = _Built(monkeypatch)
        counts = []
        for config in (_config("t"), last):
            saver = ArchiveSaver.from_url(url) if cold else writer
            counter.n = 0
            got = saver.get_tuple(config)
            assert got is not None and got.config == last and got.pending_writes == [("task-1", "note", "pending")]
            assert got.checkpoint["channel_values"] == {"turn": n - 1, "note": f"step {n - 1}"}
            counts.append(counter.n)
        built[n] = counts
        monkeypatch.undo()
    assert built[10] == built[120] and max(built[120]) <= 2, built
