"""``list(config, limit=1)`` and ``get_tuple(config)`` answer from the head hint when they can; whatever
the history (appends, forks, ids out of order, pending writes, two namespaces), both must equal the first
tuple of the full listing, for a fresh saver and for the one that wrote."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("langgraph.checkpoint.conformance")

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata

from ckpt_archive.integrations.langgraph import ArchiveSaver

OPS = ("append", "append", "fork", "old_id", "writes", "child", "crash")


class Died(Exception):
    pass


def _config(ns: str, checkpoint_id: str | None = None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": "t", "checkpoint_ns": ns}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _latest_views(url: str, writer: ArchiveSaver, ns: str) -> tuple[list[CheckpointTuple], list[list[CheckpointTuple]]]:
    full = list(ArchiveSaver.from_url(url).list(_config(ns)))
    got = ArchiveSaver.from_url(url).get_tuple(_config(ns))
    views = [
        list(ArchiveSaver.from_url(url).list(_config(ns), limit=1)),
        [] if got is None else [got],
        list(writer.list(_config(ns), limit=1)),
    ]
    return full, views


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 1000)), min_size=1, max_size=12))
def test_latest_is_the_first_of_the_listing(ops: list[tuple[str, int]]) -> None:
    url = f"memory://lg-latest-{uuid.uuid4().hex}"
    saver = ArchiveSaver.from_url(url, full_snapshot_interval=3)
    pool = sorted(str(uuid.UUID(int=(1 << 127) + i)) for i in range(0, 2 * len(ops) + 2))  # ordered ids
    low, high = len(ops), len(ops) + 1  # old ids count down from ``low``, new ones up from ``high``
    made: dict[str, list[RunnableConfig]] = {"": [], "child": []}
    for step, (op, pick) in enumerate(ops):
        ns = "child" if op == "child" else ""
        mine = made[ns]
        if op == "writes":
            if mine:
                saver.put_writes(mine[pick % len(mine)], [("ch", pick), ("__interrupt__", step)], f"task-{pick}", "p")
            continue
        parent = mine[pick % len(mine)] if op == "fork" and mine else (mine[-1] if mine else _config(ns))
        if op == "old_id":
            cid, low = pool[low], low - 1
        else:
            cid, high = pool[high], high + 1
        values = {"messages": [f"m{i}" for i in range(step + 1)], "turn": step}
        cp = generate_checkpoint(checkpoint_id=cid, channel_values=values)
        cp["channel_versions"] = {"messages": step + 1, "turn": step + 1}
        versions = {"messages": step + 1, "turn": step + 1}
        if op == "crash":  # the commit never lands, the head hint put with it does
            store = saver.archive.store
            real = store.put_if_absent

            async def commit_dies(key: str, data: bytes, real: Any = real) -> bool:
                if "/_log/" in key:
                    raise Died(key)
                return bool(await real(key, data))

            store.put_if_absent = commit_dies  # type: ignore[method-assign]
            try:
                with pytest.raises(Died):
                    saver.put(parent, cp, generate_metadata(step=step), versions)
            finally:
                del store.put_if_absent
        else:
            mine.append(saver.put(parent, cp, generate_metadata(step=step), versions))
        for each in ("", "child"):
            full, views = _latest_views(url, saver, each)
            for view in views:
                assert view == full[:1], (op, each)
