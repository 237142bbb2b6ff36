"""ArchiveSaver beyond the conformance suite: the sync API, request economy, storage growth, serde."""

from __future__ import annotations

import asyncio
import copy
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_metadata
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import ckpt_archive as ca
from ckpt_archive.integrations.langgraph import ArchiveSaver, UnknownPruneStrategy, strict_serde
from ckpt_archive.integrations.langgraph.testing import build_graph, run_turns
from ckpt_archive.storage import RoundTrips
from ckpt_archive.testing import S3Server


class SyncFacade(BaseCheckpointSaver[Any]):
    """Exposes ONLY the sync API of a saver as the async API the conformance suite calls.

    Each call runs the sync method in a worker thread, so the whole suite exercises
    put/put_writes/get_tuple/list/delete_thread/delete_for_runs/copy_thread/prune (sync).
    """

    def __init__(self, inner: ArchiveSaver) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner

    async def aput(self, *args: Any) -> Any:
        return await asyncio.to_thread(self.inner.put, *args)

    async def aput_writes(self, *args: Any, **kw: Any) -> None:
        await asyncio.to_thread(self.inner.put_writes, *args, **kw)

    async def aget_tuple(self, config: Any) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.inner.get_tuple, config)

    async def alist(self, config: Any, **kw: Any) -> AsyncIterator[CheckpointTuple]:
        for tup in await asyncio.to_thread(lambda: list(self.inner.list(config, **kw))):
            yield tup

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.inner.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.inner.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.inner.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(lambda: self.inner.prune(thread_ids, strategy=strategy))


@pytest.mark.parametrize("backend", ["local", "memory"])
async def test_sync_api_passes_the_conformance_suite(backend: str, archive_url: Any) -> None:
    @checkpointer_test(name=f"ArchiveSaver-sync[{backend}]")
    async def factory() -> AsyncIterator[SyncFacade]:
        url, opts = archive_url(backend)
        yield SyncFacade(ArchiveSaver.from_url(url, opts))

    report = await validate(factory)
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert {n for n, r in report.results.items() if r.detected} == {c.value for c in ALL_CAPABILITIES}
    assert report.conformance_level() == "FULL", failures


def _config(thread: str, ns: str = "", checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _grow(saver: ArchiveSaver, thread: str, n: int, parent: dict[str, Any] | None = None) -> dict[str, Any]:
    """n checkpoints of a chat whose messages list grows by one each step."""
    messages: list[str] = []
    cfg = parent or _config(thread)
    for i in range(n):
        messages.append(f"secret {i} " + "x" * 200)
        cp = generate_checkpoint(channel_values={"messages": list(messages), "turn": i, "constant": "c" * 500})
        cp["channel_versions"] = {"messages": i + 1, "turn": i + 1, "constant": 1}
        new = {"messages": i + 1, "turn": i + 1, **({"constant": 1} if i == 0 else {})}
        cfg = saver.put(cfg, cp, generate_metadata(step=i), new)
    return cfg


def test_sync_roundtrip_list_filters_and_writes() -> None:
    saver = ArchiveSaver.from_url("memory://lg-sync-roundtrip")
    last = _grow(saver, "t", 5)
    saver.put_writes(last, [("ch", {"a": 1}), ("__error__", "boom")], "task-1", "p")
    saver.put_writes(last, [("ch", "ignored duplicate"), ("__error__", "boom 2")], "task-1", "p")
    tup = saver.get_tuple(_config("t"))
    assert tup is not None and tup.config == last
    assert tup.checkpoint["channel_values"]["messages"][-1].startswith("secret 4")
    assert tup.pending_writes == [("task-1", "__error__", "boom 2"), ("task-1", "ch", {"a": 1})]
    ids = [t.checkpoint["id"] for t in saver.list(_config("t"))]
    assert ids == sorted(ids, reverse=True) and len(ids) == 5
    assert [t.metadata["step"] for t in saver.list(_config("t"), filter={"step": 3})] == [3]
    before = [t.metadata["step"] for t in saver.list(_config("t"), before=_config("t", checkpoint_id=ids[1]), limit=2)]
    assert before == [2, 1]
    assert [t.config["configurable"]["thread_id"] for t in saver.list(None, limit=10)] == ["t"] * 5
    saver.copy_thread("t", "u")
    assert [t.checkpoint["id"] for t in saver.list(_config("u"))] == ids
    saver.copy_thread("t", "u")  # into a thread that has checkpoints: appended, later copies win
    assert [t.checkpoint["id"] for t in saver.list(_config("u"))] == ids and len(saver.archive.list("u")) == 10
    assert saver.get_tuple(_config("u", checkpoint_id=ids[0])) is not None
    saver.prune(["u"], strategy="keep_latest")
    kept = list(saver.list(_config("u")))
    assert [t.checkpoint["id"] for t in kept] == ids[:1] and len(kept[0].pending_writes or []) == 2
    assert kept[0].checkpoint["channel_values"] == tup.checkpoint["channel_values"]
    saver.delete_thread("t")
    assert saver.get_tuple(_config("t")) is None and saver.get_tuple(_config("u")) is not None
    with pytest.raises(UnknownPruneStrategy):
        saver.prune(["u"], strategy="keep_some")
    assert isinstance(UnknownPruneStrategy("x"), ca.CheckpointError)


def test_unchanged_channels_and_appended_lists_are_stored_once() -> None:
    saver = ArchiveSaver.from_url("memory://lg-append", full_snapshot_interval=1000)
    _grow(saver, "t", 30)
    archive = saver.archive
    infos = archive.list("t")
    assert [i.kind for i in infos] == ["full"] + ["delta"] * 29
    payload = archive.load_by_id(infos[-1].checkpoint_id)
    assert payload is not None
    sizes = [i.stored_bytes for i in infos[1:]]
    # every delta holds one new message (~300 bytes of base64) + small version/id changes, not the list
    assert max(sizes) < 2 * min(sizes) and max(sizes) < 1500, sizes


def test_get_tuple_and_list_cost_constant_requests(s3_server: S3Server) -> None:
    """Latest get_tuple / list(limit=2) on a cold saver: the same request count at 6 and 21 checkpoints."""
    costs = {}
    for n in (6, 21, 8):  # 6, 21: same position relative to the last snapshot (interval 5); 8: the hint trails
        url = s3_server.make_bucket(f"lg-economy-{n}") + "/a"
        opts = s3_server.storage_options()
        writer = ArchiveSaver.from_url(url, opts, full_snapshot_interval=5)
        _grow(writer, "t", n)
        writer.archive.flush_hints()  # what the writer's idle timer (hint_idle) does: none lands in the counts
        for what in ("get", "list"):
            cold = ArchiveSaver.from_url(url, opts, full_snapshot_interval=5)
            s3_server.reset_counts()
            if what == "get":
                assert cold.get_tuple(_config("t")) is not None
            else:
                assert len(list(cold.list(_config("t"), limit=2))) == 2
            costs[(n, what)] = s3_server.total()
        warm = ArchiveSaver.from_url(url, opts, full_snapshot_interval=5)
        warm.get_tuple(_config("t"))
        s3_server.reset_counts()
        warm.get_tuple(_config("t"))
        costs[(n, "warm")] = s3_server.total()
    # the hint's head, no manifest read (the commit the hint names is read with the probes past it, to
    # check it is the one that landed); the writer put the hint once idle, so it does not trail
    assert costs[(6, "get")] == costs[(8, "get")] == costs[(21, "get")] <= 7, costs
    assert costs[(6, "list")] == costs[(21, "list")] <= 16, costs
    assert costs[(6, "warm")] == costs[(8, "warm")] == costs[(21, "warm")] <= 5, costs


def test_list_limit_one_is_the_latest_tuple_read_like_get_tuple(s3_server: S3Server) -> None:
    """``list(config, limit=1)`` (LangGraph's "latest" through ``get_state_history``) returns what a full
    list starts with, at no more than the cost of a cold ``get_tuple``: no manifest read. Filters, ``before`` and
    configs without a namespace still select from the listing."""
    url = s3_server.make_bucket("lg-limit-one") + "/a"
    opts = s3_server.storage_options()
    # no idle hint landing during the counts below (from_url's hint_idle puts one a second after a put)
    saver = ArchiveSaver.from_url(url, opts, full_snapshot_interval=5, hint_idle=None)
    assert list(saver.list(_config("t"), limit=1)) == []
    ids: list[str] = []
    for n, step in ((6, "plain"), (1, "trailing hint"), (2, "fork"), (0, "writes")):
        if step == "fork":  # a new branch from an older checkpoint: its head is still the greatest id
            last = _grow(saver, "t", n, parent=_config("t", checkpoint_id=ids[2]))
        elif step == "writes":
            saver.put_writes(last, [("ch", {"a": 1}), ("__interrupt__", "stop")], "task-1", "p")
        else:
            last = _grow(saver, "t", n, parent=None if not ids else last)
        ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(_config("t"))]
        full = list(ArchiveSaver.from_url(url, opts).list(_config("t")))
        costs = {}
        for what in ("get", "list1"):
            cold = ArchiveSaver.from_url(url, opts)
            s3_server.reset_counts()
            got = [cold.get_tuple(_config("t"))] if what == "get" else list(cold.list(_config("t"), limit=1))
            costs[what] = (s3_server.total(), s3_server.requests["LIST"])
            assert got == full[:1] and got[0] is not None and got[0].config == last, step
        # no more than get_tuple (both may race a speculative writes read against its cancellation)
        assert costs["list1"][0] <= costs["get"][0] and costs["list1"][1] <= costs["get"][1], (step, costs)
    assert full[0].pending_writes == [("task-1", "__interrupt__", "stop"), ("task-1", "ch", {"a": 1})]
    # not the latest-only case: each of these must still select, not answer with the head
    named = list(saver.list(_config("t", checkpoint_id=ids[3]), limit=1))
    assert [t.config["configurable"]["checkpoint_id"] for t in named] == [ids[3]]
    assert [t.metadata["step"] for t in saver.list(_config("t"), filter={"step": 0}, limit=1)] == [0]
    before = list(saver.list(_config("t"), before=_config("t", checkpoint_id=ids[0]), limit=1))
    assert [t.config["configurable"]["checkpoint_id"] for t in before] == [ids[1]]
    no_ns = list(saver.list({"configurable": {"thread_id": "t"}}, limit=1))
    assert [t.config["configurable"]["checkpoint_id"] for t in no_ns] == [ids[0]]

    async def async_latest() -> list[CheckpointTuple]:
        return [t async for t in ArchiveSaver.from_url(url, opts).alist(_config("t"), limit=1)]

    assert asyncio.run(async_latest()) == full[:1]


def test_cold_get_tuple_is_four_round_trips_and_list_reads_each_object_once(s3_server: S3Server) -> None:
    """get_tuple (latest, or by id) lists the writes while the manifest is read, then reads them: four
    round trips for the latest, LISTs included (counted at the store, on every backend; the fsspec-level
    counter this test had missed s3fs's ``_lsdir`` and said three). A full list builds the states in one
    walk (no index lookups, no per-checkpoint LIST) and equals get_tuple one by one."""
    url = s3_server.make_bucket("lg-round-trips") + "/a"
    opts = s3_server.storage_options()
    saver = ArchiveSaver.from_url(url, opts, full_snapshot_interval=5, hint_idle=None)  # none during the counts
    last = _grow(saver, "t", 28)
    saver.put_writes(last, [("ch", 1), ("__interrupt__", "stop")], "task-1", "p")
    first_id = next(iter(reversed(list(saver.list(_config("t")))))).config["configurable"]["checkpoint_id"]
    saver.put_writes(_config("t", checkpoint_id=first_id), [("ch", "early")], "task-0", "p")
    for config in (_config("t"), _config("t", checkpoint_id=first_id)):
        trips = RoundTrips(ca.open_store(url, opts), latency=0.1)  # as on S3: every round trip costs the same
        cold = ArchiveSaver(ca.ArchiveCheckpointer(trips))
        tup = cold.get_tuple(config)
        assert tup is not None and tup.pending_writes, config
        assert trips.depth <= 4, (config, trips.depth, "\n".join(map(str, trips.calls)))
    cold = ArchiveSaver.from_url(url, opts)
    s3_server.reset_counts()
    listed = list(cold.list(_config("t")))
    requests = s3_server.total()
    lists = s3_server.requests["LIST"]
    assert len(listed) == 28 and requests < 28, requests  # ~28 states from a handful of objects
    assert lists <= 2, s3_server.requests
    one_by_one = ArchiveSaver.from_url(url, opts)
    for tup in listed:
        alone = one_by_one.get_tuple(tup.config)
        assert alone is not None
        assert (alone.checkpoint, alone.metadata, alone.pending_writes, alone.parent_config) == (
            tup.checkpoint,
            tup.metadata,
            tup.pending_writes,
            tup.parent_config,
        )


def test_get_tuple_is_right_when_its_head_guess_is_stale() -> None:
    """The early writes read follows the head the hint (or a cached manifest) names; another writer's
    newer checkpoint, or a hint left behind by a crash, must still give the newest checkpoint and its writes."""
    url = "memory://lg-stale-guess"
    reader = ArchiveSaver.from_url(url)
    writer = ArchiveSaver.from_url(url)
    old = _grow(writer, "t", 3)
    writer.put_writes(old, [("ch", "old")], "task-old")
    assert reader.get_tuple(_config("t")) is not None  # the reader caches the manifest: head = old
    hint_key = "thread_id=t/_head.json.zst"
    stale_hint = asyncio.run(writer.store.get(hint_key))
    new = _grow(writer, "t", 1, parent=old)
    writer.put_writes(new, [("ch", "new")], "task-new")
    for saver in (reader, ArchiveSaver.from_url(url)):
        tup = saver.get_tuple(_config("t"))
        assert tup is not None and tup.config == new and tup.pending_writes == [("task-new", "ch", "new")]
    asyncio.run(writer.store.put(hint_key, stale_hint))  # as if the writer died before its hint
    tup = ArchiveSaver.from_url(url).get_tuple(_config("t"))
    assert tup is not None and tup.config == new and tup.pending_writes == [("task-new", "ch", "new")]


def _stored_bytes(saver: ArchiveSaver) -> int:
    found = asyncio.run(saver.store.find(""))
    return sum(int(v["size"]) for v in found.values())


def _memory_blob_bytes(saver: InMemorySaver) -> int:
    total = sum(len(b[1]) for b in saver.blobs.values())
    total += sum(
        len(c[0][1]) + len(c[1][1]) for ns in saver.storage.values() for cps in ns.values() for c in cps.values()
    )
    return total + sum(len(w[2][1]) for ws in saver.writes.values() for w in ws.values())


def test_bytes_stored_grow_linearly_with_turns() -> None:
    """What the archive keeps (after gc: a save's segment merge leaves the merged-away segments to it)
    grows linearly with the turns; the full-copy peer's grows quadratically."""
    from datetime import timedelta

    sizes, peers = {}, {}
    saver, memory = ArchiveSaver.from_url("memory://lg-linear"), InMemorySaver()
    ours, theirs = build_graph(saver), build_graph(memory)
    for first, last in ((0, 25), (25, 50)):  # measured after 25 turns, then after 50
        run_turns(ours, "t", first, last)
        run_turns(theirs, "t", first, last)
        saver.archive.gc(grace=timedelta(0), unsafe_no_writers=True)
        sizes[last], peers[last] = _stored_bytes(saver), _memory_blob_bytes(memory)
    assert sizes[50] / sizes[25] < 2.5, sizes
    assert peers[50] / peers[25] > 3, peers  # the full-copy peer grows quadratically
    assert sizes[50] < peers[50], (sizes, peers)


class _AesGcm:
    """A CipherProtocol on `cryptography` (the crypto extra)."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.aead = AESGCM(AESGCM.generate_key(bit_length=128))

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(12)
        return "aesgcm", nonce + self.aead.encrypt(nonce, plaintext, None)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "aesgcm"
        return self.aead.decrypt(ciphertext[:12], ciphertext[12:], None)


def test_encrypted_serializer_hides_values_and_still_appends() -> None:
    pytest.importorskip("cryptography")
    serde = EncryptedSerializer(_AesGcm(), strict_serde())
    saver = ArchiveSaver.from_url("memory://lg-encrypted", serde=serde, full_snapshot_interval=1000)
    _grow(saver, "t", 10)
    found = asyncio.run(saver.store.find(""))
    raw = b"".join(asyncio.run(saver.store.get_many(list(found))))  # type: ignore[arg-type]
    assert b"secret" not in raw and b"xxxxxxxx" not in raw and b"eHh4eHh4" not in raw  # no plaintext
    tup = saver.get_tuple(_config("t"))
    assert tup is not None and tup.checkpoint["channel_values"]["messages"][-1].startswith("secret 9")
    sizes = [i.stored_bytes for i in saver.archive.list("t")[1:]]
    assert max(sizes) < 2 * min(sizes), sizes  # re-encrypted old elements are not stored again


def test_damaged_writes_object_is_a_typed_error() -> None:
    saver = ArchiveSaver.from_url("memory://lg-damaged")
    cfg = _grow(saver, "t", 1)
    saver.put_writes(cfg, [("ch", 1)], "task")
    found = asyncio.run(saver.store.find("_langgraph"))
    key = next(iter(found))
    asyncio.run(saver.store.put(key, b'{"format_version": 1, "writes": []}'))
    with pytest.raises(ca.CorruptManifest):
        saver.get_tuple(_config("t"))


def test_non_json_metadata_round_trips_and_filters() -> None:
    saver = ArchiveSaver.from_url("memory://lg-meta")
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    meta = generate_metadata(step=0, when=when, score=1.5)
    saver.put(_config("t"), generate_checkpoint(), meta, {})
    tup = saver.get_tuple(_config("t"))
    assert tup is not None and tup.metadata["when"] == when and tup.metadata["score"] == 1.5
    info = saver.archive.list("t")[0]
    assert info.metadata["score"] == 1.5 and "when" not in info.metadata  # JSON part is in the manifest
    assert len(list(saver.list(_config("t"), filter={"when": when, "score": 1.5}))) == 1
    assert len(list(saver.list(_config("t"), filter={"when": datetime(2026, 1, 1, tzinfo=UTC)}))) == 0


def test_from_url_and_reexport() -> None:
    assert ca.ArchiveSaver is ArchiveSaver
    saver = ca.ArchiveSaver.from_url("memory://lg-reexport", full_snapshot_interval=3)
    assert saver.archive.full_snapshot_interval == 3
    assert saver.get_next_version(None, None) == 1 and saver.get_next_version(1, None) == 2
    assert saver.get_next_version("00000000000000000000000000000007.5", None).startswith("0" * 31 + "8.")
    clone = copy.copy(saver)  # what BaseCheckpointSaver.with_allowlist does before swapping the serde
    clone.serde = JsonPlusSerializer(pickle_fallback=False)
    assert clone.maintenance.saver is clone and clone.codec.serde is clone.serde is not saver.serde


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["append", "fork", "delete_run", "copy_in"]), st.integers(0, 10**6)),
        min_size=1,
        max_size=12,
    )
)
def test_fresh_get_tuple_returns_the_greatest_id_whatever_the_put_order(ops: list[tuple[str, int]]) -> None:
    """A fresh saver may answer from the head hint only when the head holds the thread's greatest
    LangGraph id (LangGraph's "latest"); ids out of order, forks, removed runs and appended copies
    must never fool it."""
    url = f"memory://lg-top-{uuid.uuid4().hex}"
    ours = ArchiveSaver.from_url(url)
    live: dict[str, str | None] = {}  # LangGraph id -> run of the checkpoints of thread "t"
    last: dict[str, Any] | None = None
    for n, (op, salt) in enumerate(ops):
        if op in ("append", "fork"):
            ids = sorted(live)
            parent = last if op == "append" or not ids else _config("t", checkpoint_id=ids[salt % len(ids)])
            cp = generate_checkpoint(checkpoint_id=f"{salt:08d}-{n:03d}", channel_values={"n": n})
            cp["channel_versions"] = {"n": n + 1}
            run = f"run-{salt % 3}"
            meta = {"source": "loop", "step": n, "parents": {}, "run_id": run}
            last = ours.put(parent or _config("t"), cp, meta, {"n": n + 1})  # type: ignore[arg-type]
            live[cp["id"]] = run
        elif op == "delete_run":
            ours.delete_for_runs([f"run-{salt % 3}"])
            live = {k: v for k, v in live.items() if v != f"run-{salt % 3}"}
            last = None if not live else _config("t", checkpoint_id=max(live))
        else:  # copy another thread, with its own id, into "t": appended after t's checkpoints
            cp = generate_checkpoint(checkpoint_id=f"{salt:08d}-c{n:02d}", channel_values={"n": -n})
            cp["channel_versions"] = {"n": 1}
            ours.put(_config("src"), cp, {"source": "loop", "step": 0, "parents": {}}, {"n": 1})  # type: ignore[arg-type]
            ours.copy_thread("src", "t")
            ours.delete_thread("src")
            live[cp["id"]] = None
        got = ArchiveSaver.from_url(url).get_tuple(_config("t"))
        assert (got and got.config["configurable"]["checkpoint_id"]) == (max(live) if live else None), (op, n)


def test_a_message_mutated_in_place_between_puts_is_stored_as_it_is_now() -> None:
    """Unchanged elements reuse their stored encoding (their bytes are compared, not their identity): an
    element changed in place since the last put must be stored with its new content."""
    from langchain_core.messages import AIMessage, HumanMessage

    saver = ArchiveSaver.from_url("memory://lg-mutated-in-place")
    messages: list[Any] = [HumanMessage(content="hello", id="m0"), AIMessage(content="draft", id="m1")]
    cfg = _config("t")
    for i in range(3):
        cp = generate_checkpoint(channel_values={"messages": list(messages)})
        cp["channel_versions"] = {"messages": i + 1}
        cfg = saver.put(cfg, cp, generate_metadata(step=i), {"messages": i + 1})
        messages[1].content = f"final {i}"  # the same object, changed after it was saved
        messages.append(HumanMessage(content=f"more {i}", id=f"h{i}"))
    for reader in (saver, ArchiveSaver.from_url("memory://lg-mutated-in-place")):
        tup = reader.get_tuple(_config("t"))
        assert tup is not None
        stored = tup.checkpoint["channel_values"]["messages"]
        assert [m.content for m in stored] == ["hello", "final 1", "more 0", "more 1"]
    history = [t.checkpoint["channel_values"]["messages"][1].content for t in saver.list(_config("t"))]
    assert history == ["final 1", "final 0", "draft"]  # newest first: each put kept what it saw


def test_a_cold_get_tuple_is_two_round_trips_after_every_put() -> None:
    """With ``hint_every=1`` (the setting, not a mutation of the archive) the head hint goes with every
    put: a cold ``get_tuple`` lists the pending writes of the head the hint names beside the probes of
    the log, so a hint trailing by one put would cost it a fourth round trip and a second LIST
    (docs/design/005-head-hint.md; ``from_url``'s default gets there once the writer is idle:
    ``tests/test_langgraph_hot_path.py``)."""
    url = "memory://lg-hint-every-put"
    saver = ArchiveSaver.from_url(url, full_snapshot_interval=10, hint_every=1, hint_idle=None)
    last = None
    for n in range(1, 9):  # puts at every seq, odd and even, between two snapshots
        last = _grow(saver, "t", 1, parent=last)
        saver.put_writes(last, [("ch", {"n": n})], f"task-{n}", "p")
        trips = RoundTrips(ca.open_store(url), latency=0.01)
        got = ArchiveSaver(ca.ArchiveCheckpointer(trips)).get_tuple(_config("t"))
        assert got is not None and got.config == last and [w[2] for w in got.pending_writes or []] == [{"n": n}]
        assert trips.depth == 3 and trips.requests["list_dir"] == 1, (n, trips.calls)  # hint; probes, writes; task


def test_delta_channel_history_reads_the_manifest_once() -> None:
    """``get_delta_channel_history`` walks the parent chain in batches; the manifest it listed the thread
    from serves every batch, so the log is read as often for a walk of 20 ancestors as of 70 (each
    batch read the manifest again, one probe of the log per batch)."""
    log_reads = {}
    for n in (20, 70):
        url = f"memory://lg-history-one-manifest-{n}"
        saver = ArchiveSaver.from_url(url, full_snapshot_interval=10)
        cfg = _config("t")
        for i in range(n):  # "d" is versioned but never stored with a value: the walk reaches the root
            cp = generate_checkpoint(channel_values={"turn": i})
            cp["channel_versions"] = {"turn": i + 1, "d": i + 1}
            cfg = saver.put(cfg, cp, generate_metadata(step=i), {"turn": i + 1, "d": i + 1})
            saver.put_writes(cfg, [("d", f"w{i}")], f"task-{i}", "p")
        trips = RoundTrips(ca.open_store(url))
        history = ArchiveSaver(ca.ArchiveCheckpointer(trips)).get_delta_channel_history(config=cfg, channels=["d"])
        assert [w[2] for w in history["d"]["writes"]] == [f"w{i}" for i in range(n - 1)]  # the target's own: not
        log_reads[n] = sum(1 for name, key, _ in trips.calls if name == "get" and "/_log/" in key)
    assert log_reads[20] == log_reads[70], log_reads
