"""Analysis on GCS (the real fake-gcs-server over HTTP) with storage_options, exactly as on local disk."""

from __future__ import annotations

from typing import Any

import pyarrow.dataset as ds

import ckpt_archive as ca
from ckpt_archive.analysis import changes_frame, checkpoints_frame, open_dataset, states


def test_frames_and_dataset_on_gcs(archive_url: Any) -> None:
    url, opts = archive_url("gcs")
    archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=4)
    messages: list[dict[str, Any]] = []
    saved = []
    for step in range(9):
        messages.append({"role": "user", "content": f"hello {step}"})
        ckpt = ca.Checkpoint.new("gcs/thread", {"messages": list(messages), "n": step}, step=step)
        archive.save(ckpt)
        saved.append(ckpt)
    archive.compact("gcs/thread")

    frame = checkpoints_frame(url, storage_options=opts)
    assert list(frame["checkpoint_id"]) == [c.checkpoint_id for c in saved]
    assert list(frame["kind"])[:5] == ["full", "delta", "delta", "delta", "full"]

    table = open_dataset(url, storage_options=opts).to_table(filter=ds.field("thread_id") == "gcs/thread")
    appended = sorted(
        s for s, op in zip(table["step"].to_pylist(), table["op"].to_pylist(), strict=True) if op == "append"
    )
    assert appended == list(range(1, 9))  # snapshot steps have their rows too (4, 8); step 0 sets the list

    changes = changes_frame(url, "gcs/thread", storage_options=opts)
    assert set(changes["key"]) == {"messages", "n"}
    assert [c.state for c in states(url, "gcs/thread", storage_options=opts)] == [c.state for c in saved]
