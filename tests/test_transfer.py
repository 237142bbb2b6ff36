"""Backup and restore after any retention: export (portable file and archive to archive), then import.

A pruned thread's surviving checkpoints name parents that no longer exist (the
prune keeps them as lineage and gives such a checkpoint a snapshot of its own);
an import must bring every surviving checkpoint back exactly as the source lists
and loads it.
"""

from __future__ import annotations

import io
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

import ckpt_archive as ca
from ckpt_archive import RetentionPolicy as RP
from ckpt_archive.transfer import copy_threads, read_portable, replay, write_portable

_urls = itertools.count()
T0 = datetime(2025, 1, 1, tzinfo=UTC)

policies = st.one_of(
    st.integers(1, 6).map(RP.keep_last),
    st.integers(1, 4).map(RP.keep_every),
    st.just(RP.keep_pinned()),
    st.integers(0, 12).map(lambda h: RP.max_age(datetime.now(UTC) - T0 - timedelta(hours=h))),
    st.tuples(st.integers(1, 5), st.integers(2, 4)).map(lambda a: RP.keep_last(a[0]) | RP.keep_every(a[1])),
)
saves = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 9), st.booleans()),  # (step increment, fork back by, pin)
    min_size=1,
    max_size=16,
)
retention = st.lists(
    st.one_of(
        st.tuples(st.just("prune"), policies),
        st.tuples(st.just("remove"), st.lists(st.integers(0, 15), max_size=5)),
        st.tuples(st.just("edit"), st.integers(0, 15)),
    ),
    max_size=3,
)


def _url(name: str) -> str:
    return f"memory://transfer-{name}-{next(_urls)}"


def _build(per_thread: dict[str, list[tuple[int, int, bool]]], interval: int) -> ca.ArchiveCheckpointer:
    archive = ca.open_archive(_url("src"), full_snapshot_interval=interval)
    for thread, plan in per_thread.items():
        ids: list[str] = []
        step, items = 0, []
        for n, (inc, back, pin) in enumerate(plan):
            step += inc
            items = [*items, f"m{n}"]
            parent = ids[-1 - back] if back and back < len(ids) else None  # a fork from an older one
            ckpt = ca.Checkpoint(
                thread_id=thread,
                parent_id=parent,
                step=step,
                state={"items": items, "n": n, "big": list(range(n * 5))},
                metadata={"node": f"node{n % 3}"},
                created_at=T0 + timedelta(hours=n),
            )
            ids.append(archive.save(ckpt))
            if pin:
                archive.pin(ids[-1])
    return archive


def _retain(archive: ca.ArchiveCheckpointer, ops: list[tuple[str, Any]]) -> None:
    for thread in archive.threads():
        for op, arg in ops:
            infos = archive.list(thread)
            if not infos:
                break
            if op == "prune":
                archive.prune(thread, arg)
            elif op == "remove":
                archive.remove(thread, [infos[i % len(infos)].checkpoint_id for i in arg])
            else:
                info = infos[arg % len(infos)]
                archive.update_state(info.checkpoint_id, {"edited": arg}, info.version)


def _listing(archive: ca.ArchiveCheckpointer, thread: str) -> list[tuple[Any, ...]]:
    return [(i.checkpoint_id, i.parent_id, i.step, i.created_at, i.metadata) for i in archive.list(thread)]


def _same(source: ca.ArchiveCheckpointer, dest: ca.ArchiveCheckpointer) -> None:
    assert dest.threads() == [t for t in source.threads() if source.list(t)]
    for thread in dest.threads():
        assert _listing(dest, thread) == _listing(source, thread)
        for a, b in zip(source.history(thread), dest.history(thread), strict=True):
            assert (a.checkpoint_id, a.state, a.messages, a.pending_nodes) == (
                b.checkpoint_id,
                b.state,
                b.messages,
                b.pending_nodes,
            )
    report = dest.verify()
    assert report.ok, str(report)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(st.sampled_from(["a", "b/c", "d"]), saves, min_size=1, max_size=2),
    retention,
    st.booleans(),
    st.integers(2, 4),
)
def test_export_import_after_any_retention(
    per_thread: dict[str, list[tuple[int, int, bool]]], ops: list[tuple[str, Any]], copy: bool, interval: int
) -> None:
    source = _build(per_thread, interval)
    _retain(source, ops)
    if copy:  # a copy of a pruned thread: records whose parent was pruned start chains of their own
        source.copy_thread(source.threads()[0], "copied")
    threads = [t for t in source.threads() if source.list(t)]

    buf = io.BytesIO()
    write_portable(source, threads, buf)
    buf.seek(0)
    restored = ca.open_archive(_url("file"), full_snapshot_interval=interval)
    reports = [replay(restored, t, ckpts) for t, _, ckpts in read_portable(buf)]
    assert [r.copied for r in reports] == [len(source.list(t)) for t in threads]
    _same(source, restored)

    copied = ca.open_archive(_url("copy"), full_snapshot_interval=interval)
    assert [r.copied for r in copy_threads(source, copied, threads)] == [len(source.list(t)) for t in threads]
    _same(source, copied)
    again = copy_threads(source, copied, threads)  # a re-run skips everything
    assert [(r.copied, r.skipped) for r in again] == [(0, len(source.list(t))) for t in threads]
