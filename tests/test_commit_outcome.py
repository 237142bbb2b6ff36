"""A commit whose reply is lost with the retries used up: a typed CommitOutcomeUnknown, and a re-save
of the same checkpoint finds its own commit (idempotent) instead of a conflict or a duplicate id.

Locally the reply is lost by ``FaultStore`` below the store's retry loop (the real retries run and
give up); on S3 by the moto server itself (the commit is applied, every reply to it is a 500).
"""

from __future__ import annotations

from typing import Any

import pytest

import ckpt_archive as ca
from ckpt_archive.format import layout
from ckpt_archive.storage import FaultPlan, FaultStore
from ckpt_archive.testing import S3Server


def commits(cp: ca.ArchiveCheckpointer, thread_id: str = "t") -> list[str]:
    return sorted(cp.store.fs.ls(cp.store.path(f"{layout.thread_dir(thread_id)}/_log"), detail=False))


def commit_call(url: str) -> int:
    """The 1-based index of the commit among the mutating calls of the second save of thread t."""
    probe = FaultPlan("fail", 10**9)
    cp = ca.ArchiveCheckpointer(FaultStore(ca.open_archive(url).store, probe))
    cp.save(ca.Checkpoint.new("t", {"a": 0}))
    probe.calls.clear()
    cp.save(ca.Checkpoint.new("t", {"a": 1}, step=1))
    return next(i for i, call in enumerate(probe.calls) if call.startswith("put_if_absent") and "/_log/" in call) + 1


def test_lost_commit_reply_is_typed_and_a_resave_is_idempotent(tmp_path: Any) -> None:
    k = commit_call(str(tmp_path / "probe"))
    url = str(tmp_path / "a")
    base = ca.open_archive(url)
    first = ca.Checkpoint.new("t", {"a": 0})
    base.save(first)
    plan = FaultPlan("lost-reply", k)
    cp = ca.ArchiveCheckpointer(FaultStore(base.store, plan))
    cp.list("t")
    plan.calls.clear()
    second = ca.Checkpoint.new("t", {"a": 1}, step=1)
    with pytest.raises(ca.CommitOutcomeUnknown, match="save the same checkpoint again") as caught:
        cp.save(second)
    assert plan.hit and "/_log/" in plan.calls[k - 1]
    assert cp.store.retried >= cp.store.retries  # the retries ran, and were used up
    assert isinstance(caught.value, ca.CheckpointError)
    # the commit is in fact visible to a fresh reader
    assert ca.open_archive(url).load("t") == second.with_parent(first.checkpoint_id)
    logged = commits(base)
    plan.outage = 0  # the network is back
    assert cp.save(second) == second.checkpoint_id  # the same writer: finds its own commit
    assert ca.open_archive(url).save(second) == second.checkpoint_id  # a new process too
    assert commits(base) == logged  # nothing new committed
    assert [i.checkpoint_id for i in ca.open_archive(url).list("t")] == [first.checkpoint_id, second.checkpoint_id]
    with pytest.raises(ca.DuplicateCheckpointId):  # the same id with other content is still refused
        cp.save(second.with_state({"a": "other"}))
    third = ca.Checkpoint.new("t", {"a": 2}, step=2)
    cp.save(third)  # and the writer carries on
    assert ca.open_archive(url).load("t").state == third.state  # type: ignore[union-attr]
    assert ca.open_archive(url).verify().ok


def test_after_an_unknown_outcome_the_writer_still_detects_a_moved_head(tmp_path: Any) -> None:
    """The re-read that lets a re-save find its commit keeps the writer's known head: another save
    that did not see the new head is still a conflict, not a silent append."""
    k = commit_call(str(tmp_path / "probe"))
    url = str(tmp_path / "a")
    base = ca.open_archive(url)
    base.save(ca.Checkpoint.new("t", {"a": 0}))
    plan = FaultPlan("lost-reply", k)
    cp = ca.ArchiveCheckpointer(FaultStore(base.store, plan))
    cp.list("t")
    plan.calls.clear()
    with pytest.raises(ca.CommitOutcomeUnknown):
        cp.save(ca.Checkpoint.new("t", {"a": 1}, step=1))
    plan.outage = 0
    with pytest.raises(ca.CheckpointConflict):
        cp.save(ca.Checkpoint.new("t", {"a": "other"}, step=1))


def test_s3_lost_commit_reply_with_retries_used_up(s3_server: S3Server, s3_url: str) -> None:
    opts = s3_server.storage_options()
    cp = ca.open_archive(s3_url, storage_options=opts)
    first = ca.Checkpoint.new("t", {"a": 0})
    cp.save(first)
    attempts = cp.store.retries + 1
    # the commit is applied, then its reply and every retry's reply are a 500
    s3_server.inject(500, "InternalError", count=attempts, method="*", path=layout.log_key("t", 2), after=True)
    second = ca.Checkpoint.new("t", {"a": 1}, step=1)
    with pytest.raises(ca.CommitOutcomeUnknown):
        cp.save(second)
    assert s3_server.faults_left() == 0  # exactly our retries: the client's own are off
    fresh = ca.open_archive(s3_url, storage_options=opts)
    assert fresh.load("t").state == second.state  # type: ignore[union-attr]
    s3_server.reset_counts()
    assert cp.save(second) == second.checkpoint_id
    assert s3_server.requests["PUT"] == 0  # nothing written: not a payload, not a commit
    assert [i.checkpoint_id for i in fresh.list("t")] == [first.checkpoint_id, second.checkpoint_id]
    assert fresh.verify().ok


@pytest.mark.parametrize("reread", [False, True])
def test_langgraph_put_after_a_lost_commit_reply_is_idempotent(tmp_path: Any, reread: bool) -> None:
    """``ArchiveSaver.put`` makes a fresh archive record per put: the same put again must save the
    record whose outcome was unknown, not a second record of the same LangGraph checkpoint -- also
    when the saver re-read the thread in between (its head is then the record that landed)."""
    pytest.importorskip("langgraph")
    from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

    from ckpt_archive.integrations.langgraph import ArchiveSaver

    url = str(tmp_path / "a")
    plan = FaultPlan("fail", 10**9)
    saver = ArchiveSaver(ca.ArchiveCheckpointer(FaultStore(ca.open_archive(url).store, plan)))
    first = empty_checkpoint()
    first["channel_values"] = {"a": 1}
    config = saver.put({"configurable": {"thread_id": "x", "checkpoint_ns": ""}}, first, {"step": 0}, {})
    second = create_checkpoint(first, None, 1)
    second["channel_values"] = {"a": 2}
    plan.calls.clear()
    saver.put(config, second, {"step": 1}, {})
    commit = next(i for i, call in enumerate(plan.calls) if "/_log/" in call) + 1
    config = {"configurable": {**config["configurable"], "checkpoint_id": second["id"]}}
    third = create_checkpoint(second, None, 2)
    third["channel_values"] = {"a": 3}
    plan.mode, plan.k = "lost-reply", len(plan.calls) + commit
    with pytest.raises(ca.CommitOutcomeUnknown):
        saver.put(config, third, {"step": 2}, {})
    latest = ArchiveSaver.from_url(url).get_tuple({"configurable": {"thread_id": "x", "checkpoint_ns": ""}})
    assert latest is not None and latest.checkpoint["id"] == third["id"]  # it landed
    plan.outage = 0
    if reread:
        assert len(list(saver.list({"configurable": {"thread_id": "x", "checkpoint_ns": ""}}))) == 3
    assert saver.put(config, third, {"step": 2}, {})["configurable"]["checkpoint_id"] == third["id"]
    infos = ca.open_archive(url).list(ca.open_archive(url).threads()[0])
    assert [i.step for i in infos] == [0, 1, 2]  # one record per LangGraph checkpoint, nothing new
