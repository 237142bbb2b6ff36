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
