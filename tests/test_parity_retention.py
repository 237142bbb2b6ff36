"""Messages and protection survive retention: edits, removals (re-based chains), history, forks, copies."""

from __future__ import annotations

from typing import Any

import pytest

import ckpt_archive as ca

from .conftest import open_backend

TOKEN = ca.binding_digest("host token")
KINDS = ["memory", "delta-memory", "archive-local", "archive-s3"]


@pytest.fixture(params=KINDS)
def cp(request: pytest.FixtureRequest, archive_url: Any) -> Any:
    if request.param == "memory":
        return ca.MemoryCheckpointer()
    if request.param == "delta-memory":
        return ca.DeltaCheckpointer(ca.MemoryCheckpointer(), ca.DeltaConfig(full_snapshot_interval=4))
    return open_backend(archive_url, request.param.removeprefix("archive-"), full_snapshot_interval=4)


def conversation(cp: Any, thread: str, n: int) -> list[ca.Checkpoint]:
    saved, messages = [], []
    for step in range(n):
        messages.append({"role": "user", "content": f"turn {step}"})
        ckpt = ca.Checkpoint.new(
            thread, {"turn": step}, step=step, messages=list(messages), node_id=f"n{step}", binding_digest=TOKEN
        )
        cp.save(ckpt)
        saved.append(ckpt)
    return saved


def test_edit_of_a_protected_checkpoint_is_protected_anew(cp: Any) -> None:
    saved = conversation(cp, "t", 6)
    target = saved[2]
    assert cp.update_state(target.checkpoint_id, {"turn": 2, "edited": True}, expected_version=1) == 2
    edited = cp.load_by_id(target.checkpoint_id)
    assert edited.state == {"turn": 2, "edited": True}
    assert edited.messages == target.messages and edited.node_id == "n2"
    assert edited.integrity_status(TOKEN) == ca.IntegrityStatus.VERIFIED  # same binding, new digests
    with pytest.raises(ca.CheckpointVersionConflict):
        cp.update_state(target.checkpoint_id, {"turn": -1}, expected_version=1)
    for other in saved[:2] + saved[3:]:  # every other checkpoint loads exactly as saved
        loaded = cp.load_by_id(other.checkpoint_id)
        assert (loaded.state, loaded.messages) == (other.state, other.messages)
        loaded.validate_integrity(TOKEN)


def test_removal_keeps_messages_of_rebased_children(cp: Any) -> None:
    saved = conversation(cp, "t", 7)
    cp.remove("t", [saved[1].checkpoint_id, saved[5].checkpoint_id])
    kept = [c for i, c in enumerate(saved) if i not in (1, 5)]
    assert [i.checkpoint_id for i in cp.list("t")] == [c.checkpoint_id for c in kept]
    for ckpt in kept:
        loaded = cp.load_by_id(ckpt.checkpoint_id)
        assert loaded.messages == ckpt.messages and loaded.try_restore_state(TOKEN) == ckpt.state


def test_history_carries_messages_and_protection(cp: Any) -> None:
    saved = conversation(cp, "t", 9)
    history = list(cp.history("t"))
    assert [(h.state, h.messages, h.protection) for h in history] == [
        (c.state, c.messages, c.protection) for c in saved
    ]


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_fork_and_copy_keep_messages(archive_url: Any, backend: str) -> None:
    archive = open_backend(archive_url, backend, full_snapshot_interval=4)
    saved = conversation(archive, "t", 6)
    forked = archive.load_by_id(archive.fork(saved[5].checkpoint_id, "fork"))  # a delta: re-snapshotted
    assert forked.messages == saved[5].messages and forked.integrity_status(TOKEN) == "verified"
    mapping = archive.copy_thread("t", "copy")
    for ckpt in saved:
        copied = archive.load_by_id(mapping[ckpt.checkpoint_id])
        assert copied.messages == ckpt.messages and copied.integrity_status(TOKEN) == "verified"
