"""Protected checkpoints: digests recorded at creation, checked by every checkpointer, tampering caught."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive.delta import apply_checkpoint, diff_checkpoint
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import seal, unseal
from ckpt_archive.format.objects import SEGMENT_SCHEMA, SegmentReader, encode_segment

from .conftest import BACKENDS, open_backend

TOKEN = ca.binding_digest("auth-token-of-the-host")
KEY = os.urandom(32)
INT64 = st.integers(-(2**63) + 1, 2**63 - 1)  # the integers JSON states may hold


def protected(step: int = 0, **kw: Any) -> ca.Checkpoint:
    return ca.Checkpoint.new(
        "p",
        {"answer": 42, "nested": {"x": [1, 2]}},
        step=step,
        messages=[{"role": "user", "content": "hi"}],
        run_id="run-1",
        node_id="agent",
        protect=True,
        **kw,
    )


# -- the model -------------------------------------------------------------------------------------


def test_protected_checkpoint_proves_itself() -> None:
    ckpt = protected(binding_digest=TOKEN)
    assert ckpt.is_protected and ckpt.protection is not None
    assert ckpt.protection.state_sha256 == ca.content_digest(ckpt.state)
    assert ckpt.protection.binding_sha256 == TOKEN
    ckpt.validate_integrity()
    ckpt.validate_integrity(TOKEN)
    assert ckpt.integrity_status(TOKEN) == ca.IntegrityStatus.VERIFIED
    restored = ckpt.try_restore_state(TOKEN)
    assert restored == ckpt.state
    restored["nested"]["x"].append(3)  # a private copy
    assert ckpt.state["nested"]["x"] == [1, 2]


def test_altered_state_or_messages_is_caught() -> None:
    ckpt = protected()
    for bad in (
        ckpt.model_copy(update={"state": {**ckpt.state, "answer": 43}}),
        ckpt.model_copy(update={"messages": [{"role": "user", "content": "HI"}]}),
        ckpt.model_copy(update={"messages": []}),  # truncated
    ):
        assert bad.integrity_status() == ca.IntegrityStatus.TAMPERED
        with pytest.raises(ca.ProtectionMismatch) as info:
            bad.try_restore_state()
        assert isinstance(info.value, ca.IntegrityError) and ckpt.checkpoint_id in str(info.value)
        assert bad.restore_state() == bad.state  # the explicitly lenient variant


def test_binding_must_match() -> None:
    ckpt = protected(binding_digest=TOKEN)
    with pytest.raises(ca.BindingMismatch):
        ckpt.try_restore_state(ca.binding_digest("someone else's token"))
    unbound = protected()
    with pytest.raises(ca.BindingMismatch):
        unbound.validate_integrity(TOKEN)
    assert unbound.integrity_status(TOKEN) == ca.IntegrityStatus.TAMPERED


def test_legacy_checkpoint_cannot_be_proven() -> None:
    legacy = ca.Checkpoint.new("p", {"a": 1})
    assert not legacy.is_protected
    assert legacy.integrity_status() == ca.IntegrityStatus.UNPROTECTED
    with pytest.raises(ca.UnprovableCheckpoint):
        legacy.try_restore_state()
    assert legacy.restore_state() == {"a": 1}
    legacy.check_protection()  # what checkpointers run: legacy loads


def test_with_helpers_reprotect_keeping_the_binding() -> None:
    ckpt = protected(binding_digest=TOKEN)
    changed = ckpt.with_state({"answer": 0}).with_messages([{"role": "tool", "content": "x"}])
    assert changed.integrity_status(TOKEN) == ca.IntegrityStatus.VERIFIED
    assert ca.Checkpoint.new("p", {}).with_state({"a": 1}).protection is None


def test_messages_must_be_a_json_list() -> None:
    with pytest.raises(ca.InvalidState, match="messages"):
        ca.Checkpoint.new("p", {}, messages=[{"when": object()}])
    with pytest.raises(ca.InvalidState, match="list"):
        ca.Checkpoint(thread_id="p", messages={"not": "a list"})


@settings(max_examples=60, deadline=None)
@given(
    st.lists(INT64, max_size=5),
    st.lists(INT64, max_size=5),
    st.dictionaries(st.text(max_size=3), INT64, max_size=3),
    st.dictionaries(st.text(max_size=3), INT64, max_size=3),
)
def test_checkpoint_delta_round_trips(
    old_m: list[int], new_m: list[int], old_s: dict[str, int], new_s: dict[str, int]
) -> None:
    ops = diff_checkpoint(old_s, old_m, new_s, new_m)
    assert apply_checkpoint(old_s, old_m, ops) == (new_s, new_m)
    if new_m[: len(old_m)] == old_m and len(new_m) > len(old_m) and old_m:
        message_ops = [op for op in ops if op.get("target") == "messages"]
        assert message_ops == [
            {"op": "append", "path": ["messages"], "value": new_m[len(old_m) :], "target": "messages"}
        ]


def test_unknown_delta_target_is_a_broken_chain() -> None:
    with pytest.raises(ca.BrokenChain, match="target"):
        apply_checkpoint({}, [], [{"op": "set", "path": ["a"], "value": 1, "target": "elsewhere"}])


# -- every checkpointer ----------------------------------------------------------------------------

KINDS = ["memory", "delta-memory", *(f"archive-{b}" for b in BACKENDS)]


@pytest.fixture(params=KINDS)
def cp(request: pytest.FixtureRequest, archive_url: Any) -> ca.Checkpointer:
    if request.param == "memory":
        return ca.MemoryCheckpointer()
    if request.param == "delta-memory":
        return ca.DeltaCheckpointer(ca.MemoryCheckpointer(), ca.DeltaConfig(full_snapshot_interval=3))
    return open_backend(archive_url, request.param.removeprefix("archive-"), full_snapshot_interval=3)


def test_save_refuses_a_tampered_checkpoint_and_stores_nothing(cp: ca.Checkpointer) -> None:
    bad = protected().model_copy(update={"state": {"answer": 0}})
    with pytest.raises(ca.ProtectionMismatch):
        cp.save(bad)
    assert cp.list("p") == [] and cp.load("p") is None


def test_messages_grow_and_round_trip(cp: ca.Checkpointer) -> None:
    messages: list[Any] = []
    saved = []
    for step in range(7):
        messages.append({"role": "user", "content": f"turn {step} " * 20})
        ckpt = ca.Checkpoint.new("m", {"turn": step}, step=step, messages=list(messages), protect=True)
        cp.save(ckpt)
        saved.append(ckpt)
    for ckpt in saved:
        loaded = cp.load_by_id(ckpt.checkpoint_id)
        assert loaded is not None and loaded.messages == ckpt.messages
        assert loaded.try_restore_state() == ckpt.state
    # a fork that rewrites history stores the whole list, and still round-trips
    fork = ca.Checkpoint.new("m", {"turn": 9}, step=2, parent_id=saved[1].checkpoint_id, messages=[], protect=True)
    cp.save(fork)
    assert cp.load("m").messages == []  # type: ignore[union-attr]


def test_archive_stores_appended_messages_as_append_deltas(archive_url: Any) -> None:
    archive = open_backend(archive_url, "memory", full_snapshot_interval=10)
    messages: list[Any] = []
    for step in range(4):
        messages.append({"role": "user", "content": "x" * 2000 + str(step)})
        archive.save(ca.Checkpoint.new("m", {"s": step}, step=step, messages=list(messages)))
    infos = archive.list("m")
    assert [i.kind for i in infos] == ["full", "delta", "delta", "delta"]
    assert all(i.stored_bytes < 2300 for i in infos[1:])  # each delta holds one new message, not the list
    entry = unseal(run(archive.store.get(layout.log_key("m", 4))), "commit", kind="commit entry")
    ops = entry["actions"][0]["ops"]
    assert {"op": "append", "path": ["messages"], "target": "messages", "value": [messages[3]]} in ops
    assert archive.compact("m")
    segment_key = next(iter(run(archive.store.find(layout.thread_dir("m") + "/deltas"))))
    table = pq.read_table(io.BytesIO(run(archive.store.get(segment_key))))
    # the three deltas, and the first checkpoint's history rows (its list against the empty one)
    assert table.column("target").to_pylist().count("messages") == 4
    fresh = ca.open_archive(archive.url)
    assert fresh.load("m").messages == messages  # type: ignore[union-attr]


@pytest.mark.parametrize("column", ["target", "thread_id"])
def test_a_segment_without_a_column_is_refused(column: str) -> None:
    """One format version: a segment lacking a column of ``SEGMENT_SCHEMA`` is not read as state ops."""
    old_schema = pa.schema([f for f in SEGMENT_SCHEMA if f.name != column])
    rows = {
        "thread_id": ["t"],
        "checkpoint_id": ["c"],
        "base_id": [None],
        "step": [1],
        "op_index": [0],
        "op": ["set"],
        "key": ["a"],
        "path": ['["a"]'],
        "value": ["1"],
        "target": [None],
    }
    buf = io.BytesIO()
    schema = old_schema.with_metadata({b"ckpt_archive.format_version": b"1"})
    table = pa.table({k: v for k, v in rows.items() if k != column}, schema=schema)
    pq.write_table(table, buf)
    with pytest.raises(ca.TruncatedObject, match=f"no '{column}' column"):
        SegmentReader(buf.getvalue(), thread_id="t", key="k")


def test_a_segment_of_another_thread_is_refused() -> None:
    """A segment's rows name their thread: one put under another thread's folder (a forger who also
    rewrites that thread's manifest to its digest) is a typed integrity error, not that thread's history."""
    data, _ = encode_segment("theirs", [("c", 1, None, [{"op": "set", "path": ["a"], "value": 1}])])
    assert SegmentReader(data, thread_id="theirs", key="k").ops("c", 0)[0]["value"] == 1
    with pytest.raises(ca.ForeignRows, match="rows of thread 'theirs'"):
        SegmentReader(data, thread_id="mine", key="k").ops("c", 0)


# -- tampering with the stored bytes ---------------------------------------------------------------


def run(coro: Any) -> Any:
    from ckpt_archive._sync import run_sync

    return run_sync(coro)


def reseal_commit(archive: ca.ArchiveCheckpointer, thread: str, seq: int, edit: Any) -> None:
    """Rewrite commit ``seq`` with ``edit`` applied and a freshly computed digest (a consistent forgery)."""
    key = layout.log_key(thread, seq)
    doc = unseal(run(archive.store.get(key)), "commit", kind="commit entry")
    edit(doc)
    run(archive.store.put(key, codec.compress(seal(doc))))
    run(archive.store.delete([layout.head_key(thread)]))  # and drop the hint that still names the old bytes


def snapshot_key(archive: ca.ArchiveCheckpointer, thread: str) -> str:
    return next(k for k in run(archive.store.find(layout.thread_dir(thread))) if "/snapshots/" in k)


def forge_snapshot(archive: ca.ArchiveCheckpointer, thread: str) -> tuple[str, bytes]:
    key = snapshot_key(archive, thread)
    doc = codec.loads(codec.decompress(run(archive.store.get(key))))
    doc["state"]["answer"] = 41
    return key, codec.compress(codec.dumps(doc))


@pytest.mark.parametrize("backend", BACKENDS)
def test_edited_snapshot_is_caught_by_the_manifest_digest(archive_url: Any, backend: str) -> None:
    archive = open_backend(archive_url, backend)
    ckpt = protected()
    archive.save(ckpt)
    key, forged = forge_snapshot(archive, "p")
    run(archive.store.put(key, forged))
    with pytest.raises((ca.DigestMismatch, ca.TruncatedObject)) as info:  # size or sha256 differs
        ca.open_archive(archive.url, storage_options=archive.store.fs.storage_options).load("p")
    assert key in str(info.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_edited_snapshot_with_consistent_manifest_is_caught_by_protection(archive_url: Any, backend: str) -> None:
    archive = open_backend(archive_url, backend)
    ckpt = protected()
    archive.save(ckpt)
    key, forged = forge_snapshot(archive, "p")
    run(archive.store.put(key, forged))

    def fix_ref(doc: dict[str, Any]) -> None:
        doc["actions"][0]["record"]["ref"].update(sha256=codec.sha256(forged), size=len(forged))

    reseal_commit(archive, "p", 1, fix_ref)
    fresh = ca.open_archive(archive.url, storage_options=archive.store.fs.storage_options)
    with pytest.raises(ca.ProtectionMismatch) as info:
        fresh.load("p")
    assert ckpt.checkpoint_id in str(info.value)
    with pytest.raises(ca.ProtectionMismatch):
        fresh.load_by_id(ckpt.checkpoint_id)
    assert [p.kind for p in fresh.verify("p").problems] == ["ProtectionMismatch"]


def test_same_forgery_of_a_legacy_checkpoint_loads_but_cannot_be_proven(tmp_path: Path) -> None:
    archive = ca.open_archive(str(tmp_path / "a"))
    archive.save(ca.Checkpoint.new("p", {"answer": 42}))
    key, forged = forge_snapshot(archive, "p")
    (tmp_path / "a" / key).write_bytes(forged)  # straight onto the disk

    def fix_ref(doc: dict[str, Any]) -> None:
        doc["actions"][0]["record"]["ref"].update(sha256=codec.sha256(forged), size=len(forged))

    reseal_commit(archive, "p", 1, fix_ref)
    with pytest.raises(ca.DigestMismatch, match="state_sha256"):  # the archive's own per-record digest
        ca.open_archive(str(tmp_path / "a")).load("p")

    def fix_digest(doc: dict[str, Any]) -> None:  # anyone who can reseal a commit can recompute it too
        doc["actions"][0]["record"]["state_sha256"] = codec.sha256(codec.dumps({"answer": 41}))

    reseal_commit(archive, "p", 1, fix_digest)
    loaded = ca.open_archive(str(tmp_path / "a")).load("p")
    assert loaded is not None and loaded.state == {"answer": 41}
    assert loaded.integrity_status() == ca.IntegrityStatus.UNPROTECTED
    with pytest.raises(ca.UnprovableCheckpoint):
        loaded.try_restore_state()


def test_flipped_byte_on_local_disk_is_caught(tmp_path: Path) -> None:
    archive = ca.open_archive(str(tmp_path / "a"))
    archive.save(protected())
    path = tmp_path / "a" / snapshot_key(archive, "p")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(ca.IntegrityError):
        ca.open_archive(str(tmp_path / "a")).load("p")


@pytest.mark.parametrize("backend", BACKENDS)
def test_forged_inline_delta_is_caught_by_protection(archive_url: Any, backend: str) -> None:
    archive = open_backend(archive_url, backend)
    first = protected()
    archive.save(first)
    second = protected(step=1).with_messages([*first.messages, {"role": "assistant", "content": "pay 10"}])
    archive.save(second)

    def forge(doc: dict[str, Any]) -> None:
        for op in doc["actions"][0]["ops"]:
            if op.get("target") == "messages":
                op["value"] = [{"role": "assistant", "content": "pay 1000"}]

    reseal_commit(archive, "p", 2, forge)
    fresh = ca.open_archive(archive.url, storage_options=archive.store.fs.storage_options)
    assert fresh.load_by_id(first.checkpoint_id) is not None  # the untouched parent still proves itself
    with pytest.raises(ca.ProtectionMismatch, match="messages"):
        fresh.load_by_id(second.checkpoint_id)


def test_forged_parquet_segment_is_caught_by_protection(tmp_path: Path) -> None:
    archive = ca.open_archive(str(tmp_path / "a"))
    saved = [protected(step=s).with_state({"answer": s}) for s in range(3)]
    for ckpt in saved:
        archive.save(ckpt)
    assert archive.compact("p")
    seg_key = next(k for k in run(archive.store.find(layout.thread_dir("p"))) if k.endswith(".parquet"))
    path = tmp_path / "a" / seg_key
    original = pq.ParquetFile(io.BytesIO(path.read_bytes()))
    groups = [original.read_row_group(i) for i in range(original.num_row_groups)]
    values = groups[0].column("value").to_pylist()
    first_delta = groups[0].column("checkpoint_id").to_pylist().index(saved[1].checkpoint_id)
    values[first_delta] = "999"  # the first delta's "answer" op now sets 999
    index = groups[0].schema.get_field_index("value")
    groups[0] = groups[0].set_column(index, "value", pa.array(values, pa.string()))
    with pq.ParquetWriter(path, original.schema_arrow) as writer:  # same row groups, same metadata
        for group in groups:
            writer.write_table(group)
    forged = path.read_bytes()

    def fix(doc: dict[str, Any]) -> None:
        doc["actions"][0].update(sha256=codec.sha256(forged), size=len(forged))

    reseal_commit(archive, "p", 4, fix)
    for seq in range(1, 5):  # the folded manifest also names the old digest: forge it away too
        run(archive.store.delete([layout.manifest_key("p", seq)]))
    fresh = ca.open_archive(str(tmp_path / "a"))
    assert fresh.load_by_id(saved[0].checkpoint_id) is not None
    with pytest.raises(ca.ProtectionMismatch, match="state"):
        fresh.load_by_id(saved[1].checkpoint_id)


@pytest.mark.parametrize("backend", ["local", "memory"])
def test_long_message_lists_are_replayed_like_state_lists(archive_url: Any, backend: str) -> None:
    """Snapshots keep no long message list: it is replayed from the history rows, each message once."""
    archive = open_backend(archive_url, backend, full_snapshot_interval=10)
    messages: list[Any] = []
    saved = []
    for step in range(100):
        messages.append({"role": "user", "content": f"message {step} " + "y" * 300})
        ckpt = ca.Checkpoint.new("long", {"n": step}, step=step, messages=list(messages), protect=True)
        archive.save(ckpt)
        saved.append(ckpt)
    objects = run(archive.store.find(layout.thread_dir("long")))
    snapshot_bytes = sum(o["size"] for k, o in objects.items() if "/snapshots/" in k)
    raw_messages = len(codec.dumps(messages))
    assert snapshot_bytes < raw_messages / 10  # ten snapshots, yet less than a tenth of one full list
    doc = codec.loads(codec.decompress(run(archive.store.get(snapshot_key_of(archive, saved[90])))))
    assert "messages" not in doc and doc["lists"] == [["messages", "messages"]]
    fresh = ca.open_archive(archive.url, storage_options=archive.store.fs.storage_options)
    for ckpt in saved[::9]:
        loaded = fresh.load_by_id(ckpt.checkpoint_id)
        assert loaded is not None and loaded.messages == ckpt.messages
        loaded.validate_integrity()


def snapshot_key_of(archive: ca.ArchiveCheckpointer, ckpt: ca.Checkpoint) -> str:
    return layout.snapshot_key(ckpt.thread_id, ckpt.step, ckpt.checkpoint_id)


# -- one digest per content ------------------------------------------------------------------------


def stored_forms(archive: ca.ArchiveCheckpointer) -> list[bytes]:
    """Every stored object's bytes, decompressed where they are zstd."""
    forms = []
    for key in run(archive.store.find("")):
        data = run(archive.store.get(key))
        forms.append(data)
        with contextlib.suppress(ca.CheckpointError):  # log documents decode with the log dictionary (their kind's)
            forms.append(codec.decompress(data, kind=layout.kind_of(key) or "object"))
    return forms


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_a_protected_record_carries_each_digest_once(tmp_path: Path, encrypted: bool) -> None:
    """The record's digests (or MACs) prove the content; its protection keeps only the binding."""
    encryption = ca.Encryption({"k1": KEY}, "k1") if encrypted else None
    archive = ca.open_archive(str(tmp_path / "a"), encryption=encryption)
    ckpt = protected(binding_digest=TOKEN)
    archive.save(ckpt)
    entry = unseal(run(archive.store.get(layout.log_key("p", 1))), "commit", kind="commit entry")
    record = entry["actions"][0]["record"]
    assert record["fields"]["protection"] == {"binding_sha256": TOKEN}
    digests = [ca.content_digest(ckpt.state), ca.content_digest(ckpt.messages)]
    if encrypted:  # MACs only: no plain digest anywhere lets a reader confirm a guess of the content
        assert len(record["state_mac"]) == len(record["messages_mac"]) == 64
        assert not [d for d in digests for form in stored_forms(archive) if d.encode() in form]
    else:
        assert [record["state_sha256"], record["messages_sha256"]] == digests
        assert [codec.dumps(entry).count(d.encode()) for d in digests] == [1, 1]
    loaded = ca.open_archive(str(tmp_path / "a"), encryption=encryption).load("p")
    assert loaded is not None and loaded.protection == ckpt.protection
    assert loaded.integrity_status(TOKEN) == ca.IntegrityStatus.VERIFIED


def test_a_protection_with_digests_of_its_own_is_refused(tmp_path: Path) -> None:
    """A record's protection holds its binding and nothing else (one format version: no other shape)."""
    archive = ca.open_archive(str(tmp_path / "a"))
    ckpt = protected()
    archive.save(ckpt)

    def duplicate(doc: dict[str, Any]) -> None:
        record = doc["actions"][0]["record"]
        record["fields"]["protection"] = {**record["fields"]["protection"], "state_sha256": record["state_sha256"]}

    reseal_commit(archive, "p", 1, duplicate)
    with pytest.raises(ca.CorruptManifest, match="protection"):
        ca.open_archive(str(tmp_path / "a")).load("p")


def test_altered_delta_of_a_protected_checkpoint_on_an_encrypted_archive_is_caught(tmp_path: Path) -> None:
    """A forger without the key cannot recompute a MAC: a message op dropped from a well-sealed entry
    is the ``ProtectionMismatch`` of the protected checkpoint, naming the messages."""

    def reopen() -> ca.ArchiveCheckpointer:
        return ca.open_archive(str(tmp_path / "a"), encryption=ca.Encryption({"k1": KEY}, "k1"))

    archive = reopen()
    first = protected(binding_digest=TOKEN)
    archive.save(first)
    second = protected(step=1, binding_digest=TOKEN)
    second = second.with_messages([*first.messages, {"role": "assistant", "content": "pay 10"}])
    archive.save(second)

    def drop_message_ops(doc: dict[str, Any]) -> None:
        ops = doc["actions"][0]["ops"]
        assert [op.get("target") for op in ops] == ["messages"]
        doc["actions"][0]["ops"] = []

    reseal_commit(archive, "p", 2, drop_message_ops)
    fresh = reopen()
    assert fresh.load_by_id(first.checkpoint_id).integrity_status(TOKEN) == ca.IntegrityStatus.VERIFIED  # type: ignore[union-attr]
    with pytest.raises(ca.ProtectionMismatch, match="messages") as info:
        fresh.load_by_id(second.checkpoint_id)
    assert info.value.checkpoint_id == second.checkpoint_id
    assert [(p.kind, p.checkpoint_id) for p in fresh.verify("p").problems] == [
        ("ProtectionMismatch", second.checkpoint_id)
    ]
