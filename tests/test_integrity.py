"""Integrity: every damaged object gives its own typed error naming thread, checkpoint and object;
``verify`` reports every problem; strict and lenient restores."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive._sync import run_sync
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import seal, unseal


@pytest.fixture(params=["local", "memory"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def build(archive_url: Any, backend: str, n: int = 7, thread: str = "t") -> tuple[ca.ArchiveCheckpointer, list[Any]]:
    url, opts = archive_url(backend)
    cp = ca.open_archive(url, storage_options=opts, full_snapshot_interval=4)
    saved = []
    for step in range(n):
        ckpt = ca.Checkpoint.new(thread, {"m": [f"msg {i}" for i in range(step + 1)], "n": step}, step=step)
        cp.save(ckpt)
        saved.append(ckpt)
    return ca.open_archive(url, storage_options=opts, full_snapshot_interval=4), saved


def keys(cp: ca.ArchiveCheckpointer, part: str) -> list[str]:
    return sorted(k for k in run_sync(cp.store.find("")) if part in k)


def get(cp: ca.ArchiveCheckpointer, key: str) -> bytes:
    return run_sync(cp.store.get(key))


def put(cp: ca.ArchiveCheckpointer, key: str, data: bytes) -> None:
    run_sync(cp.store.put(key, data))


def fresh(cp: ca.ArchiveCheckpointer) -> ca.ArchiveCheckpointer:
    return ca.ArchiveCheckpointer(cp.store, full_snapshot_interval=4)


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def names(report: ca.VerifyReport) -> set[str]:
    return {p.kind for p in report.problems}


def test_clean_archive_verifies(archive_url: Any, backend: str) -> None:
    cp, saved = build(archive_url, backend)
    report = cp.verify()
    assert report.ok, str(report)
    assert (report.threads, report.checkpoints) == (1, 7)
    assert report.objects == len(keys(cp, "snapshots/")) + len(keys(cp, "deltas/"))
    assert report.orphans == []
    for ckpt in saved:
        cp.validate_integrity(ckpt.checkpoint_id)
        assert cp.try_restore_state(ckpt.checkpoint_id) == ckpt.state
        restored = cp.restore_state(ckpt.checkpoint_id)
        assert restored.proven and restored.state == ckpt.state and restored.thread_id == "t"


def test_flipped_snapshot_byte(archive_url: Any, backend: str) -> None:
    cp, saved = build(archive_url, backend)
    snap = keys(cp, "snapshots/")[1]  # step 4's snapshot: steps 4..6 depend on it
    put(cp, snap, flip(get(cp, snap), 20))
    victim = saved[4].checkpoint_id
    with pytest.raises(ca.DigestMismatch) as err:
        fresh(cp).load_by_id(victim)
    assert (err.value.thread_id, err.value.checkpoint_id, err.value.key) == ("t", victim, snap)
    assert victim in str(err.value) and snap in str(err.value)
    with pytest.raises(ca.DigestMismatch):
        cp.validate_integrity(victim)
    with pytest.raises(ca.IntegrityError):
        cp.try_restore_state(saved[6].checkpoint_id)
    assert cp.try_restore_state(saved[3].checkpoint_id) == saved[3].state  # other chains unaffected
    report = cp.verify()
    assert [(p.kind, p.checkpoint_id) for p in report.problems] == [
        ("DigestMismatch", victim),
        ("BrokenChain", saved[5].checkpoint_id),
        ("BrokenChain", saved[6].checkpoint_id),
    ]


def test_truncated_segment(archive_url: Any, backend: str) -> None:
    cp, saved = build(archive_url, backend)
    seg = keys(cp, "deltas/")[0]  # deltas 1..3, and the history rows of snapshots 0 and 4
    put(cp, seg, get(cp, seg)[:-30])
    with pytest.raises(ca.TruncatedObject) as err:
        fresh(cp).load_by_id(saved[2].checkpoint_id)
    assert err.value.key == seg and err.value.thread_id == "t"
    report = cp.verify()
    # the damaged segment once, as what it is (found by the first record reading it: snapshot 0's rows),
    # then every checkpoint that needs it: deltas 1..3 and the rows of snapshot 4
    assert [p.kind for p in report.problems] == ["TruncatedObject", *["BrokenChain"] * 4]
    assert fresh(cp).load("t").state == saved[-1].state  # type: ignore[union-attr]


def test_missing_snapshot(archive_url: Any, backend: str) -> None:
    cp, saved = build(archive_url, backend)
    snap = keys(cp, "snapshots/")[0]
    run_sync(cp.store.delete([snap]))
    with pytest.raises(ca.MissingObject) as err:
        fresh(cp).load_by_id(saved[1].checkpoint_id)
    assert (err.value.key, err.value.checkpoint_id) == (snap, saved[0].checkpoint_id)
    with pytest.raises(ca.MissingObject):
        cp.restore_state(saved[0].checkpoint_id)  # lenient never invents a state
    assert names(cp.verify()) == {"MissingObject", "BrokenChain"}


def test_lenient_restore_notes_what_is_unproven(archive_url: Any, backend: str) -> None:
    """Snapshot rewritten with the same state, other bytes: strict refuses, lenient restores and says so."""
    cp, saved = build(archive_url, backend, n=2)
    snap = keys(cp, "snapshots/")[0]
    doc = codec.loads(codec.decompress(get(cp, snap)))
    put(cp, snap, codec.compress(codec.dumps(doc) + b" "))
    cid = saved[0].checkpoint_id
    with pytest.raises(ca.IntegrityError):
        cp.try_restore_state(cid)
    restored = cp.restore_state(cid)
    assert restored.state == saved[0].state and not restored.proven
    assert any("TruncatedObject" in note or "DigestMismatch" in note for note in restored.unproven)


def test_corrupt_commit_entry(archive_url: Any, backend: str) -> None:
    cp, _ = build(archive_url, backend, n=3)
    entry = layout.log_key("t", 2)
    put(cp, entry, flip(get(cp, entry), 30))
    run_sync(cp.store.delete([layout.head_key("t")]))
    with pytest.raises(ca.CorruptManifest) as err:
        fresh(cp).load("t")
    assert err.value.thread_id == "t" and err.value.key == entry
    report = cp.verify()
    assert any(p.kind == "CorruptManifest" and p.key == entry for p in report.problems)


def test_commit_entry_from_another_thread_is_refused(archive_url: Any, backend: str) -> None:
    cp, _ = build(archive_url, backend, n=2)
    other, _ = build(lambda _b: (cp.url, {}) if backend != "s3" else archive_url(backend), backend, n=2, thread="u")
    put(cp, layout.log_key("t", 2), get(other, layout.log_key("u", 2)))
    run_sync(cp.store.delete([layout.head_key("t")]))
    with pytest.raises(ca.CorruptManifest, match="belongs to thread"):
        fresh(cp).list("t")


def test_resealed_commit_with_altered_delta_is_caught_by_state_digest(archive_url: Any, backend: str) -> None:
    cp, saved = build(archive_url, backend, n=3)
    key = layout.log_key("t", 3)
    doc = unseal(get(cp, key), "commit", kind="commit entry")
    doc["actions"][0]["ops"] = [{"op": "set", "path": ["n"], "value": 99}]
    put(cp, key, codec.compress(seal(doc)))
    run_sync(cp.store.delete([layout.head_key("t")]))
    with pytest.raises(ca.DigestMismatch, match="state_sha256") as err:
        fresh(cp).load("t")
    assert err.value.checkpoint_id == saved[2].checkpoint_id
    assert [p.kind for p in cp.verify().problems] == ["DigestMismatch"]


@pytest.mark.parametrize("dropped", [("state_sha256",), ("messages_sha256",), ("state_sha256", "messages_sha256")])
def test_a_record_without_its_content_digests_is_refused(
    archive_url: Any, backend: str, dropped: tuple[str, ...]
) -> None:
    """Every record proves its content: a forged, re-sealed commit whose record drops a digest (so its
    altered delta would go unchecked) is CorruptManifest, not a state nobody can prove."""
    cp, _ = build(archive_url, backend, n=3)
    key = layout.log_key("t", 3)
    doc = unseal(get(cp, key), "commit", kind="commit entry")
    doc["actions"][0]["ops"] = [{"op": "set", "path": ["n"], "value": 99}]
    for name in dropped:
        del doc["actions"][0]["record"][name]
    put(cp, key, codec.compress(seal(doc)))
    run_sync(cp.store.delete([layout.head_key("t")]))
    with pytest.raises(ca.CorruptManifest, match=dropped[0]):
        fresh(cp).load("t")
    assert "CorruptManifest" in names(cp.verify())


def test_broken_chain(archive_url: Any, backend: str) -> None:
    """A delta whose parent is not in the manifest (forged but well-sealed commit)."""
    cp, saved = build(archive_url, backend, n=2)
    rec = dict(unseal(get(cp, layout.log_key("t", 2)), "commit", kind="commit entry")["actions"][0]["record"])
    rec.update(id="ghost-child", parent="ghost-parent")
    entry = {"type": "commit", "thread_id": "t", "seq": 3, "committed_at": "2026-01-01T00:00:00+00:00"}
    put(
        cp,
        layout.log_key("t", 3),
        codec.compress(seal({**entry, "actions": [{"action": "add", "record": rec, "ops": []}]})),
    )
    with pytest.raises(ca.BrokenChain) as err:
        fresh(cp).load("t")
    assert err.value.checkpoint_id == "ghost-child" and err.value.thread_id == "t"
    assert "BrokenChain" in names(cp.verify())
    assert fresh(cp).load_by_id(saved[1].checkpoint_id).state == saved[1].state  # type: ignore[union-attr]


def test_corrupt_folded_manifest_falls_back_when_provably_safe(archive_url: Any, backend: str) -> None:
    cp, saved = build(archive_url, backend, n=10)  # compactions at steps 4 and 8: folded with steps 5 and 9
    folded = keys(cp, ".manifest.json.zst")
    assert len(folded) == 2
    put(cp, folded[-1], flip(get(cp, folded[-1]), 12))
    again = fresh(cp)
    assert again.load("t").state == saved[-1].state  # type: ignore[union-attr]  # all commits still there
    assert [i.checkpoint_id for i in again.list("t")] == [c.checkpoint_id for c in saved]
    report = cp.verify()
    assert [(p.kind, p.key) for p in report.problems] == [("CorruptManifest", folded[-1])]
    # without the commits it summarises, falling back would be a guess: refused
    assert again.try_restore_state(saved[6].checkpoint_id) == saved[6].state
    run_sync(cp.store.delete([layout.log_key("t", 7)]))  # between the two folded manifests
    with pytest.raises(ca.CorruptManifest):
        fresh(cp).list("t")


def test_a_foreign_file_in_the_log_folder_is_not_read_as_a_log_name(archive_url: Any, backend: str) -> None:
    """A name in ``_log/`` that only looks like a fold (no 20-digit seq) is not the archive's: the
    listing, verify and gc pass it by, and gc leaves it (a guard: names are parsed in one place,
    ``layout.log_name``)."""
    cp, saved = build(archive_url, backend, n=9)
    folded = keys(cp, ".manifest.json.zst")
    put(cp, folded[-1], flip(get(cp, folded[-1]), 12))
    put(cp, f"{layout.thread_dir('t')}/_log/notes.manifest.json.zst", b"a user's file")
    assert [i.checkpoint_id for i in fresh(cp).list("t")] == [c.checkpoint_id for c in saved]  # reads the fold
    assert [p.key for p in cp.verify().problems] == [folded[-1]]
    put(cp, folded[-1], flip(get(cp, folded[-1]), 12))  # flipped back: the fold is sound again
    foreign = f"{layout.thread_dir('t')}/_log/notes.manifest.json.zst"
    assert fresh(cp).gc(grace=timedelta(0), unsafe_no_writers=True).errors == []
    assert get(cp, foreign) == b"a user's file"  # not the archive's: gc leaves it


def test_corrupt_hint_is_only_a_hint(archive_url: Any, backend: str) -> None:
    cp, saved = build(archive_url, backend, n=3)
    put(cp, layout.head_key("t"), b"{not json")
    assert fresh(cp).load("t").state == saved[-1].state  # type: ignore[union-attr]
    assert names(cp.verify()) == {"CorruptManifest"}


def test_verify_on_object_stores(archive_url: Any) -> None:
    for backend in ("s3", "gcs", "azure"):
        cp, _ = build(archive_url, backend, n=5)
        assert cp.verify().ok
        snap = keys(cp, "snapshots/")[0]
        put(cp, snap, get(cp, snap)[:-1])
        assert cp.verify().problems[0].kind == "TruncatedObject"


def test_replayed_snapshots_are_verified(archive_url: Any, backend: str) -> None:
    """A snapshot's long lists come from its lineage's history rows: a damaged segment holding them
    is reported by verify and refused by validate_integrity of a snapshot that replays through it."""
    url, opts = archive_url(backend)
    cp = ca.open_archive(url, storage_options=opts, full_snapshot_interval=4)
    saved: list[ca.Checkpoint] = []
    for step in range(9):
        parent = saved[-1].checkpoint_id if saved else None
        c = ca.Checkpoint.new(
            "p", {"messages": [f"message {i}" for i in range(40 + step)]}, step=step, parent_id=parent
        )
        cp.save(c)
        saved.append(c)
    cp.compact("p")
    records = cp.engine.log.manifests["p"].records
    assert records[saved[8].checkpoint_id]["ref"]["replay"] == 8  # through every ancestor, to the root
    report = cp.verify()
    assert report.ok and report.orphans == [], str(report)
    segments = keys(cp, "/deltas/")
    assert segments
    for key in segments:
        put(cp, key, flip(get(cp, key), 5))
    report = cp.verify()
    assert report.problems and {p.kind for p in report.problems} <= {"DigestMismatch", "TruncatedObject", "BrokenChain"}
    with pytest.raises(ca.IntegrityError):
        cp.validate_integrity(saved[8].checkpoint_id)


def test_tampered_messages_are_caught_by_the_messages_digest(archive_url: Any, backend: str) -> None:
    url, opts = archive_url(backend)
    cp = ca.open_archive(url, storage_options=opts, full_snapshot_interval=4)
    first = ca.Checkpoint.new("t", {"n": 0}, messages=[{"role": "user", "content": "hi"}])
    cp.save(first)
    second = ca.Checkpoint.new(
        "t", {"n": 0}, step=1, parent_id=first.checkpoint_id, messages=[*first.messages, "how are you?"]
    )
    cp.save(second)
    records = [
        a["record"]
        for s in (1, 2)
        for a in unseal(get(cp, layout.log_key("t", s)), "commit", kind="commit entry")["actions"]
    ]
    assert all(
        r["messages_sha256"] == codec.sha256(codec.dumps(c.messages))
        for r, c in zip(records, [first, second], strict=True)
    )
    assert fresh(cp).verify().ok
    # a consistent forgery of the stored messages: the delta's message op is altered and the commit resealed
    # (the state and every object digest stay right; only the messages digest can tell)
    key = layout.log_key("t", 2)
    doc = unseal(get(cp, key), "commit", kind="commit entry")
    ops = doc["actions"][0]["ops"]
    assert [op.get("target") for op in ops] == ["messages"]
    ops[0]["value"] = ["I transfer all my money"]
    put(cp, key, codec.compress(seal(doc)))
    run_sync(cp.store.delete([layout.head_key("t")]))
    report = fresh(cp).verify()
    assert [(p.kind, p.checkpoint_id) for p in report.problems] == [("DigestMismatch", second.checkpoint_id)]
    assert "messages_sha256" in report.problems[0].message
    with pytest.raises(ca.DigestMismatch, match="messages_sha256"):
        fresh(cp).load("t")
    with pytest.raises(ca.DigestMismatch, match="messages_sha256"):
        fresh(cp).try_restore_state(second.checkpoint_id)
    assert fresh(cp).load_by_id(first.checkpoint_id).messages == first.messages  # type: ignore[union-attr]
