"""The work of a save against the thread's length (issue 20, "time flat in thread length").

A caller hands a whole state on every save, so checking it (one canonical serialisation, one
comparison) is proportional to the state. Everything else a plain delta save does must not grow with
the thread: what it parses, hashes and compresses is its own commit, and the state is serialised once
per check, however deep its growing list sits. Counted in bytes through orjson, not in seconds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

import ckpt_archive as ca
from ckpt_archive import codec


class _CountingOrjson:
    """``orjson`` as ``codec`` uses it, counting the bytes it writes and reads."""

    def __init__(self, work: Counter[str]) -> None:
        self.work = work

    def dumps(self, value: Any, **kw: Any) -> bytes:
        out = orjson.dumps(value, **kw)
        self.work["dumps"] += len(out)
        return out

    def loads(self, data: Any) -> Any:
        self.work["loads"] += len(data)
        return orjson.loads(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(orjson, name)


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    counts: Counter[str] = Counter()
    monkeypatch.setattr(codec, "orjson", _CountingOrjson(counts))
    sha = codec.sha256

    def counted_sha256(data: bytes) -> str:
        counts["sha256"] += len(data)
        return sha(data)

    monkeypatch.setattr(codec, "sha256", counted_sha256)
    yield counts


def _message(i: int) -> dict[str, Any]:
    return {"role": "user" if i % 2 else "assistant", "content": f"message {i} " + "lorem ipsum " * 80, "id": f"m{i}"}


def _nested(messages: list[dict[str, Any]], step: int) -> dict[str, Any]:
    """A LangGraph-like archive state: the growing list three dicts deep."""
    return {"channels": {"messages": {"items": list(messages)}, "step": step}, "checkpoint": {"id": f"c{step}"}}


def test_a_growing_list_nested_in_dicts_is_serialised_once_per_check(work: Counter[str]) -> None:
    """``json_copy_raw`` with a series: the text of a list deep in a state is the one its parents'
    texts are joined from, not serialised again to compare with the last copy (it was, once per level
    of nesting below the top: twice for the ArchiveSaver's state)."""
    messages: list[dict[str, Any]] = []
    for step in range(60):
        messages.append(_message(step))
        state = _nested(messages, step)
        work.clear()
        copy, raw = codec.json_copy_raw(state, "state", series="nested-work")
        assert raw == orjson.dumps(state, option=orjson.OPT_SORT_KEYS) and copy == state
        if step >= 10:  # a copy to build on; the constant: keys, and the brackets that bound the depth
            assert work["dumps"] <= 1.1 * len(raw) + 1000, (step, work, len(raw))
            assert work["loads"] <= 2 * len(orjson.dumps(messages[-1])) + 200, (step, work)


@pytest.mark.parametrize("target", ["native", "ArchiveSaver"])
def test_a_plain_delta_save_does_bounded_work_beyond_checking_the_state(work: Counter[str], target: str) -> None:
    """A chat of 1 KB messages, a snapshot every 10 steps: at step ~150 and ~25 a plain delta save
    parses, hashes and compresses the same (its commit entry, own manifest step), and serialises the
    state at most twice (native: ``Checkpoint.new`` checks it, ``save`` copies it; LangGraph: once, plus
    the serde's own encoding outside orjson)."""
    url = f"memory://save-work-{target}"
    messages: list[dict[str, Any]] = []
    per_save: dict[int, tuple[Counter[str], int]] = {}
    checks = 2 if target == "native" else 1  # serialisations of the state each save needs (docstring)
    if target == "native":
        archive = ca.open_archive(url, full_snapshot_interval=10)
    else:
        pytest.importorskip("langgraph")
        from langgraph.checkpoint.base.id import uuid6

        from ckpt_archive.integrations.langgraph import ArchiveSaver

        saver = ArchiveSaver.from_url(url)
        parent: str | None = None
        versions: dict[str, Any] = {}
    for step in range(160):
        messages.append(_message(step))
        state = {"messages": list(messages), "step": step}
        work.clear()
        if target == "native":
            archive.save(ca.Checkpoint.new("chat", state, step=step))
        else:
            versions = {k: saver.get_next_version(versions.get(k), None) for k in state}
            conf: dict[str, Any] = {"thread_id": "chat", "checkpoint_ns": ""}
            if parent:
                conf["checkpoint_id"] = parent
            checkpoint = {
                "v": 4,
                "id": str(uuid6(clock_seq=step)),
                "ts": "2025-01-01T00:00:00+00:00",
                "channel_values": state,
                "channel_versions": versions,
                "versions_seen": {},
                "updated_channels": list(state),
            }
            out = saver.put({"configurable": conf}, checkpoint, {"source": "loop", "step": step}, dict(versions))
            parent = out["configurable"]["checkpoint_id"]
        if step % 10 in (3, 5, 7) and step >= 20:  # plain delta saves, a copy to build on
            done = Counter(work)
            if target == "native":
                checked = codec._copies.get(("state", "chat"))  # the canonical text of the state as saved
                assert checked is not None
                size = len(checked[0])
            else:  # the saver hands its encoded state over (``asave_owned``): serialised once, for the digest
                stored = saver.archive.load("chat")
                assert stored is not None
                size = len(orjson.dumps(stored.state, option=orjson.OPT_SORT_KEYS))
            done["dumps"] -= checks * size  # what is left: the commit's own documents
            per_save[step] = done, size
    early = [w for s, (w, _) in per_save.items() if s < 60]
    late = [(w, size) for s, (w, size) in per_save.items() if s >= 130]
    assert late[0][1] > 2 * max(size for s, (_, size) in per_save.items() if s < 60)  # the state grew
    bound = {k: max(w[k] for w in early) * 1.5 + 2000 for k in ("dumps", "loads", "sha256")}
    for w, _ in late:
        for kind, most in bound.items():  # the same as early in the thread: bounded by the commit's size
            assert w[kind] <= most, (kind, w, bound)


def _save_long(archive: Any, step: int) -> None:
    archive.save(ca.Checkpoint.new("long", {"turn": step, "log": [step % 7], "text": "x" * 200}, step=step))


def _calls(archive: Any, step: int) -> int:
    """Function calls (Python and C, in both threads that run them: the caller's and the archive's
    I/O loop) of one save of a small, constant state."""
    import cProfile
    import pstats

    from ckpt_archive._sync import run_sync

    loop, caller = cProfile.Profile(), cProfile.Profile()

    async def on() -> None:
        loop.enable()

    async def off() -> None:
        loop.disable()

    run_sync(on())
    caller.enable()
    try:
        _save_long(archive, step)
    finally:
        caller.disable()
        run_sync(off())
    return sum(int(v[1]) for prof in (loop, caller) for v in pstats.Stats(prof).stats.values())  # type: ignore[attr-defined]


def test_a_save_makes_as_many_calls_at_2000_records_as_at_200() -> None:
    """A save's compaction plans its tier merges and its head hint lists the segments a reader
    replays from: both from the manifest's count of segments (``format.holders``), not a scan of its
    records; a compaction or merge finds the records it moves from the newest back. Before, each
    visited every record: calls a save (the fewest 95% of 200 saves) grew from 1,417 at 200 records
    to 1,798 at 1,200 and 2,417 at 3,000, its 90th percentile from 3,417 to 15,381. The rarest 5%
    are left out: a tier merge re-points its records, once per 8 merges of the tier below (spec.md
    section 6), so its work is the tier's size, amortised flat."""
    archive = ca.open_archive("memory://save-calls", full_snapshot_interval=10)
    windows: list[list[int]] = []
    step = 0
    for start in (200, 2000):
        while step < start:
            _save_long(archive, step)
            step += 1
        windows.append(sorted(_calls(archive, s) for s in range(step, step + 200)))
        step += 200
    early, late = windows
    kept = int(0.95 * len(early))
    assert sum(late[:kept]) <= 1.05 * sum(early[:kept]), (early[::20], late[::20])
    assert late[int(0.9 * len(late))] <= 1.1 * early[int(0.9 * len(early))], (early[-20:], late[-20:])
