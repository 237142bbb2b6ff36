"""Encryption at rest (AES-256-GCM): nothing secret stored in clear, ciphertexts bound to their place,
keys rotate and are never stored, plaintext refused where encryption is required."""

from __future__ import annotations

import base64
import contextlib
import io
import os
from typing import Any

import pyarrow.parquet as pq
import pytest

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive._sync import run_sync
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import seal, unseal

SECRET = "TOP-SECRET-PAYLOAD"
K1, K2 = os.urandom(32), os.urandom(32)


def enc(active: str = "k1", required: bool = True, **keys: bytes) -> ca.Encryption:
    return ca.Encryption(keys or {"k1": K1}, active, required=required)


def chat(cp: ca.ArchiveCheckpointer, thread: str, n: int, start: int = 0) -> list[ca.Checkpoint]:
    saved = []
    for step in range(start, start + n):
        state = {
            "messages": [f"{SECRET} {i}" for i in range(step + 1)],
            "profile": {"secret": f"{SECRET}-{step}"},
        }
        c = ca.Checkpoint.new(thread, state, step=step)
        cp.save(c)
        saved.append(c)
    return saved


def stored(cp: ca.ArchiveCheckpointer) -> dict[str, bytes]:
    return {k: run_sync(cp.store.get(k)) for k in run_sync(cp.store.find(""))}


def readable_forms(key: str, data: bytes) -> list[bytes]:
    """The bytes, their zstd decompression, and every Parquet column's values."""
    forms = [data]
    with contextlib.suppress(ca.CheckpointError):  # log documents decode with the log dictionary (their kind's)
        forms.append(codec.decompress(data, kind=layout.kind_of(key) or "object"))
    if key.endswith(".parquet"):
        table = pq.read_table(io.BytesIO(data))
        forms += [str(table.column(name).to_pylist()).encode() for name in table.column_names]
    return forms


@pytest.mark.parametrize("backend", ["local", "memory", "s3"])
def test_round_trip_and_no_plaintext_stored(archive_url: Any, backend: str) -> None:
    url, opts = archive_url(backend)
    cp = ca.open_archive(url, storage_options=opts, full_snapshot_interval=4, encryption=enc())
    saved = chat(cp, "t", 10)
    cp.compact("t")
    again = ca.open_archive(url, storage_options=opts, encryption=enc())
    for c in saved:
        assert again.load_by_id(c.checkpoint_id).state == c.state  # type: ignore[union-attr]
    assert again.load("t").state == saved[-1].state  # type: ignore[union-attr]
    assert again.verify().ok
    assert again.try_restore_state(saved[5].checkpoint_id) == saved[5].state
    for key, data in stored(cp).items():
        for form in readable_forms(key, data):
            assert SECRET.encode() not in form, key
            assert K1 not in form and base64.b64encode(K1) not in form, key  # keys are never stored


def test_parquet_keeps_analyst_columns_clear(archive_url: Any) -> None:
    url, opts = archive_url("memory")
    cp = ca.open_archive(url, storage_options=opts, full_snapshot_interval=4, encryption=enc())
    saved = chat(cp, "t", 4)
    cp.compact("t")
    segment = next(data for key, data in stored(cp).items() if key.endswith(".parquet"))
    rows = pq.read_table(io.BytesIO(segment)).to_pylist()
    assert {r["checkpoint_id"] for r in rows} == {c.checkpoint_id for c in saved}  # snapshot 0's history rows too
    assert {r["op"] for r in rows} <= {"set", "append", "del"} and {r["key"] for r in rows} <= {
        "messages",
        "profile",
    }
    assert all(r["value"].startswith('"enc1:') for r in rows if r["op"] != "del")


def test_records_name_their_key_and_use_a_keyed_state_digest(archive_url: Any) -> None:
    url, opts = archive_url("memory")
    cp = ca.open_archive(url, storage_options=opts, encryption=enc())
    chat(cp, "t", 2)
    entry = unseal(run_sync(cp.store.get(layout.log_key("t", 2))), "commit", kind="commit entry")
    record = entry["actions"][0]["record"]
    assert record["enc"] == {"alg": "AES-256-GCM", "key_id": "k1"}
    assert "state_sha256" not in record and len(record["state_mac"]) == 64


def test_ciphertext_moved_to_another_thread_or_checkpoint_is_rejected(archive_url: Any) -> None:
    """Even an attacker who re-seals the (unkeyed) manifest digests cannot move ciphertexts."""
    url, opts = archive_url("memory")
    cp = ca.open_archive(url, storage_options=opts, encryption=enc())
    a = chat(cp, "a", 2)
    b = chat(cp, "b", 2)
    objects = stored(cp)
    snap_a = next(k for k in objects if k.startswith(layout.thread_dir("a") + "/snapshots/"))
    # b's first commit now points at a's snapshot bytes, with digests fixed up
    key_b1 = layout.log_key("b", 1)
    entry = unseal(objects[key_b1], "commit", kind="commit entry")
    ref = entry["actions"][0]["record"]["ref"]
    run_sync(cp.store.put(ref["key"], objects[snap_a]))
    ref.update(sha256=codec.sha256(objects[snap_a]), size=len(objects[snap_a]))
    run_sync(cp.store.put(key_b1, codec.compress(seal(entry))))
    run_sync(cp.store.delete([layout.head_key("b")]))
    fresh = ca.open_archive(url, storage_options=opts, encryption=enc())
    with pytest.raises(ca.DecryptionFailed) as err:
        fresh.load_by_id(b[0].checkpoint_id)
    assert err.value.checkpoint_id == b[0].checkpoint_id and err.value.thread_id == "b"
    # an encrypted op value moved from a's delta into b's delta
    key_b2, key_a2 = layout.log_key("b", 2), layout.log_key("a", 2)
    entry_b2, entry_a2 = (
        unseal(objects[key_b2], "commit", kind="commit entry"),
        unseal(objects[key_a2], "commit", kind="commit entry"),
    )
    entry_b2["actions"][0]["ops"] = entry_a2["actions"][0]["ops"]
    run_sync(cp.store.put(key_b2, codec.compress(seal(entry_b2))))
    with pytest.raises(ca.DecryptionFailed):
        ca.open_archive(url, storage_options=opts, encryption=enc()).load_by_id(b[1].checkpoint_id)
    assert ca.open_archive(url, storage_options=opts, encryption=enc()).load("a").state == a[-1].state  # type: ignore[union-attr]
    problems = [(p.kind, p.checkpoint_id) for p in fresh.verify("b").problems]
    assert problems == [("DecryptionFailed", b[0].checkpoint_id), ("BrokenChain", b[1].checkpoint_id)]


def test_missing_or_wrong_keys(archive_url: Any) -> None:
    url, opts = archive_url("memory")
    saved = chat(ca.open_archive(url, storage_options=opts, encryption=enc()), "t", 3)
    with pytest.raises(ca.KeyUnavailable):
        ca.open_archive(url, storage_options=opts).load("t")
    with pytest.raises(ca.KeyUnavailable):
        ca.open_archive(url, storage_options=opts, encryption=enc("k2", k2=K2)).load("t")
    with pytest.raises(ca.DecryptionFailed):
        ca.open_archive(url, storage_options=opts, encryption=enc("k1", k1=K2)).load_by_id(saved[0].checkpoint_id)
    with pytest.raises(ca.KeyUnavailable):
        ca.Encryption({"k1": b"short"}, "k1")


def test_plaintext_refused_where_encryption_is_required(archive_url: Any) -> None:
    url, opts = archive_url("memory")
    saved = chat(ca.open_archive(url, storage_options=opts), "t", 3)  # written without encryption
    with pytest.raises(ca.PlaintextRefused):
        ca.open_archive(url, storage_options=opts, encryption=enc()).load("t")
    with pytest.raises(ca.PlaintextRefused):
        ca.open_archive(url, storage_options=opts, encryption=enc()).load_by_id(saved[0].checkpoint_id)
    # migration mode: read old plaintext, write new checkpoints encrypted
    lenient = ca.open_archive(url, storage_options=opts, encryption=enc(required=False))
    assert lenient.load("t").state == saved[-1].state  # type: ignore[union-attr]
    more = chat(lenient, "t", 2, start=3)
    strict = ca.open_archive(url, storage_options=opts, encryption=enc())
    with pytest.raises(ca.PlaintextRefused):
        strict.load_by_id(more[-1].checkpoint_id)  # its chain still starts at a plaintext snapshot


def test_key_rotation(archive_url: Any) -> None:
    url, opts = archive_url("memory")
    old = chat(ca.open_archive(url, storage_options=opts, full_snapshot_interval=3, encryption=enc()), "t", 4)
    both = enc("k2", k1=K1, k2=K2)
    new = chat(ca.open_archive(url, storage_options=opts, full_snapshot_interval=3, encryption=both), "t", 4, start=4)
    cp = ca.open_archive(url, storage_options=opts, encryption=both)
    for c in old + new:
        assert cp.load_by_id(c.checkpoint_id).state == c.state  # type: ignore[union-attr]
    assert cp.verify().ok
    only_new = ca.open_archive(url, storage_options=opts, encryption=enc("k2", k2=K2))
    assert only_new.load_by_id(new[2].checkpoint_id).state == new[2].state  # type: ignore[union-attr]  # step 6: k2 snapshot
    with pytest.raises(ca.KeyUnavailable):
        only_new.load_by_id(old[0].checkpoint_id)


def test_keys_from_a_callable_and_the_environment(archive_url: Any) -> None:
    url, opts = archive_url("memory")
    asked: list[str] = []

    def provider(key_id: str) -> bytes | None:
        asked.append(key_id)
        return K1 if key_id == "kms-1" else None

    saved = chat(ca.open_archive(url, storage_options=opts, encryption=ca.Encryption(provider, "kms-1")), "t", 2)
    assert set(asked) == {"kms-1"}
    env = {"CKPT_ARCHIVE_KEY_kms-1": base64.b64encode(K1).decode(), "CKPT_ARCHIVE_ACTIVE_KEY": "kms-1"}
    from_env = ca.open_archive(url, storage_options=opts, encryption=ca.Encryption.from_env(env))
    assert from_env.load("t").state == saved[-1].state  # type: ignore[union-attr]
    with pytest.raises(ca.KeyUnavailable):
        ca.Encryption.from_env({})


def test_long_lists_are_replayed_from_sealed_rows_never_in_clear(archive_url: Any) -> None:
    """An encrypted snapshot replays its long lists from the history rows like a plain one: the rows
    are sealed per op, so no item is ever in clear, and a fresh reader with the key rebuilds them."""
    url, opts = archive_url("memory")
    cp = ca.open_archive(url, storage_options=opts, full_snapshot_interval=2, encryption=enc())
    saved = chat(cp, "t", 1, start=60)  # a 61-message history: a replayed list
    assert any("replay" in r["ref"] for r in cp.engine.log.manifests["t"].records.values())
    for key, data in stored(cp).items():
        for form in readable_forms(key, data):
            assert SECRET.encode() not in form, key
    assert ca.open_archive(url, storage_options=opts, encryption=enc()).load("t").state == saved[0].state  # type: ignore[union-attr]


def test_prune_and_update_state_stay_encrypted(archive_url: Any) -> None:
    url, opts = archive_url("memory")
    cp = ca.open_archive(url, storage_options=opts, full_snapshot_interval=4, encryption=enc())
    saved = chat(cp, "t", 9)
    cp.prune("t", ca.RetentionPolicy.keep_last(3))  # re-bases the oldest kept delta onto a new snapshot
    version = cp.list("t")[-1].version
    cp.update_state(saved[-1].checkpoint_id, {"edited": SECRET}, expected_version=version)
    again = ca.open_archive(url, storage_options=opts, encryption=enc())
    assert [c.state for c in again.history("t")][:2] == [saved[6].state, saved[7].state]
    assert again.load("t").state == {"edited": SECRET}  # type: ignore[union-attr]
    assert again.verify().ok
    for key, data in stored(cp).items():
        for form in readable_forms(key, data):
            assert SECRET.encode() not in form, key
    with pytest.raises(ca.EncryptionError):
        again.fork(saved[-2].checkpoint_id, "copy")


def talk(cp: ca.ArchiveCheckpointer, thread: str, n: int, per_step: int = 12) -> list[ca.Checkpoint]:
    """Checkpoints whose *messages* (not the state) hold the secret; long enough to be replayed."""
    saved, parent = [], None
    for step in range(n):
        messages = [{"role": "user", "content": f"{SECRET}-msg-{i}"} for i in range((step + 1) * per_step)]
        c = ca.Checkpoint.new(thread, {"n": step}, step=step, parent_id=parent, messages=messages, protect=False)
        cp.save(c)
        saved.append(c)
        parent = c.checkpoint_id
    return saved


@pytest.mark.parametrize("backend", ["local", "memory"])
def test_messages_are_never_stored_in_clear(archive_url: Any, backend: str) -> None:
    url, opts = archive_url(backend)
    cp = ca.open_archive(url, storage_options=opts, full_snapshot_interval=3, encryption=enc())
    saved = talk(cp, "t", 7)  # snapshots replaying > LIST_ITEMS messages, inline message ops and a rewrite
    edited = cp.update_state(saved[4].checkpoint_id, {"n": 40}, 1)  # re-bases its delta child (snapshots)
    logs = [
        unseal(d, "commit", kind="commit entry") for k, d in stored(cp).items() if layout.kind_of(k) == "commit entry"
    ]
    inline = [op for doc in logs for a in doc["actions"] for op in a.get("ops", [])]
    assert any(op.get("target") == "messages" for op in inline)  # message ops stored inline, before compaction
    cp.compact("t")  # message ops move to the Parquet segment
    again = ca.open_archive(url, storage_options=opts, encryption=enc())
    for c in saved:
        assert again.load_by_id(c.checkpoint_id).messages == c.messages  # type: ignore[union-attr]
    edited_back = again.load_by_id(saved[4].checkpoint_id)
    assert edited == 2 and edited_back is not None and edited_back.state == {"n": 40}
    assert edited_back.messages == saved[4].messages  # an edit keeps the (encrypted) messages
    assert again.verify().ok
    assert again.restore_state(saved[5].checkpoint_id).messages == saved[5].messages
    objects = stored(cp)
    segment = next(data for key, data in objects.items() if key.endswith(".parquet"))
    rows = pq.read_table(io.BytesIO(segment)).to_pylist()
    message_rows = [r for r in rows if r["target"] == "messages"]
    assert message_rows and all(r["value"].startswith('"enc1:') for r in message_rows)
    for key, data in objects.items():
        for form in readable_forms(key, data):
            assert SECRET.encode() not in form, key
    records = [
        r
        for key, data in objects.items()
        if layout.kind_of(key) == "commit entry"
        for a in unseal(data, "commit", kind="commit entry")["actions"]
        if "record" in a
        for r in [a["record"]]
    ]
    assert records and all("messages_mac" in r and "messages_sha256" not in r for r in records)


def test_moved_message_op_value_fails_to_decrypt(archive_url: Any) -> None:
    """A message op's ciphertext is bound to its target: relabelled as a state op, it does not open."""
    url, opts = archive_url("memory")
    cp = ca.open_archive(url, storage_options=opts, full_snapshot_interval=10, encryption=enc())
    first = ca.Checkpoint.new("t", {"n": 0}, messages=[SECRET])
    cp.save(first)
    cp.save(ca.Checkpoint.new("t", {"n": 0}, step=1, parent_id=first.checkpoint_id, messages=[SECRET, SECRET]))
    key = layout.log_key("t", 2)
    doc = unseal(run_sync(cp.store.get(key)), "commit", kind="commit entry")
    ops = doc["actions"][0]["ops"]
    assert [op.get("target") for op in ops] == ["messages"]
    ops[0].pop("target")
    run_sync(cp.store.put(key, codec.compress(seal(doc))))
    run_sync(cp.store.delete([layout.head_key("t")]))
    with pytest.raises(ca.DecryptionFailed):
        ca.open_archive(url, storage_options=opts, encryption=enc()).load("t")


def test_migration_edit_of_a_plaintext_checkpoint_is_encrypted_and_still_proven(archive_url: Any) -> None:
    url, opts = archive_url("memory")
    plain = ca.open_archive(url, storage_options=opts)
    first = ca.Checkpoint.new("t", {"n": 0}, messages=[SECRET])
    plain.save(first)
    lenient = ca.open_archive(url, storage_options=opts, encryption=enc(required=False))
    assert lenient.update_state(first.checkpoint_id, {"n": 1}, 1) == 2
    again = ca.open_archive(url, storage_options=opts, encryption=enc(required=False))
    loaded = again.load_by_id(first.checkpoint_id)
    assert loaded is not None and loaded.state == {"n": 1} and loaded.messages == [SECRET]
    assert again.verify().ok
    record = again.list("t")[0]
    assert record.version == 2
    snapshots = [d for k, d in stored(again).items() if "/snapshots/" in k]
    assert sum(SECRET.encode() in f for d in snapshots for f in readable_forms("", d)) == 1  # the old one only
