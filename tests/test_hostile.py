"""Hostile input: ids, states, metadata and stored bytes an attacker (or a bug) could produce.

Each gives a typed error (a ``CheckpointError``) or a correct result: never another
exception, never a wrong or empty state, never a file outside the archive root.
"""

from __future__ import annotations

import contextlib
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive._sync import run_sync
from ckpt_archive.format import layout
from ckpt_archive.format.manifest import Manifest, seal, unseal
from ckpt_archive.format.objects import SegmentReader, decode_snapshot_content, encode_segment, encode_snapshot
from ckpt_archive.model import uuid7
from tests.test_retention import age, chat

HOSTILE_IDS = [
    "a/b",
    "/abs",
    "..",
    "../..",
    "a/../../b",
    ".",
    "a\x00b",
    "\x00",
    "\x01\x1f\x7f",
    "line\nbreak\r",
    "tab\there",
    "x" * 10_240,
    "é/../" * 2000,
    "back\\slash",
    "%2e%2e%2f",
    "@" + "0" * 64,
    "_ids",
    "thread_id=x",
    " ",
    "ünïcødé 🧵",
]


def files_under(path: Path) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs}


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
def test_hostile_ids_round_trip_inside_the_root(tmp_path: Path, hostile: str) -> None:
    root = tmp_path / "outer" / "archive"
    cp = ca.open_archive(str(root), full_snapshot_interval=2)
    saved = []
    for step in range(3):
        c = ca.Checkpoint(thread_id=hostile, checkpoint_id=f"{hostile}#{step}", state={"s": step}, step=step)
        cp.save(c)
        saved.append(c)
    again = ca.open_archive(str(root))
    assert again.load(hostile).state == {"s": 2}  # type: ignore[union-attr]
    assert [again.load_by_id(c.checkpoint_id).state for c in saved] == [{"s": 0}, {"s": 1}, {"s": 2}]  # type: ignore[union-attr]
    assert again.threads() == [hostile]
    assert again.verify().ok
    assert files_under(tmp_path) == {os.path.join("outer", "archive", f) for f in files_under(root)}
    again.delete(hostile)
    assert again.load(hostile) is None


@pytest.mark.parametrize("bad", ["", "\ud800", "a\udfffb", 7, None, b"bytes", "x" * (64 * 1024 + 1)])
def test_unstorable_ids_are_refused(bad: Any) -> None:
    with pytest.raises(ca.InvalidIdentifier):
        ca.Checkpoint(thread_id=bad, state={})
    with pytest.raises(ca.InvalidIdentifier):
        ca.Checkpoint(thread_id="t", checkpoint_id=bad, state={})


@given(thread=st.text(min_size=1, max_size=60), cid=st.text(min_size=1, max_size=60))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_id_typed_error_or_round_trip(tmp_path: Path, thread: str, cid: str) -> None:
    root = tmp_path / "fuzz-ids"
    cp = ca.open_archive(str(root))
    try:
        ckpt = ca.Checkpoint(thread_id=thread, checkpoint_id=cid, state={"v": cid})
        cp.save(ckpt)
    except ca.CheckpointError:
        return
    assert cp.load_by_id(cid).state == {"v": cid}  # type: ignore[union-attr]
    assert cp.load(thread).checkpoint_id == cid  # type: ignore[union-attr]
    assert all(p.startswith("fuzz-ids") for p in files_under(tmp_path))
    cp.delete(thread)


def nested(depth: int) -> dict[str, Any]:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    return value  # type: ignore[no-any-return]


BAD_STATES = [
    {"x": float("nan")},
    {"x": float("inf")},
    {"x": -float("inf")},
    {"x": 2**64},
    {"x": -(2**70)},
    nested(codec.MAX_DEPTH + 5),
    {"x": "placeholder: deep lists, set below"},
    {1: "non-string key"},
    {"x": {2: "nested non-string key"}},
    {"x": b"bytes"},
    {"x": {1, 2}},
    {"x": (1, 2)},
    {"x": datetime.now(UTC)},
    {"x": "lone \ud800 surrogate"},
    {"lone \udfff key": 1},
    {"x": object()},
]


def _deep_lists(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


BAD_STATES[6] = {"x": _deep_lists(codec.MAX_DEPTH + 1)}


@pytest.mark.parametrize("bad", BAD_STATES, ids=range(len(BAD_STATES)))
def test_unstorable_states_are_refused_even_past_the_model(tmp_path: Path, bad: dict[Any, Any]) -> None:
    with pytest.raises(ca.InvalidState):
        ca.Checkpoint.new("t", bad)
    cp = ca.open_archive(str(tmp_path / "a"))
    raw = ca.Checkpoint.model_construct(
        thread_id="t",
        checkpoint_id=uuid7(),
        parent_id=None,
        step=0,
        state=bad,
        pending_nodes=[],
        metadata={},
        created_at=datetime.now(UTC),
        cleared_interrupt=None,
        attempts={},
        child_ledger={},
    )
    with pytest.raises(ca.InvalidState):
        cp.save(raw)
    assert cp.load("t") is None


@pytest.mark.parametrize("bad", BAD_STATES, ids=range(len(BAD_STATES)))
def test_a_checkpoint_checked_at_save_is_refused_by_save(tmp_path: Path, bad: dict[Any, Any]) -> None:
    """``Checkpoint._checked_at_save`` (what ArchiveSaver builds) skips the construction check of state
    and messages (but for the state's top-level keys, which the field's type needs); the archive's save
    must then refuse them, typed, and store nothing."""
    cp = ca.open_archive(str(tmp_path / "a"))
    for fields in ({"state": bad}, {"state": {}, "messages": [bad]}):
        with pytest.raises(ca.InvalidState):  # by save; a non-string top-level key, when built
            cp.save(ca.Checkpoint._checked_at_save(thread_id="t", checkpoint_id=uuid7(), **fields))
    assert cp.load("t") is None and cp.threads() == []
    with pytest.raises(ca.InvalidIdentifier):  # every other field is validated as usual
        ca.Checkpoint._checked_at_save(thread_id="", state={})
    with pytest.raises(ca.InvalidState):
        ca.Checkpoint._checked_at_save(thread_id="t", state={}, metadata={"x": bad})


def test_edge_states_that_are_json_round_trip(tmp_path: Path) -> None:
    cp = ca.open_archive(str(tmp_path / "a"), full_snapshot_interval=3)
    states = [
        {"deep": nested(codec.MAX_DEPTH - 2)},
        {"big": 2**63 - 1, "small": -(2**63) + 1, "f": 1e308, "tiny": 5e-324, "neg0": -0.0},
        {"\x00": "\x00", "": "", "ünï": "🧵", "ctrl\x1f": "\x7f"},
        {"types": [True, 1, 1.0, "1", None, [], {}]},
        {"ckpt_archive.looks_reserved": "state keys are the user's own"},
    ]
    saved = []
    for step, s in enumerate(states):
        c = ca.Checkpoint.new("e", s, step=step)
        cp.save(c)
        saved.append(c)
    again = ca.open_archive(str(tmp_path / "a"))
    for c in saved:
        loaded = again.load_by_id(c.checkpoint_id)
        assert loaded is not None and codec.dumps(loaded.state) == codec.dumps(c.state)
    assert again.verify().ok


@pytest.mark.parametrize("key", ["ckpt_archive.pin", "ckpt_archive.", "ckpt_archive.version"])
def test_reserved_metadata_names_are_refused(key: str) -> None:
    with pytest.raises(ca.ReservedMetadataKey):
        ca.Checkpoint.new("t", {}, metadata={key: 1})
    with pytest.raises(ca.ReservedMetadataKey):
        ca.Checkpoint.new("t", {}).with_metadata(key, 1)
    assert ca.Checkpoint.new("t", {}).with_metadata("ckpt_archive_not_quite", 1).metadata


def test_store_refuses_keys_that_leave_the_root(tmp_path: Path) -> None:
    cp = ca.open_archive(str(tmp_path / "a"))
    for key in ["../escape", "a/../../escape", "/abs", "a//b", "./x", "a\x00b", "a\\..\\b"]:
        with pytest.raises(ca.InvalidIdentifier):
            run_sync(cp.store.put(key, b"x"))
    assert files_under(tmp_path) == set()


# -- fuzzed stored bytes ----------------------------------------------------------------
class Fixture(tuple):  # type: ignore[type-arg]
    def __repr__(self) -> str:  # keeps hypothesis' failure reports readable
        return "<archive fixture>"


@pytest.fixture(scope="module")
def archive() -> tuple[ca.ArchiveCheckpointer, list[ca.Checkpoint], dict[str, bytes]]:
    cp = ca.open_archive(f"memory://hostile-fuzz-{uuid7()}", full_snapshot_interval=3)
    saved = []
    for step in range(8):
        c = ca.Checkpoint.new("t", {"m": [f"message {i}" for i in range(step + 1)], "n": step}, step=step)
        cp.save(c)
        saved.append(c)
    objects = {k: run_sync(cp.store.get(k)) for k in run_sync(cp.store.find(""))}
    return Fixture((cp, saved, objects))  # type: ignore[return-value]


def mutate(data: bytes, how: str, at: int, blob: bytes) -> bytes:
    at = at % max(len(data), 1)
    if how == "flip":
        return data[:at] + bytes([data[at] ^ (1 + at % 255)]) + data[at + 1 :]
    if how == "truncate":
        return data[:at]
    if how == "insert":
        return data[:at] + blob + data[at:]
    if how == "replace":
        return blob
    return data + blob


def check_reads(cp: ca.ArchiveCheckpointer, saved: list[ca.Checkpoint]) -> None:
    """Every read gives the right answer or a typed error; verify reports and never raises."""
    for c in [saved[-1], saved[0], saved[4]]:
        try:
            loaded = cp.load_by_id(c.checkpoint_id)
        except ca.CheckpointError:
            continue
        assert loaded is not None and loaded.state == c.state
    try:
        latest = cp.load("t")
        assert latest is not None and latest.state == saved[-1].state
        assert [i.checkpoint_id for i in cp.list("t")] == [c.checkpoint_id for c in saved]
    except ca.CheckpointError:
        pass
    assert isinstance(cp.verify(), ca.VerifyReport)  # verify reports problems, never raises them


@given(
    which=st.integers(min_value=0),
    how=st.sampled_from(["flip", "truncate", "insert", "replace", "append"]),
    at=st.integers(min_value=0),
    blob=st.binary(min_size=1, max_size=64),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fuzzed_stored_objects(archive: Any, which: int, how: str, at: int, blob: bytes) -> None:
    cp, saved, objects = archive
    key = sorted(objects)[which % len(objects)]
    damaged = mutate(objects[key], how, at, blob)
    run_sync(cp.store.put(key, damaged))
    try:
        check_reads(ca.ArchiveCheckpointer(cp.store, full_snapshot_interval=3), saved)
        # every damage is detected, bytes appended after a zstd frame included (readers refuse them),
        # but a changed zstd frame that decodes to the very same bytes (a match re-pointed at equal bytes
        # elsewhere in the window or in the log dictionary) loses nothing and is no damage
        if (
            damaged != objects[key]
            and key != layout.ARCHIVE_MARKER
            and not _same_frame_content(key, damaged, objects[key])
        ):
            assert not ca.ArchiveCheckpointer(cp.store).verify().ok, key
    finally:
        run_sync(cp.store.put(key, objects[key]))


def _same_frame_content(key: str, damaged: bytes, original: bytes) -> bool:
    if original[:4] != codec.ZSTD_MAGIC:
        return False
    kind = layout.kind_of(key) or "object"
    try:
        return codec.decompress(damaged, kind=kind) == codec.decompress(original, kind=kind)
    except ca.CheckpointError:
        return False


# field names the readers look up, so forged documents often have the right keys with wrong values
_FIELDS = st.sampled_from(["type", "action", "op", "path", "key", "id", "kind", "ref", "record", "ops", "seq"])


@given(
    doc=st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_FIELDS | st.text(max_size=8), inner, max_size=4),
        max_leaves=20,
    )
)
@example(doc={"type": []})  # an unhashable ref type once raised TypeError from a set lookup
@example(doc=[{"action": []}])
@example(doc=[{"action": {"a": 1}}])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_forged_but_sealed_documents(archive: Any, doc: Any) -> None:
    """Well-sealed JSON of the wrong shape in a commit entry, folded manifest or hint."""
    cp, saved, objects = archive
    shaped = {"type": "commit", "thread_id": "t", "seq": 9, "actions": doc}
    targets = {
        layout.log_key("t", 9): codec.compress(seal(shaped)),
        layout.log_key("t", 2): codec.compress(seal(doc if isinstance(doc, dict) else {"x": doc})),
        layout.head_key("t"): codec.compress(
            seal({"type": "head", "thread_id": "t", "seq": 8, "manifest_seq": None, "chain": doc})
        ),
    }
    folded = next(k for k in objects if k.endswith(".manifest.json.zst"))
    inner = unseal(objects[folded], "folded", kind="folded manifest")
    inner["records"] = [{**inner["records"][0], "ref": doc}]
    targets[folded] = codec.compress(seal(inner))
    for key, data in targets.items():
        run_sync(cp.store.put(key, data))
        try:
            check_reads(ca.ArchiveCheckpointer(cp.store, full_snapshot_interval=3), saved)
        finally:
            if key in objects:
                run_sync(cp.store.put(key, objects[key]))
            else:
                run_sync(cp.store.delete([key]))


@given(data=st.binary(max_size=2048))
@settings(max_examples=200, deadline=None)
def test_decoders_on_random_bytes(data: bytes) -> None:
    for decode in (
        lambda: SegmentReader(data, thread_id="t", key="k").ops("c", 0),
        lambda: decode_snapshot_content(data, thread_id="t", checkpoint_id="c", key="k"),
        lambda: unseal(data, "doc"),
        lambda: unseal(data, "doc", kind="commit entry"),
        lambda: decode_snapshot_content(codec.compress(data), thread_id="t", checkpoint_id="c", key="k"),
        lambda: Manifest("t").apply_entry(unseal(data, "commit", thread_id="t")),
        lambda: Manifest.from_folded(codec.compress(data), "manifest", thread_id="t"),
    ):
        with contextlib.suppress(ca.CheckpointError):
            decode()


@pytest.mark.parametrize(
    "key",
    ["../../outside.json.zst", "thread_id=t/snapshots/../../../x", "thread_id=other/snapshots/x.json.zst", "/etc/x"],
)
def test_manifest_cannot_point_outside_its_thread(tmp_path: Path, key: str) -> None:
    (tmp_path / "outside.json.zst").write_bytes(b"secret")
    cp = ca.open_archive(str(tmp_path / "root" / "a"))
    cp.save(ca.Checkpoint.new("t", {"a": 1}))
    entry = unseal(run_sync(cp.store.get(layout.log_key("t", 1))), "commit", kind="commit entry")
    entry["actions"][0]["record"]["ref"]["key"] = key
    run_sync(cp.store.put(layout.log_key("t", 1), codec.compress(seal(entry))))
    run_sync(cp.store.delete([layout.head_key("t")]))
    with pytest.raises(ca.CorruptManifest, match=r"outside|bad object key"):
        ca.open_archive(str(tmp_path / "root" / "a")).load("t")


_SEGMENT, _ = encode_segment(
    "t",
    [
        (
            f"c{i}",
            i,
            f"c{i - 1}" if i else None,
            [{"op": "set", "path": ["n"], "value": i}, {"op": "append", "path": ["log"], "value": "x" * i}],
        )
        for i in range(6)
    ],
)
_SNAPSHOT = encode_snapshot("t", "c", {"messages": ["a", "b"], "n": 1}, [{"role": "user", "content": "hi"}])


@given(
    which=st.sampled_from(["segment", "snapshot"]),
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=8),
    cut=st.none() | st.integers(min_value=0),
)
@settings(max_examples=300, deadline=None, derandomize=True)
def test_decoders_on_damaged_real_objects(which: str, flips: list[tuple[int, int]], cut: int | None) -> None:
    """What the atheris harness did, as a property (it needed a wheel no extra installs, and never ran):
    a real segment or snapshot with bytes overwritten and maybe truncated decodes, or fails with a
    ``CheckpointError``; nothing else escapes a decoder (random bytes, above, rarely get past the
    first magic number). Derandomised: pyarrow 26 aborts the process on about 1 in 7,000 objects
    damaged in a data page (a level histogram exception it cannot raise; a footer's such damage is
    refused before pyarrow, ``objects._footer_shape``), so a random draw could end the run. A segment a
    record names is checked against its sha256 before it is parsed; one the head hint names (without a
    digest) is not, so a damaged one of those can still reach that abort: open."""
    data = bytearray(_SEGMENT if which == "segment" else _SNAPSHOT)
    for at, value in flips:
        data[at % len(data)] = value
    damaged = bytes(data[: cut % (len(data) + 1)] if cut is not None else data)
    assert SegmentReader(_SEGMENT, thread_id="t", key="k").ops("c5", 0)  # undamaged, both decode
    assert decode_snapshot_content(_SNAPSHOT, thread_id="t", checkpoint_id="c", key="k")[0]["n"] == 1
    with contextlib.suppress(ca.CheckpointError):
        if which == "segment":
            reader = SegmentReader(damaged, thread_id="t", key="k")
            for i in range(6):
                reader.ops(f"c{i}", 0)
        else:
            decode_snapshot_content(damaged, thread_id="t", checkpoint_id="c", key="k")


# -- forged tombstones: gc deletes only what a tombstone may name ------------------------------------
def _forge_tombstone(cp: ca.ArchiveCheckpointer, thread: str, key: str) -> None:
    """What a hostile writer can append: a well-sealed commit tombstoning ``key`` 90 minutes ago (the
    objects are aged 2 h, so gc's default grace, 1 h, would delete it)."""
    m = run_sync(ca.ArchiveCheckpointer(cp.store).engine.log.manifest(thread))
    at = datetime.fromtimestamp(time.time() - 90 * 60, UTC).isoformat()
    entry = {"type": "commit", "thread_id": thread, "seq": m.seq + 1, "committed_at": at}
    entry["actions"] = [{"action": "tombstone", "at": at, "objects": {key: 1}}]
    run_sync(cp.store.put(layout.log_key(thread, m.seq + 1), codec.compress(seal(entry))))


def _two_threads(root: Path) -> tuple[ca.ArchiveCheckpointer, list[ca.Checkpoint], list[ca.Checkpoint]]:
    cp = ca.open_archive(str(root), full_snapshot_interval=3)
    mine, other = chat(cp, "t", 6), chat(cp, "u", 4)
    age(root, 2 * 3600)
    return cp, mine, other


_OUT_OF_REACH = {  # what each names, and why it must stay
    "commit 1": lambda: layout.log_key("t", 1),  # a reader with no hint tells the thread exists by it
    "a commit entry": lambda: layout.log_key("t", 3),
    "the head hint": lambda: layout.head_key("t"),
    "another thread's snapshot": lambda: next(iter(_snapshots("u"))),
    "another thread's commit 1": lambda: layout.log_key("u", 1),
    "a foreign file at the root": lambda: "_ids/notes.json.bak",
    "a file where an old id index kept another thread's id": lambda: _OTHER_IDS["u"],
}
_ROOTS: dict[str, Path] = {}
_OTHER_IDS: dict[str, str] = {}


def _snapshots(thread: str) -> list[str]:
    folder = _ROOTS["root"] / layout.thread_dir(thread) / "snapshots"
    return sorted(f"{layout.thread_dir(thread)}/snapshots/{name}" for name in os.listdir(folder))


@pytest.mark.parametrize("what", sorted(_OUT_OF_REACH))
def test_a_forged_tombstone_reaches_no_log_hint_or_other_thread(tmp_path: Path, what: str) -> None:
    """A tombstone may name only payload objects of its own thread: any other key (there is no id index:
    a stray ``_ids/`` folder is a foreign one) is a CorruptManifest before anything acts on it, so gc
    (default grace) deletes nothing of the thread."""
    root = _ROOTS["root"] = tmp_path / "a"
    cp, _, other = _two_threads(root)
    _OTHER_IDS["u"] = f"_ids/{quote(other[0].checkpoint_id, safe='-_.~')}.json"
    (root / "_ids").mkdir()
    (root / "_ids" / "notes.json.bak").write_bytes(b"the user's")
    (root / _OTHER_IDS["u"]).write_bytes(b"the user's too")
    target = _OUT_OF_REACH[what]()
    _forge_tombstone(cp, "t", target)
    report = ca.ArchiveCheckpointer(cp.store).gc()
    assert (root / target).exists(), f"gc deleted {what}"
    assert any("'t' skipped" in e and "tombstone" in e for e in report.errors), report.errors
    with pytest.raises(ca.CorruptManifest, match="tombstone"):
        ca.ArchiveCheckpointer(cp.store).load("t")
    reader = ca.ArchiveCheckpointer(cp.store)
    assert [c.state for c in reader.history("u")] == [c.state for c in other]
    assert reader.verify("u").ok and not reader.verify("t").ok


def test_a_forged_fold_tombstone_reaches_no_log(tmp_path: Path) -> None:
    """The tombstones a folded manifest carries obey the same rule: a fold naming commit 1 is corrupt, and
    the reader replays the log in its place (which tombstones nothing)."""
    root = _ROOTS["root"] = tmp_path / "a"
    cp, mine, _ = _two_threads(root)
    folds = [n for n in os.listdir(root / layout.thread_dir("t") / "_log") if n.endswith(layout.FOLDED_SUFFIX)]
    fold_key = f"{layout.thread_dir('t')}/_log/{max(folds)}"  # the newest: the one gc cuts the log below
    fold = unseal(run_sync(cp.store.get(fold_key)), "fold", kind="folded manifest")
    at = datetime.fromtimestamp(time.time() - 90 * 60, UTC).isoformat()
    fold["tombstones"] = {layout.log_key("t", 1): {"at": at, "size": 1}, layout.head_key("t"): {"at": at, "size": 1}}
    run_sync(cp.store.put(fold_key, codec.compress(seal(fold))))
    report = ca.ArchiveCheckpointer(cp.store).gc()
    assert (root / layout.log_key("t", 1)).exists() and (root / layout.head_key("t")).exists()
    assert any("log kept whole" in e for e in report.errors), report.errors  # the replay needs it
    assert [c.state for c in ca.ArchiveCheckpointer(cp.store).history("t")] == [c.state for c in mine]


@pytest.mark.parametrize("folded", [True, False])
def test_a_thread_without_commit_1_is_never_taken_for_a_new_one(tmp_path: Path, folded: bool) -> None:
    """Commit 1 tells a reader with no usable hint that a thread exists. Without it (deleted, or an
    interrupted delete of the thread), verify reports it; a reader whose hint is unusable lists the log
    instead of taking the thread for a new one: it reads the thread from its newest fold, or refuses
    (MissingObject) when the log cannot be rebuilt, and a save never starts a new history over it."""
    root = tmp_path / "a"
    cp = ca.open_archive(str(root), full_snapshot_interval=3)
    saved = chat(cp, "t", 10 if folded else 2)
    assert any(n.endswith(layout.FOLDED_SUFFIX) for n in os.listdir(root / "thread_id=t" / "_log")) == folded
    os.remove(root / layout.log_key("t", 1))
    problems = [(p.kind, p.key) for p in ca.ArchiveCheckpointer(cp.store).verify("t").problems]
    assert ("MissingObject", layout.log_key("t", 1)) in problems
    run_sync(cp.store.put(layout.head_key("t"), b"garbage"))  # an unusable hint
    reader = ca.ArchiveCheckpointer(cp.store, full_snapshot_interval=3)
    after = ca.Checkpoint.new("t", {"messages": [], "turn": 99}, step=99)
    if folded:
        assert reader.load("t").state == saved[-1].state  # type: ignore[union-attr]
        reader.save(after)
        listed = [i.checkpoint_id for i in ca.ArchiveCheckpointer(cp.store).list("t")]
        assert listed == [c.checkpoint_id for c in saved] + [after.checkpoint_id]
    else:
        with pytest.raises(ca.MissingObject):
            reader.load("t")
        with pytest.raises(ca.MissingObject):
            reader.save(after)
        assert not (root / layout.log_key("t", 1)).exists()
