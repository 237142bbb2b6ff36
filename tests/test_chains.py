"""One chain replay for every reader: load_by_id, history, the integrity API and verify agree on every
checkpoint, including those of copied threads (whose segment rows are named by their ``origin``)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckpt_archive as ca

_urls = itertools.count()


def say(archive: ca.ArchiveCheckpointer, thread: str, step: int, parent: str | None = None) -> ca.Checkpoint:
    """A chat-like checkpoint: a growing list (paged once long), a counter, and messages."""
    ckpt = ca.Checkpoint.new(
        thread,
        {"m": [f"msg {i} " + "x" * 20 for i in range(step + 1)], "n": step},
        step=step,
        parent_id=parent,
        messages=[{"role": "user", "content": f"turn {i}"} for i in range(step % 5)],
    )
    archive.save(ckpt)
    return ckpt


def agree(archive: ca.ArchiveCheckpointer) -> int:
    """Every checkpoint of every thread reads the same through each reader; returns how many."""
    report = archive.verify()
    assert report.ok, str(report)
    reader = ca.open_archive(archive.url, full_snapshot_interval=4)  # nothing cached
    count = 0
    for thread in reader.threads():
        for ckpt in reader.history(thread):
            by_id = reader.load_by_id(ckpt.checkpoint_id)
            assert by_id is not None
            assert (by_id.state, by_id.messages) == (ckpt.state, ckpt.messages)
            reader.validate_integrity(ckpt.checkpoint_id)
            restored = reader.restore_state(ckpt.checkpoint_id)
            assert restored.proven, restored.unproven
            assert (restored.state, restored.messages) == (ckpt.state, ckpt.messages)
            count += 1
    return count


@pytest.mark.parametrize("backend", ["local", "memory"])
def test_copied_thread_verifies(archive_url: Any, backend: str) -> None:
    """After compact and copy_thread, the copy's deltas live in copied segments whose rows carry the
    source's checkpoint ids: verify and validate_integrity must find them as load_by_id does."""
    url, opts = archive_url(backend)
    archive = ca.open_archive(url, storage_options=opts, full_snapshot_interval=4)
    saved = [say(archive, "src", step) for step in range(11)]
    archive.compact("src")
    mapping = archive.copy_thread("src", "dst")
    report = archive.verify()
    assert report.ok, str(report)
    assert report.checkpoints == 22
    for ckpt in saved:
        new_id = mapping[ckpt.checkpoint_id]
        archive.validate_integrity(new_id)
        assert archive.try_restore_state(new_id) == ckpt.state
        restored = archive.restore_state(new_id)
        assert restored.proven and (restored.state, restored.messages) == (ckpt.state, ckpt.messages)
    assert [c.state for c in archive.history("dst")] == [c.state for c in saved]


_op = st.one_of(
    st.tuples(st.just("save"), st.integers(0, 3), st.integers(1, 4)),  # thread, how many
    st.tuples(st.just("branch"), st.integers(0, 3), st.integers(0, 50)),  # thread, which parent
    st.tuples(st.just("compact"), st.integers(0, 3), st.just(0)),
    st.tuples(st.just("fork"), st.integers(0, 3), st.integers(0, 50)),  # source thread, which checkpoint
    st.tuples(st.just("copy"), st.integers(0, 3), st.just(0)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_op, min_size=1, max_size=12))
def test_every_reader_agrees_after_any_history(ops: list[tuple[str, int, int]]) -> None:
    archive = ca.open_archive(f"memory://chains-{next(_urls)}", full_snapshot_interval=4)
    threads: list[str] = ["t0"]
    ids: dict[str, list[str]] = {"t0": []}
    steps: dict[str, int] = {"t0": 0}

    def new_thread() -> str:
        name = f"t{len(threads)}"
        threads.append(name)
        return name

    for op, t, n in ops:
        thread = threads[t % len(threads)]
        if op == "save":
            for _ in range(n):
                ids[thread].append(say(archive, thread, steps[thread]).checkpoint_id)
                steps[thread] += 1
        elif op == "branch" and ids[thread]:
            parent = ids[thread][n % len(ids[thread])]
            ids[thread].append(say(archive, thread, steps[thread], parent=parent).checkpoint_id)
            steps[thread] += 1
        elif op == "compact" and ids[thread]:
            archive.compact(thread)
        elif op == "fork" and ids[thread]:
            dst = new_thread()
            ids[dst] = [archive.fork(ids[thread][n % len(ids[thread])], dst)]
            steps[dst] = steps[thread]
        elif op == "copy" and ids[thread]:
            dst = new_thread()
            mapping = archive.copy_thread(thread, dst)
            ids[dst] = [mapping[c] for c in ids[thread]]
            steps[dst] = steps[thread]
    assert agree(archive) == sum(len(v) for v in ids.values())
